//! The BPF filesystem the lab pins its programs and maps in.

use std::path::Path;

use rustix::fs::statfs;
use rustix::mount::{MountFlags, mount};

use super::{Named as _, Result};

/// `BPF_FS_MAGIC` of `<linux/magic.h>`: `statfs(2)`'s `f_type` of a bpffs.
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// Whether `path` is the root of, or inside, a mounted bpffs.
pub fn is_bpffs(path: &Path) -> Result<bool> {
    let st = statfs(path).named("statfs")?;
    #[allow(clippy::unnecessary_cast)] // f_type's width differs by target
    Ok(st.f_type as i64 == BPF_FS_MAGIC)
}

/// Mounts a bpffs on `path` (an existing directory, usually
/// `/sys/fs/bpf`), as systemd does at boot; needs CAP_SYS_ADMIN.
pub fn mount_bpffs(path: &Path) -> Result<()> {
    mount("bpf", path, "bpf", MountFlags::empty(), None).named("mount")
}
