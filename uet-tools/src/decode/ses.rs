//! The `ses` object: every SES request, extension and response header
//! (`docs/protocol-notes.md` §4).
//!
//! Requests: `opcode` (spec name, `UET_WRITE`, …), `version`, `flags`
//! (`dc ie rel hd eom som`; the small header has no `hd`), `ri_generation`,
//! `job_id`, `pid_on_fep`, `resource_index`, `header_len` and:
//!
//! | header | fields |
//! |---|---|
//! | standard | `message_id`, `buffer_offset`, `initiator`, `memory_key` (or `match_bits` for tagged opcodes), with `som`: `header_data`, without: `payload_length` + `message_offset`; `request_length`; `ext` when the opcode carries an extension |
//! | medium | `request_length`, `header_data` (with `hd`) or `buffer_offset`, `initiator`, `memory_key` / `match_bits` |
//! | small | `request_length`, `buffer_offset` |
//!
//! `ext` is `{"type": "atomic" | "compare-and-swap" | "rendezvous", …}` with
//! `atomic_opcode`, `atomic_datatype`, `semantic_control` (+ `cacheable`,
//! `cpu_coherent`), `compare_value`, `swap_value`; or `eager_length`,
//! `ri_generation`, `pid_on_fep`, `resource_index`, `read_offset`,
//! `read_memory_key`.
//!
//! Responses: `list`, `opcode`, `version`, `return_code` (spec names),
//! `job_id`, `header_len` and: `UET_HDR_RESPONSE` `message_id`,
//! `ri_generation`, `modified_length`; `UET_HDR_RESPONSE_DATA` `message_id`,
//! `read_request_message_id`, `payload_length`, `modified_length`,
//! `message_offset`; `UET_HDR_RESPONSE_DATA_SMALL` `payload_length`,
//! `original_request_psn`.

use serde_json::{Value, json};
use uet_wire::ses::request::VERSION;
use uet_wire::ses::{
    HeaderDataOrOffset, Opcode, RequestFlags, SesAtomicExtRepr, SesExtRepr, SesMediumRepr, SesRepr,
    SesSmallRepr, SomFields, StandardRequest,
};

use super::{Obj, hex, put};

/// The `ses` object of an SES header.
#[must_use]
pub fn ses_json(s: &SesRepr) -> Value {
    let mut o = Obj::new();
    put(&mut o, "header_len", s.header_len());
    match s {
        SesRepr::Standard(r) => standard(r, &mut o),
        SesRepr::Medium(r) => medium(r, &mut o),
        SesRepr::Small(r) => small(r, &mut o),
        SesRepr::Response(r) => {
            put(&mut o, "list", r.list.to_string());
            put(&mut o, "opcode", r.opcode.to_string());
            put(&mut o, "version", VERSION);
            put(&mut o, "return_code", r.return_code.to_string());
            put(&mut o, "message_id", r.message_id.get());
            put(&mut o, "ri_generation", r.ri_generation.get());
            put(&mut o, "job_id", r.job_id.get());
            put(&mut o, "modified_length", r.modified_length);
        }
        SesRepr::ResponseData(r) => {
            put(&mut o, "list", r.list.to_string());
            put(&mut o, "opcode", r.opcode.to_string());
            put(&mut o, "version", VERSION);
            put(&mut o, "return_code", r.return_code.to_string());
            put(&mut o, "message_id", r.message_id.get());
            put(&mut o, "job_id", r.job_id.get());
            put(
                &mut o,
                "read_request_message_id",
                r.read_request_message_id.get(),
            );
            put(&mut o, "payload_length", r.payload_length.get());
            put(&mut o, "modified_length", r.modified_length);
            put(&mut o, "message_offset", r.message_offset);
        }
        SesRepr::ResponseDataSmall(r) => {
            put(&mut o, "list", r.list.to_string());
            put(&mut o, "opcode", r.opcode.to_string());
            put(&mut o, "version", VERSION);
            put(&mut o, "return_code", r.return_code.to_string());
            put(&mut o, "payload_length", r.payload_length.get());
            put(&mut o, "job_id", r.job_id.get());
            put(&mut o, "original_request_psn", r.original_request_psn.0);
        }
    }
    Value::Object(o)
}

/// `flags` of a request header; `hd` is `None` for the small header, where
/// the bit is reserved.
fn flags(f: RequestFlags, hd: Option<bool>, som: bool) -> Value {
    let mut o = Obj::new();
    put(&mut o, "dc", f.dc);
    put(&mut o, "ie", f.ie);
    put(&mut o, "rel", f.rel);
    if let Some(hd) = hd {
        put(&mut o, "hd", hd);
    }
    put(&mut o, "eom", f.eom);
    put(&mut o, "som", som);
    Value::Object(o)
}

/// The 64-bit key word: `match_bits` for tagged opcodes, else `memory_key`.
fn key(opcode: Opcode, v: u64, o: &mut Obj) {
    let name = if opcode.is_tagged() {
        "match_bits"
    } else {
        "memory_key"
    };
    put(o, name, hex(v));
}

fn standard(r: &StandardRequest, o: &mut Obj) {
    let h = r.header();
    put(o, "opcode", h.opcode.to_string());
    put(o, "version", VERSION);
    put(o, "flags", flags(h.flags, Some(h.hd), h.is_som()));
    put(o, "message_id", h.message_id.get());
    put(o, "ri_generation", h.ri_generation.get());
    put(o, "job_id", h.job_id.get());
    put(o, "pid_on_fep", h.pid_on_fep.get());
    put(o, "resource_index", h.resource_index.get());
    put(o, "buffer_offset", h.buffer_offset);
    put(o, "initiator", h.initiator);
    key(h.opcode, h.memory_key, o);
    match h.som {
        SomFields::Start { header_data } => put(o, "header_data", hex(header_data)),
        SomFields::Continuation {
            payload_length,
            message_offset,
        } => {
            put(o, "payload_length", payload_length.get());
            put(o, "message_offset", message_offset);
        }
    }
    put(o, "request_length", h.request_length);
    if let Some(e) = r.ext() {
        put(o, "ext", ext_json(e));
    }
}

fn medium(r: &SesMediumRepr, o: &mut Obj) {
    put(o, "opcode", r.opcode.to_string());
    put(o, "version", VERSION);
    put(
        o,
        "flags",
        flags(r.flags, Some(r.data_or_offset.hd()), r.som),
    );
    put(o, "request_length", r.request_length.get());
    put(o, "ri_generation", r.ri_generation.get());
    put(o, "job_id", r.job_id.get());
    put(o, "pid_on_fep", r.pid_on_fep.get());
    put(o, "resource_index", r.resource_index.get());
    match r.data_or_offset {
        HeaderDataOrOffset::HeaderData(v) => put(o, "header_data", hex(v)),
        HeaderDataOrOffset::BufferOffset(v) => put(o, "buffer_offset", v),
    }
    put(o, "initiator", r.initiator);
    key(r.opcode, r.memory_key, o);
}

fn small(r: &SesSmallRepr, o: &mut Obj) {
    put(o, "opcode", r.opcode.to_string());
    put(o, "version", VERSION);
    put(o, "flags", flags(r.flags, None, r.som));
    put(o, "request_length", r.request_length.get());
    put(o, "ri_generation", r.ri_generation.get());
    put(o, "job_id", r.job_id.get());
    put(o, "pid_on_fep", r.pid_on_fep.get());
    put(o, "resource_index", r.resource_index.get());
    put(o, "buffer_offset", r.buffer_offset);
}

fn atomic(a: &SesAtomicExtRepr, o: &mut Obj) {
    put(o, "atomic_opcode", a.opcode.to_string());
    put(o, "atomic_datatype", a.datatype.to_string());
    put(o, "semantic_control", a.semantic_control());
    put(o, "cacheable", a.cacheable);
    put(o, "cpu_coherent", a.cpu_coherent);
}

/// The extension header of a standard request (§4.4).
fn ext_json(e: &SesExtRepr) -> Value {
    let mut o = Obj::new();
    put(&mut o, "type", e.kind().name());
    put(&mut o, "header_len", e.buffer_len());
    match e {
        SesExtRepr::Atomic(a) => atomic(a, &mut o),
        SesExtRepr::CompareSwap(c) => {
            atomic(&c.atomic, &mut o);
            put(&mut o, "compare_value", hex(c.compare));
            put(&mut o, "swap_value", hex(c.swap));
        }
        SesExtRepr::Rendezvous(r) => {
            put(&mut o, "eager_length", r.eager_length);
            put(&mut o, "ri_generation", r.ri_generation.get());
            put(&mut o, "pid_on_fep", r.pid_on_fep.get());
            put(&mut o, "resource_index", r.resource_index.get());
            put(&mut o, "read_offset", r.read_offset);
            put(&mut o, "read_memory_key", hex(r.read_memory_key));
        }
    }
    json!(o)
}
