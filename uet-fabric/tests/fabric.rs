//! libfabric and MPI applications over the provider, end to end:
//! `scripts/fabric-smoke.sh` between two network namespaces it creates and
//! removes — Debian's `fi_info` and `fi_pingpong`, our `fi_rma_check` (1 GiB
//! of fi_write/fi_writedata/fi_read verified by hash), Open MPI (pml cm, mtl
//! ofi) with our `mpi_check` and mpi4py's benchmarks, one rank per
//! namespace, and the interop legs with a uetd (libfabric into a `uet serve`
//! region, `uet write` into fi_mr_reg'd memory).
//!
//! Needs root and the Debian packages `.ci/run` installs (libfabric-bin,
//! libfabric-dev, openmpi-bin, libopenmpi-dev, libxxhash-dev); without them
//! the test says why and passes. `UET_FABRIC_PROVIDER=tcp` runs the same
//! harness against libfabric's own tcp provider.

use std::path::{Path, PathBuf};
use std::process::Command;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

/// The provider library cargo built beside this test: `target/PROFILE/`
/// or its `deps/`.
fn provider_library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    [deps.parent(), Some(deps)]
        .into_iter()
        .flatten()
        .map(|d| d.join("libuet_fabric.so"))
        .find(|p| p.is_file())
}

/// The profile directory (`target/release`) holding `uetd` and `uet`.
fn profile_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.parent()?.parent().map(Path::to_path_buf)
}

#[test]
fn libfabric_and_mpi_programs_run_over_the_provider_between_two_namespaces() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let missing: Vec<_> = [
        "ip",
        "fi_info",
        "fi_pingpong",
        "mpirun",
        "mpicc",
        "cc",
        "python3",
    ]
    .into_iter()
    .filter(|t| !on_path(t))
    .collect();
    if missing.is_empty() && !Path::new("/usr/include/xxhash.h").is_file() {
        eprintln!("skipped: /usr/include/xxhash.h missing (apt-get install libxxhash-dev)");
        return;
    }
    if !missing.is_empty() {
        eprintln!(
            "skipped: {missing:?} not found (apt-get install libfabric-bin libfabric-dev \
             openmpi-bin libopenmpi-dev libxxhash-dev)"
        );
        return;
    }
    let provider = std::env::var("UET_FABRIC_PROVIDER").unwrap_or_else(|_| "uet".into());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("scripts/fabric-smoke.sh"))
        .args(["--provider", &provider]);
    if provider == "uet" {
        let lib = provider_library().expect("cargo built libuet_fabric.so beside this test");
        cmd.arg("--lib").arg(lib);
    }
    if let Some(dir) = profile_dir() {
        // The interop legs' uetd and uet, from the same build.
        cmd.env("UET_FABRIC_BIN_DIR", dir);
    }
    let out = cmd.output().expect("running scripts/fabric-smoke.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let log = format!("--- stdout:\n{stdout}\n--- stderr:\n{stderr}");
    assert!(out.status.success(), "fabric-smoke.sh failed\n{log}");

    let line = |prefix: &str| stdout.lines().any(|l| l.starts_with(prefix));
    for step in ["fi_info", "fi_pingpong", "fi_rma", "mpi", "mpi4py"] {
        assert!(
            line(&format!("PASS  {step}")),
            "step {step} did not pass\n{log}"
        );
    }
    if provider == "uet" {
        assert!(
            line("PASS  interop"),
            "the uetd interop legs did not pass\n{log}"
        );
    }
    // fi_pingpong's own table, up to 1 MiB at least.
    assert!(line("bytes ") && line("1m "), "no fi_pingpong table\n{log}");
    // fi_rma_check moved its gibibyte and verified it.
    assert!(line("fi_rma_check passed"), "{log}");
    // Open MPI's mtl ofi ran on the provider, ranks in the two namespaces.
    assert!(
        stdout.contains(&format!("mtl:ofi:prov: {provider}")),
        "mtl ofi did not use {provider}\n{log}"
    );
    assert!(line("location rank=0") && line("location rank=1"), "{log}");
    for size in [8, 65536, 4194304] {
        assert!(line(&format!("pingpong size={size} ")), "{log}");
    }
    assert!(
        line("allreduce ok") && line("onesided ok") && line("mpi_check passed"),
        "{log}"
    );
    assert!(
        stdout.contains("Hello, World! I am process 1 of 2"),
        "mpi4py helloworld\n{log}"
    );
    assert!(line("fabric-smoke: all steps passed"), "{log}");
}
