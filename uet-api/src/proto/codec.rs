//! Field-level encoding and decoding: little-endian integers, options,
//! addresses and strings, with the offset and name of every field a decode
//! error names.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{DecodeError, HEADER_LEN};

/// Appends fields to a frame body.
pub(super) struct Enc<'a>(pub(super) &'a mut Vec<u8>);

impl Enc<'_> {
    pub(super) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    pub(super) fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(super) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(super) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(super) fn bytes(&mut self, v: &[u8]) {
        self.0.extend_from_slice(v);
    }

    /// `u8` 0 (absent) or 1 followed by the `u64`.
    pub(super) fn opt_u64(&mut self, v: Option<u64>) {
        match v {
            None => self.u8(0),
            Some(x) => {
                self.u8(1);
                self.u64(x);
            }
        }
    }

    /// `u16` byte count followed by the bytes. Callers keep `v` within
    /// `u16::MAX` (the frame limit refuses longer bodies anyway); longer
    /// input is cut there.
    pub(super) fn blob(&mut self, v: &[u8]) {
        let v = &v[..v.len().min(usize::from(u16::MAX))];
        self.u16(v.len() as u16);
        self.bytes(v);
    }

    /// `u8` family (4 or 6) followed by 4 or 16 address bytes.
    pub(super) fn ip(&mut self, ip: IpAddr) {
        match ip {
            IpAddr::V4(a) => {
                self.u8(4);
                self.bytes(&a.octets());
            }
            IpAddr::V6(a) => {
                self.u8(6);
                self.bytes(&a.octets());
            }
        }
    }

    /// `u16` byte length followed by UTF-8. Strings longer than `u16::MAX`
    /// bytes are cut at a character boundary (the frame limit refuses them
    /// anyway).
    pub(super) fn str(&mut self, s: &str) {
        let mut n = s.len().min(usize::from(u16::MAX));
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.u16(n as u16);
        self.bytes(&s.as_bytes()[..n]);
    }
}

/// Reads fields from a frame body; errors name the message type, the field
/// and its offset from the start of the frame.
pub(super) struct Dec<'a> {
    body: &'a [u8],
    pos: usize,
    ty: u16,
}

impl<'a> Dec<'a> {
    pub(super) fn new(ty: u16, body: &'a [u8]) -> Self {
        Self { body, pos: 0, ty }
    }

    fn at(&self) -> usize {
        HEADER_LEN + self.pos
    }

    pub(super) fn bad(&self, field: &'static str) -> DecodeError {
        DecodeError::BadValue {
            ty: self.ty,
            field,
            at: self.at(),
        }
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.body.len() - self.pos < n {
            return Err(DecodeError::Truncated {
                ty: self.ty,
                field,
                at: self.at(),
            });
        }
        let s = &self.body[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let s = self.take(N, field)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(super) fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(field)?[0])
    }

    pub(super) fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        self.array(field).map(u16::from_le_bytes)
    }

    pub(super) fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        self.array(field).map(u32::from_le_bytes)
    }

    pub(super) fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        self.array(field).map(u64::from_le_bytes)
    }

    /// A `u8` that `f` accepts.
    pub(super) fn u8_map<T>(
        &mut self,
        field: &'static str,
        f: impl FnOnce(u8) -> Option<T>,
    ) -> Result<T, DecodeError> {
        let here = self.at();
        let v = self.u8(field)?;
        f(v).ok_or(DecodeError::BadValue {
            ty: self.ty,
            field,
            at: here,
        })
    }

    /// A `u32` that must fit in `bits` bits (the spec's field width).
    pub(super) fn u32_bits(&mut self, bits: u32, field: &'static str) -> Result<u32, DecodeError> {
        let here = self.at();
        let v = self.u32(field)?;
        if v >> bits != 0 {
            return Err(DecodeError::BadValue {
                ty: self.ty,
                field,
                at: here,
            });
        }
        Ok(v)
    }

    /// A `u16` that must fit in `bits` bits.
    pub(super) fn u16_bits(&mut self, bits: u32, field: &'static str) -> Result<u16, DecodeError> {
        let here = self.at();
        let v = self.u16(field)?;
        if v >> bits != 0 {
            return Err(DecodeError::BadValue {
                ty: self.ty,
                field,
                at: here,
            });
        }
        Ok(v)
    }

    /// A presence byte: 0 or 1, anything else is an error.
    pub(super) fn flag(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        let here = self.at();
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::BadValue {
                ty: self.ty,
                field,
                at: here,
            }),
        }
    }

    pub(super) fn opt_u64(&mut self, field: &'static str) -> Result<Option<u64>, DecodeError> {
        if self.flag(field)? {
            self.u64(field).map(Some)
        } else {
            Ok(None)
        }
    }

    pub(super) fn ip(&mut self, field: &'static str) -> Result<IpAddr, DecodeError> {
        let here = self.at();
        match self.u8(field)? {
            4 => Ok(IpAddr::V4(Ipv4Addr::from(self.array::<4>(field)?))),
            6 => Ok(IpAddr::V6(Ipv6Addr::from(self.array::<16>(field)?))),
            _ => Err(DecodeError::BadValue {
                ty: self.ty,
                field,
                at: here,
            }),
        }
    }

    /// A `u16` byte count followed by that many bytes.
    pub(super) fn blob(&mut self, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let n = self.u16(field)?;
        self.take(usize::from(n), field)
    }

    pub(super) fn str(&mut self, field: &'static str) -> Result<String, DecodeError> {
        let n = self.u16(field)?;
        let here = self.at();
        let bytes = self.take(usize::from(n), field)?;
        match core::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(DecodeError::BadValue {
                ty: self.ty,
                field,
                at: here,
            }),
        }
    }

    pub(super) fn magic(&mut self, want: [u8; 4], field: &'static str) -> Result<(), DecodeError> {
        let here = self.at();
        if self.array::<4>(field)? != want {
            return Err(DecodeError::BadValue {
                ty: self.ty,
                field,
                at: here,
            });
        }
        Ok(())
    }

    /// Every body byte must have been read.
    pub(super) fn finish(self) -> Result<(), DecodeError> {
        let extra = self.body.len() - self.pos;
        if extra != 0 {
            return Err(DecodeError::TrailingBytes {
                ty: self.ty,
                extra,
                at: self.at(),
            });
        }
        Ok(())
    }
}
