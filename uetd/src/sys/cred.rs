//! The daemon's own credentials.

/// The effective user ID of this process.
pub(crate) fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}
