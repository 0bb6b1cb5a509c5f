//! `uet write` and `uet read` stream: a file many times larger than their
//! staging memory goes out and comes back with the client's and its
//! daemon's peak RSS bounded (the client's from GNU time's `%M`, the
//! daemon's — which maps the staging region — from its `VmHWM`), and the
//! hash the target prints matches the writer's. The staging slots are
//! reused hundreds of times, out of completion order, and the bytes still
//! come back in place.

mod common;

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Pair, Uetd, field, serve};

/// The file: 256 MiB.
const FILE_BYTES: u64 = 256 << 20;
/// Staging: 4 slots of 256 KiB = 1 MiB.
const CHUNK: &str = "256KiB";
const DEPTH: &str = "4";
/// What the client and the writer's daemon may reach at their peak: a
/// quarter of the file (a client that holds the file, or a daemon that
/// maps all of it, is far above; the binaries themselves and their heaps
/// are about 10–30 MiB).
const RSS_BOUND: u64 = FILE_BYTES / 4;

/// A scratch directory removed on drop (also when the test fails).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `uet ARGS --socket SOCKET` under GNU time: its stdout and its
/// peak RSS in bytes.
fn uet_timed(socket: &str, args: &[&str]) -> (String, u64) {
    let time = Path::new("/usr/bin/time");
    assert!(
        time.exists(),
        "GNU time (/usr/bin/time) measures the client's peak RSS: install Debian's `time` package"
    );
    let out = Command::new(time)
        .args(["-f", "uet-maxrss-kb=%M"])
        .arg(uet_lab::uet_bin().expect("the uet binary"))
        .args(args)
        .args(["--socket", socket])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "uet {args:?}: {stderr}");
    let kb: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("uet-maxrss-kb="))
        .unwrap_or_else(|| panic!("no peak RSS from GNU time in {stderr}"))
        .trim()
        .parse()
        .unwrap();
    (String::from_utf8(out.stdout).unwrap(), kb << 10)
}

/// The peak RSS of process `pid` (`VmHWM`), in bytes.
fn vm_hwm(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .unwrap_or_else(|| panic!("no VmHWM in {status}"))
        .trim()
        .parse()
        .unwrap();
    kb << 10
}

/// XXH3 of a file, read in pieces.
fn file_xxh3(path: &Path) -> u64 {
    let mut f = std::fs::File::open(path).unwrap();
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            return h.digest();
        }
        h.update(&buf[..n]);
    }
}

#[test]
fn write_and_read_stream_a_file_much_larger_than_their_memory() {
    let pair = Pair::new(125, 1500);
    let _target = Uetd::spawn(&pair.b, &["--interface", "v1", "--backend", "udp"]);
    let writer = Uetd::spawn(&pair.a, &["--interface", "v0", "--backend", "udp"]);
    let (tsock, wsock) = (Uetd::socket_of(&pair.b), Uetd::socket_of(&pair.a));
    common::connect(&tsock);
    common::connect(&wsock);

    let dir = Scratch(std::env::temp_dir().join(format!("uet-transfer-{}", pair.a.name())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let input = dir.0.join("in.bin");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
        let mut piece = vec![0u8; 1 << 20];
        for off in (0..FILE_BYTES).step_by(piece.len()) {
            uetd::mem::pattern(7, off, &mut piece);
            f.write_all(&piece).unwrap();
        }
        f.flush().unwrap();
    }
    let want = file_xxh3(&input);

    let (mut serve, address) = serve(&tsock, "256MiB");

    let (written, rss) = uet_timed(
        &wsock,
        &[
            "write",
            input.to_str().unwrap(),
            &address,
            "--chunk",
            CHUNK,
            "--depth",
            DEPTH,
        ],
    );
    let arrived = serve.wait_line("\"write_arrived\"", Duration::from_secs(60));
    assert_eq!(field(&written, "xxh3"), format!("{want:016x}"), "{written}");
    assert_eq!(
        field(&arrived, "xxh3"),
        field(&written, "xxh3"),
        "{arrived}"
    );
    assert_eq!(field(&arrived, "verified_bytes"), FILE_BYTES.to_string());
    assert_eq!(field(&written, "staging_bytes"), (1 << 20).to_string());
    assert!(
        rss < RSS_BOUND,
        "uet write of {FILE_BYTES} bytes peaked at {rss} bytes of RSS"
    );
    let daemon_rss = vm_hwm(writer.child.id());
    assert!(
        daemon_rss < RSS_BOUND,
        "the writer's daemon peaked at {daemon_rss} bytes of RSS"
    );

    let output = dir.0.join("out.bin");
    let (read, rss) = uet_timed(
        &wsock,
        &[
            "read",
            &address,
            "--len",
            "256MiB",
            output.to_str().unwrap(),
            "--chunk",
            CHUNK,
            "--depth",
            DEPTH,
        ],
    );
    assert_eq!(field(&read, "xxh3"), format!("{want:016x}"), "{read}");
    assert_eq!(file_xxh3(&output), want);
    assert!(
        rss < RSS_BOUND,
        "uet read of {FILE_BYTES} bytes peaked at {rss} bytes of RSS"
    );
    let daemon_rss = vm_hwm(writer.child.id());
    assert!(
        daemon_rss < RSS_BOUND,
        "the reader's daemon peaked at {daemon_rss} bytes of RSS"
    );
}
