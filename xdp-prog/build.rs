//! Builds every program in [`PROGRAMS`] — `src/NAME.bpf.c` into
//! `$OUT_DIR/NAME.bpf.o` — with clang (`docs/architecture.md` §5), or copies the
//! committed `obj/NAME.bpf.o` copies there when clang is absent (or fails),
//! with a cargo warning. The choice is made for the whole set: either every
//! object comes from this clang or every one is the committed copy.
//!
//! - `CLANG`: the clang to run (default: `clang` on `PATH`).
//! - `XDP_PROG_REQUIRE_CLANG=1`: fail instead of falling back (CI, and
//!   `regen.sh`, which must not bless the committed object with itself).
//!
//! The output is reproducible across checkout directories: clang runs in
//! the crate directory on a relative source path, with the debug info's
//! directory names mapped to `.`, so the same clang gives byte-identical
//! objects from any clone (the staleness test relies on it).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The programs: name (source `src/NAME.bpf.c`) and extra clang flags.
/// The tc programs use BPF atomics with fetch (compare-and-swap), which need
/// `-mcpu=v3` (kernel 5.12+); the XDP steering program keeps clang's default
/// so its object stays what it was.
const PROGRAMS: &[(&str, &[&str])] = &[
    ("uet_steer", &[]),
    ("uet_ecn", &["-mcpu=v3"]),
    ("uet_impair", &["-mcpu=v3"]),
];

fn main() {
    for (name, _) in PROGRAMS {
        println!("cargo:rerun-if-changed=src/{name}.bpf.c");
        println!("cargo:rerun-if-changed=obj/{name}.bpf.o");
    }
    // The headers the programs share (`#include "NAME.h"` from src/).
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-env-changed=XDP_PROG_REQUIRE_CLANG");

    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let clang = env::var_os("CLANG").unwrap_or_else(|| "clang".into());
    let require = env::var("XDP_PROG_REQUIRE_CLANG").is_ok_and(|v| v == "1");

    let all = PROGRAMS.iter().try_fold(String::new(), |_, (name, flags)| {
        compile(Path::new(&clang), &manifest, name, flags, &out_dir)
    });
    match all {
        Ok(version) => {
            println!("cargo:rustc-env=XDP_PROG_BUILT_BY=clang");
            println!("cargo:rustc-env=XDP_PROG_CLANG_VERSION={version}");
        }
        Err(Failure::Broken(why)) => panic!("clang could not build the BPF programs: {why}"),
        Err(Failure::Absent(why)) => {
            if require {
                panic!("XDP_PROG_REQUIRE_CLANG=1 but clang could not build the programs: {why}");
            }
            println!(
                "cargo:warning=xdp-prog: using the committed obj/*.bpf.o ({why}); \
                 install clang + libbpf-dev to build them from src/*.bpf.c"
            );
            for (name, _) in PROGRAMS {
                let committed = manifest.join(format!("obj/{name}.bpf.o"));
                let out = out_dir.join(format!("{name}.bpf.o"));
                std::fs::copy(&committed, &out).unwrap_or_else(|e| {
                    panic!("copying {} to {}: {e}", committed.display(), out.display())
                });
            }
            println!("cargo:rustc-env=XDP_PROG_BUILT_BY=committed");
            println!("cargo:rustc-env=XDP_PROG_CLANG_VERSION=");
        }
    }
}

/// Why clang gave no object.
enum Failure {
    /// No usable toolchain: clang missing, or the kernel/libbpf headers
    /// missing. The committed object stands in.
    Absent(String),
    /// The toolchain is there and rejected the source: a real error.
    Broken(String),
}

/// Compiles `src/NAME.bpf.c` into `out_dir/NAME.bpf.o`; returns clang's
/// version line.
fn compile(
    clang: &Path,
    manifest: &Path,
    name: &str,
    flags: &[&str],
    out_dir: &Path,
) -> Result<String, Failure> {
    let source = format!("src/{name}.bpf.c");
    let out = out_dir.join(format!("{name}.bpf.o"));
    let v = Command::new(clang)
        .arg("--version")
        .output()
        .map_err(|e| Failure::Absent(format!("{} not runnable: {e}", clang.display())))?;
    if !v.status.success() {
        return Err(Failure::Absent(format!(
            "{} --version failed",
            clang.display()
        )));
    }
    let version = String::from_utf8_lossy(&v.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();

    let mut cmd = Command::new(clang);
    cmd.current_dir(manifest)
        .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Wextra"])
        .args(flags)
        .arg(format!("-fdebug-prefix-map={}=.", manifest.display()))
        .arg("-fdebug-compilation-dir=.");
    // <linux/types.h> includes <asm/types.h>, which Debian-style systems
    // keep under the multiarch directory that `-target bpf` does not search.
    if let Some(arch) = env::var("HOST")
        .ok()
        .and_then(|h| h.split('-').next().map(str::to_owned))
    {
        let dir = format!("/usr/include/{arch}-linux-gnu");
        if Path::new(&dir).is_dir() {
            cmd.arg(format!("-I{dir}"));
        }
    }
    cmd.args(["-c", &source, "-o"]).arg(&out);
    let r = cmd
        .output()
        .map_err(|e| Failure::Absent(format!("running {}: {e}", clang.display())))?;
    if !r.status.success() {
        let stderr = String::from_utf8_lossy(&r.stderr);
        let why = format!("{cmd:?} failed: {}", stderr.trim());
        // A missing <linux/bpf.h> or <bpf/bpf_helpers.h> is a missing
        // package (linux-libc-dev, libbpf-dev), not a bug in the source.
        return Err(if stderr.contains("file not found") {
            Failure::Absent(why)
        } else {
            Failure::Broken(why)
        });
    }
    // Warnings (a newer clang may add some) are shown, not fatal.
    for line in String::from_utf8_lossy(&r.stderr).lines() {
        println!("cargo:warning=clang: {line}");
    }
    Ok(version)
}
