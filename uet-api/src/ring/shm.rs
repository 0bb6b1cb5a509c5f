//! The one place `uet-api` touches memory it does not own: a `MAP_SHARED`
//! mapping of a ring's memfd, shared by a client and the daemon.
//!
//! The other side may write any byte at any time, so the mapping is never
//! seen through a Rust reference to plain data: indices and flags are
//! atomics, and entries are copied in and out through raw pointers within
//! bounds (the reader then decodes its own copy once).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsFd;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

/// A shared read-write mapping of `len` bytes of a file from offset 0,
/// unmapped on drop.
#[derive(Debug)]
pub(crate) struct SharedMem {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every access is an atomic
// or a bounded raw copy, which any thread may make.
unsafe impl Send for SharedMem {}
// SAFETY: as above.
unsafe impl Sync for SharedMem {}

impl SharedMem {
    /// Maps `len` bytes of `fd` (the caller checked that the file is at
    /// least that long and sealed against shrinking).
    pub(crate) fn map(fd: impl AsFd, len: usize) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty ring"));
        }
        // SAFETY: a fresh mapping at an address the kernel picks (NULL
        // hint), so no existing Rust object is aliased; the fd is borrowed
        // for the call only.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::SHARED,
                fd,
                0,
            )
        }?;
        let ptr =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mapped at address 0"))?;
        Ok(Self { ptr, len })
    }

    /// The 32-bit word at `off`.
    ///
    /// # Panics
    ///
    /// If `off` is unaligned or out of bounds: offsets come from the ring
    /// layout, never from the other side.
    pub(crate) fn word(&self, off: usize) -> &AtomicU32 {
        assert!(
            off.is_multiple_of(4) && off + 4 <= self.len,
            "ring word {off} out of layout"
        );
        // SAFETY: in bounds and 4-byte aligned (the mapping is page
        // aligned); AtomicU32 has u32's layout and any bit pattern is
        // valid; the memory lives as long as `self`.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast::<u32>()) }
    }

    /// Copies `out.len()` bytes from `off` into `out`.
    ///
    /// # Panics
    ///
    /// Out of bounds (a layout bug).
    pub(crate) fn read(&self, off: usize, out: &mut [u8]) {
        assert!(
            off.checked_add(out.len()).is_some_and(|e| e <= self.len),
            "ring read out of layout"
        );
        // SAFETY: in bounds; `out` is ours and cannot overlap a mapping
        // made by `map`.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), out.as_mut_ptr(), out.len());
        }
    }

    /// Copies `data` to `off`.
    ///
    /// # Panics
    ///
    /// Out of bounds (a layout bug).
    pub(crate) fn write(&self, off: usize, data: &[u8]) {
        assert!(
            off.checked_add(data.len()).is_some_and(|e| e <= self.len),
            "ring write out of layout"
        );
        // SAFETY: in bounds; `data` cannot overlap the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(off), data.len());
        }
    }
}

impl Drop for SharedMem {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; no reference
        // into it outlives `self` (`word` borrows `self`).
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
