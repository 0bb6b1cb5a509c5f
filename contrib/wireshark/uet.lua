-- uet.lua: a Wireshark dissector for Ultra Ethernet Transport (UET 1.0),
-- for released Wireshark 3.6 to 4.6 (Lua 5.2 to 5.4).
--
--   tshark -X lua_script:contrib/wireshark/uet.lua -r samples/uet-sample.pcap
--   cp contrib/wireshark/uet.lua ~/.local/lib/wireshark/plugins/   # every start
--
-- It decodes UET over UDP (destination port 4793, a preference; "Decode As"
-- for any other port) and UET directly over IP (protocol 253, a preference)
-- behind its 4-byte entropy header: the TSS header, every PDS header type
-- and every SES request, extension and response header, the CRC32C trailer
-- (a preference: nothing on the wire says it is there), trimmed packets (by
-- their DSCP, preferences) and frames cut by a capture's snap length.
--
-- Layouts follow docs/protocol-notes.md (§1 encapsulation, §2 PDS, §4 SES)
-- and the uet-wire parsers, byte for byte. Field names are the keys of
-- `uet decode --json` under `uet.`: the JSON key `pds.flags.retx` is the
-- field `uet.pds.flags.retx`, `ses.ext.atomic_opcode` is
-- `uet.ses.ext.atomic_opcode`. Enumerations are strings spelled as
-- `uet decode` spells them (`uet.pds.type == "ACK_CC"`), flags booleans,
-- numbers numbers, and bit patterns hex. Values `uet decode` derives
-- (clear_psn, ack_psn, sack_base, sacked_psns, start_psn, …) are generated
-- fields. A header `uet decode` refuses gets an expert error here.

local uet = Proto("uet", "Ultra Ethernet Transport")

-------------------------------------------------------------------------------
-- Preferences

uet.prefs.udp_port = Pref.uint("UDP port", 4793,
    "UDP destination port of UET over UDP (0: none; Decode As adds others)")
uet.prefs.ip_proto = Pref.uint("IP protocol", 253,
    "IP protocol number of UET directly over IP, with the entropy header (0: none)")
uet.prefs.crc = Pref.bool("CRC32C trailer", false,
    "Every packet ends in a 4-byte CRC32C trailer, big-endian (uet decode --crc)")
uet.prefs.trimmed_dscp = Pref.uint("Trimmed DSCP", 16,
    "DSCP a switch marks a trimmed packet with (64 or more: no trimming)")
uet.prefs.trimmed_lasthop_dscp = Pref.uint("Last-hop trimmed DSCP", 18,
    "DSCP of a packet trimmed at the last hop (64 or more: no trimming)")

-------------------------------------------------------------------------------
-- Fields, named after the `uet decode --json` keys

local hf = {}
local field_list = {}

local function def(key, ctor, name, ...)
    local f = ctor("uet." .. key, name, ...)
    hf[key] = f
    field_list[#field_list + 1] = f
end

local S, B, N = ProtoField.string, ProtoField.bool, ProtoField.none
local U8, U16, U24, U32, U64 = ProtoField.uint8, ProtoField.uint16,
    ProtoField.uint24, ProtoField.uint32, ProtoField.uint64
local I16, BYTES = ProtoField.int16, ProtoField.bytes
local DEC, HEX = base.DEC, base.HEX

-- Frame level.
def("entropy", U16, "Entropy value", DEC)
def("transport_pktsize", U32, "Transport packet size", DEC)
def("payload_len", U32, "Payload length", DEC)
def("trimmed", S, "Trimmed")
def("crc32c", U32, "CRC32C trailer", HEX)

-- TSS (§2.13).
def("tss", N, "Transport security header")
def("tss.sdi", U24, "SDI", DEC)
def("tss.sp", B, "SP (SSI present)")
def("tss.ssi", U32, "SSI", DEC)
def("tss.an", B, "AN")
def("tss.epoch", U16, "Epoch", DEC)
def("tss.tsc", U64, "TSC", DEC)
def("tss.header_len", U8, "Header length", DEC)
def("tss.ciphertext_len", U32, "Ciphertext length", DEC)

-- PDS (§2).
def("pds", N, "Packet delivery header")
def("pds.type", S, "Type")
def("pds.header_len", U8, "Header length", DEC)
def("pds.next_hdr", S, "Next header")
def("pds.ctl_type", S, "Control type")
def("pds.flags", N, "Flags")
for _, f in ipairs({ "retx", "ar", "syn", "m", "p", "epsn", "nt", "isrod" }) do
    def("pds.flags." .. f, B, f)
end
def("pds.flags.req", S, "req")
def("pds.clear_psn_offset", I16, "CLEAR_PSN offset", DEC)
def("pds.clear_psn", U32, "CLEAR_PSN", DEC)
def("pds.psn", U32, "PSN", DEC)
def("pds.spdcid", U16, "Source PDC ID", DEC)
def("pds.dpdcid", U16, "Destination PDC ID", DEC)
def("pds.pdc_info", U8, "PDC info", DEC)
def("pds.use_rsv_pdc", B, "Use reserved PDC")
def("pds.psn_offset", U16, "PSN offset (PSN - Start_PSN)", DEC)
def("pds.start_psn", U32, "Start_PSN", DEC)
def("pds.ccc_id", U8, "CCC ID", DEC)
def("pds.credit_target", U24, "Credit target", DEC)
def("pds.pkt_id", U32, "Packet ID", DEC)
def("pds.ack_psn_offset", I16, "ACK_PSN offset", DEC)
def("pds.ack_psn", U32, "ACK_PSN", DEC)
def("pds.probe_opaque", U16, "Probe opaque", HEX)
def("pds.cack_psn", U32, "Cumulative ACK PSN", DEC)
def("pds.expected_psn", U32, "Expected PSN", DEC)
def("pds.cc_flags", U8, "CC flags", DEC)
def("pds.mpr", U8, "MPR", DEC)
def("pds.mp_range", U32, "MP_RANGE (packets)", DEC)
def("pds.sack_psn_offset", I16, "SACK PSN offset", DEC)
def("pds.sack_base", U32, "SACK base PSN", DEC)
def("pds.sack_bitmap", U64, "SACK bitmap", HEX)
def("pds.sacked_psns", U32, "SACKed PSN", DEC)
def("pds.cc_type", S, "CC type")
def("pds.service_time", U16, "Service time", DEC)
def("pds.rc", B, "Restore cwnd")
def("pds.rcv_cwnd_pend", U8, "Receiver cwnd penalty", DEC)
def("pds.rcvd_bytes", U24, "Received bytes (256-B units)", DEC)
def("pds.rcvd_bytes_in_bytes", U32, "Received bytes", DEC)
def("pds.ooo_count", U16, "Out-of-order count", DEC)
def("pds.credit", U32, "Credit", DEC)
def("pds.ack_cc_state", U64, "ACK CC state", HEX)
def("pds.ccx_type", U8, "CCX type", DEC)
def("pds.ack_ccx_state", BYTES, "ACK CCX state")
def("pds.nack_code", S, "NACK code")
def("pds.vendor_code", U8, "Vendor code", DEC)
def("pds.nack_psn", U32, "NACK PSN", DEC)
def("pds.nack_pkt_id", U32, "NACK packet ID", DEC)
def("pds.payload", U32, "Payload word", DEC)
def("pds.nccx_type", U8, "NCCX type", DEC)
def("pds.nack_ccx_state1", U64, "NACK CCX state 1", HEX)
def("pds.nack_ccx_state2", U64, "NACK CCX state 2", HEX)
def("pds.message_id", U16, "Message ID", DEC)
def("pds.target_credit", U32, "Target credit", DEC)

-- SES (§4).
def("ses", N, "Semantic header")
def("ses.header_len", U8, "Header length", DEC)
def("ses.opcode", S, "Opcode")
def("ses.version", U8, "Version", DEC)
def("ses.flags", N, "Flags")
for _, f in ipairs({ "dc", "ie", "rel", "hd", "eom", "som" }) do
    def("ses.flags." .. f, B, f)
end
def("ses.message_id", U16, "Message ID", DEC)
def("ses.ri_generation", U8, "Resource index generation", DEC)
def("ses.job_id", U24, "Job ID", DEC)
def("ses.pid_on_fep", U16, "PID on FEP", DEC)
def("ses.resource_index", U16, "Resource index", DEC)
def("ses.buffer_offset", U64, "Buffer offset", DEC)
def("ses.initiator", U32, "Initiator", DEC)
def("ses.memory_key", U64, "Memory key", HEX)
def("ses.match_bits", U64, "Match bits", HEX)
def("ses.header_data", U64, "Header data", HEX)
def("ses.payload_length", U16, "Payload length", DEC)
def("ses.message_offset", U32, "Message offset", DEC)
def("ses.request_length", U32, "Request length", DEC)
def("ses.list", S, "List")
def("ses.return_code", S, "Return code")
def("ses.modified_length", U32, "Modified length", DEC)
def("ses.read_request_message_id", U16, "Read request message ID", DEC)
def("ses.original_request_psn", U32, "Original request PSN", DEC)
def("ses.ext", N, "Extension header")
def("ses.ext.type", S, "Type")
def("ses.ext.header_len", U8, "Header length", DEC)
def("ses.ext.atomic_opcode", S, "Atomic opcode")
def("ses.ext.atomic_datatype", S, "Atomic datatype")
def("ses.ext.semantic_control", U8, "Semantic control", HEX)
def("ses.ext.cacheable", B, "Cacheable")
def("ses.ext.cpu_coherent", B, "CPU coherent")
def("ses.ext.compare_value", BYTES, "Compare value")
def("ses.ext.swap_value", BYTES, "Swap value")
def("ses.ext.eager_length", U32, "Eager length", DEC)
def("ses.ext.ri_generation", U8, "Resource index generation", DEC)
def("ses.ext.pid_on_fep", U16, "PID on FEP", DEC)
def("ses.ext.resource_index", U16, "Resource index", DEC)
def("ses.ext.read_offset", U64, "Read offset", DEC)
def("ses.ext.read_memory_key", U64, "Read memory key", HEX)

uet.fields = field_list

local ef = {
    malformed = ProtoExpert.new("uet.malformed", "Malformed UET header",
        expert.group.MALFORMED, expert.severity.ERROR),
    snapped = ProtoExpert.new("uet.snapped", "UET headers cut by the capture's snap length",
        expert.group.MALFORMED, expert.severity.ERROR),
    bad_crc = ProtoExpert.new("uet.bad_crc", "Bad CRC32C trailer",
        expert.group.CHECKSUM, expert.severity.ERROR),
    trimmed = ProtoExpert.new("uet.trimmed.note", "Packet trimmed by a switch",
        expert.group.SEQUENCE, expert.severity.NOTE),
}
uet.experts = { ef.malformed, ef.snapped, ef.bad_crc, ef.trimmed }

-------------------------------------------------------------------------------
-- Names, spelled as uet-wire's Display spells them

local PDS_TYPES = {
    [1] = "TSS", [2] = "RUD_REQ", [3] = "ROD_REQ", [4] = "RUDI_REQ", [5] = "RUDI_RESP",
    [6] = "UUD_REQ", [7] = "ACK", [8] = "ACK_CC", [9] = "ACK_CCX", [10] = "NACK",
    [11] = "CP", [12] = "NACK_CCX", [13] = "RUD_CC_REQ", [14] = "ROD_CC_REQ",
}
local NEXT_HDRS = {
    [0] = "UET_HDR_NONE", [1] = "UET_HDR_REQUEST_SMALL", [2] = "UET_HDR_REQUEST_MEDIUM",
    [3] = "UET_HDR_REQUEST_STD", [4] = "UET_HDR_RESPONSE", [5] = "UET_HDR_RESPONSE_DATA",
    [6] = "UET_HDR_RESPONSE_DATA_SMALL",
}
local ACK_REQ = { [0] = "NONE", [1] = "CLEAR", [2] = "CLOSE", [3] = "RESERVED" }
local NACK_CODES = {
    [0x01] = "UET_TRIMMED", [0x02] = "UET_TRIMMED_LASTHOP", [0x03] = "UET_TRIMMED_ACK",
    [0x04] = "NO_PDC_AVAIL", [0x05] = "NO_CCC_AVAIL", [0x06] = "NO_BITMAP",
    [0x07] = "NO_PKT_BUFFER", [0x08] = "NO_GTD_DEL_AVAIL", [0x09] = "NO_SES_MSG_AVAIL",
    [0x0a] = "NO_RESOURCE", [0x0b] = "PSN_OOR_WINDOW", [0x0d] = "ROD_OOO",
    [0x0e] = "INV_DPDCID", [0x0f] = "PDC_HDR_MISMATCH", [0x10] = "CLOSING",
    [0x11] = "CLOSING_IN_ERR", [0x12] = "PKT_NOT_RCVD", [0x13] = "GTD_RESP_UNAVAIL",
    [0x14] = "ACK_WITH_DATA", [0x15] = "INVALID_SYN", [0x16] = "PDC_MODE_MISMATCH",
    [0x17] = "NEW_START_PSN", [0x18] = "RCVD_SES_PROCG", [0x19] = "UNEXP_EVENT",
    [0x1a] = "RCVR_INFER_LOSS", [0xfd] = "EXP_NACK_NORMAL", [0xfe] = "EXP_NACK_ERR",
    [0xff] = "EXP_NACK_FATAL",
}
local CTL_TYPES = {
    [0] = "NOOP", [1] = "ACK_REQ", [2] = "CLEAR", [3] = "CLEAR_REQ", [4] = "CLOSE",
    [5] = "CLOSE_REQ", [6] = "PROBE", [7] = "CREDIT", [8] = "CREDIT_REQ", [9] = "NEGOTIATION",
}
local OPCODES = {
    [0x00] = "UET_NO_OP", [0x01] = "UET_WRITE", [0x02] = "UET_READ", [0x03] = "UET_ATOMIC",
    [0x04] = "UET_FETCHING_ATOMIC", [0x05] = "UET_SEND", [0x06] = "UET_RENDEZVOUS_SEND",
    [0x07] = "UET_DATAGRAM_SEND", [0x08] = "UET_DEFERRABLE_SEND", [0x09] = "UET_TAGGED_SEND",
    [0x0a] = "UET_RENDEZVOUS_TSEND", [0x0b] = "UET_DEFERRABLE_TSEND",
    [0x0c] = "UET_DEFERRABLE_RTR", [0x0d] = "UET_TSEND_ATOMIC",
    [0x0e] = "UET_TSEND_FETCH_ATOMIC", [0x0f] = "UET_MSG_ERROR",
}
local RSP_OPCODES = {
    [0] = "UET_DEFAULT_RESPONSE", [1] = "UET_RESPONSE", [2] = "UET_RESPONSE_W_DATA",
    [3] = "UET_NO_RESPONSE",
}
local RETURN_CODES = {
    [0x00] = "RC_NULL", [0x01] = "RC_OK", [0x02] = "BAD_GENERATION", [0x03] = "DISABLED",
    [0x04] = "DISABLED_GEN", [0x05] = "NO_MATCH", [0x06] = "UNSUPPORTED_OP",
    [0x07] = "UNSUPPORTED_SIZE", [0x08] = "AT_INVALID", [0x09] = "AT_PERM",
    [0x0a] = "AT_ATS_ERROR", [0x0b] = "AT_NO_TRANS", [0x0c] = "AT_OUT_OF_RANGE",
    [0x0d] = "HOST_POISONED", [0x0e] = "HOST_UNSUCCESS_CMPL", [0x0f] = "AMO_UNSUPPORTED_OP",
    [0x10] = "AMO_UNSUPPORTED_DT", [0x11] = "AMO_UNSUPPORTED_SIZE", [0x12] = "AMO_UNALIGNED",
    [0x13] = "AMO_FP_NAN", [0x14] = "AMO_FP_UNDERFLOW", [0x15] = "AMO_FP_OVERFLOW",
    [0x16] = "AMO_FP_INEXACT", [0x17] = "PERM_VIOLATION", [0x18] = "OP_VIOLATION",
    [0x19] = "BAD_INDEX", [0x1a] = "BAD_PID", [0x1b] = "BAD_JOB_ID", [0x1c] = "BAD_MKEY",
    [0x1d] = "BAD_ADDR", [0x1e] = "CANCELLED", [0x1f] = "UNDELIVERABLE", [0x20] = "UNCOR",
    [0x21] = "UNCOR_TRNSNT", [0x22] = "TOO_LONG", [0x23] = "INITIATOR_ERR", [0x24] = "DROPPED",
}
local AMO_OPCODES = {
    [0x00] = "MIN", [0x01] = "MAX", [0x02] = "SUM", [0x03] = "DIFF", [0x04] = "PROD",
    [0x05] = "LOR", [0x06] = "LAND", [0x07] = "BOR", [0x08] = "BAND", [0x09] = "LXOR",
    [0x0a] = "BXOR", [0x0b] = "READ", [0x0c] = "WRITE", [0x0d] = "CSWAP", [0x0e] = "CSWAP_NE",
    [0x0f] = "CSWAP_LE", [0x10] = "CSWAP_LT", [0x11] = "CSWAP_GE", [0x12] = "CSWAP_GT",
    [0x13] = "MSWAP", [0x14] = "INVAL",
}
local AMO_TYPES = {
    [0x00] = "INT8", [0x01] = "UINT8", [0x02] = "INT16", [0x03] = "UINT16", [0x04] = "INT32",
    [0x05] = "UINT32", [0x06] = "INT64", [0x07] = "UINT64", [0x08] = "INT128",
    [0x09] = "UINT128", [0x0a] = "FLOAT", [0x0b] = "DOUBLE", [0x0c] = "FLOAT_COMPLEX",
    [0x0d] = "DOUBLE_COMPLEX", [0x0e] = "LONG_DOUBLE", [0x0f] = "LONG_DOUBLE_COMPLEX",
    [0x10] = "BF16", [0x11] = "FP16",
}

local function hex2(v) return string.format("0x%02x", v) end

local function nack_code_name(v)
    return NACK_CODES[v] or ("UNKNOWN(" .. hex2(v) .. ")")
end
local function ctl_type_name(v)
    return CTL_TYPES[v] or ("RESERVED(" .. v .. ")")
end
local function opcode_name(v)
    if OPCODES[v] then return OPCODES[v] end
    if v == 0x3f then return "EXTENDED" end
    if v >= 0x30 then return "VENDOR(" .. hex2(v) .. ")" end
    return "RESERVED(" .. hex2(v) .. ")"
end
local function rsp_opcode_name(v)
    if RSP_OPCODES[v] then return RSP_OPCODES[v] end
    if v >= 0x30 then return "VENDOR(" .. hex2(v) .. ")" end
    return "RESERVED(" .. hex2(v) .. ")"
end
local function list_name(v)
    if v == 0 then return "EXPECTED" end
    if v == 1 then return "OVERFLOW" end
    return "VENDOR(" .. v .. ")"
end
local function return_code_name(v)
    if RETURN_CODES[v] then return RETURN_CODES[v] end
    if v >= 0x30 and v <= 0x37 then return "VENDOR(" .. hex2(v) .. ")" end
    if v == 0x3e then return "EXTENDED(" .. hex2(v) .. ")" end
    return "UNKNOWN(" .. hex2(v) .. ")"
end
local function amo_name(v)
    if AMO_OPCODES[v] then return AMO_OPCODES[v] end
    if v >= 0xe0 and v <= 0xfe then return "VENDOR(" .. hex2(v) .. ")" end
    return "UNKNOWN(" .. hex2(v) .. ")"
end
local function amo_type_name(v)
    return AMO_TYPES[v] or ("UNKNOWN(" .. hex2(v) .. ")")
end

local function is_tagged(op)
    return op == 0x09 or op == 0x0a or op == 0x0b or op == 0x0d or op == 0x0e
end
local function has_atomic_ext(op)
    return op == 0x03 or op == 0x04 or op == 0x0d or op == 0x0e
end
local function has_rendezvous_ext(op)
    return op == 0x06 or op == 0x0a
end

-------------------------------------------------------------------------------
-- Arithmetic helpers: no bit library, so the same code runs on Lua 5.2-5.4.

-- Bits [shift, shift + width) of a non-negative integer below 2^53.
local function bits(v, shift, width)
    return math.floor(v / 2 ^ shift) % 2 ^ width
end
local function bit(v, mask)
    return math.floor(v / mask) % 2 == 1
end
-- PSNs are 32-bit serial numbers: wrapping add of a signed offset.
local function psn_add(psn, off)
    return (psn + off) % 2 ^ 32
end

-- Bitwise operations for the CRC, from whichever library this Lua has.
local bxor, band, rshift
if bit32 then
    bxor, band, rshift = bit32.bxor, bit32.band, bit32.rshift
else
    local ops = load([[return function(a, b) return (a ~ b) & 0xffffffff end,
        function(a, b) return a & b end,
        function(a, n) return (a & 0xffffffff) >> n end]])
    bxor, band, rshift = ops()
end

local crc_table
-- CRC-32C (Castagnoli, reflected, init and final XOR 0xffffffff) over the
-- byte arrays in `parts` (docs/protocol-notes.md §1).
local function crc32c(parts)
    if not crc_table then
        crc_table = {}
        for i = 0, 255 do
            local c = i
            for _ = 1, 8 do
                if c % 2 == 1 then
                    c = bxor(rshift(c, 1), 0x82f63b78)
                else
                    c = rshift(c, 1)
                end
            end
            crc_table[i] = c
        end
    end
    local crc = 0xffffffff
    for _, ba in ipairs(parts) do
        for i = 0, ba:len() - 1 do
            crc = bxor(crc_table[band(bxor(crc, ba:get_index(i)), 0xff)], rshift(crc, 8))
        end
    end
    return bxor(crc, 0xffffffff) % 2 ^ 32
end

-------------------------------------------------------------------------------
-- Facts from the lower layers

local f_ip = Field.new("ip")
local f_ip_proto = Field.new("ip.proto")
local f_ip_hdr_len = Field.new("ip.hdr_len")
local f_ip_dscp = Field.new("ip.dsfield.dscp")
local f_ip6_nxt = Field.new("ipv6.nxt")
local f_ip6_dscp = Field.new("ipv6.tclass.dscp")
local f_ip6_src = Field.new("ipv6.src")
local f_ip6_dst = Field.new("ipv6.dst")
local f_udp = Field.new("udp")
local f_udp_len = Field.new("udp.length")

-- The occurrence of any of `fields` nearest before `before` (a frame offset).
local function last_before(before, ...)
    local best
    for _, f in ipairs({ ... }) do
        for _, fi in ipairs({ f() }) do
            if fi.offset < before and (not best or fi.offset > best.offset) then
                best = fi
            end
        end
    end
    return best
end

-------------------------------------------------------------------------------
-- The walk over the UET bytes

-- A cursor over the UET bytes of `tvb`: [start, uend) on the wire, of which
-- the bytes below `cap` were captured.
local Walk = {}
Walk.__index = Walk

-- Checks that `n` bytes at `off` are there: on the wire (else the header is
-- malformed, as `uet decode` says) and in the capture (else the snap length
-- cut it). Adds the expert info and returns false when not.
function Walk:need(tree, off, n, what)
    if off + n > self.uend then
        tree:add_proto_expert_info(ef.malformed, string.format(
            "%s: truncated header (need %d bytes, %d left)", what, n,
            math.max(self.uend - off, 0)))
        self.error = true
        return false
    end
    if off + n > self.cap then
        tree:add_proto_expert_info(ef.snapped, string.format(
            "%s: the capture holds %d of its %d bytes", what,
            math.max(self.cap - off, 0), n))
        self.error, self.cut = true, true
        return false
    end
    return true
end

function Walk:bad(tree, text)
    tree:add_proto_expert_info(ef.malformed, text)
    self.error = true
    return false
end

local function add(tree, key, range, value)
    if value == nil then return tree:add(hf[key], range) end
    return tree:add(hf[key], range, value)
end
local function gen(tree, key, range, value)
    local it = tree:add(hf[key], range, value)
    it:set_generated()
    return it
end

-- Bytes 10-11 of a request or CP: dpdcid, or with syn pdc_info:4 |
-- psn_offset:12 and the derived use_rsv_pdc and start_psn (§2.5).
local function dpdcid_field(t, tvb, o, syn, psn)
    local w = tvb(o + 10, 2):uint()
    if syn then
        local info, off = bits(w, 12, 4), bits(w, 0, 12)
        add(t, "pds.pdc_info", tvb(o + 10, 1), info)
        gen(t, "pds.use_rsv_pdc", tvb(o + 10, 1), info % 2 == 1)
        add(t, "pds.psn_offset", tvb(o + 10, 2), off)
        gen(t, "pds.start_psn", tvb(o + 10, 2), psn_add(psn, -off))
        return string.format(" syn start_psn=%d", psn_add(psn, -off))
    end
    add(t, "pds.dpdcid", tvb(o + 10, 2), w)
    return string.format(" dpdcid=%d", w)
end

-- The prologue's flags subtree; `list` is { {name, value}, ... }.
local function flags_tree(t, tvb, o, list)
    local ft = t:add(hf["pds.flags"], tvb(o, 2))
    local set = {}
    for _, kv in ipairs(list) do
        add(ft, "pds.flags." .. kv[1], tvb(o + 1, 1), kv[2])
        if kv[2] == true then set[#set + 1] = kv[1] end
    end
    if #set > 0 then ft:append_text(": " .. table.concat(set, " ")) end
    return set
end

-- RUD/ROD requests (§2.5): types 2, 3, 13, 14.
local function pds_request(w, t, tvb, o, ty, fl)
    local cc = ty == 13 or ty == 14
    local syn = bit(fl, 0x04)
    flags_tree(t, tvb, o, { { "retx", bit(fl, 0x10) }, { "ar", bit(fl, 0x08) }, { "syn", syn } })
    local off = tvb(o + 2, 2):int()
    local psn = tvb(o + 4, 4):uint()
    add(t, "pds.clear_psn_offset", tvb(o + 2, 2), off)
    gen(t, "pds.clear_psn", tvb(o + 2, 2), psn_add(psn, off))
    add(t, "pds.psn", tvb(o + 4, 4), psn)
    add(t, "pds.spdcid", tvb(o + 8, 2), tvb(o + 8, 2):uint())
    local info = string.format(" psn=%d", psn) .. dpdcid_field(t, tvb, o, syn, psn)
    if cc then
        add(t, "pds.ccc_id", tvb(o + 12, 1), tvb(o + 12, 1):uint())
        add(t, "pds.credit_target", tvb(o + 13, 3), tvb(o + 13, 3):uint())
    end
    return info
end

local function pds_rudi(w, t, tvb, o, ty, fl)
    flags_tree(t, tvb, o, { { "retx", bit(fl, 0x10) }, { "m", ty == 5 and bit(fl, 0x20) } })
    local id = tvb(o + 4, 4):uint()
    add(t, "pds.pkt_id", tvb(o + 4, 4), id)
    return string.format(" pkt_id=%d", id)
end

-- ACK, ACK_CC, ACK_CCX (§2.6, §2.7).
local function pds_ack(w, t, tvb, o, ty, fl)
    local p = bit(fl, 0x08)
    flags_tree(t, tvb, o, {
        { "m", bit(fl, 0x20) }, { "retx", bit(fl, 0x10) }, { "p", p },
        { "req", ACK_REQ[bits(fl, 1, 2)] }, { "epsn", ty == 7 and bit(fl, 0x40) },
    })
    local cack = tvb(o + 4, 4):uint()
    local info
    if p then
        add(t, "pds.probe_opaque", tvb(o + 2, 2), tvb(o + 2, 2):uint())
        info = string.format(" probe_opaque=0x%04x", tvb(o + 2, 2):uint())
    else
        local off = tvb(o + 2, 2):int()
        add(t, "pds.ack_psn_offset", tvb(o + 2, 2), off)
        gen(t, "pds.ack_psn", tvb(o + 2, 2), psn_add(cack, off))
        info = string.format(" ack_psn=%d", psn_add(cack, off))
    end
    add(t, "pds.cack_psn", tvb(o + 4, 4), cack)
    add(t, "pds.spdcid", tvb(o + 8, 2), tvb(o + 8, 2):uint())
    add(t, "pds.dpdcid", tvb(o + 10, 2), tvb(o + 10, 2):uint())
    info = info .. string.format(" cack_psn=%d", cack)
    if ty == 7 then
        if bit(fl, 0x40) then
            add(t, "pds.expected_psn", tvb(o + 12, 4), tvb(o + 12, 4):uint())
        end
        return info
    end
    local b12 = tvb(o + 12, 1):uint()
    local cc_type = bits(b12, 4, 4)
    add(t, "pds.cc_flags", tvb(o + 12, 1), bits(b12, 0, 4))
    local mpr = tvb(o + 13, 1):uint()
    add(t, "pds.mpr", tvb(o + 13, 1), mpr)
    gen(t, "pds.mp_range", tvb(o + 13, 1), mpr * 128)
    local soff = tvb(o + 14, 2):int()
    local base_psn = psn_add(cack, soff)
    add(t, "pds.sack_psn_offset", tvb(o + 14, 2), soff)
    gen(t, "pds.sack_base", tvb(o + 14, 2), base_psn)
    local bm = tvb(o + 16, 8)
    add(t, "pds.sack_bitmap", bm, bm:uint64())
    -- Bit i (LSB = 0) of the big-endian word stands for SACK_BASE + i.
    local halves = { tvb(o + 20, 4):uint(), tvb(o + 16, 4):uint() }
    for h = 1, 2 do
        for i = 0, 31 do
            if bit(halves[h], 2 ^ i) then
                gen(t, "pds.sacked_psns", bm, psn_add(base_psn, (h - 1) * 32 + i))
            end
        end
    end
    if ty == 9 then
        add(t, "pds.ccx_type", tvb(o + 12, 1), cc_type)
        add(t, "pds.ack_ccx_state", tvb(o + 24, 16))
        return info
    end
    local st = o + 24
    if cc_type == 0 then
        add(t, "pds.cc_type", tvb(o + 12, 1), "NSCC")
        add(t, "pds.service_time", tvb(st, 2), tvb(st, 2):uint())
        local b2 = tvb(st + 2, 1):uint()
        add(t, "pds.rc", tvb(st + 2, 1), bit(b2, 0x80))
        add(t, "pds.rcv_cwnd_pend", tvb(st + 2, 1), bits(b2, 0, 7))
        local rcvd = tvb(st + 3, 3):uint()
        add(t, "pds.rcvd_bytes", tvb(st + 3, 3), rcvd)
        gen(t, "pds.rcvd_bytes_in_bytes", tvb(st + 3, 3), rcvd * 256)
        add(t, "pds.ooo_count", tvb(st + 6, 2), tvb(st + 6, 2):uint())
    elseif cc_type == 1 then
        add(t, "pds.cc_type", tvb(o + 12, 1), "CREDIT")
        add(t, "pds.credit", tvb(st, 3), tvb(st, 3):uint())
        add(t, "pds.ooo_count", tvb(st + 6, 2), tvb(st + 6, 2):uint())
    else
        add(t, "pds.cc_type", tvb(o + 12, 1), "RESERVED(" .. cc_type .. ")")
        add(t, "pds.ack_cc_state", tvb(st, 8), tvb(st, 8):uint64())
    end
    return info
end

-- NACK, NACK_CCX (§2.8, §2.9).
local function pds_nack(w, t, tvb, o, ty, fl)
    local nt = bit(fl, 0x08)
    flags_tree(t, tvb, o, { { "m", bit(fl, 0x20) }, { "retx", bit(fl, 0x10) }, { "nt", nt } })
    local code = tvb(o + 2, 1):uint()
    add(t, "pds.nack_code", tvb(o + 2, 1), nack_code_name(code))
    add(t, "pds.vendor_code", tvb(o + 3, 1), tvb(o + 3, 1):uint())
    local target = tvb(o + 4, 4):uint()
    add(t, nt and "pds.nack_pkt_id" or "pds.nack_psn", tvb(o + 4, 4), target)
    add(t, "pds.spdcid", tvb(o + 8, 2), tvb(o + 8, 2):uint())
    add(t, "pds.dpdcid", tvb(o + 10, 2), tvb(o + 10, 2):uint())
    add(t, "pds.payload", tvb(o + 12, 4), tvb(o + 12, 4):uint())
    if ty == 12 then
        local w1 = tvb(o + 16, 8):uint64()
        add(t, "pds.nccx_type", tvb(o + 16, 1), bits(tvb(o + 16, 1):uint(), 4, 4))
        add(t, "pds.nack_ccx_state1", tvb(o + 16, 8),
            w1:band(UInt64(0xffffffff, 0x0fffffff)))
        add(t, "pds.nack_ccx_state2", tvb(o + 24, 8), tvb(o + 24, 8):uint64())
    end
    return string.format(" %s %s=%d", nack_code_name(code), nt and "pkt_id" or "psn", target)
end

-- Control packet (§2.10).
local function pds_cp(w, t, tvb, o, ty, fl, ctl)
    local syn = bit(fl, 0x04)
    flags_tree(t, tvb, o, {
        { "isrod", bit(fl, 0x20) }, { "retx", bit(fl, 0x10) }, { "ar", bit(fl, 0x08) },
        { "syn", syn },
    })
    local psn = tvb(o + 4, 4):uint()
    add(t, "pds.psn", tvb(o + 4, 4), psn)
    add(t, "pds.spdcid", tvb(o + 8, 2), tvb(o + 8, 2):uint())
    local info = string.format(" %s psn=%d", ctl_type_name(ctl), psn)
        .. dpdcid_field(t, tvb, o, syn, psn)
    local raw = tvb(o + 12, 4):uint()
    local r = tvb(o + 12, 4)
    -- The payload word as uet-wire keeps it: zero where it has no meaning.
    local payload = raw
    if ctl == 0 or ctl == 4 or ctl == 5 then
        payload = 0
    elseif ctl == 1 then
        payload = raw % 2 ^ 16
    end
    add(t, "pds.payload", r, payload)
    if ctl == 1 then
        gen(t, "pds.message_id", tvb(o + 14, 2), payload)
    elseif ctl == 2 or ctl == 3 then
        gen(t, "pds.clear_psn", r, raw)
    elseif ctl == 6 then
        add(t, "pds.probe_opaque", tvb(o + 2, 2), tvb(o + 2, 2):uint())
        gen(t, "pds.sack_base", r, raw)
    elseif ctl == 7 then
        gen(t, "pds.credit", r, raw)
    elseif ctl == 8 then
        gen(t, "pds.target_credit", r, raw)
    end
    return info
end

-- PDS header lengths by type (§2.2); ACK with EPSN is 16 (REFPROV).
local PDS_LEN = {
    [2] = 12, [3] = 12, [13] = 16, [14] = 16, [4] = 8, [5] = 8, [6] = 4,
    [7] = 12, [8] = 32, [9] = 40, [10] = 16, [12] = 32, [11] = 16,
}

-- The PDS header at `o`. Returns its length and next_hdr (nil for a CP),
-- or nil after an expert error.
function Walk:pds(tree, tvb, o, info)
    if not self:need(tree, o, 2, "PDS") then return nil end
    local word = tvb(o, 2):uint()
    local ty, nh, fl = bits(word, 11, 5), bits(word, 7, 4), bits(word, 0, 7)
    if ty == 1 then
        return self:bad(tree, "PDS: a second TSS header where the PDS header belongs") and nil
    end
    local len = PDS_LEN[ty]
    if not len then
        return self:bad(tree, string.format("PDS: reserved type %d", ty)) and nil
    end
    if ty == 7 and bit(fl, 0x40) then len = 16 end
    local name = PDS_TYPES[ty]
    local t = tree:add(hf["pds"], tvb(o, math.min(len, self.cap - o)))
    t:append_text(": " .. name)
    add(t, "pds.type", tvb(o, 1), name)
    if not self:need(t, o, len, "PDS " .. name) then return nil end
    gen(t, "pds.header_len", tvb(o, len), len)
    if ty ~= 11 then
        if not NEXT_HDRS[nh] then
            return self:bad(t, string.format("PDS: reserved next_hdr %d", nh)) and nil
        end
        add(t, "pds.next_hdr", tvb(o, 2), NEXT_HDRS[nh])
    else
        add(t, "pds.ctl_type", tvb(o, 2), ctl_type_name(nh))
    end
    local detail
    if ty == 2 or ty == 3 or ty == 13 or ty == 14 then
        detail = pds_request(self, t, tvb, o, ty, fl)
    elseif ty == 4 or ty == 5 then
        detail = pds_rudi(self, t, tvb, o, ty, fl)
    elseif ty == 6 then
        t:add(hf["pds.flags"], tvb(o, 2))
        detail = ""
    elseif ty == 7 or ty == 8 or ty == 9 then
        detail = pds_ack(self, t, tvb, o, ty, fl)
    elseif ty == 10 or ty == 12 then
        detail = pds_nack(self, t, tvb, o, ty, fl)
    else
        detail = pds_cp(self, t, tvb, o, ty, fl, nh)
    end
    info[#info + 1] = name .. detail
    if ty == 11 then return len, nil end
    return len, nh
end

-- The TSS header (§2.13): 12 bytes, 16 with SSI. Everything behind it (PDS,
-- SES, payload) is ciphertext up to the 16-byte integrity tag (ICV), which
-- takes the CRC trailer's place.
function Walk:tss(tree, tvb, o)
    if not self:need(tree, o, 1, "TSS") then return nil end
    local sp = bit(tvb(o, 1):uint(), 0x04)
    local len = sp and 16 or 12
    local t = tree:add(hf["tss"], tvb(o, math.min(len, self.cap - o)))
    if not self:need(t, o, len, "TSS") then return nil end
    local word = tvb(o, 4):uint()
    add(t, "tss.sp", tvb(o, 1), sp)
    add(t, "tss.an", tvb(o, 1), bit(word, 2 ^ 24))
    add(t, "tss.sdi", tvb(o + 1, 3), bits(word, 0, 24))
    if sp then add(t, "tss.ssi", tvb(o + 4, 4), tvb(o + 4, 4):uint()) end
    local et = o + len - 8
    add(t, "tss.epoch", tvb(et, 2), tvb(et, 2):uint())
    add(t, "tss.tsc", tvb(et + 2, 6), tvb(et + 2, 6):uint64())
    gen(t, "tss.header_len", tvb(o, len), len)
    local ct = self.uend - (o + len) - 16
    if ct < 0 then
        self:bad(t, "TSS: truncated (need " .. (len + 16) .. " bytes with the ICV)")
        return nil
    end
    gen(t, "tss.ciphertext_len", tvb(o, len), ct)
    return len
end

-- Bytes 0-1 of a request: opcode, version and flags; nil after an error.
local function request_common(w, t, tvb, o, hd_defined)
    local op = bits(tvb(o, 1):uint(), 0, 6)
    local b1 = tvb(o + 1, 1):uint()
    add(t, "ses.opcode", tvb(o, 1), opcode_name(op))
    add(t, "ses.version", tvb(o + 1, 1), bits(b1, 6, 2))
    if bits(b1, 6, 2) ~= 0 then
        return w:bad(t, string.format("SES: version %d (1.0 is 0)", bits(b1, 6, 2))) and nil
    end
    local ft = t:add(hf["ses.flags"], tvb(o + 1, 1))
    for _, f in ipairs({ { "dc", 0x20 }, { "ie", 0x10 }, { "rel", 0x08 }, { "hd", 0x04 },
        { "eom", 0x02 }, { "som", 0x01 } }) do
        if f[1] ~= "hd" or hd_defined then
            add(ft, "ses.flags." .. f[1], tvb(o + 1, 1), bit(b1, f[2]))
        end
    end
    add(t, "ses.ri_generation", tvb(o + 4, 1), tvb(o + 4, 1):uint())
    add(t, "ses.job_id", tvb(o + 5, 3), tvb(o + 5, 3):uint())
    add(t, "ses.pid_on_fep", tvb(o + 8, 2), bits(tvb(o + 8, 2):uint(), 0, 12))
    add(t, "ses.resource_index", tvb(o + 10, 2), bits(tvb(o + 10, 2):uint(), 0, 12))
    return op, b1
end

local function key_field(t, tvb, at, op)
    add(t, is_tagged(op) and "ses.match_bits" or "ses.memory_key", tvb(at, 8), tvb(at, 8):uint64())
end

-- The atomic extension's four bytes at `e`.
local function atomic_ext(t, tvb, e)
    local sc = tvb(e + 2, 1):uint()
    add(t, "ses.ext.atomic_opcode", tvb(e, 1), amo_name(tvb(e, 1):uint()))
    add(t, "ses.ext.atomic_datatype", tvb(e + 1, 1), amo_type_name(tvb(e + 1, 1):uint()))
    gen(t, "ses.ext.semantic_control", tvb(e + 2, 1), sc % 4)
    add(t, "ses.ext.cacheable", tvb(e + 2, 1), bit(sc, 0x01))
    add(t, "ses.ext.cpu_coherent", tvb(e + 2, 1), bit(sc, 0x02))
end

-- The standard request (§4.2) and its extension header (§4.4).
function Walk:ses_standard(t, tvb, o)
    if not self:need(t, o, 44, "SES standard request") then return nil end
    local op, b1 = request_common(self, t, tvb, o, true)
    if not op then return nil end
    add(t, "ses.message_id", tvb(o + 2, 2), tvb(o + 2, 2):uint())
    add(t, "ses.buffer_offset", tvb(o + 12, 8), tvb(o + 12, 8):uint64())
    add(t, "ses.initiator", tvb(o + 20, 4), tvb(o + 20, 4):uint())
    key_field(t, tvb, o + 24, op)
    if bit(b1, 0x01) then
        add(t, "ses.header_data", tvb(o + 32, 8), tvb(o + 32, 8):uint64())
    else
        add(t, "ses.payload_length", tvb(o + 34, 2), bits(tvb(o + 34, 2):uint(), 0, 14))
        add(t, "ses.message_offset", tvb(o + 36, 4), tvb(o + 36, 4):uint())
    end
    add(t, "ses.request_length", tvb(o + 40, 4), tvb(o + 40, 4):uint())
    local e = o + 44
    local kind, elen
    if has_rendezvous_ext(op) then
        kind, elen = "rendezvous", 24
    elseif has_atomic_ext(op) then
        if not self:need(t, e, 1, "SES atomic extension") then return nil end
        local amo = tvb(e, 1):uint()
        if amo >= 0x0d and amo <= 0x13 then
            kind, elen = "compare-and-swap", 36
        else
            kind, elen = "atomic", 4
        end
    end
    local len = 44
    if kind then
        local x = t:add(hf["ses.ext"], tvb(e, math.min(elen, math.max(self.cap - e, 0))))
        x:append_text(": " .. kind)
        if not self:need(x, e, elen, "SES " .. kind .. " extension") then return nil end
        add(x, "ses.ext.type", tvb(e, elen), kind)
        gen(x, "ses.ext.header_len", tvb(e, elen), elen)
        if kind == "rendezvous" then
            local rt = tvb(e + 4, 4):uint()
            add(x, "ses.ext.eager_length", tvb(e, 4), tvb(e, 4):uint())
            add(x, "ses.ext.ri_generation", tvb(e + 4, 1), bits(rt, 24, 8))
            add(x, "ses.ext.pid_on_fep", tvb(e + 5, 2), bits(rt, 12, 12))
            add(x, "ses.ext.resource_index", tvb(e + 6, 2), bits(rt, 0, 12))
            add(x, "ses.ext.read_offset", tvb(e + 8, 8), tvb(e + 8, 8):uint64())
            add(x, "ses.ext.read_memory_key", tvb(e + 16, 8), tvb(e + 16, 8):uint64())
        else
            atomic_ext(x, tvb, e)
            if kind == "compare-and-swap" then
                add(x, "ses.ext.compare_value", tvb(e + 4, 16))
                add(x, "ses.ext.swap_value", tvb(e + 20, 16))
            end
        end
        len = 44 + elen
    end
    return len, opcode_name(op)
end

function Walk:ses_medium(t, tvb, o)
    if not self:need(t, o, 32, "SES medium request") then return nil end
    local op, b1 = request_common(self, t, tvb, o, true)
    if not op then return nil end
    add(t, "ses.request_length", tvb(o + 2, 2), bits(tvb(o + 2, 2):uint(), 0, 14))
    if bit(b1, 0x04) then
        add(t, "ses.header_data", tvb(o + 12, 8), tvb(o + 12, 8):uint64())
    else
        add(t, "ses.buffer_offset", tvb(o + 12, 8), tvb(o + 12, 8):uint64())
    end
    add(t, "ses.initiator", tvb(o + 20, 4), tvb(o + 20, 4):uint())
    key_field(t, tvb, o + 24, op)
    return 32, opcode_name(op)
end

function Walk:ses_small(t, tvb, o)
    if not self:need(t, o, 20, "SES small request") then return nil end
    local op = request_common(self, t, tvb, o, false)
    if not op then return nil end
    add(t, "ses.request_length", tvb(o + 2, 2), bits(tvb(o + 2, 2):uint(), 0, 14))
    add(t, "ses.buffer_offset", tvb(o + 12, 8), tvb(o + 12, 8):uint64())
    return 20, opcode_name(op)
end

-- The response headers (§4.6).
function Walk:ses_response(t, tvb, o, nh)
    local len = (nh == 5) and 20 or 12
    if not self:need(t, o, len, "SES response") then return nil end
    local b0, b1 = tvb(o, 1):uint(), tvb(o + 1, 1):uint()
    add(t, "ses.list", tvb(o, 1), list_name(bits(b0, 6, 2)))
    add(t, "ses.opcode", tvb(o, 1), rsp_opcode_name(bits(b0, 0, 6)))
    add(t, "ses.version", tvb(o + 1, 1), bits(b1, 6, 2))
    if bits(b1, 6, 2) ~= 0 then
        return self:bad(t, string.format("SES: version %d (1.0 is 0)", bits(b1, 6, 2))) and nil
    end
    local rc = return_code_name(bits(b1, 0, 6))
    add(t, "ses.return_code", tvb(o + 1, 1), rc)
    add(t, "ses.job_id", tvb(o + 5, 3), tvb(o + 5, 3):uint())
    if nh == 4 then
        add(t, "ses.message_id", tvb(o + 2, 2), tvb(o + 2, 2):uint())
        add(t, "ses.ri_generation", tvb(o + 4, 1), tvb(o + 4, 1):uint())
        add(t, "ses.modified_length", tvb(o + 8, 4), tvb(o + 8, 4):uint())
    elseif nh == 5 then
        add(t, "ses.message_id", tvb(o + 2, 2), tvb(o + 2, 2):uint())
        add(t, "ses.read_request_message_id", tvb(o + 8, 2), tvb(o + 8, 2):uint())
        add(t, "ses.payload_length", tvb(o + 10, 2), bits(tvb(o + 10, 2):uint(), 0, 14))
        add(t, "ses.modified_length", tvb(o + 12, 4), tvb(o + 12, 4):uint())
        add(t, "ses.message_offset", tvb(o + 16, 4), tvb(o + 16, 4):uint())
    else
        add(t, "ses.payload_length", tvb(o + 2, 2), bits(tvb(o + 2, 2):uint(), 0, 14))
        add(t, "ses.original_request_psn", tvb(o + 8, 4), tvb(o + 8, 4):uint())
    end
    return len, rsp_opcode_name(bits(b0, 0, 6)) .. " " .. rc
end

-- The SES header that `next_hdr` announces.
function Walk:ses(tree, tvb, o, nh)
    local t = tree:add(hf["ses"], tvb(o, math.max(math.min(self.uend, self.cap) - o, 0)))
    local len, name
    if nh == 1 then
        len, name = self:ses_small(t, tvb, o)
    elseif nh == 2 then
        len, name = self:ses_medium(t, tvb, o)
    elseif nh == 3 then
        len, name = self:ses_standard(t, tvb, o)
    else
        len, name = self:ses_response(t, tvb, o, nh)
    end
    if not len then return nil end
    t:set_len(len)
    t:append_text(": " .. name)
    gen(t, "ses.header_len", tvb(o, len), len)
    return len, name
end

-------------------------------------------------------------------------------
-- The dissector

-- The trim state a DSCP means (spec §7), as EncapConfig::trim_of.
local function trim_of(dscp)
    if not dscp then return nil end
    if dscp == uet.prefs.trimmed_lasthop_dscp then return "TRIMMED_LASTHOP" end
    if dscp == uet.prefs.trimmed_dscp then return "TRIMMED" end
    return nil
end

function uet.dissector(tvb, pinfo, tree)
    local cap, rep = tvb:len(), tvb:reported_len()
    -- Where this tvb starts in the frame, to find the IP header before it.
    local here = tvb:offset()
    local ip = last_before(here, f_ip_proto, f_ip6_nxt)
    local over_udp = ip ~= nil and ip.value == 17
    local dscp_fi = last_before(here, f_ip_dscp, f_ip6_dscp)
    local trimmed = trim_of(dscp_fi and dscp_fi.value)

    pinfo.cols.protocol = "UET"
    local root = tree:add(uet, tvb())
    local w = setmetatable({ cap = cap, uend = rep }, Walk)
    local info = {}
    -- The Info column and the tree's summary, also when a header is bad.
    local function finish()
        if w.cut then
            info[#info + 1] = "[Cut by the snap length]"
        elseif w.error then
            info[#info + 1] = "[Malformed]"
        end
        root:append_text(", " .. table.concat(info, " | "))
        pinfo.cols.info = table.concat(info, " | ")
    end
    local start, pktsize
    if over_udp then
        start = 0
        local ulen = last_before(here, f_udp_len)
        pktsize = ulen and ulen.value or (rep + 8)
        if trimmed then pktsize = math.max(pktsize, rep + 8) end
        gen(root, "entropy", tvb(0, 0), pinfo.src_port)
    else
        start = 4
        pktsize = rep
        if not w:need(root, 0, 4, "Entropy header") then return finish() end
        add(root, "entropy", tvb(0, 2), tvb(0, 2):uint())
    end
    gen(root, "transport_pktsize", tvb(0, 0), pktsize)

    -- A secured packet: the TSS header in the clear, the rest ciphertext
    -- and the ICV (no CRC trailer behind TSS).
    if w:need(root, start, 1, "PDS") and bits(tvb(start, 1):uint(), 3, 5) == 1 then
        w:tss(root, tvb, start)
        info[#info + 1] = "TSS"
        return finish()
    end
    if w.error then return finish() end

    -- The CRC32C trailer: the last 4 bytes when configured, not on trimmed
    -- packets (the switch cut it off).
    local crc_range
    if uet.prefs.crc and not trimmed then
        if rep - start < 4 then
            w:bad(root, "Trailer: truncated (need 4 bytes)")
            return finish()
        end
        w.uend = rep - 4
        if cap >= rep then crc_range = tvb(rep - 4, 4) end
    end

    local o = start
    local pds_len, nh = w:pds(root, tvb, o, info)
    if not pds_len then return finish() end
    o = o + pds_len

    local payload_off, payload_len = o, math.max(w.uend - o, 0)
    if trimmed then
        payload_len = 0
    elseif nh and nh ~= 0 then
        local ses_len, ses_name = w:ses(root, tvb, o, nh)
        if not ses_len then return finish() end
        info[#info + 1] = ses_name
        payload_off = o + ses_len
        payload_len = math.max(w.uend - payload_off, 0)
    end
    local shown = math.max(math.min(payload_len, cap - payload_off), 0)
    gen(root, "payload_len", tvb(payload_off, shown), payload_len)
    if trimmed then
        gen(root, "trimmed", tvb(0, 0), trimmed)
        root:add_proto_expert_info(ef.trimmed, "Trimmed by a switch (DSCP "
            .. dscp_fi.value .. "): only the PDS header is left")
        info[#info + 1] = "[" .. trimmed .. "]"
    end
    if crc_range then
        local stored = crc_range:uint()
        local parts = {}
        local ipfi = last_before(here, f_ip)
        if ipfi then
            -- IPv4: from the source address (offset 12) to the header's end.
            local hl = last_before(here, f_ip_hdr_len)
            parts[#parts + 1] = ipfi.range:bytes():subset(12, (hl and hl.value or 20) - 12)
        end
        local s6, d6 = last_before(here, f_ip6_src), last_before(here, f_ip6_dst)
        if s6 and d6 and (not ipfi or s6.offset > ipfi.offset) then
            parts = { s6.range:bytes(), d6.range:bytes() }
        end
        if over_udp then
            local u = last_before(here, f_udp)
            parts[#parts + 1] = u.range:bytes():subset(0, 8)
        end
        parts[#parts + 1] = tvb(0, rep - 4):bytes()
        local want = crc32c(parts)
        if want == stored then
            add(root, "crc32c", crc_range, stored)
        else
            local it = add(root, "crc32c", crc_range, stored)
            it:add_proto_expert_info(ef.bad_crc, string.format(
                "Trailer: bad checksum 0x%08x (computed 0x%08x)", stored, want))
            w.error = true
        end
    end
    finish()
end

-------------------------------------------------------------------------------
-- Registration

local udp_table = DissectorTable.get("udp.port")
local ip_table = DissectorTable.get("ip.proto")
local registered = { udp = 0, ip = 0 }

local function register()
    if registered.udp ~= 0 then udp_table:remove(registered.udp, uet) end
    if registered.ip ~= 0 then ip_table:remove(registered.ip, uet) end
    registered.udp, registered.ip = uet.prefs.udp_port, uet.prefs.ip_proto
    if registered.udp ~= 0 then udp_table:add(registered.udp, uet) end
    if registered.ip ~= 0 then ip_table:add(registered.ip, uet) end
end

function uet.prefs_changed()
    register()
end

register()
if udp_table.add_for_decode_as then
    udp_table:add_for_decode_as(uet)
end
