//! # xdp-prog — the XDP steering program and its loader-facing constants
//!
//! `src/uet_steer.bpf.c` is an XDP program (C, built by clang `-target bpf`
//! with BTF; `docs/architecture.md` §5) that redirects UET frames — UDP to the UET port,
//! and optionally native-IP UET by protocol number — to the AF_XDP socket of
//! the receiving queue, and passes everything else to the kernel. Its header
//! comment states the parsing bounds and exactly what each counter counts.
//!
//! The lab's switch (`docs/architecture.md` §6) has two tc programs: `src/uet_ecn.bpf.c`
//! ([`ecn_object`], [`ecn`]), the virtual-queue ECN marker on the bottleneck
//! port, and `src/uet_impair.bpf.c` ([`impair_object`], [`impair`]): loss,
//! duplication, reordering and trimming, off until switched on.
//!
//! The build script compiles them when clang is present and otherwise uses
//! the committed `obj/NAME.bpf.o`; `tests/committed_object.rs` fails when a
//! copy is stale. Regenerate them with `xdp-prog/regen.sh`.
//!
//! This crate only carries bytes and constants; `uetd::xdp` and `uet_lab`
//! load them with aya.

/// 8-byte alignment for the object: aya's ELF parser (the `object` crate)
/// reads the ELF headers in place and rejects misaligned input.
#[repr(C, align(8))]
struct Aligned<B: ?Sized> {
    bytes: B,
}

macro_rules! object {
    ($name:literal) => {{
        static OBJ: &Aligned<[u8]> = &Aligned {
            bytes: *include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".bpf.o")),
        };
        &OBJ.bytes
    }};
}

/// The compiled XDP steering program (a BPF ELF object), 8-byte aligned.
pub fn object() -> &'static [u8] {
    object!("uet_steer")
}

/// The lab switch's ECN marker (`src/uet_ecn.bpf.c`, a tc program); see
/// [`ecn`].
pub fn ecn_object() -> &'static [u8] {
    object!("uet_ecn")
}

/// The lab switch's impairment programs (`src/uet_impair.bpf.c`, tc); see
/// [`impair`].
pub fn impair_object() -> &'static [u8] {
    object!("uet_impair")
}

/// Every object this crate carries: (name, bytes). `obj/NAME.bpf.o` is the
/// committed copy of each, `src/NAME.bpf.c` its source.
pub fn objects() -> [(&'static str, &'static [u8]); 3] {
    [
        ("uet_steer", object()),
        ("uet_ecn", ecn_object()),
        ("uet_impair", impair_object()),
    ]
}

/// The arrival stamp the steering program writes as XDP metadata in front
/// of every UET frame it steers (`struct uet_rx_meta` in
/// `src/uet_steer.bpf.c`): [`LEN`](rx_meta::LEN) bytes ending where the
/// frame's data begins, in host byte order.
pub mod rx_meta {
    /// Bytes of metadata.
    pub const LEN: usize = 16;
    /// Offset of `arrived_ns` (u64, `bpf_ktime_get_ns()`: CLOCK_MONOTONIC
    /// nanoseconds when the program started on the frame).
    pub const ARRIVED_NS: usize = 0;
    /// Offset of `magic` (u32).
    pub const MAGIC_AT: usize = 8;
    /// `magic` when the program wrote the metadata ("UETS").
    pub const MAGIC: u32 = 0x5545_5453;
}

/// Names and indices of the ECN marker (`src/uet_ecn.bpf.c`, whose header
/// comment defines the model and each counter). Every map is an
/// `BPF_MAP_TYPE_ARRAY` of `u64`.
pub mod ecn {
    /// The tc program (ELF section `classifier`).
    pub const PROGRAM: &str = "uet_ecn";
    /// Config map, indexed by the `CFG_*` constants.
    pub const CONFIG_MAP: &str = "ecn_config";
    /// State map: `[0]` = the virtual queue's finish time, picoseconds of
    /// CLOCK_MONOTONIC.
    pub const STATE_MAP: &str = "ecn_state";
    /// Counter map, indexed by the `CNT_*` constants.
    pub const COUNTERS_MAP: &str = "ecn_counters";
    /// Picoseconds per byte of the drain rate R·γ; 0 = virtual queue off.
    pub const CFG_PS_PER_BYTE: u32 = 0;
    /// Lower marking threshold, bytes.
    pub const CFG_KMIN: u32 = 1;
    /// Upper marking threshold, bytes.
    pub const CFG_KMAX: u32 = 2;
    /// The buffer, bytes (virtual drops above it); 0 = unbounded.
    pub const CFG_LIMIT: u32 = 3;
    /// `FLAG_*` bits.
    pub const CFG_FLAGS: u32 = 4;
    /// UDP payload bytes a frame trimmed for the limit keeps.
    pub const CFG_TRIM_TO: u32 = 5;
    /// The UET UDP port (0: 4793): only UET frames are trimmed.
    pub const CFG_UDP_PORT: u32 = 6;
    /// The DSCP of a trimmed frame (0: 16, DSCP_TRIMMED).
    pub const CFG_TRIM_DSCP: u32 = 7;
    /// Entries of the config map.
    pub const CFG_COUNT: u32 = 8;
    /// [`CFG_FLAGS`] bit: mark CE.
    pub const FLAG_MARK: u64 = 1;
    /// [`CFG_FLAGS`] bit: trim a UET frame that would overflow the limit
    /// instead of leaving it to the TBF to drop (a trimming switch).
    pub const FLAG_TRIM: u64 = 2;
    /// Packets seen.
    pub const CNT_SEEN: u32 = 0;
    /// Packets marked CE.
    pub const CNT_MARKED: u32 = 1;
    /// Packets chosen for marking that were Not-ECT.
    pub const CNT_NOT_ECT: u32 = 2;
    /// Packets the virtual queue dropped (over the limit).
    pub const CNT_VQ_DROPS: u32 = 3;
    /// Peak virtual backlog, bytes.
    pub const CNT_VQ_PEAK: u32 = 4;
    /// Bytes admitted to the virtual queue.
    pub const CNT_VQ_BYTES: u32 = 5;
    /// Frames trimmed for the limit ([`FLAG_TRIM`]).
    pub const CNT_TRIMMED: u32 = 6;
    /// Frames whose trimming failed in a helper (dropped).
    pub const CNT_TRIM_ERRORS: u32 = 7;
    /// Entries of the counter map.
    pub const CNT_COUNT: u32 = 8;
}

/// Names and indices of the impairment programs (`src/uet_impair.bpf.c`,
/// whose header comment defines each action and counter). Every map is an
/// `BPF_MAP_TYPE_ARRAY` of `u64`; probabilities are scaled by 2^32.
pub mod impair {
    /// The tc program on every switch port's egress.
    pub const PROGRAM: &str = "uet_impair";
    /// The tc program on the detour veth's peer ingress (reordering).
    pub const DETOUR_PROGRAM: &str = "uet_detour";
    /// Config map, indexed by the `CFG_*` constants.
    pub const CONFIG_MAP: &str = "imp_config";
    /// Counter map, indexed by the `CNT_*` constants.
    pub const COUNTERS_MAP: &str = "imp_counters";
    /// Drop probability.
    pub const CFG_LOSS: u32 = 0;
    /// Duplication probability.
    pub const CFG_DUP: u32 = 1;
    /// Reordering (detour) probability.
    pub const CFG_REORDER: u32 = 2;
    /// Trimming probability.
    pub const CFG_TRIM: u32 = 3;
    /// UDP payload bytes a trimmed frame keeps.
    pub const CFG_TRIM_TO: u32 = 4;
    /// UET UDP port; 0 = 4793.
    pub const CFG_UDP_PORT: u32 = 5;
    /// Only this egress ifindex; 0 = every port.
    pub const CFG_IFINDEX: u32 = 6;
    /// Ifindex of the detour veth; 0 = no reordering.
    pub const CFG_DETOUR: u32 = 7;
    /// DSCP of trimmed frames; 0 = 16 (DSCP_TRIMMED).
    pub const CFG_TRIM_DSCP: u32 = 8;
    /// Entries of the config map.
    pub const CFG_COUNT: u32 = 9;
    /// UET frames considered.
    pub const CNT_SEEN: u32 = 0;
    /// Frames dropped.
    pub const CNT_DROPPED: u32 = 1;
    /// Frames duplicated.
    pub const CNT_DUPLICATED: u32 = 2;
    /// Frames sent on the detour.
    pub const CNT_DETOURED: u32 = 3;
    /// Frames back from the detour.
    pub const CNT_RETURNED: u32 = 4;
    /// Frames trimmed.
    pub const CNT_TRIMMED: u32 = 5;
    /// Helper failures.
    pub const CNT_ERRORS: u32 = 6;
    /// Entries of the counter map.
    pub const CNT_COUNT: u32 = 7;
}

/// Whether [`object`] (and every other object) was compiled by clang in this build (`true`) or is
/// the committed copy (`false`, clang absent).
pub const BUILT_WITH_CLANG: bool = matches!(env!("XDP_PROG_BUILT_BY").as_bytes(), b"clang");

/// First line of `clang --version` of the clang that built [`object`];
/// empty when the committed copy was used.
pub const CLANG_VERSION: &str = env!("XDP_PROG_CLANG_VERSION");

/// The program (C function) name, as the kernel shows it (`bpftool prog`).
pub const PROGRAM_NAME: &str = "uet_steer";

/// The ELF section of the program (`ip link set … obj F sec xdp.frags`):
/// frags-aware, so it is loaded with `BPF_F_XDP_HAS_FRAGS` and multi-buffer
/// frames (MTU above a page on veth, jumbo frames) reach it.
pub const SECTION: &str = "xdp.frags";

/// `BPF_MAP_TYPE_XSKMAP`: RX queue index → AF_XDP socket.
pub const XSKS_MAP: &str = "xsks";

/// Entries of [`XSKS_MAP`]: the highest RX queue index served, plus one.
pub const XSKS_MAX_ENTRIES: u32 = 64;

/// `BPF_MAP_TYPE_ARRAY`, one [`ConfigRaw`] at key 0.
pub const CONFIG_MAP: &str = "config";

/// `BPF_MAP_TYPE_PERCPU_ARRAY` of `u64`, indexed by [`counter`].
pub const COUNTERS_MAP: &str = "counters";

/// The UET UDP destination port the program steers when the config leaves
/// it 0 (IANA-assigned for UET over UDP).
pub const DEFAULT_UDP_PORT: u16 = 4793;

/// The IP protocol number for native-IP UET unless configured otherwise
/// (RFC 3692 experimental); steering by it is off unless
/// [`CFG_FLAG_IP_PROTO`] is set.
pub const DEFAULT_IP_PROTO: u8 = 253;

/// [`ConfigRaw::flags`] bit: also steer IPv4/IPv6 frames whose protocol /
/// next header is [`ConfigRaw::ip_proto`].
pub const CFG_FLAG_IP_PROTO: u8 = 0x01;

/// Indices into [`COUNTERS_MAP`]; the C source defines what each counts.
/// `SEEN == REDIRECTED + PASSED + MALFORMED`; `NO_SOCKET` is part of
/// `PASSED`.
pub mod counter {
    /// Every frame the program ran on.
    pub const SEEN: u32 = 0;
    /// UET frames handed to an AF_XDP socket (`XDP_REDIRECT`).
    pub const REDIRECTED: u32 = 1;
    /// Well-formed frames left to the kernel (`XDP_PASS`), including UET
    /// frames with no socket at their queue.
    pub const PASSED: u32 = 2;
    /// Frames with a truncated or invalid header, left to the kernel.
    pub const MALFORMED: u32 = 3;
    /// UET frames passed because no socket is registered at their queue.
    pub const NO_SOCKET: u32 = 4;
    /// Number of counters (the map's `max_entries`).
    pub const COUNT: u32 = 5;
}

/// The value of [`CONFIG_MAP`] — `struct uet_steer_config` in the C source:
/// 4 bytes, host byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigRaw {
    /// UDP destination port of UET; 0 means [`DEFAULT_UDP_PORT`].
    pub udp_port: u16,
    /// IP protocol number of native-IP UET.
    pub ip_proto: u8,
    /// `CFG_FLAG_*` bits.
    pub flags: u8,
}

impl Default for ConfigRaw {
    fn default() -> Self {
        Self {
            udp_port: DEFAULT_UDP_PORT,
            ip_proto: DEFAULT_IP_PROTO,
            flags: 0,
        }
    }
}

impl ConfigRaw {
    /// Size of the C struct.
    pub const SIZE: usize = 4;

    /// The struct's bytes as the program reads them (native endianness).
    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        let p = self.udp_port.to_ne_bytes();
        [p[0], p[1], self.ip_proto, self.flags]
    }

    /// The same bytes as one native `u32`, for a map typed `u32` on the
    /// loader side (the value size is all the kernel checks).
    pub fn to_ne_u32(self) -> u32 {
        u32::from_ne_bytes(self.to_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_aligned_bpf_elfs() {
        for (name, o) in objects() {
            assert_eq!(
                o.as_ptr() as usize % 8,
                0,
                "{name}: aya needs 8-byte alignment"
            );
            assert_eq!(&o[..4], b"\x7fELF");
            assert_eq!(o[4], 2, "ELFCLASS64");
            // e_machine at offset 18: EM_BPF = 247, little or big endian.
            let m = u16::from_le_bytes([o[18], o[19]]);
            assert!(m == 247 || u16::from_be_bytes([o[18], o[19]]) == 247);
        }
        let has = |o: &[u8], name: &str| o.windows(name.len()).any(|w| w == name.as_bytes());
        for name in [
            ecn::PROGRAM,
            ecn::CONFIG_MAP,
            ecn::STATE_MAP,
            ecn::COUNTERS_MAP,
        ] {
            assert!(has(ecn_object(), name), "{name} not in uet_ecn");
        }
        for name in [
            impair::PROGRAM,
            impair::DETOUR_PROGRAM,
            impair::CONFIG_MAP,
            impair::COUNTERS_MAP,
        ] {
            assert!(has(impair_object(), name), "{name} not in uet_impair");
        }
        let o = object();
        for name in [PROGRAM_NAME, XSKS_MAP, CONFIG_MAP, COUNTERS_MAP] {
            assert!(
                o.windows(name.len()).any(|w| w == name.as_bytes()),
                "{name} not in the object"
            );
        }
    }

    #[test]
    fn config_bytes_follow_the_c_layout() {
        let c = ConfigRaw {
            udp_port: 0x12b9,
            ip_proto: 253,
            flags: CFG_FLAG_IP_PROTO,
        };
        let b = c.to_bytes();
        assert_eq!(u16::from_ne_bytes([b[0], b[1]]), 0x12b9);
        assert_eq!(&b[2..], &[253, 1]);
        assert_eq!(c.to_ne_u32().to_ne_bytes(), b);
        assert_eq!(ConfigRaw::default().udp_port, 4793);
    }
}
