//! Helpers of the real-kernel tests: a two-namespace veth lab and uetd
//! processes whose JSON lines the tests wait for (with deadlines, never
//! sleeps).
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use uet_lab::netns::{NetNs, veth_pair};

/// Two namespaces `a` (10.x.0.1) and `b` (10.x.0.2) joined by veth
/// `v0`–`v1`.
pub struct Pair {
    pub a: NetNs,
    pub b: NetNs,
    pub a_ip: String,
    pub b_ip: String,
}

impl Pair {
    pub fn new(subnet: u8, mtu: u32) -> Self {
        let a = NetNs::create("uet-a").unwrap();
        let b = NetNs::create("uet-b").unwrap();
        let a_ip = format!("10.{subnet}.0.1");
        let b_ip = format!("10.{subnet}.0.2");
        veth_pair(
            &a,
            "v0",
            &format!("{a_ip}/24"),
            &b,
            "v1",
            &format!("{b_ip}/24"),
            mtu,
        )
        .unwrap();
        Self { a, b, a_ip, b_ip }
    }
}

/// A uetd process and the lines it prints.
pub struct Uetd {
    pub child: Child,
    lines: Receiver<String>,
    pub seen: Vec<String>,
}

impl Uetd {
    pub fn spawn(ns: &NetNs, args: &[&str]) -> Self {
        // Daemons in different namespaces share the filesystem: each gets a
        // control socket of its own unless the test names one.
        let socket = Self::socket_of(ns);
        let mut cmd = ns.command(env!("CARGO_BIN_EXE_uetd"));
        cmd.args(args);
        if !args.contains(&"--socket") {
            cmd.args(["--socket", &socket]);
        }
        Self::from_command(cmd)
    }

    /// Runs `cmd` with its stdout collected line by line.
    pub fn from_command(mut cmd: Command) -> Self {
        let mut child = cmd
            .env("UET_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// The control socket path a daemon in `ns` gets by default here.
    pub fn socket_of(ns: &NetNs) -> String {
        format!("/run/uet/test/{}.sock", ns.name())
    }

    /// The next line containing `needle`, waiting at most `within`.
    pub fn wait_line(&mut self, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if l.contains(needle) {
                        return l;
                    }
                }
                Err(_) => panic!(
                    "no line with {needle:?} within {within:?}; saw {:?}",
                    self.seen
                ),
            }
        }
    }

    /// Waits for the process to exit (up to `within`) and returns its code.
    pub fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        self.wait_status(within).and_then(|s| s.code())
    }

    /// Waits for the process to exit (up to `within`); `None` if it did
    /// not.
    pub fn wait_status(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            if Instant::now() > deadline {
                return None;
            }
            // Drain output meanwhile so the child never blocks on a pipe.
            if let Ok(l) = self.lines.recv_timeout(Duration::from_millis(50)) {
                self.seen.push(l);
            }
        }
    }

    pub fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status();
    }
}

impl Drop for Uetd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What [`write_once`] leaves: the target daemon (still running), the
/// writer, the writer's `written` line and the target's `verified` line.
pub struct Write {
    pub target: Uetd,
    pub writer: Uetd,
    pub written: String,
    pub verified: String,
}

/// One RMA write of `bytes` from `pair.a` (`v0`) to `pair.b` (`v1`): a
/// target daemon exposing region 1 (key 0x5eed) of that size, then a writer
/// daemon that writes it and exits, both with `extra` arguments; checks
/// that the target's hash and byte count are the writer's.
pub fn write_once(
    pair: &Pair,
    a_backend: &str,
    b_backend: &str,
    bytes: &str,
    extra: &[&str],
) -> Write {
    let (mut target, mut writer) = start_write(pair, a_backend, b_backend, bytes, extra);
    let (written, verified) = landed(&mut writer, &mut target, Duration::from_secs(600));
    Write {
        target,
        writer,
        written,
        verified,
    }
}

/// [`write_once`]'s first half: the target daemon, once it has exposed
/// its region, and the writer daemon, just started. Returns (target,
/// writer); [`landed`] waits for the write.
pub fn start_write(
    pair: &Pair,
    a_backend: &str,
    b_backend: &str,
    bytes: &str,
    extra: &[&str],
) -> (Uetd, Uetd) {
    let expose = format!("1:0x5eed:{bytes}");
    let mut args = vec![
        "--interface",
        "v1",
        "--backend",
        b_backend,
        "--expose",
        &expose,
    ];
    args.extend_from_slice(extra);
    let mut target = Uetd::spawn(&pair.b, &args);
    let exposed = target.wait_line("\"exposed\"", Duration::from_secs(30));
    let generation = field(&exposed, "generation").to_owned();
    let mut args = vec![
        "--interface",
        "v0",
        "--backend",
        a_backend,
        "--write-to",
        &pair.b_ip,
        "--generation",
        &generation,
        "--bytes",
        bytes,
        "--exit",
    ];
    args.extend_from_slice(extra);
    let writer = Uetd::spawn(&pair.a, &args);
    (target, writer)
}

/// Waits (up to `within`) for the writer's `written` line and then for the
/// target's `verified` one, and checks that the target hashed what the
/// writer wrote: the same xxh3 over the same byte count. Returns both
/// lines.
pub fn landed(writer: &mut Uetd, target: &mut Uetd, within: Duration) -> (String, String) {
    let written = writer.wait_line("\"written\"", within);
    let verified = target.wait_line("\"verified\"", Duration::from_secs(60));
    assert_eq!(
        field(&written, "xxh3"),
        field(&verified, "xxh3"),
        "{written}\n{verified}"
    );
    assert_eq!(field(&written, "bytes"), field(&verified, "bytes"));
    (written, verified)
}

/// The value of `"key":"…"` or `"key":n` in a JSON line.
pub fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let pat = format!("\"{key}\":");
    let at = line
        .find(&pat)
        .unwrap_or_else(|| panic!("{key} not in {line}"))
        + pat.len();
    let rest = &line[at..];
    let rest = rest.strip_prefix('"').unwrap_or(rest);
    let end = rest.find(['"', ',', '}']).unwrap_or(rest.len());
    &rest[..end]
}

/// A client of the daemon whose control socket is `path`, retried for up
/// to 10 s while the daemon starts.
pub fn connect(path: &str) -> uet_api::Client {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match uet_api::Client::connect(path, "test") {
            Ok(c) => return c,
            Err(_) if Instant::now() < deadline => std::thread::yield_now(),
            Err(e) => panic!("connecting to {path}: {e}"),
        }
    }
}

/// Runs the `uet` CLI against the daemon at `socket` and returns its
/// stdout, asserting that it succeeded.
pub fn uet(socket: &str, args: &[&str]) -> String {
    let out = Command::new(uet_lab::uet_bin().expect("the uet binary"))
        .args(args)
        .args(["--socket", socket])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "uet {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Waits (at most 30 s) until the daemon's control socket at `socket`
/// accepts connections.
pub fn wait_for_socket(socket: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        assert!(Instant::now() < deadline, "no socket {socket}");
        std::thread::yield_now();
    }
}

/// Runs `uet serve --size SIZE` against the daemon at `socket` and waits
/// for its `serving` line: the process (killed when dropped) and the
/// region's `uet://…` address.
pub fn serve(socket: &str, size: &str) -> (Uetd, String) {
    let mut c = Command::new(uet_lab::uet_bin().expect("the uet binary"));
    c.args(["serve", "--size", size, "--socket", socket]);
    let mut serve = Uetd::from_command(c);
    let serving = serve.wait_line("\"serving\"", Duration::from_secs(30));
    let address = field(&serving, "address").to_owned();
    (serve, address)
}
