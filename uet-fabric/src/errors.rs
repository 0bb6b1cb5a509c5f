//! libfabric error numbers, and what a failed operation reports in its
//! completion error (`err`, `prov_errno`, and the text `fi_cq_strerror`
//! gives for it).

use uet_pds::PdsError;
use uet_ses::{LocalError, OpError};
use uet_wire::pds::NackCode;
use uet_wire::ses::ReturnCode;

use crate::ffi;

/// A positive libfabric error number (`FI_E*`); API calls return its
/// negation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Errno(pub(crate) i32);

impl Errno {
    /// The negative value an API call returns.
    pub(crate) const fn ret(self) -> i32 {
        -self.0
    }

    /// The same, as `ssize_t`.
    pub(crate) const fn sret(self) -> isize {
        -(self.0 as isize)
    }
}

pub(crate) const EINVAL: Errno = Errno(ffi::FI_EINVAL as i32);
pub(crate) const ENOSYS: Errno = Errno(ffi::FI_ENOSYS as i32);
pub(crate) const EAGAIN: Errno = Errno(ffi::FI_EAGAIN as i32);
pub(crate) const ENOMEM: Errno = Errno(ffi::FI_ENOMEM as i32);
pub(crate) const ENOSPC: Errno = Errno(ffi::FI_ENOSPC as i32);
pub(crate) const ENODATA: Errno = Errno(ffi::FI_ENODATA as i32);
pub(crate) const EBUSY: Errno = Errno(ffi::FI_EBUSY as i32);
pub(crate) const EIO: Errno = Errno(ffi::FI_EIO as i32);
pub(crate) const EMSGSIZE: Errno = Errno(ffi::FI_EMSGSIZE as i32);
pub(crate) const ETIMEDOUT: Errno = Errno(ffi::FI_ETIMEDOUT as i32);
pub(crate) const ECANCELED: Errno = Errno(ffi::FI_ECANCELED as i32);
pub(crate) const ENOMSG: Errno = Errno(ffi::FI_ENOMSG as i32);
pub(crate) const EAVAIL: Errno = Errno(ffi::FI_EAVAIL as i32);
pub(crate) const ETRUNC: Errno = Errno(ffi::FI_ETRUNC as i32);
pub(crate) const EOPBADSTATE: Errno = Errno(ffi::FI_EOPBADSTATE as i32);
pub(crate) const EADDRNOTAVAIL: Errno = Errno(ffi::FI_EADDRNOTAVAIL as i32);
pub(crate) const EACCES: Errno = Errno(ffi::FI_EACCES as i32);
pub(crate) const EKEYREJECTED: Errno = Errno(ffi::FI_EKEYREJECTED as i32);
pub(crate) const EOTHER: Errno = Errno(ffi::FI_EOTHER as i32);

/// `prov_errno` classes: the high byte says which layer, the low byte the
/// code that layer gave.
const REMOTE: i32 = 0x100;
const NACK: i32 = 0x200;
const TIMEOUT: i32 = 0x300;
const CLOSED: i32 = 0x301;
const LOCAL_BOUNDS: i32 = 0x400;
const RECV_GONE: i32 = 0x401;

/// The libfabric error of a failed operation.
pub(crate) fn op_errno(e: &OpError) -> Errno {
    match e {
        OpError::Remote(rc) => match rc {
            ReturnCode::BadGeneration
            | ReturnCode::Disabled
            | ReturnCode::DisabledGen
            | ReturnCode::BadMkey
            | ReturnCode::BadIndex => EKEYREJECTED,
            ReturnCode::PermViolation | ReturnCode::OpViolation => EACCES,
            ReturnCode::BadAddr | ReturnCode::TooLong => EINVAL,
            ReturnCode::BadPid | ReturnCode::BadJobId => EADDRNOTAVAIL,
            ReturnCode::NoMatch => ENOMSG,
            ReturnCode::Cancelled => ECANCELED,
            ReturnCode::UnsupportedOp | ReturnCode::UnsupportedSize => ENOSYS,
            _ => EIO,
        },
        OpError::Local(LocalError::LocalOutOfBounds) => EINVAL,
        OpError::Local(_) => EIO,
        OpError::Transport(PdsError::Timeout) => ETIMEDOUT,
        OpError::Transport(_) => EIO,
        _ => EOTHER,
    }
}

/// The provider's error number of a failed operation.
pub(crate) fn prov_errno(e: &OpError) -> i32 {
    match e {
        OpError::Remote(rc) => REMOTE | i32::from(rc.code()),
        OpError::Local(LocalError::LocalOutOfBounds) => LOCAL_BOUNDS,
        OpError::Local(_) => RECV_GONE,
        OpError::Transport(PdsError::Timeout) => TIMEOUT,
        OpError::Transport(PdsError::Nack(c)) => NACK | i32::from(c.code()),
        OpError::Transport(_) => CLOSED,
        _ => 0,
    }
}

/// What `fi_cq_strerror` says about a `prov_errno`.
pub(crate) fn prov_strerror(prov_errno: i32) -> String {
    let low = (prov_errno & 0xff) as u8;
    match prov_errno & !0xff {
        REMOTE => format!(
            "the target answered UET return code {} ({:#04x})",
            ReturnCode::from_u8(low).name(),
            low
        ),
        NACK => format!(
            "packet delivery gave up after NACK {} ({:#04x})",
            NackCode::from_u8(low).name(),
            low
        ),
        _ => match prov_errno {
            0 => "no provider error".to_owned(),
            TIMEOUT => "packet delivery gave up: the retransmission budget ran out".to_owned(),
            CLOSED => "packet delivery gave up: the PDC closed first".to_owned(),
            LOCAL_BOUNDS => "the local buffer does not hold the message".to_owned(),
            RECV_GONE => "the receive buffer went away while the message arrived".to_owned(),
            other => format!("unknown provider error {other:#x}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strerror_names_the_code() {
        let e = OpError::Remote(ReturnCode::BadMkey);
        assert_eq!(op_errno(&e), EKEYREJECTED);
        let s = prov_strerror(prov_errno(&e));
        assert!(s.contains("BAD_MKEY"), "{s}");
        let t = OpError::Transport(PdsError::Timeout);
        assert_eq!(op_errno(&t), ETIMEDOUT);
        assert!(prov_strerror(prov_errno(&t)).contains("retransmission"));
        let n = OpError::Transport(PdsError::Nack(NackCode::from_u8(0x01)));
        assert!(prov_strerror(prov_errno(&n)).contains("NACK"));
    }
}
