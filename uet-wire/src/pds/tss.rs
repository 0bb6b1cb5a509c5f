//! The TSS security header (prologue type 1), REFPROV layout
//! (`docs/protocol-notes.md` §2.13; WS's older 20-byte layout is not followed,
//! §9 item 9), and how a secured frame splits into what is authenticated,
//! what is encrypted and the tag.
//!
//! ```text
//! 0      type:5 (= 1) | SP:1 (bit 26, SSI present) | rsvd:1 | AN:1 (bit 24) | SDI:24
//! 4      SSI           u32, only when SP = 1
//! 4/8    epoch:16 | TSC:48
//! ```
//!
//! 12 bytes, or 16 with SSI. Everything after the header — the PDS header,
//! the SES header and the payload — is AES-GCM ciphertext, and the packet
//! ends in a 16-byte tag (ICV) that takes the place of the CRC32C trailer
//! (§2.13). The header itself is authenticated, never encrypted.
//! [`SealedLayout`] gives the byte ranges; `uet-tss` does the cryptography.
//! A PDS header follows the header once the packet has been opened; see
//! [`super::parse_with_tss`]. Errors carry `Layer::Tss`.

use core::fmt;
use core::ops::Range;

use crate::error::{Error, ErrorKind, Layer, Result};
use crate::field::{set_u32, set_u64, u32_at, u64_at};

/// Length without SSI.
pub const HEADER_LEN: usize = 12;
/// Length with SSI.
pub const SSI_HEADER_LEN: usize = 16;

/// The `type` value of a TSS header.
pub const TSS_TYPE: u8 = 1;

mod field {
    pub(super) const WORD: usize = 0;
    pub(super) const SSI: usize = 4;
    pub(super) const TYPE_SHIFT: u32 = 27;
    pub(super) const SP: u32 = 1 << 26;
    pub(super) const AN: u32 = 1 << 24;
    pub(super) const SDI_MASK: u32 = 0x00ff_ffff;
    pub(super) const EPOCH_SHIFT: u32 = 48;
}

bits_newtype!(
    /// The 24-bit security domain index (SDI).
    Sdi, u32, 24
);

bits_newtype!(
    /// The 48-bit transmit security counter (TSC).
    Tsc, u64, 48
);

/// A read/write view of a TSS header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it (for emitting into a buffer of the
    /// right size).
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer after checking its length: afterwards no accessor can
    /// panic.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the buffer holds the whole header (16 B when SP is set).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        let need = self.header_len();
        if len < need {
            Err(Error::truncated(Layer::Tss, need, len))
        } else {
            Ok(())
        }
    }

    /// The header length SP announces. Never panics.
    pub fn header_len(&self) -> usize {
        match self.buffer.as_ref().first() {
            Some(b) if (u32::from(*b) << 24) & field::SP != 0 => SSI_HEADER_LEN,
            _ => HEADER_LEN,
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn word(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::WORD)
    }

    /// The 5-bit `type` (1 for TSS).
    pub fn pds_type_raw(&self) -> u8 {
        (self.word() >> field::TYPE_SHIFT) as u8
    }

    /// SP: the SSI is present.
    pub fn sp(&self) -> bool {
        self.word() & field::SP != 0
    }

    /// AN: the association number.
    pub fn an(&self) -> bool {
        self.word() & field::AN != 0
    }

    /// The SDI.
    pub fn sdi(&self) -> Sdi {
        Sdi::from_masked(self.word())
    }

    /// The SSI, when SP is set.
    pub fn ssi(&self) -> Option<u32> {
        let b = self.buffer.as_ref();
        (self.sp() && b.len() >= SSI_HEADER_LEN).then(|| u32_at(b, field::SSI))
    }

    fn epoch_tsc(&self) -> u64 {
        let b = self.buffer.as_ref();
        let off = self.header_len() - 8;
        if b.len() >= off + 8 {
            u64_at(b, off)
        } else {
            0
        }
    }

    /// The 16-bit epoch.
    pub fn epoch(&self) -> u16 {
        (self.epoch_tsc() >> field::EPOCH_SHIFT) as u16
    }

    /// The 48-bit TSC.
    pub fn tsc(&self) -> Tsc {
        Tsc::from_masked(self.epoch_tsc())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the first word: `type` 1, SP, AN and SDI (rsvd zero).
    pub fn set_word(&mut self, sp: bool, an: bool, sdi: Sdi) {
        let w = (u32::from(TSS_TYPE) << field::TYPE_SHIFT)
            | if sp { field::SP } else { 0 }
            | if an { field::AN } else { 0 }
            | (sdi.get() & field::SDI_MASK);
        set_u32(self.buffer.as_mut(), field::WORD, w);
    }

    /// Sets the SSI (bytes 4-7; only meaningful with SP).
    pub fn set_ssi(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::SSI, v);
    }

    /// Sets epoch and TSC at the position SP (already written) implies.
    pub fn set_epoch_tsc(&mut self, epoch: u16, tsc: Tsc) {
        let off = self.header_len() - 8;
        set_u64(
            self.buffer.as_mut(),
            off,
            (u64::from(epoch) << field::EPOCH_SHIFT) | tsc.get(),
        );
    }
}

/// A parsed TSS header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// AN: association number (selects the key).
    pub an: bool,
    /// Security domain index.
    pub sdi: Sdi,
    /// Secure source identifier; `Some` sets SP.
    pub ssi: Option<u32>,
    /// Key epoch.
    pub epoch: u16,
    /// Transmit security counter.
    pub tsc: Tsc,
}

impl Repr {
    /// Parses a TSS header. The rsvd bit is ignored; a `type` other than 1
    /// is `ErrorKind::OutOfRange` at byte 0.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        packet.check_len()?;
        if packet.pds_type_raw() != TSS_TYPE {
            return Err(Error::new(Layer::Tss, ErrorKind::OutOfRange, 0));
        }
        Ok(Self {
            an: packet.an(),
            sdi: packet.sdi(),
            ssi: packet.ssi(),
            epoch: packet.epoch(),
            tsc: packet.tsc(),
        })
    }

    /// Bytes `emit` writes: 12, or 16 with SSI.
    #[must_use]
    pub const fn buffer_len(&self) -> usize {
        if self.ssi.is_some() {
            SSI_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Writes the header into a buffer of at least `buffer_len()` bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_word(self.ssi.is_some(), self.an, self.sdi);
        if let Some(ssi) = self.ssi {
            packet.set_ssi(ssi);
        }
        packet.set_epoch_tsc(self.epoch, self.tsc);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TSS sdi={}", self.sdi)?;
        if let Some(ssi) = self.ssi {
            write!(f, " ssi={ssi:#010x}")?;
        }
        write!(f, " epoch={} tsc={}", self.epoch, self.tsc)?;
        if self.an {
            f.write_str(" an")?;
        }
        Ok(())
    }
}

/// Length of the AES-GCM tag (ICV) that ends a secured packet in place of
/// the CRC32C trailer (`docs/protocol-notes.md` §2.13).
pub const ICV_LEN: usize = 16;

/// The largest additional authenticated data: IPv6 addresses (32 B), the
/// flow bytes (4 B) and a header with SSI (16 B).
pub const MAX_AAD_LEN: usize = 32 + FLOW_LEN + SSI_HEADER_LEN;

/// Length of the flow bytes in the AAD: the entropy header, or the UDP
/// source and destination ports.
pub const FLOW_LEN: usize = 4;

/// Splits UET bytes that begin with a TSS header (after UDP or the entropy
/// header; the packet's last [`ICV_LEN`] bytes are the tag): the header, the
/// ciphertext range and the tag range, relative to `uet`.
///
/// Errors: not a TSS header (`OutOfRange` at 0), or too short for the header
/// and the tag (`Truncated`).
pub fn split(uet: &[u8]) -> Result<(Repr, Range<usize>, Range<usize>)> {
    let p = Packet::new_checked(uet)?;
    let r = Repr::parse(&p)?;
    let hl = r.buffer_len();
    let need = hl + ICV_LEN;
    if uet.len() < need {
        return Err(Error::truncated(Layer::Tss, need, uet.len()));
    }
    let tag_start = uet.len() - ICV_LEN;
    Ok((r, hl..tag_start, tag_start..uet.len()))
}

/// Where the parts of a secured frame lie, as byte ranges of the frame
/// (`docs/protocol-notes.md` §2.13, `docs/security.md`).
///
/// The additional authenticated data is `addrs ‖ flow ‖ header`; the
/// ciphertext is everything between the header and the tag. Over native IP
/// the three AAD parts are adjacent in the frame and the AAD is exactly
/// REFPROV's: from 12 bytes (IPv4) or 36 bytes (IPv6) before the header
/// through its end. Over UDP the flow bytes are the UDP source port (the
/// entropy value) and destination port — the same two 16-bit fields in the
/// same place as the entropy header's `entropy` and `rsvd` — while the UDP
/// length and checksum between them and the header are left out: the
/// checksum is computed after sealing, and the length is implied by the IP
/// length, which the receiver checks.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SealedLayout {
    /// Source and destination IP addresses (8 bytes for IPv4, 32 for IPv6).
    pub addrs: Range<usize>,
    /// The 4 flow bytes: the entropy header, or the UDP ports.
    pub flow: Range<usize>,
    /// The TSS header (12 or 16 bytes).
    pub header: Range<usize>,
    /// The ciphertext: PDS header, SES header and payload.
    pub ciphertext: Range<usize>,
    /// The 16-byte tag at the end of the UET bytes.
    pub tag: Range<usize>,
}

impl SealedLayout {
    /// The layout of a frame whose IP header starts at `l3` (`ipv6` says
    /// which version), whose UDP or entropy header starts at `l4`, and whose
    /// UET bytes (TSS header through tag) are `uet`, with a TSS header of
    /// `header_len` bytes.
    ///
    /// Errors (`Layer::Tss`): `header_len` is not 12 or 16 (`BadLength`);
    /// the UET bytes are too short for the header and the tag (`Truncated`);
    /// the offsets do not nest (`BadLength`).
    pub fn new(
        l3: usize,
        ipv6: bool,
        l4: usize,
        uet: Range<usize>,
        header_len: usize,
    ) -> Result<Self> {
        if header_len != HEADER_LEN && header_len != SSI_HEADER_LEN {
            return Err(Error::new(Layer::Tss, ErrorKind::BadLength, 0));
        }
        let (addr_off, addr_len) = if ipv6 { (8, 32) } else { (12, 8) };
        let addrs = l3 + addr_off..l3 + addr_off + addr_len;
        let flow = l4..l4 + FLOW_LEN;
        if addrs.end > l4 || flow.end > uet.start || uet.start > uet.end {
            return Err(Error::new(Layer::Tss, ErrorKind::BadLength, 0));
        }
        let need = header_len + ICV_LEN;
        if uet.len() < need {
            return Err(Error::truncated(Layer::Tss, need, uet.len()).at(uet.start));
        }
        let header = uet.start..uet.start + header_len;
        let tag = uet.end - ICV_LEN..uet.end;
        Ok(Self {
            addrs,
            flow,
            ciphertext: header.end..tag.start,
            header,
            tag,
        })
    }

    /// Length of the additional authenticated data.
    #[must_use]
    pub const fn aad_len(&self) -> usize {
        (self.addrs.end - self.addrs.start)
            + (self.flow.end - self.flow.start)
            + (self.header.end - self.header.start)
    }

    /// Gathers the AAD (`addrs ‖ flow ‖ header`) of `frame` into `out` and
    /// returns it. Parts outside `frame` are left out rather than panicking
    /// (the layout of a frame always lies inside it).
    pub fn aad<'b>(&self, frame: &[u8], out: &'b mut [u8; MAX_AAD_LEN]) -> &'b [u8] {
        let mut n = 0;
        for r in [&self.addrs, &self.flow, &self.header] {
            if let (Some(src), Some(dst)) = (frame.get(r.clone()), out.get_mut(n..n + r.len())) {
                dst.copy_from_slice(src);
                n += r.len();
            }
        }
        &out[..n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn repr() -> impl Strategy<Value = Repr> {
        (
            any::<bool>(),
            any::<u32>(),
            proptest::option::of(any::<u32>()),
            any::<u16>(),
            any::<u64>(),
        )
            .prop_map(|(an, sdi, ssi, epoch, tsc)| Repr {
                an,
                sdi: Sdi::from_masked(sdi),
                ssi,
                epoch,
                tsc: Tsc::from_masked(tsc),
            })
    }

    // type 1 | SP | AN: 0b00001_1_0_1 = 0x0d; SDI 0x123456; SSI 0xcafef00d;
    // epoch 2, TSC 0x0000_0000_1000.
    const TSS_SSI: [u8; 16] = [
        0x0d, 0x12, 0x34, 0x56, 0xca, 0xfe, 0xf0, 0x0d, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x10,
        0x00,
    ];
    // type 1, no SP, no AN: 0x08; SDI 7; epoch 1, TSC 9.
    const TSS_PLAIN: [u8; 12] = [0x08, 0x00, 0x00, 0x07, 0, 1, 0, 0, 0, 0, 0, 9];

    #[test]
    fn golden() {
        let r = Repr::parse(&Packet::new_checked(&TSS_SSI[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            Repr {
                an: true,
                sdi: Sdi::new(0x12_3456).unwrap(),
                ssi: Some(0xcafe_f00d),
                epoch: 2,
                tsc: Tsc::new(0x1000).unwrap(),
            }
        );
        let mut b = [0xeeu8; 16];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, TSS_SSI);
        assert_eq!(
            std::format!("{r}"),
            "TSS sdi=1193046 ssi=0xcafef00d epoch=2 tsc=4096 an"
        );

        let r = Repr::parse(&Packet::new_checked(&TSS_PLAIN[..]).unwrap()).unwrap();
        assert_eq!(r.ssi, None);
        assert_eq!((r.sdi.get(), r.epoch, r.tsc.get()), (7, 1, 9));
        let mut b = [0xeeu8; 12];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, TSS_PLAIN);
    }

    #[test]
    fn errors_and_reserved_bit() {
        assert_eq!(
            Packet::new_checked(&TSS_SSI[..12]).unwrap_err(),
            Error::truncated(Layer::Tss, 16, 12)
        );
        assert_eq!(
            Packet::new_checked(&[][..]).unwrap_err(),
            Error::truncated(Layer::Tss, 12, 0)
        );
        let mut b = TSS_PLAIN;
        b[0] = 0x10; // type 2
        let e = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap_err();
        assert_eq!(
            (e.layer, e.kind, e.offset),
            (Layer::Tss, ErrorKind::OutOfRange, 0)
        );
        let mut b = TSS_PLAIN;
        b[0] |= 0x02; // rsvd bit 25
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        let mut out = [0u8; 12];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, TSS_PLAIN);
    }

    #[test]
    fn split_finds_header_ciphertext_and_tag() {
        let mut uet = TSS_SSI.to_vec();
        uet.extend_from_slice(&[0xc7; 7]);
        uet.extend_from_slice(&[0x1c; ICV_LEN]);
        let (r, ct, tag) = split(&uet).unwrap();
        assert_eq!(r.ssi, Some(0xcafe_f00d));
        assert_eq!((ct, tag), (16..23, 23..39));
        // Header and tag with nothing between them still split.
        let (_, ct, tag) = split(&uet[..16]).map_or((None, 0..0, 0..0), |x| (Some(x.0), x.1, x.2));
        assert_eq!((ct, tag), (0..0, 0..0));
        assert_eq!(
            split(&uet[..16 + 15]).unwrap_err(),
            Error::truncated(Layer::Tss, 32, 31)
        );
        let mut not_tss = uet.clone();
        not_tss[0] = 0x10;
        assert_eq!(split(&not_tss).unwrap_err().kind, ErrorKind::OutOfRange);
    }

    #[test]
    fn native_ip_layouts_are_refprov_aad() {
        // IPv4 native: Ethernet 14, IPv4 20, entropy header 4. REFPROV's AAD
        // starts 12 bytes before the header (source address) and runs
        // through its end: one contiguous range.
        let l = SealedLayout::new(14, false, 34, 38..38 + 12 + 30 + ICV_LEN, 12).unwrap();
        assert_eq!(
            (l.addrs.clone(), l.flow.clone(), l.header.clone()),
            (26..34, 34..38, 38..50)
        );
        assert_eq!(l.addrs.start, l.header.start - 12);
        assert_eq!((l.ciphertext.clone(), l.tag.clone()), (50..80, 80..96));
        let frame: Vec<u8> = (0..96u8).collect();
        let mut buf = [0u8; MAX_AAD_LEN];
        assert_eq!(l.aad(&frame, &mut buf), &frame[26..50]);
        // IPv6 native: 36 bytes before the header, with SSI.
        let l = SealedLayout::new(14, true, 54, 58..58 + 16 + 1 + ICV_LEN, 16).unwrap();
        assert_eq!(l.addrs.start, l.header.start - 36);
        assert_eq!((l.header.clone(), l.ciphertext.clone()), (58..74, 74..75));
        assert_eq!(l.aad_len(), 52);
        let frame: Vec<u8> = (0..91u8).collect();
        assert_eq!(l.aad(&frame, &mut buf), &frame[22..74]);
        // Bad shapes.
        assert!(SealedLayout::new(14, false, 34, 38..38 + 12 + 15, 12).is_err());
        assert!(SealedLayout::new(14, false, 34, 38..200, 13).is_err());
        assert!(SealedLayout::new(14, false, 20, 38..200, 12).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(r in repr()) {
            let mut b = [0x5au8; SSI_HEADER_LEN];
            let n = r.buffer_len();
            r.emit(&mut Packet::new_unchecked(&mut b[..n]));
            let p = Packet::new_checked(&b[..n]).unwrap();
            prop_assert_eq!(p.header_len(), n);
            prop_assert_eq!(Repr::parse(&p).unwrap(), r);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
            if let Ok(p) = Packet::new_checked(&bytes[..])
                && let Ok(r) = Repr::parse(&p)
            {
                prop_assert_eq!(r.buffer_len(), p.header_len());
            }
        }
    }
}
