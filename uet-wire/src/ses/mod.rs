//! SES headers (`uet-spec-notes.md` §4).

/// Declares a SES header view: the struct, `new_unchecked` / `new_checked` /
/// `check_len` / `into_inner` and the payload accessors, exactly as in
/// `pds/prologue.rs`. Field accessors are written per header.
macro_rules! ses_packet {
    ($(#[$m:meta])* $name:ident, $len:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Wraps a buffer without checking it (for emitting into a buffer
            /// of the right size).
            pub const fn new_unchecked(buffer: T) -> Self {
                Self { buffer }
            }

            /// Wraps a buffer after checking its length: afterwards no
            /// accessor can panic.
            pub fn new_checked(buffer: T) -> $crate::error::Result<Self> {
                let p = Self::new_unchecked(buffer);
                p.check_len()?;
                Ok(p)
            }

            /// Checks that the buffer holds the whole fixed-size header.
            pub fn check_len(&self) -> $crate::error::Result<()> {
                let len = self.buffer.as_ref().len();
                if len < $len {
                    return Err($crate::error::Error::truncated(
                        $crate::error::Layer::Ses,
                        $len,
                        len,
                    ));
                }
                Ok(())
            }

            /// The underlying buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }

            /// The bytes after the fixed-size header (extension headers, then
            /// payload and trailer, as far as the buffer reaches).
            pub fn payload(&self) -> &[u8] {
                &self.buffer.as_ref()[$len..]
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            /// The bytes after the fixed-size header, writable.
            pub fn payload_mut(&mut self) -> &mut [u8] {
                &mut self.buffer.as_mut()[$len..]
            }
        }
    };
}

pub mod atomic;
pub mod ext;
pub mod opcode;
pub mod request;
pub mod response;
pub mod return_code;

#[cfg(test)]
mod testutil;

pub use atomic::{AtomicDatatype, AtomicOpcode};
pub use ext::{
    ATOMIC_EXT_LEN as SES_ATOMIC_EXT_LEN, AtomicExtPacket as SesAtomicExtPacket,
    AtomicExtRepr as SesAtomicExtRepr, CAS_EXT_LEN as SES_CAS_EXT_LEN,
    CasExtPacket as SesCasExtPacket, CasExtRepr as SesCasExtRepr, ExtKind, ExtMismatch,
    ExtRepr as SesExtRepr, RENDEZVOUS_EXT_LEN as SES_RENDEZVOUS_EXT_LEN,
    RendezvousExtPacket as SesRendezvousExtPacket, RendezvousExtRepr as SesRendezvousExtRepr,
};
pub use opcode::{ListKind, Opcode, ResponseOpcode};
pub use request::{
    HeaderDataOrOffset, MEDIUM_HEADER_LEN as SES_MEDIUM_HEADER_LEN,
    MediumPacket as SesMediumPacket, MediumRepr as SesMediumRepr, RequestFlags,
    SMALL_HEADER_LEN as SES_SMALL_HEADER_LEN, STANDARD_HEADER_LEN as SES_STANDARD_HEADER_LEN,
    SmallPacket as SesSmallPacket, SmallRepr as SesSmallRepr, SomFields,
    StandardPacket as SesStandardPacket, StandardRepr as SesStandardRepr,
};
pub use response::{
    RESPONSE_DATA_HEADER_LEN as SES_RESPONSE_DATA_HEADER_LEN,
    RESPONSE_DATA_SMALL_HEADER_LEN as SES_RESPONSE_DATA_SMALL_HEADER_LEN,
    RESPONSE_HEADER_LEN as SES_RESPONSE_HEADER_LEN, ResponseDataPacket as SesResponseDataPacket,
    ResponseDataRepr as SesResponseDataRepr, ResponseDataSmallPacket as SesResponseDataSmallPacket,
    ResponseDataSmallRepr as SesResponseDataSmallRepr, ResponsePacket as SesResponsePacket,
    ResponseRepr as SesResponseRepr,
};
pub use return_code::ReturnCode;
