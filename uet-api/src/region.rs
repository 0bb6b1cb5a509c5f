//! Memory shared with the daemon: a memfd the application reads and writes
//! with `pread`/`pwrite` (or maps itself), and the daemon maps after
//! receiving it with `SCM_RIGHTS`.

use core::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;

use rustix::fs::{FileType, MemfdFlags, SealFlags};

use crate::proto::ErrorCode;

/// A memory region backed by a memfd of fixed length, sealed against
/// shrinking and growing, so the daemon's mapping of it can never point
/// past the end of the file (which would be `SIGBUS` in the daemon).
#[derive(Debug)]
pub struct Region {
    file: File,
    len: u64,
}

impl Region {
    /// A zero-filled region of `len` bytes (`memfd_create` + `ftruncate` +
    /// `F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL`). Its pages are allocated
    /// as they are first written; see [`Region::allocated`] for a region
    /// remote writes will land in.
    ///
    /// # Errors
    ///
    /// The kernel's error (`EMFILE`, `ENOMEM`, `EFBIG`…).
    pub fn new(len: u64) -> io::Result<Self> {
        Self::create(len, false)
    }

    /// A zero-filled region of `len` bytes whose memory is allocated now
    /// (`fallocate`), as an RDMA registration pins its pages. Remote writes
    /// into a sparse region make the daemon's worker fault in and zero a
    /// page for every 4 KiB they first touch — a quarter of a core at
    /// 8 Gb/s, and now and then a stall in reclaim longer than the sender's
    /// retransmission timer. The pages are the application's (its memory
    /// cgroup pays for them).
    ///
    /// # Errors
    ///
    /// The kernel's error (`ENOMEM`, `ENOSPC` when the memory is not there,
    /// `EMFILE`, `EFBIG`…).
    pub fn allocated(len: u64) -> io::Result<Self> {
        Self::create(len, true)
    }

    fn create(len: u64, allocate: bool) -> io::Result<Self> {
        let fd = rustix::fs::memfd_create(
            "uet-region",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )?;
        rustix::fs::ftruncate(&fd, len)?;
        if allocate && len > 0 {
            rustix::fs::fallocate(&fd, rustix::fs::FallocateFlags::empty(), 0, len)?;
        }
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        Ok(Self {
            file: File::from(fd),
            len,
        })
    }

    /// A region over an existing descriptor (a memfd, a file on tmpfs or
    /// hugetlbfs…), as long as it is now. The daemon refuses it unless it
    /// is sealed against shrinking (see [`check_region_fd`]).
    ///
    /// # Errors
    ///
    /// `fstat`'s error.
    pub fn from_fd(fd: OwnedFd) -> io::Result<Self> {
        let len = rustix::fs::fstat(&fd)?.st_size as u64;
        Ok(Self {
            file: File::from(fd),
            len,
        })
    }

    /// Its length in bytes.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it has no bytes.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The backing file, for `mmap` or other I/O.
    #[must_use]
    pub fn file(&self) -> &File {
        &self.file
    }

    fn check(&self, offset: u64, n: usize) -> io::Result<()> {
        match offset.checked_add(n as u64) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{n} bytes at offset {offset} lie beyond the {}-byte region",
                    self.len
                ),
            )),
        }
    }

    /// Writes all of `buf` at `offset` (`pwrite`).
    ///
    /// # Errors
    ///
    /// `InvalidInput` beyond the end, or the kernel's error.
    pub fn write_at(&self, offset: u64, buf: &[u8]) -> io::Result<()> {
        self.check(offset, buf.len())?;
        self.file.write_all_at(buf, offset)
    }

    /// Fills `buf` from `offset` (`pread`).
    ///
    /// # Errors
    ///
    /// `InvalidInput` beyond the end, or the kernel's error.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.check(offset, buf.len())?;
        self.file.read_exact_at(buf, offset)
    }
}

impl AsFd for Region {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// Why a descriptor passed with `Register`/`RegisterLocal` cannot back a
/// region of the asked length.
#[derive(Debug)]
pub enum RegionFdError {
    /// Not a regular file (a socket, a pipe, a directory…).
    NotAFile,
    /// Not sealed with `F_SEAL_SHRINK`: the client could truncate it under
    /// the daemon's mapping.
    NotSealed,
    /// Shorter than the registration asks.
    TooShort {
        /// The file's size.
        size: u64,
        /// The registered length.
        len: u64,
    },
    /// `fstat`/`fcntl` failed.
    Io(io::Error),
}

impl RegionFdError {
    /// The code for the `Error` reply.
    #[must_use]
    pub const fn code(&self) -> ErrorCode {
        match self {
            Self::TooShort { .. } => ErrorCode::BadLength,
            _ => ErrorCode::BadFd,
        }
    }
}

impl fmt::Display for RegionFdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAFile => f.write_str("the descriptor is not a regular file"),
            Self::NotSealed => f.write_str("the descriptor is not sealed with F_SEAL_SHRINK"),
            Self::TooShort { size, len } => {
                write!(
                    f,
                    "the file has {size} bytes, the registration asks for {len}"
                )
            }
            Self::Io(e) => write!(f, "cannot inspect the descriptor: {e}"),
        }
    }
}

impl std::error::Error for RegionFdError {}

/// The daemon's check before mapping a client's descriptor for `len`
/// bytes: a regular file, sealed against shrinking, at least `len` bytes.
/// Returns the file's size.
///
/// # Errors
///
/// See [`RegionFdError`].
pub fn check_region_fd(fd: impl AsFd, len: u64) -> Result<u64, RegionFdError> {
    let st = rustix::fs::fstat(&fd).map_err(|e| RegionFdError::Io(e.into()))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(RegionFdError::NotAFile);
    }
    let seals = rustix::fs::fcntl_get_seals(&fd).map_err(|_| RegionFdError::NotSealed)?;
    if !seals.contains(SealFlags::SHRINK) {
        return Err(RegionFdError::NotSealed);
    }
    let size = st.st_size as u64;
    if size < len {
        return Err(RegionFdError::TooShort { size, len });
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of memory the region's memfd holds now.
    fn resident(r: &Region) -> u64 {
        rustix::fs::fstat(r.file()).unwrap().st_blocks as u64 * 512
    }

    #[test]
    fn an_allocated_region_holds_its_memory_and_a_plain_one_does_not() {
        let len = 8 << 20;
        let plain = Region::new(len).unwrap();
        let allocated = Region::allocated(len).unwrap();
        assert_eq!(resident(&plain), 0);
        assert!(resident(&allocated) >= len, "{}", resident(&allocated));
        // Both read as zeros and keep their seals.
        let mut b = [1u8; 16];
        allocated.read_at(len - 16, &mut b).unwrap();
        assert_eq!(b, [0; 16]);
        assert_eq!(check_region_fd(allocated.file(), len).unwrap(), len);
        assert!(Region::allocated(0).unwrap().is_empty());
    }
}
