//! # xdp-prog — the XDP steering program and its loader-facing constants
//!
//! `src/uet_steer.bpf.c` is an XDP program (C, built by clang `-target bpf`
//! with BTF; `design.md` §5) that redirects UET frames — UDP to the UET port,
//! and optionally native-IP UET by protocol number — to the AF_XDP socket of
//! the receiving queue, and passes everything else to the kernel. Its header
//! comment states the parsing bounds and exactly what each counter counts.
//!
//! The build script compiles it when clang is present and otherwise uses the
//! committed `obj/uet_steer.bpf.o`; `tests/committed_object.rs` fails when
//! that copy is stale. Regenerate it with `xdp-prog/regen.sh`.
//!
//! This crate only carries bytes and constants; `uetd::xdp` loads them with
//! aya.

/// 8-byte alignment for the object: aya's ELF parser (the `object` crate)
/// reads the ELF headers in place and rejects misaligned input.
#[repr(C, align(8))]
struct Aligned<B: ?Sized> {
    bytes: B,
}

static OBJECT: &Aligned<[u8]> = &Aligned {
    bytes: *include_bytes!(concat!(env!("OUT_DIR"), "/uet_steer.bpf.o")),
};

/// The compiled program (a BPF ELF object), 8-byte aligned.
pub fn object() -> &'static [u8] {
    &OBJECT.bytes
}

/// Whether [`object`] was compiled by clang in this build (`true`) or is
/// the committed copy (`false`, clang absent).
pub const BUILT_WITH_CLANG: bool = matches!(env!("XDP_PROG_BUILT_BY").as_bytes(), b"clang");

/// First line of `clang --version` of the clang that built [`object`];
/// empty when the committed copy was used.
pub const CLANG_VERSION: &str = env!("XDP_PROG_CLANG_VERSION");

/// The program (C function) name, as the kernel shows it (`bpftool prog`).
pub const PROGRAM_NAME: &str = "uet_steer";

/// The ELF section of the program (`ip link set … obj F sec xdp`).
pub const SECTION: &str = "xdp";

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
    fn object_is_an_aligned_bpf_elf() {
        let o = object();
        assert_eq!(o.as_ptr() as usize % 8, 0, "aya needs 8-byte alignment");
        assert_eq!(&o[..4], b"\x7fELF");
        assert_eq!(o[4], 2, "ELFCLASS64");
        // e_machine at offset 18: EM_BPF = 247, little or big endian.
        let m = u16::from_le_bytes([o[18], o[19]]);
        assert!(m == 247 || u16::from_be_bytes([o[18], o[19]]) == 247);
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
