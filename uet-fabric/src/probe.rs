//! `FI_PEEK`, `FI_CLAIM` and `FI_DISCARD` on tagged receives, as MPI's
//! matched probes (`MPI_Improbe`/`MPI_Mrecv`) use them.

use crate::engine::RxOp;
use crate::ep::Ep;
use crate::errors::{self, Errno};
use crate::ffi;
use crate::ffi_flags as f;

/// A `fi_trecvmsg` with any of the three flags.
pub(crate) fn tagged(ep: &Ep, m: &ffi::fi_msg_tagged, flags: u64) -> Result<(), Errno> {
    let cq = ep.rx_cq()?;
    let (buf, len) = match m.iov_count {
        0 => (0, 0),
        // SAFETY: one iovec, as the count says.
        1 if !m.msg_iov.is_null() => unsafe {
            ((*m.msg_iov).iov_base as usize, (*m.msg_iov).iov_len as u64)
        },
        _ => return Err(errors::EINVAL),
    };
    let from = ep.directed_source(m.addr)?;
    ep.engine().probe(
        (m.tag, m.ignore),
        flags,
        buf,
        len,
        from.as_ref(),
        RxOp {
            cq,
            success: true,
            context: m.context as usize,
            flags: f::RECV | f::TAGGED,
            buf,
        },
    )
}
