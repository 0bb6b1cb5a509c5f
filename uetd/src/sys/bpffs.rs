//! The BPF filesystem the lab pins its programs and maps in.

use std::ffi::CString;
use std::io;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `BPF_FS_MAGIC` of `<linux/magic.h>`: `statfs(2)`'s `f_type` of a bpffs.
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path with a NUL byte"))
}

/// Whether `path` is the root of, or inside, a mounted bpffs.
pub fn is_bpffs(path: &Path) -> io::Result<bool> {
    let p = c_path(path)?;
    let mut st = MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: `p` is a NUL-terminated string that outlives the call, and
    // `st` points to writable memory of the size statfs(2) fills.
    let rc = unsafe { libc::statfs(p.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statfs returned 0, so it initialised the struct.
    let st = unsafe { st.assume_init() };
    #[allow(clippy::unnecessary_cast)] // f_type's width differs by target
    Ok(st.f_type as i64 == BPF_FS_MAGIC)
}

/// Mounts a bpffs on `path` (an existing directory, usually
/// `/sys/fs/bpf`), as systemd does at boot; needs CAP_SYS_ADMIN.
pub fn mount_bpffs(path: &Path) -> io::Result<()> {
    let p = c_path(path)?;
    let fstype = c"bpf";
    // SAFETY: every pointer is a NUL-terminated string that outlives the
    // call; `data` may be null for bpffs.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            p.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
