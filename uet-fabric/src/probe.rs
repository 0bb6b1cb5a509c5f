//! `FI_PEEK`, `FI_CLAIM` and `FI_DISCARD` on tagged receives.
use crate::ep::Ep;
use crate::errors::{self, Errno};
use crate::ffi;

pub(crate) fn tagged(_ep: &Ep, _m: &ffi::fi_msg_tagged, _flags: u64) -> Result<(), Errno> {
    Err(errors::ENOSYS)
}
