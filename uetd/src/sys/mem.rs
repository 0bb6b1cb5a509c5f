//! Shared memory mappings that registered regions live in: anonymous
//! memory for regions the daemon owns, or a memfd a client passed
//! (`docs/architecture.md` §1: incoming writes land straight in the application's
//! memory).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

use super::{Error, Result};

/// Faults the pages of `[start, start + len)` in for writing now, so that
/// their first use does not: `MADV_POPULATE_WRITE` (Linux 5.14) where
/// `start` is page-aligned, else a write of the zero already there every
/// 4 KiB (at least once per page whatever the page size; volatile, since
/// a plain store of that zero could be dropped).
///
/// # Safety
///
/// The range must be mapped, writable and all zero, and nothing else may
/// access it during the call.
pub unsafe fn populate_zeroed(start: *mut u8, len: usize) {
    // SAFETY: the caller's range; advice changes neither its contents nor
    // its validity.
    let advised = (start as usize).is_multiple_of(4096)
        && unsafe { libc::madvise(start.cast(), len, libc::MADV_POPULATE_WRITE) } == 0;
    if !advised {
        for off in (0..len).step_by(4096) {
            // SAFETY: in bounds of the caller's range, which is zero and
            // stays zero.
            unsafe { std::ptr::write_volatile(start.add(off), 0) };
        }
    }
}

/// A `MAP_SHARED` mapping, unmapped on drop.
///
/// Several workers may write to one mapping at once (RMA semantics: the
/// bytes a remote peer writes are not ordered against anyone's reads), so
/// it is only ever touched through raw-pointer copies, never through a
/// Rust reference to its contents.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; all access goes through
// `write_at`/`read_at`, which copy through raw pointers within bounds.
unsafe impl Send for Mapping {}
// SAFETY: as above; concurrent copies to the same bytes race like DMA into
// registered memory does, which is the contract of RMA.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `len` bytes of zeroed anonymous shared memory, populated now
    /// (`MAP_POPULATE`): the daemon's own exposed regions are registered
    /// memory, and a page first touched by a remote write would cost the
    /// worker a fault and a page to zero (`uet_api::Region::allocated` is
    /// the client's way to the same).
    pub fn anonymous(len: usize) -> Result<Self> {
        Self::map(len, None)
    }

    /// `len` bytes of `fd` (a memfd or a file) from offset 0.
    pub fn of_fd(fd: BorrowedFd<'_>, len: usize) -> Result<Self> {
        Self::map(len, Some(fd))
    }

    fn map(len: usize, fd: Option<BorrowedFd<'_>>) -> Result<Self> {
        if len == 0 {
            return Err(Error::invalid("mmap", "cannot map zero bytes"));
        }
        let (flags, raw) = match fd {
            Some(fd) => (libc::MAP_SHARED, fd.as_raw_fd()),
            None => (
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_POPULATE,
                -1,
            ),
        };
        // SAFETY: a fresh mapping chosen by the kernel (addr NULL); the fd,
        // if any, is borrowed and valid for the call.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                raw,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::last("mmap"));
        }
        let ptr = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| Error::new("mmap", io::Error::other("mapped at address 0")))?;
        Ok(Self { ptr, len })
    }

    /// Its length.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies `data` to `offset..`; returns false (copying nothing) when it
    /// does not fit.
    pub fn write_at(&self, offset: usize, data: &[u8]) -> bool {
        let Some(end) = offset.checked_add(data.len()) else {
            return false;
        };
        if end > self.len {
            return false;
        }
        // SAFETY: offset..end is within the mapping (checked above); `data`
        // is a separate allocation, so the ranges do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len());
        }
        true
    }

    /// Copies `offset..offset + out.len()` into `out`; false when it does
    /// not fit.
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> bool {
        let Some(end) = offset.checked_add(out.len()) else {
            return false;
        };
        if end > self.len {
            return false;
        }
        // SAFETY: offset..end is within the mapping (checked above); `out`
        // is a separate allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                out.as_mut_ptr(),
                out.len(),
            );
        }
        true
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; no reference into
        // the mapping outlives `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the one clock of every daemon on the
/// machine (shared across network namespaces), so lab timelines line up.
/// (CLOCK_MONOTONIC cannot fail; rustix reads it through the vDSO.)
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_REALTIME in nanoseconds: the clock of the kernel's socket
/// timestamps, read only to turn those into [`monotonic_ns`]'s.
pub fn realtime_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    u64::try_from(ts.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(ts.tv_nsec).unwrap_or(0))
}
