//! The TSS security header (prologue type 1), REFPROV layout
//! (`docs/protocol-notes.md` §2.13; WS's older 20-byte layout is not followed,
//! §9 item 9).
//!
//! ```text
//! 0      type:5 (= 1) | SP:1 (bit 26, SSI present) | rsvd:1 | AN:1 (bit 24) | SDI:24
//! 4      SSI           u32, only when SP = 1
//! 4/8    epoch:16 | TSC:48
//! ```
//!
//! 12 bytes, or 16 with SSI. The header is recognised and skipped: no
//! cryptography happens here (the 16-byte AES-GCM tag at the end of the
//! packet is the frame parser's business). A PDS header follows it; see
//! [`super::parse_with_tss`]. Errors carry `Layer::Tss`.

use core::fmt;

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
