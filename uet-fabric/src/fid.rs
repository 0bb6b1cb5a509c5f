//! What every libfabric object shares: static operation tables, the panic
//! guard around each entry point, and the answers to operations an object
//! does not offer (`-FI_ENOSYS`, never a null pointer to call).

use std::ffi::{c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::errors;
use crate::ffi;

/// A static operation table handed to the application as a `*mut`.
/// libfabric never writes through it.
pub(crate) struct Table<T>(pub(crate) T);

// SAFETY: the tables hold function pointers and a size, never written.
unsafe impl<T> Sync for Table<T> {}

impl<T> Table<T> {
    /// The pointer libfabric's structures carry.
    pub(crate) const fn ptr(&'static self) -> *mut T {
        (&raw const self.0).cast_mut()
    }
}

/// Runs an entry point's body; a panic becomes `on_panic` (an error code)
/// instead of unwinding into C.
pub(crate) fn guard<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

pub(crate) unsafe extern "C" fn no_bind(_: *mut ffi::fid, _: *mut ffi::fid, _: u64) -> c_int {
    errors::ENOSYS.ret()
}

pub(crate) unsafe extern "C" fn no_control(_: *mut ffi::fid, _: c_int, _: *mut c_void) -> c_int {
    errors::ENOSYS.ret()
}

pub(crate) unsafe extern "C" fn no_ops_open(
    _: *mut ffi::fid,
    _: *const c_char,
    _: u64,
    _: *mut *mut c_void,
    _: *mut c_void,
) -> c_int {
    errors::ENOSYS.ret()
}

pub(crate) unsafe extern "C" fn no_tostr(_: *const ffi::fid, _: *mut c_char, _: usize) -> c_int {
    errors::ENOSYS.ret()
}

pub(crate) unsafe extern "C" fn no_ops_set(
    _: *mut ffi::fid,
    _: *const c_char,
    _: u64,
    _: *mut c_void,
    _: *mut c_void,
) -> c_int {
    errors::ENOSYS.ret()
}
