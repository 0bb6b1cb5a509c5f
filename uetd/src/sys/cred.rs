//! The daemon's own credentials.

/// The effective user ID of this process.
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions, touches no memory and cannot
    // fail.
    unsafe { libc::geteuid() }
}
