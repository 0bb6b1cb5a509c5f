//! # uet-lab — the veth lab
//!
//! The veth lab (`docs/architecture.md` §6): N host namespaces joined through a switch
//! namespace, `uetd` in every host, the bottleneck and the eBPF ECN marker
//! on the switch port toward the receiver, and an eBPF impairment program
//! on every switch port — built by [`Lab::up`], removed by [`Lab`]'s drop,
//! by [`down`] (another process: `uet lab down`), on failure and on Ctrl-C.
//!
//! ```text
//!  host 0 (receiver)   host 1        …   host N-1      one namespace each,
//!   eth0 10.S.0.1      eth0 10.S.0.2      eth0 10.S.0.N  uetd on eth0
//!     |                  |                  |
//!     p0 ── TBF(R, L) ── | ───────────────  |            switch namespace:
//!     └─ egress: uet_impair, uet_ecn        |            a Linux bridge br0
//!        br0 ─────────── p1 ─── … ───────── pN-1         over p0..pN-1
//! ```
//!
//! **One L2 segment, a Linux bridge in the switch.** Every host is on
//! 10.S.0.0/24 and resolves its peers by ARP, as hosts on one ToR do; the
//! bridge forwards by MAC with no routing decision, TTL or per-hop
//! neighbour state, so the only queue that matters is the one this lab puts
//! there: the TBF on the bridge port toward the receiver (`p0`'s egress).
//! Routed /30s would add a FIB lookup and a second neighbour resolution per
//! path and gain nothing for an incast (the switch is a single hop either
//! way); a bridge is also what `uetd`'s neighbour resolution expects on a
//! LAN.
//!
//! **The bottleneck**: TBF rate R, a small burst (two frames, or R·20 µs if
//! larger, so the shaper is not starved by timer granularity), limit = the
//! buffer in bytes. **ECN**: `uet_ecn` on the same egress, ahead of the
//! TBF, marks from a virtual queue drained at R·γ (`xdp_prog::ecn`).
//! **Impairment**: `uet_impair` on every port's egress (off until
//! [`Lab::impair`]); reordering uses a detour veth pair `dt0`/`dt1` in the
//! switch.
//!
//! Everything a lab creates is recorded, step by step, in its state file
//! `/run/uet/lab/<name>.json` ([`LabState`]): namespaces, daemon pids (each
//! daemon carries `UET_LAB=<name>` in its environment, checked before it is
//! signalled), logs under `/run/uet/lab/<name>/`, BPF pins under
//! `/sys/fs/bpf/uet-lab/<name>/`.
//!
//! Besides the lab itself: [`incast`] runs, measures and reports incasts
//! on it; [`demo`] is `uet lab demo`; [`bench`] is `uet lab bench` (the
//! datapath table, on a [`LabConfig::direct`] lab: two hosts on one veth
//! pair); [`ceiling`] measures a link's raw ceiling; [`cpu`] the machine's
//! CPU time; [`netns`] makes namespaces and veth pairs for the lab and for
//! the real-kernel tests of the other crates. Errors are [`Error`], by
//! culprit.

pub mod bench;
mod bpf;
pub mod ceiling;
pub mod cpu;
pub mod demo;
mod error;
pub mod incast;
pub mod netns;
mod qdisc;

use std::fs::File;
use std::io::{BufRead as _, BufReader, Seek as _, SeekFrom};
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use bpf::{EcnCounters, EcnSettings, ImpairCounters, Impairment};
pub use error::{BoxError, Error, Result};
pub use qdisc::QdiscStats;

use crate::error::require;

use crate::netns::{NetNs, run};
use uetd::config::Backend;
use uetd::daemon::VERIFY_TAG;

/// Where state files and logs live.
pub const STATE_DIR: &str = "/run/uet/lab";

/// The region every host's daemon exposes: resource index 1, this key.
pub const REGION_RI: u16 = 1;
/// Its key.
pub const REGION_KEY: u64 = 0x5eed;

/// UDP payload bytes a packet trimmed at the bottleneck keeps
/// ([`LabConfig::trim`]): a data packet's PDS and SES headers (60 bytes
/// with the CC header), which the receiver needs to NACK it.
pub const TRIM_TO: u32 = 64;

/// The DSCP of a packet trimmed at the bottleneck: DSCP_TRIMMED_LASTHOP,
/// since the bottleneck is the switch port toward the receiver, its last
/// hop. The receiver NACKs it with `UET_TRIMMED_LASTHOP`, which RCCC
/// reads as its sender's demand and NSCC with RCCC leaves to RCCC
/// (`docs/protocol-notes.md`).
pub const TRIM_DSCP: u8 = 18;

/// The Ethernet frame of a trimmed packet: Ethernet, IPv4, UDP and
/// [`TRIM_TO`].
pub const TRIMMED_FRAME_BYTES: u64 = 14 + 20 + 8 + TRIM_TO as u64;

/// Trimmed frames the bottleneck's TBF has room for beyond the buffer
/// ([`LabConfig::trim`]): eight per sender of the largest incast the lab
/// runs (64), whose speculative first windows arrive at once. With two
/// per sender, 64 senders' first windows overflowed it (4 drops in one
/// of three runs of 64 × 1 MiB at 200 Mb/s).
pub const TRIM_ROOM_FRAMES: u64 = 512;

/// How late the host may run the bottleneck TBF's timer, with a trimming
/// switch, before the TBF drops what the switch admitted. The virtual
/// queue decides what to trim by the clock; the TBF drains only when its
/// timer runs, so while the host is late its backlog runs ahead of the
/// virtual queue's, and a limit of the buffer alone dropped what a switch
/// would have forwarded (15 frames in one test run while a build ran
/// beside it). The TBF gets R × this beyond the buffer and the trimmed
/// frames' room; the buffer itself stays the virtual queue's.
pub const TRIM_LATE_ROOM: Duration = Duration::from_millis(10);

/// The limit (bytes) of a bottleneck TBF of rate `r` (bits/s) in front of
/// `buffer` bytes of switch buffer: the buffer; with a trimming switch
/// also room for [`TRIM_ROOM_FRAMES`] trimmed frames and for
/// [`TRIM_LATE_ROOM`] of data at `r`.
pub fn tbf_limit(buffer: u64, trim: bool, r: u64) -> u64 {
    if !trim {
        return buffer;
    }
    let late = u64::try_from(u128::from(r) * TRIM_LATE_ROOM.as_nanos() / 8 / 1_000_000_000)
        .unwrap_or(u64::MAX);
    buffer
        .saturating_add(TRIM_ROOM_FRAMES * TRIMMED_FRAME_BYTES)
        .saturating_add(late)
}

/// How a lab is built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabConfig {
    /// Hosts (≥ 2); host 0 is the receiver.
    pub hosts: usize,
    /// Bottleneck rate toward the receiver, bits/s; `None`: no shaper.
    pub bottleneck: Option<u64>,
    /// The bottleneck's buffer (TBF limit), bytes; `None`: R · 1 ms, at
    /// least 16 frames.
    pub buffer: Option<u64>,
    /// ECN marking thresholds (Kmin, Kmax), bytes of virtual backlog;
    /// needs a bottleneck.
    pub ecn: Option<(u64, u64)>,
    /// A trimming switch: a UET packet that would overflow the buffer is
    /// trimmed to [`TRIM_TO`] bytes of UDP payload and forwarded, marked
    /// [`TRIM_DSCP`], instead of dropped (`uet_ecn`; the TBF gets room for
    /// [`TRIM_ROOM_FRAMES`] trimmed frames beyond the buffer), and the
    /// daemons run `--trimming true`. Needs a bottleneck.
    #[serde(default)]
    pub trim: bool,
    /// The virtual queue drains at R · `gamma`.
    pub gamma: f64,
    /// IP MTU of every link (above 3498 the daemons' packets span several
    /// UMEM frames: multi-buffer AF_XDP).
    pub mtu: u32,
    /// The daemons' datapath.
    #[serde(serialize_with = "backend_name")]
    pub backend: Backend,
    /// The daemons' congestion control (`uetd --cc`).
    pub cc: String,
    /// `uetd --link-rate`, bits/s; `None`: the bottleneck rate, if any.
    pub link_rate: Option<u64>,
    /// `uetd --base-rtt-us`.
    pub base_rtt_us: Option<u64>,
    /// `uetd --fabric-rtt-us`.
    #[serde(default)]
    pub fabric_rtt_us: Option<u64>,
    /// More `uetd` arguments, for every daemon.
    pub daemon_args: Vec<String>,
    /// Bytes of the region every daemon exposes ([`REGION_RI`],
    /// [`REGION_KEY`]); the receiver's bounds what can be written to it.
    pub region_bytes: u64,
    /// Run a serving daemon on the senders too (`false`: only on the
    /// receiver; a sender's daemon then starts at its first write).
    pub sender_daemons: bool,
    /// The lab's name (`None`: `uetlab-<pid>-<n>`); namespaces, state and
    /// pins are named after it.
    pub name: Option<String>,
    /// The second octet of the hosts' addresses, 10.S.0.i.
    pub subnet: u8,
    /// Two hosts on one veth pair, no switch (so no bottleneck, ECN or
    /// impairment): the path `uet lab bench` measures.
    #[serde(default)]
    pub direct: bool,
    /// Secure the lab's job (job 1, which the daemons expose and grant
    /// their clients) with TSS: a fresh random key, written with mode 0600
    /// into the lab's state directory, handed to every daemon with
    /// `--tss-key-file 1=PATH` (`docs/security.md`).
    #[serde(default)]
    pub tss: bool,
    /// Hosts whose daemon runs SCHED_FIFO at [`PROBE_PRIORITY`] once it
    /// serves (`chrt` on every thread; the threads it starts later inherit
    /// it; it starts at normal priority, which leaves the kernel's deferred
    /// release of an earlier daemon's AF_XDP sockets the CPU it needs
    /// before the new daemon binds the queue): a latency probe's daemon then does not wait behind
    /// the other daemons for a CPU, so what it measures is the network and
    /// the peer, not this machine's run queue. Meant for daemons that sleep
    /// when idle (`--busy-poll-us 0`): a real-time daemon that polls keeps
    /// every normal thread off its CPU while it polls.
    #[serde(default)]
    pub realtime_hosts: Vec<usize>,
    /// Hosts whose daemons' workers ask the kernel for a short time slice
    /// ([`PROMPT_SLICE_US`], `uetd --worker-slice-us`): woken by a packet
    /// or a timer, they take a CPU the lab's hosts share before the other
    /// hosts' daemons, as a host with CPUs of its own would not wait for
    /// another's. Unlike [`Self::realtime_hosts`] their share of the CPU
    /// stays fair.
    #[serde(default)]
    pub prompt_hosts: Vec<usize>,
}

/// The scheduler slice, µs, of [`LabConfig::prompt_hosts`]' workers: the
/// least the kernel gives.
pub const PROMPT_SLICE_US: u64 = 100;

/// The SCHED_FIFO priority of [`LabConfig::realtime_hosts`]' daemons and of
/// the threads that drive them: above every normal thread, below the
/// incast's queue sampler (10).
pub const PROBE_PRIORITY: u8 = 5;

impl Default for LabConfig {
    fn default() -> Self {
        Self {
            hosts: 2,
            bottleneck: None,
            buffer: None,
            ecn: None,
            trim: false,
            gamma: 1.0,
            mtu: 1500,
            backend: Backend::Xdp,
            cc: "none".into(),
            link_rate: None,
            base_rtt_us: None,
            fabric_rtt_us: None,
            daemon_args: Vec::new(),
            region_bytes: 1 << 30,
            sender_daemons: true,
            name: None,
            subnet: 77,
            direct: false,
            tss: false,
            realtime_hosts: Vec::new(),
            prompt_hosts: Vec::new(),
        }
    }
}

impl LabConfig {
    /// The TBF limit this config gives (bytes), when there is a bottleneck.
    pub fn buffer_bytes(&self) -> Option<u64> {
        let r = self.bottleneck?;
        Some(
            self.buffer
                .unwrap_or_else(|| (r / 8 / 1000).max(16 * u64::from(self.mtu + 14))),
        )
    }

    /// The TBF's limit (bytes): the buffer, and with [`LabConfig::trim`]
    /// room beyond it for trimmed frames, which the switch forwards, and
    /// for a host that runs the TBF late ([`TRIM_LATE_ROOM`]).
    pub fn tbf_limit(&self) -> Option<u64> {
        Some(tbf_limit(self.buffer_bytes()?, self.trim, self.bottleneck?))
    }

    /// The TBF burst (bytes): two frames, or R · 20 µs if larger.
    pub fn burst_bytes(&self) -> Option<u64> {
        let r = self.bottleneck?;
        Some((2 * u64::from(self.mtu + 14)).max(r / 8 / 50_000))
    }

    fn check(&self) -> Result<()> {
        const WHAT: &str = "lab config";
        require(self.hosts >= 2, WHAT, || {
            "a lab needs at least 2 hosts".into()
        })?;
        require(self.hosts <= 250, WHAT, || "at most 250 hosts".into())?;
        require((576..=9000).contains(&self.mtu), WHAT, || {
            format!("MTU {} out of range", self.mtu)
        })?;
        require(
            self.ecn.is_none() || self.bottleneck.is_some(),
            WHAT,
            || "ECN marking needs a bottleneck (the virtual queue drains at its rate)".into(),
        )?;
        require(!self.trim || self.bottleneck.is_some(), WHAT, || {
            "trimming needs a bottleneck (it trims what would overflow its buffer)".into()
        })?;
        if let Some((kmin, kmax)) = self.ecn {
            require(kmin <= kmax, WHAT, || {
                format!("ECN Kmin {kmin} > Kmax {kmax}")
            })?;
        }
        require(self.gamma > 0.0 && self.gamma <= 2.0, WHAT, || {
            format!("gamma {} out of range", self.gamma)
        })?;
        if self.direct {
            require(self.hosts == 2, WHAT, || {
                "a direct lab (one veth pair) has exactly 2 hosts".into()
            })?;
            require(self.bottleneck.is_none(), WHAT, || {
                "a direct lab (one veth pair) has no switch for a bottleneck".into()
            })?;
        }
        if let Some(n) = &self.name {
            check_name(n)?;
        }
        Ok(())
    }
}

const fn backend_str(b: Backend) -> &'static str {
    match b {
        Backend::Xdp => "xdp",
        Backend::Udp => "udp",
    }
}

fn backend_name<S: serde::Serializer>(b: &Backend, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(backend_str(*b))
}

fn check_name(n: &str) -> Result<()> {
    require(
        !n.is_empty()
            && n.len() <= 40
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "lab name",
        || format!("{n:?}: 1-40 characters of [A-Za-z0-9_-]"),
    )
}

/// One host, as recorded in the state file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostState {
    /// Its namespace.
    pub netns: String,
    /// Its interface (in its namespace).
    pub ifname: String,
    /// Its address.
    pub ip: Ipv4Addr,
    /// The switch port it hangs off.
    pub port: String,
    /// The port's ifindex in the switch.
    pub port_ifindex: u32,
    /// Its serving daemon's pid, while one runs.
    pub daemon_pid: Option<u32>,
    /// The daemon's stdout (JSON lines) and stderr.
    pub log: PathBuf,
}

/// Everything a lab made: what [`down`] removes. Also what `uet lab up`
/// prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    /// The lab's name.
    pub name: String,
    /// The config it was built from.
    pub config: LabConfig,
    /// The switch namespace.
    pub switch: Option<String>,
    /// The hosts (index 0: the receiver).
    pub hosts: Vec<HostState>,
    /// The detour veth's ifindex in the switch (reordering).
    pub detour_ifindex: u32,
    /// BPF pins (links and maps), once attached.
    pub pins: Option<PathBuf>,
    /// Logs of the daemons.
    pub log_dir: PathBuf,
    /// Other processes started in the lab, while they run.
    pub pids: Vec<u32>,
}

impl LabState {
    /// The state file of lab `name`.
    pub fn path(name: &str) -> PathBuf {
        Path::new(STATE_DIR).join(format!("{name}.json"))
    }

    /// Reads the state of lab `name`.
    pub fn load(name: &str) -> Result<Self> {
        let p = Self::path(name);
        let text = std::fs::read_to_string(&p).map_err(|source| Error::NoLab {
            name: name.to_owned(),
            path: p.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(Error::json(format!("parsing {}", p.display())))
    }

    fn save(&self) -> Result<()> {
        let p = Self::path(&self.name);
        let tmp = p.with_extension("json.tmp");
        let text = serde_json::to_vec_pretty(self).map_err(Error::json(format!(
            "encoding the state of lab {}",
            self.name
        )))?;
        std::fs::write(&tmp, text).map_err(Error::io(format!("writing {}", tmp.display())))?;
        std::fs::rename(&tmp, &p).map_err(Error::io(format!("writing {}", p.display())))?;
        Ok(())
    }

    /// Every namespace of the lab.
    pub fn namespaces(&self) -> Vec<String> {
        self.switch
            .iter()
            .cloned()
            .chain(self.hosts.iter().map(|h| h.netns.clone()))
            .collect()
    }
}

/// Set by a signal handler: stop building, a teardown is coming.
static ABORT: AtomicBool = AtomicBool::new(false);
/// Held while a step that creates something runs and until the state file
/// records it, so a teardown from a signal handler never misses it.
static STEP: Mutex<()> = Mutex::new(());
/// Names of the labs this process is building or running, for
/// [`abort_all`].
static ACTIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn step() -> Result<MutexGuard<'static, ()>> {
    let g = STEP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if ABORT.load(Ordering::SeqCst) {
        return Err(Error::Interrupted);
    }
    Ok(g)
}

/// For a signal handler (`uet lab …` on Ctrl-C): stops every lab this
/// process is building or running — waits for the step in progress,
/// removes everything their state files record — and never lets a lab be
/// built again in this process. The caller then exits.
pub fn abort_all() {
    ABORT.store(true, Ordering::SeqCst);
    let _g = STEP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let names = ACTIVE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    for n in names {
        if let Err(e) = down(&n) {
            eprintln!("removing lab {n}: {}", e.chain());
        }
    }
}

/// A serving `uetd` in a host, and the lines it printed so far.
#[derive(Debug)]
struct Daemon {
    child: Child,
    log: LogReader,
}

/// Reads a growing log of JSON lines (the daemons write to files so that
/// they outlive `uet lab up`; a pipe would break when it exits).
#[derive(Debug)]
pub struct LogReader {
    path: PathBuf,
    pos: u64,
    partial: String,
    /// Every complete line read so far.
    pub lines: Vec<String>,
}

impl LogReader {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            pos: 0,
            partial: String::new(),
            lines: Vec::new(),
        }
    }

    /// Reads what was appended since the last call.
    pub fn poll(&mut self) -> Result<()> {
        let reading = |e| Error::io(format!("reading {}", self.path.display()))(e);
        let mut f = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(reading(e)),
        };
        f.seek(SeekFrom::Start(self.pos)).map_err(reading)?;
        let mut r = BufReader::new(f);
        loop {
            let mut buf = String::new();
            let n = r.read_line(&mut buf).map_err(reading)?;
            if n == 0 {
                break;
            }
            self.pos += n as u64;
            if buf.ends_with('\n') {
                self.partial.push_str(buf.trim_end());
                self.lines.push(std::mem::take(&mut self.partial));
            } else {
                self.partial.push_str(&buf);
            }
        }
        Ok(())
    }

    /// The first line at index ≥ `from` for which `want` holds, polling
    /// until `deadline` ([`Error::Timeout`]); fails early when `alive` says
    /// the process exited ([`Error::Exited`]). Both carry the log's last
    /// lines.
    pub fn wait(
        &mut self,
        from: usize,
        want: impl Fn(&str) -> bool,
        deadline: Instant,
        mut alive: impl FnMut() -> bool,
    ) -> Result<(usize, String)> {
        let mut pause = Duration::from_micros(500);
        loop {
            self.poll()?;
            if let Some((i, l)) = self
                .lines
                .iter()
                .enumerate()
                .skip(from)
                .find(|(_, l)| want(l))
            {
                return Ok((i, l.clone()));
            }
            if !alive() {
                // One last read: the line may have landed as it exited.
                self.poll()?;
                if let Some((i, l)) = self
                    .lines
                    .iter()
                    .enumerate()
                    .skip(from)
                    .find(|(_, l)| want(l))
                {
                    return Ok((i, l.clone()));
                }
                return Err(Error::Exited { log: self.tail() });
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    awaiting: format!("a line in {}", self.path.display()),
                    state: self.tail(),
                });
            }
            std::thread::park_timeout(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    fn tail(&self) -> String {
        let err = std::fs::read_to_string(self.path.with_extension("err")).unwrap_or_default();
        format!(
            "stdout: {:?}; stderr: {}",
            self.lines.iter().rev().take(5).collect::<Vec<_>>(),
            stderr_summary(&err)
        )
    }
}

/// Makes every thread of process `pid` SCHED_FIFO at [`PROBE_PRIORITY`]
/// (threads it starts later inherit the policy). Thread by thread: a
/// thread that ends meanwhile is skipped, where `chrt --all-tasks` fails.
fn make_realtime(pid: u32) -> Result<()> {
    let dir = format!("/proc/{pid}/task");
    let tasks = std::fs::read_dir(&dir).map_err(Error::io(format!("listing {dir}")))?;
    for t in tasks {
        let t = t.map_err(Error::io(format!("listing {dir}")))?.path();
        let Some(tid) = t.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let r =
            run(Command::new("chrt").args(["--fifo", "--pid", &PROBE_PRIORITY.to_string(), tid]));
        if r.is_err() && t.exists() {
            return r.map(drop);
        }
    }
    Ok(())
}

/// The first lines of a daemon's stderr (its error, which a backtrace
/// follows) and its last lines.
fn stderr_summary(err: &str) -> String {
    let lines: Vec<&str> = err.lines().collect();
    if lines.len() <= 8 {
        return format!("{lines:?}");
    }
    format!("{:?} … {:?}", &lines[..3], &lines[lines.len() - 5..])
}

fn child_alive(c: &mut Child) -> bool {
    matches!(c.try_wait(), Ok(None))
}

/// The `uetd` binary: `$UETD_BIN`, else next to the running executable (or
/// one directory up, where cargo puts binaries for tests and benches).
pub fn uetd_bin() -> Result<PathBuf> {
    sibling_bin("uetd", "UETD_BIN")
}

/// The `uet` binary: `$UET_BIN`, else found as [`uetd_bin`] finds `uetd`
/// (tests of other crates run it; `cargo test --workspace` builds it).
pub fn uet_bin() -> Result<PathBuf> {
    sibling_bin("uet", "UET_BIN")
}

fn sibling_bin(name: &str, env: &str) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(Error::io("locating the running executable"))?;
    let dir = exe.parent().unwrap_or_else(|| Path::new("/"));
    for d in [Some(dir), dir.parent()].into_iter().flatten() {
        let p = d.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(Error::MissingBinary {
        name: name.into(),
        near: exe,
        env: env.into(),
    })
}

/// A running lab; dropping it removes everything (unless [`Lab::keep`]).
#[derive(Debug)]
pub struct Lab {
    state: LabState,
    switch: Option<NetNs>,
    hosts: Vec<NetNs>,
    daemons: Vec<Option<Daemon>>,
    uetd: PathBuf,
    kept: bool,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

fn ip_json(ns: &NetNs, args: &[&str]) -> Result<serde_json::Value> {
    let mut a = vec!["-j"];
    a.extend_from_slice(args);
    let out = ns.ip(&a)?;
    serde_json::from_slice(&out.stdout).map_err(Error::json(format!(
        "parsing the output of ip {} in {}",
        a.join(" "),
        ns.name()
    )))
}

fn ifindex(ns: &NetNs, ifname: &str) -> Result<u32> {
    let v = ip_json(ns, &["link", "show", "dev", ifname])?;
    v[0]["ifindex"]
        .as_u64()
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(|| Error::Output {
            what: format!("ip link show: no ifindex for {ifname} in {}", ns.name()),
            source: None,
        })
}

/// `tc qdisc VERB dev p0 root handle 1: tbf …` in the switch: the
/// bottleneck toward the receiver.
fn tbf(sw: &NetNs, verb: &str, rate: u64, burst: u64, limit: u64) -> Result<()> {
    run(sw.command("tc").args([
        "qdisc",
        verb,
        "dev",
        "p0",
        "root",
        "handle",
        "1:",
        "tbf",
        "rate",
        &format!("{rate}bit"),
        "burst",
        &burst.to_string(),
        "limit",
        &limit.to_string(),
    ]))?;
    Ok(())
}

/// Writes a sysctl of the calling thread's network namespace.
fn sysctl_net(path: &str, value: &str) -> Result<()> {
    std::fs::write(Path::new("/proc/sys/net").join(path), value)
        .map_err(Error::io(format!("writing net.{}", path.replace('/', "."))))
}

/// Writes 32 random bytes (the kernel's generator) to a new file at `path`
/// with mode 0600: the lab's TSS key.
fn write_key_file(path: &Path) -> Result<()> {
    use std::io::{Read as _, Write as _};
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut key = [0u8; 32];
    File::open("/dev/urandom")
        .and_then(|mut r| r.read_exact(&mut key))
        .map_err(Error::io("reading /dev/urandom"))?;
    let _ = std::fs::remove_file(path);
    let r = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(&key));
    key.fill(0);
    r.map_err(Error::io(format!("writing the TSS key {}", path.display())))
}

impl Lab {
    /// Builds the lab and starts its daemons; on any failure everything
    /// made so far is removed before the error returns.
    pub fn up(cfg: LabConfig) -> Result<Self> {
        cfg.check()?;
        let uetd = uetd_bin()?;
        let name = cfg.name.clone().unwrap_or_else(|| {
            format!(
                "uetlab-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            )
        });
        std::fs::create_dir_all(STATE_DIR).map_err(Error::io(format!("creating {STATE_DIR}")))?;
        let log_dir = Path::new(STATE_DIR).join(&name);
        let mut lab = {
            let _s = step()?;
            require(!LabState::path(&name).exists(), "lab name", || {
                format!("a lab named {name} exists (uet lab down --name {name})")
            })?;
            let lab = Self {
                state: LabState {
                    name: name.clone(),
                    config: cfg,
                    switch: None,
                    hosts: Vec::new(),
                    detour_ifindex: 0,
                    pins: None,
                    log_dir: log_dir.clone(),
                    pids: Vec::new(),
                },
                switch: None,
                hosts: Vec::new(),
                daemons: Vec::new(),
                uetd,
                kept: false,
            };
            lab.state.save()?;
            ACTIVE
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(name);
            lab
        };
        std::fs::create_dir_all(&log_dir)
            .map_err(Error::io(format!("creating {}", log_dir.display())))?;
        if lab.state.config.tss {
            write_key_file(&lab.tss_key_file())?;
        }
        lab.build()?;
        lab.start_daemons()?;
        Ok(lab)
    }

    fn build(&mut self) -> Result<()> {
        if self.state.config.direct {
            return self.build_direct();
        }
        let cfg = self.state.config.clone();
        let name = self.state.name.clone();
        let mtu = cfg.mtu.to_string();
        {
            let _s = step()?;
            let sw = NetNs::create(&format!("{name}-sw"))?;
            self.state.switch = Some(sw.name().to_owned());
            self.switch = Some(sw);
            self.state.save()?;
        }
        let sw = self.switch.as_ref().expect("just made");
        sw.run(|| -> Result<()> {
            sysctl_net("ipv6/conf/all/disable_ipv6", "1")?;
            sysctl_net("ipv6/conf/default/disable_ipv6", "1")?;
            // Where br_netfilter is loaded, every bridged frame also runs
            // the switch namespace's iptables hooks (3–4 % of the CPU in
            // a 2-vCPU incast); the lab's switch filters nothing. These
            // sysctls are per network namespace (absent without the
            // module).
            for t in ["iptables", "ip6tables", "arptables"] {
                let path = format!("bridge/bridge-nf-call-{t}");
                if Path::new("/proc/sys/net").join(&path).exists() {
                    sysctl_net(&path, "0")?;
                }
            }
            Ok(())
        })??;
        sw.ip(&[
            "link",
            "add",
            "br0",
            "mtu",
            &mtu,
            "type",
            "bridge",
            "stp_state",
            "0",
        ])?;
        sw.ip(&["link", "set", "br0", "up"])?;
        for i in 0..cfg.hosts {
            let host = {
                let _s = step()?;
                let h = NetNs::create(&format!("{name}-h{i}"))?;
                // At most 250 hosts (checked): the last octet fits.
                let ip = Ipv4Addr::new(10, cfg.subnet, 0, (i + 1) as u8);
                self.state.hosts.push(HostState {
                    netns: h.name().to_owned(),
                    ifname: "eth0".into(),
                    ip,
                    port: format!("p{i}"),
                    port_ifindex: 0,
                    daemon_pid: None,
                    log: self.state.log_dir.join(format!("h{i}.log")),
                });
                self.hosts.push(h);
                self.daemons.push(None);
                self.state.save()?;
                self.hosts.last().expect("just pushed")
            };
            host.run(|| -> Result<()> {
                sysctl_net("ipv6/conf/all/disable_ipv6", "1")?;
                sysctl_net("ipv6/conf/default/disable_ipv6", "1")
            })??;
            let port = format!("p{i}");
            run(Command::new("ip").args([
                "link",
                "add",
                "eth0",
                "netns",
                host.name(),
                "mtu",
                &mtu,
                "type",
                "veth",
                "peer",
                "name",
                &port,
                "netns",
                sw.name(),
                "mtu",
                &mtu,
            ]))
            .map_err(Error::during(format!("creating the veth of host {i}")))?;
            let ip = self.state.hosts[i].ip;
            host.ip(&["addr", "add", &format!("{ip}/24"), "dev", "eth0"])?;
            host.ip(&["link", "set", "eth0", "up"])?;
            sw.ip(&["link", "set", &port, "master", "br0", "up"])?;
            if cfg.backend == Backend::Xdp {
                host.run(|| uetd::xsk::set_tx_checksum_offload("eth0", false))?
                    .map_err(Error::io(format!(
                        "turning TX checksum offload off on eth0 of host {i}"
                    )))?;
                let p = port.clone();
                sw.run(move || uetd::xsk::set_tx_checksum_offload(&p, false))?
                    .map_err(Error::io(format!(
                        "turning TX checksum offload off on {port}"
                    )))?;
            }
            self.state.hosts[i].port_ifindex = ifindex(sw, &port)?;
        }
        // The detour pair for reordering: not bridge ports, only BPF uses it.
        sw.ip(&[
            "link", "add", "dt0", "mtu", &mtu, "type", "veth", "peer", "name", "dt1", "mtu", &mtu,
        ])?;
        sw.ip(&["link", "set", "dt0", "up"])?;
        sw.ip(&["link", "set", "dt1", "up"])?;
        self.state.detour_ifindex = ifindex(sw, "dt0")?;

        if let (Some(rate), Some(limit), Some(burst)) =
            (cfg.bottleneck, cfg.tbf_limit(), cfg.burst_bytes())
        {
            tbf(sw, "add", rate, burst, limit)
                .map_err(Error::during("installing the TBF bottleneck"))?;
        }

        {
            let _s = step()?;
            bpf::ensure_bpffs()?;
            let pins = bpf::pin_dir(&name);
            self.state.pins = Some(pins.clone());
            self.state.save()?;
            let ports: Vec<String> = self.state.hosts.iter().map(|h| h.port.clone()).collect();
            sw.run(move || {
                bpf::attach(&bpf::Attach {
                    pins: &pins,
                    ports: &ports,
                    detour: ("dt0", "dt1"),
                })
            })?
            .map_err(Error::during("attaching the switch's BPF programs"))?;
        }
        let limit = cfg.buffer_bytes().unwrap_or(0);
        let mut ecn = self.ecn_maps()?;
        ecn.configure(&EcnSettings {
            rate_bps: cfg
                .bottleneck
                .map_or(0, |r| (r as f64 * cfg.gamma).round() as u64),
            thresholds: cfg.ecn,
            limit,
            trim: cfg.trim,
        })?;
        self.impair(&Impairment::default())?;
        self.state.save()
    }

    /// Host 0's and host 1's `eth0` are the two ends of one veth pair.
    fn build_direct(&mut self) -> Result<()> {
        let cfg = self.state.config.clone();
        let name = self.state.name.clone();
        for i in 0..2 {
            let _s = step()?;
            let h = NetNs::create(&format!("{name}-h{i}"))?;
            self.state.hosts.push(HostState {
                netns: h.name().to_owned(),
                ifname: "eth0".into(),
                ip: Ipv4Addr::new(10, cfg.subnet, 0, (i + 1) as u8),
                port: String::new(),
                port_ifindex: 0,
                daemon_pid: None,
                log: self.state.log_dir.join(format!("h{i}.log")),
            });
            self.hosts.push(h);
            self.daemons.push(None);
            self.state.save()?;
            self.hosts[i].run(|| -> Result<()> {
                sysctl_net("ipv6/conf/all/disable_ipv6", "1")?;
                sysctl_net("ipv6/conf/default/disable_ipv6", "1")
            })??;
        }
        let mtu = cfg.mtu.to_string();
        run(Command::new("ip").args([
            "link",
            "add",
            "eth0",
            "netns",
            self.hosts[0].name(),
            "mtu",
            &mtu,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            self.hosts[1].name(),
            "mtu",
            &mtu,
        ]))
        .map_err(Error::during("creating the veth pair of hosts 0 and 1"))?;
        for (i, host) in self.hosts.iter().enumerate() {
            let ip = self.state.hosts[i].ip;
            host.ip(&["addr", "add", &format!("{ip}/24"), "dev", "eth0"])?;
            host.ip(&["link", "set", "eth0", "up"])?;
            if cfg.backend == Backend::Xdp {
                host.run(|| uetd::xsk::set_tx_checksum_offload("eth0", false))?
                    .map_err(Error::io(format!(
                        "turning TX checksum offload off on eth0 of host {i}"
                    )))?;
            }
        }
        self.state.save()
    }

    /// The control socket of host `i`'s daemon (applications and `uet
    /// --socket …` use it; the namespaces share the filesystem, so each
    /// daemon has its own).
    pub fn socket(&self, i: usize) -> PathBuf {
        PathBuf::from(format!("/run/uet/lab/{}/h{i}.sock", self.state.name))
    }

    fn daemon_args(&self, i: usize) -> Vec<String> {
        let c = &self.state.config;
        let mut a: Vec<String> = vec![
            "--interface".into(),
            self.state.hosts[i].ifname.clone(),
            "--backend".into(),
            backend_str(c.backend).into(),
            "--cc".into(),
            c.cc.clone(),
            "--socket".into(),
            self.socket(i).display().to_string(),
        ];
        if let Some(r) = c.link_rate.or(c.bottleneck) {
            a.extend(["--link-rate".into(), r.to_string()]);
        }
        if let Some(r) = c.base_rtt_us {
            a.extend(["--base-rtt-us".into(), r.to_string()]);
        }
        if let Some(r) = c.fabric_rtt_us {
            a.extend(["--fabric-rtt-us".into(), r.to_string()]);
        }
        if c.trim {
            a.extend(["--trimming".into(), "true".into()]);
        }
        if c.tss {
            a.extend([
                "--tss-key-file".into(),
                format!("1={}", self.tss_key_file().display()),
            ]);
        }
        if c.prompt_hosts.contains(&i) {
            a.extend(["--worker-slice-us".into(), PROMPT_SLICE_US.to_string()]);
        }
        a.extend(c.daemon_args.iter().cloned());
        a
    }

    /// The key file of the lab's job when it runs with TSS.
    pub fn tss_key_file(&self) -> PathBuf {
        self.state.log_dir.join("tss-job1.key")
    }

    /// Spawns `uetd args…` in host `i` with stdout/stderr to `log`/`.err`.
    fn spawn_uetd(&self, i: usize, args: &[String], log: &Path) -> Result<Child> {
        let out = File::create(log).map_err(Error::io(format!("creating {}", log.display())))?;
        let err_log = log.with_extension("err");
        let err =
            File::create(&err_log).map_err(Error::io(format!("creating {}", err_log.display())))?;
        let uetd = self.uetd.to_str().ok_or_else(|| {
            Error::invalid("uetd path", format!("{} is not UTF-8", self.uetd.display()))
        })?;
        let mut cmd = self.hosts[i].command(uetd);
        cmd.args(args)
            .env("UET_LAB", &self.state.name)
            .env(
                "UET_LOG",
                std::env::var("UET_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own process group: Ctrl-C reaches `uet`, which tears the
            // lab down in order, not every daemon at once.
            .process_group(0);
        cmd.spawn()
            .map_err(Error::io(format!("starting {}", self.uetd.display())))
    }

    fn start_daemon(&mut self, i: usize) -> Result<()> {
        let mut args = self.daemon_args(i);
        let size = self.region_len(i);
        args.extend([
            "--expose".into(),
            format!("{REGION_RI}:{REGION_KEY:#x}:{size}"),
        ]);
        let log = self.state.hosts[i].log.clone();
        {
            let _s = step()?;
            let child = self.spawn_uetd(i, &args, &log)?;
            self.state.hosts[i].daemon_pid = Some(child.id());
            self.daemons[i] = Some(Daemon {
                child,
                log: LogReader::new(log),
            });
            self.state.save()?;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        let socket = self.socket(i);
        let d = self.daemons[i].as_mut().expect("just started");
        let child = &mut d.child;
        d.log
            .wait(
                0,
                |l| l.contains(r#""event":"exposed""#),
                deadline,
                || child_alive(child),
            )
            .map_err(|e| Error::Daemon {
                host: i,
                what: "did not come up".into(),
                source: Box::new(e),
            })?;
        // The region is up; the control socket follows. Answering, not
        // merely present: a stale file of an earlier daemon may be there.
        let mut pause = Duration::from_micros(200);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            let why = if !child_alive(child) {
                Error::Exited { log: d.log.tail() }
            } else if Instant::now() >= deadline {
                Error::Timeout {
                    awaiting: "its control socket to answer".into(),
                    state: d.log.tail(),
                }
            } else {
                std::thread::park_timeout(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
                continue;
            };
            return Err(Error::Daemon {
                host: i,
                what: format!("does not answer on {}", socket.display()),
                source: Box::new(why),
            });
        }
        if self.state.config.realtime_hosts.contains(&i) {
            make_realtime(child.id()).map_err(|e| Error::Daemon {
                host: i,
                what: "could not be made SCHED_FIFO".into(),
                source: Box::new(e),
            })?;
        }
        Ok(())
    }

    fn start_daemons(&mut self) -> Result<()> {
        for i in 0..self.state.hosts.len() {
            if i == 0 || self.state.config.sender_daemons {
                self.start_daemon(i)?;
            }
        }
        Ok(())
    }

    /// Stops host `i`'s serving daemon (if it runs) and starts a new one
    /// (a peer restart: new PDCs, the region exposed again).
    pub fn restart_daemon(&mut self, i: usize) -> Result<()> {
        self.stop_daemon(i)?;
        self.start_daemon(i)
    }

    /// Starts `cmd` (made by `self.host(i).command(…)`) as a process of
    /// the lab: `UET_LAB` in its environment and its pid in the state
    /// file, so a teardown (drop, `uet lab down`, a signal) stops it if the
    /// caller has not.
    pub fn spawn_tracked(&mut self, cmd: &mut Command) -> Result<Child> {
        let _s = step()?;
        let child = cmd
            .env("UET_LAB", &self.state.name)
            .spawn()
            .map_err(Error::io(format!("starting {cmd:?}")))?;
        self.state.pids.push(child.id());
        self.state.save()?;
        Ok(child)
    }

    /// Stops host `i`'s serving daemon (if it runs).
    pub fn stop_daemon(&mut self, i: usize) -> Result<()> {
        if let Some(mut d) = self.daemons[i].take() {
            terminate(&mut d.child);
            self.state.hosts[i].daemon_pid = None;
            self.state.save()?;
        }
        Ok(())
    }

    /// The lab's state (what the state file says).
    pub fn state(&self) -> &LabState {
        &self.state
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// Host `i`'s namespace.
    pub fn host(&self, i: usize) -> &NetNs {
        &self.hosts[i]
    }

    /// Host `i`'s address.
    pub fn ip(&self, i: usize) -> Ipv4Addr {
        self.state.hosts[i].ip
    }

    /// The switch namespace.
    pub fn switch(&self) -> &NetNs {
        self.switch.as_ref().expect("a built lab has a switch")
    }

    /// Whether host `i`'s serving daemon is running.
    pub fn daemon_alive(&mut self, i: usize) -> bool {
        self.daemons[i]
            .as_mut()
            .is_some_and(|d| child_alive(&mut d.child))
    }

    /// The lines host `i`'s serving daemon printed so far.
    pub fn daemon_lines(&mut self, i: usize) -> Result<&[String]> {
        let d = self.daemons[i]
            .as_mut()
            .ok_or_else(|| Error::invalid("daemon", format!("host {i} runs no daemon")))?;
        d.log.poll()?;
        Ok(&d.log.lines)
    }

    /// Leaves the lab running after this handle is gone (`uet lab up`);
    /// [`down`] removes it.
    pub fn keep(mut self) -> LabState {
        self.kept = true;
        if let Some(sw) = self.switch.take() {
            std::mem::forget(sw);
        }
        for h in self.hosts.drain(..) {
            std::mem::forget(h);
        }
        deactivate(&self.state.name);
        self.state.clone()
    }

    fn ecn_maps(&self) -> Result<bpf::EcnMaps> {
        bpf::EcnMaps::open(pins(&self.state)?)
    }

    /// Switches the impairment program to `imp` (all zero: off).
    pub fn impair(&self, imp: &Impairment) -> Result<()> {
        impair_state(&self.state, imp)
    }

    /// The impairment program's counters.
    pub fn impair_counters(&self) -> Result<ImpairCounters> {
        bpf::ImpairMaps::open(pins(&self.state)?)?.read()
    }

    /// A sampler of the bottleneck queue and the ECN marker.
    pub fn sampler(&self) -> Result<Sampler> {
        Sampler::open(&self.state)
    }

    /// The region host `i`'s serving daemon exposes ([`REGION_RI`],
    /// [`REGION_KEY`]), as a remote peer addresses it — read from the
    /// daemon's `exposed` line (job, pid and generation are the daemon's).
    pub fn region(&mut self, i: usize) -> Result<uet_api::RemoteRegion> {
        let ip = self.state.hosts[i].ip;
        let line = self
            .daemon_lines(i)?
            .iter()
            .find(|l| l.contains(r#""event":"exposed""#))
            .cloned()
            .ok_or_else(|| Error::Output {
                what: format!("host {i}'s daemon exposed no region"),
                source: None,
            })?;
        let v: serde_json::Value = serde_json::from_str(&line).map_err(Error::json(format!(
            "parsing host {i}'s exposed line {line}"
        )))?;
        let bad = |k: &str| Error::Output {
            what: format!("no valid {k} in host {i}'s exposed line {line}"),
            source: None,
        };
        let num = |k: &str| v[k].as_u64().ok_or_else(|| bad(k));
        let key = v["key"]
            .as_str()
            .and_then(|k| u64::from_str_radix(k.trim_start_matches("0x"), 16).ok())
            .ok_or_else(|| bad("key"))?;
        Ok(uet_api::RemoteRegion {
            fep: ip.into(),
            job: u32::try_from(num("job")?).map_err(|_| bad("job"))?,
            pid: u16::try_from(num("pid")?).map_err(|_| bad("pid"))?,
            ri: u16::try_from(num("ri")?).map_err(|_| bad("ri"))?,
            generation: u8::try_from(num("generation")?).map_err(|_| bad("generation"))?,
            key,
        })
    }

    /// A client of host `i`'s serving daemon (its control socket).
    pub fn client(&self, i: usize, name: &str) -> Result<uet_api::Client> {
        let s = self.socket(i);
        uet_api::Client::connect(&s, name).map_err(Error::client(format!(
            "connecting to host {i}'s uetd at {}",
            s.display()
        )))
    }

    /// Keeps the evidence of a failed run in `dir`: each host's daemon
    /// counters (`h<i>.json`, as `uet stats` gives them, or `h<i>.error`
    /// where the daemon did not answer) and its log (`h<i>.log`), before the
    /// lab is torn down and its log directory with it.
    pub fn save_state(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        for (i, h) in self.state.hosts.iter().enumerate() {
            let stats = self
                .client(i, "lab-save-state")
                .and_then(|mut c| stats_json(&mut c, &format!("host {i}'s counters")));
            let (name, text) = match stats {
                Ok(v) => (format!("h{i}.json"), format!("{v:#}\n")),
                Err(e) => (format!("h{i}.error"), format!("{e:#}\n")),
            };
            let path = dir.join(name);
            std::fs::write(&path, text)
                .map_err(Error::io(format!("writing {}", path.display())))?;
            if h.log.exists() {
                let to = dir.join(format!("h{i}.log"));
                std::fs::copy(&h.log, &to)
                    .map_err(Error::io(format!("copying {}", h.log.display())))?;
            }
        }
        Ok(())
    }

    /// Bytes of the region host `i`'s serving daemon exposes.
    fn region_len(&self, i: usize) -> u64 {
        let c = &self.state.config;
        if i == 0 {
            c.region_bytes
        } else {
            c.region_bytes.min(1 << 20)
        }
    }

    /// Starts an RMA write from host `from` to host `to`'s region through
    /// host `from`'s serving daemon, as an application does: a client of
    /// its control socket registers a memfd holding the test pattern and
    /// writes it in `chunk`-byte operations, `depth` in flight, the last
    /// one asking the target's daemon to verify (hash) what landed. Host
    /// `from`'s daemon is started first if it does not run. Several writes
    /// from different hosts may run at once (an incast).
    pub fn start_write(&mut self, from: usize, to: usize, opts: &WriteOpts) -> Result<WriteRun> {
        const WHAT: &str = "lab write";
        require(from != to, WHAT, || "a host cannot write to itself".into())?;
        let hosts = self.daemons.len();
        require(from < hosts && to < hosts, WHAT, || {
            format!("the lab has {hosts} hosts")
        })?;
        require(self.daemons[to].is_some(), WHAT, || {
            format!("host {to} runs no daemon to write to")
        })?;
        require(
            opts.bytes > 0 && opts.chunk > 0 && opts.depth > 0,
            WHAT,
            || "bytes, chunk and depth must be positive".into(),
        )?;
        let chunk =
            u32::try_from(opts.chunk).map_err(|_| Error::invalid(WHAT, "chunk must be < 4 GiB"))?;
        let region = self.region_len(to);
        require(opts.bytes <= region, WHAT, || {
            format!(
                "{} bytes do not fit host {to}'s region of {region}",
                opts.bytes
            )
        })?;
        if self.daemons[from].is_none() {
            self.start_daemon(from)?;
        }
        let dst = self.region(to)?;
        let target_from = self.daemon_lines(to)?.len();
        let mut client = self.client(from, &format!("lab write h{from}->h{to}"))?;
        let before = stats_json(&mut client, "the writer's counters")?;
        let progress = Arc::new(AtomicU64::new(0));
        let deadline = Instant::now() + opts.timeout;
        let job = ClientWrite {
            bytes: opts.bytes,
            chunk,
            depth: opts.depth,
            seed: opts.seed,
            dst,
            deadline,
            progress: Arc::clone(&progress),
        };
        let thread = std::thread::Builder::new()
            .name(format!("lab-write-h{from}"))
            .spawn(move || job.run(client))
            .map_err(Error::io("starting the writer thread"))?;
        Ok(WriteRun {
            from,
            to,
            thread,
            progress,
            before,
            target_from,
            deadline,
        })
    }

    /// [`Lab::start_write`] and [`WriteRun::wait`].
    pub fn write(&mut self, from: usize, to: usize, opts: &WriteOpts) -> Result<WriteResult> {
        let w = self.start_write(from, to, opts)?;
        w.wait(self)
    }
}

/// How [`Lab::write`] writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOpts {
    /// Bytes in all.
    pub bytes: u64,
    /// Bytes per write operation.
    pub chunk: u64,
    /// Operations in flight.
    pub depth: usize,
    /// Test pattern seed.
    pub seed: u64,
    /// Give up after this long.
    pub timeout: Duration,
}

impl Default for WriteOpts {
    fn default() -> Self {
        Self {
            bytes: 1 << 20,
            chunk: 1 << 20,
            depth: 16,
            seed: 1,
            timeout: Duration::from_secs(300),
        }
    }
}

/// A write in progress ([`Lab::start_write`]).
#[derive(Debug)]
pub struct WriteRun {
    from: usize,
    to: usize,
    thread: std::thread::JoinHandle<Result<Written>>,
    progress: Arc<AtomicU64>,
    before: serde_json::Value,
    target_from: usize,
    deadline: Instant,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WriteResult {
    /// Bytes written.
    pub bytes: u64,
    /// Seconds the writer measured (first submit to last completion).
    pub seconds: f64,
    /// Goodput, Gb/s.
    pub gbps: f64,
    /// The writer's xxh3 of what it wrote.
    pub xxh3: String,
    /// The target's xxh3 of its region after the write (equal when the
    /// write landed intact).
    pub target_xxh3: String,
    /// The writer's retransmits during the write (its daemon's counters,
    /// all workers, after minus before).
    pub retransmits: u64,
    /// The writer's retransmission timeouts during the write.
    pub rtos: u64,
    /// Data packets the writer sent during the write.
    pub tx_data: u64,
    /// CPU-seconds the whole machine spent busy over the transfer (both
    /// hosts, kernel included; [`cpu::CpuSample`]), if `/proc/stat` was
    /// readable.
    pub machine_cpu_seconds: Option<f64>,
    /// The writer daemon's counters after the write (`uet stats`).
    pub stats: serde_json::Value,
}

impl WriteResult {
    /// Whether the target's hash equals the writer's.
    pub fn verified(&self) -> bool {
        self.xxh3 == self.target_xxh3
    }
}

/// Sums a PDS counter over every worker of a `uet stats` object.
pub fn sum_pds(stats: &serde_json::Value, k: &str) -> u64 {
    stats["workers"]
        .as_array()
        .map_or(0, |ws| ws.iter().filter_map(|w| w["pds"][k].as_u64()).sum())
}

/// A daemon's counters (`uet stats`), `what` naming them for errors.
fn stats_json(c: &mut uet_api::Client, what: &str) -> Result<serde_json::Value> {
    let text = c
        .stats()
        .map_err(Error::client(format!("reading {what}")))?;
    serde_json::from_str(&text).map_err(Error::json(format!("parsing {what}")))
}

/// The writer thread's job: one client's writes of the test pattern.
#[derive(Debug)]
struct ClientWrite {
    bytes: u64,
    chunk: u32,
    depth: usize,
    seed: u64,
    dst: uet_api::RemoteRegion,
    deadline: Instant,
    progress: Arc<AtomicU64>,
}

/// What the writer thread reports.
#[derive(Debug)]
struct Written {
    xxh3: u64,
    seconds: f64,
    cpu_seconds: Option<f64>,
    after: serde_json::Value,
}

impl ClientWrite {
    fn run(self, mut c: uet_api::Client) -> Result<Written> {
        use uet_api::{Event, Status};
        let src = c
            .create_region(self.bytes)
            .map_err(Error::io("creating the source memfd"))?;
        // The test pattern, hashed as it is written.
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut off = 0;
        while off < self.bytes {
            let n = (self.bytes - off).min(buf.len() as u64) as usize;
            uetd::mem::pattern(self.seed, off, &mut buf[..n]);
            src.write_at(off, &buf[..n])
                .map_err(Error::io("filling the source memfd"))?;
            h.update(&buf[..n]);
            off += n as u64;
        }
        drop(buf);
        let local = c
            .register_local(&src)
            .map_err(Error::client("registering the source"))?;
        let chunk = u64::from(self.chunk);
        let chunks = self.bytes.div_ceil(chunk);
        let len = |i: u64| (self.bytes - i * chunk).min(chunk) as u32;
        let mut in_flight = std::collections::HashMap::new();
        let (mut next, mut done) = (0u64, 0u64);
        let cpu = cpu::CpuSample::now().ok();
        let start = Instant::now();
        while done < chunks {
            // Every chunk but the last first; the last, carrying the
            // verification request, once the others completed (delivery
            // complete), so the target hashes a region that is whole.
            while in_flight.len() < self.depth && next + 1 < chunks {
                let t = c
                    .write(
                        local.at(next * chunk),
                        self.dst.at(next * chunk),
                        len(next),
                        None,
                    )
                    .map_err(Error::client("submitting a write"))?;
                in_flight.insert(t, next);
                next += 1;
            }
            if next + 1 == chunks && done + 1 == chunks {
                let hd = VERIFY_TAG | self.bytes;
                let t = c
                    .write(
                        local.at(next * chunk),
                        self.dst.at(next * chunk),
                        len(next),
                        Some(hd),
                    )
                    .map_err(Error::client("submitting the last write"))?;
                in_flight.insert(t, next);
                next += 1;
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            let ev = match c.wait_event(Some(left)) {
                Err(uet_api::ClientError::Timeout) => {
                    return Err(Error::Timeout {
                        awaiting: "the writes to complete".into(),
                        state: format!(
                            "{done} of {chunks} done after {:.1} s",
                            start.elapsed().as_secs_f64()
                        ),
                    });
                }
                r => r.map_err(Error::client("waiting for completions"))?,
            };
            let Event::Completion(cmp) = ev else { continue };
            let Some(i) = in_flight.remove(&cmp.tag) else {
                continue;
            };
            if cmp.status != Status::Ok {
                return Err(Error::Operation {
                    what: format!(
                        "write {i} of {chunks} (after {:.3} s)",
                        start.elapsed().as_secs_f64()
                    ),
                    status: format!("{:?}", cmp.status),
                });
            }
            done += 1;
            self.progress
                .fetch_add(u64::from(len(i)), Ordering::Relaxed);
        }
        let seconds = start.elapsed().as_secs_f64();
        let cpu_seconds = cpu.and_then(|c| c.busy_seconds().ok());
        let after = stats_json(&mut c, "the writer's counters")?;
        let _ = c.close();
        Ok(Written {
            xxh3: h.digest(),
            seconds,
            cpu_seconds,
            after,
        })
    }
}

impl WriteRun {
    /// Bytes whose writes completed so far.
    pub fn progress(&self) -> u64 {
        self.progress.load(Ordering::Relaxed)
    }

    /// Whether the writer has finished (either way).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for the writer's result and the target's verification.
    pub fn wait(self, lab: &mut Lab) -> Result<WriteResult> {
        let w = self
            .thread
            .join()
            .map_err(|_| Error::Panicked("writer".into()))?
            .map_err(Error::during(format!(
                "the write from host {} to host {}",
                self.from, self.to
            )))?;
        let src = lab.state.hosts[self.from].ip.to_string();
        let d = lab.daemons[self.to].as_mut().ok_or_else(|| {
            Error::invalid("lab write", format!("host {}'s daemon is gone", self.to))
        })?;
        let child = &mut d.child;
        let (_, v) = d
            .log
            .wait(
                self.target_from,
                |l| {
                    l.contains(r#""event":"verified""#)
                        && l.contains(&format!(r#""source":"{src}""#))
                },
                self.deadline.max(Instant::now() + Duration::from_secs(10)),
                || child_alive(child),
            )
            .map_err(|e| Error::Daemon {
                host: self.to,
                what: "did not report the verification".into(),
                source: Box::new(e),
            })?;
        let verified: serde_json::Value = serde_json::from_str(&v).map_err(Error::json(
            format!("parsing host {}'s verification {v}", self.to),
        ))?;
        let delta = |k: &str| sum_pds(&w.after, k).saturating_sub(sum_pds(&self.before, k));
        let bytes = self.progress.load(Ordering::Relaxed);
        let target_bytes = verified["bytes"].as_u64().unwrap_or_default();
        if target_bytes != bytes {
            return Err(Error::Check(format!(
                "the target verified {target_bytes} bytes, the writer wrote {bytes}"
            )));
        }
        Ok(WriteResult {
            bytes,
            seconds: w.seconds,
            gbps: bytes as f64 * 8.0 / w.seconds / 1e9,
            xxh3: format!("{:016x}", w.xxh3),
            target_xxh3: verified["xxh3"].as_str().unwrap_or_default().to_owned(),
            retransmits: delta("tx_retransmits"),
            rtos: delta("rtos"),
            tx_data: delta("tx_data"),
            machine_cpu_seconds: w.cpu_seconds,
            stats: w.after,
        })
    }
}

/// SIGTERM, up to 5 s to exit, then SIGKILL; reaps it.
fn terminate(c: &mut Child) {
    if child_alive(c) {
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while child_alive(c) && Instant::now() < deadline {
            std::thread::park_timeout(Duration::from_millis(5));
        }
    }
    let _ = c.kill();
    let _ = c.wait();
}

fn deactivate(name: &str) {
    ACTIVE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .retain(|n| n != name);
}

impl Drop for Lab {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        for d in self.daemons.iter_mut().flatten() {
            terminate(&mut d.child);
        }
        if let Err(e) = teardown(&self.state) {
            eprintln!("lab {}: {e:#}", self.state.name);
        }
        deactivate(&self.state.name);
        // The NetNs handles drop now; their namespaces are already gone.
    }
}

/// Whether `pid` is a process of lab `name` (its environment says so): a
/// pid from a state file may have been reused since.
fn is_lab_process(pid: u32, name: &str) -> bool {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let want = format!("UET_LAB={name}");
    env.split(|&b| b == 0).any(|v| v == want.as_bytes())
}

fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie (state Z, after the command name in parentheses) has
        // exited and only waits for its parent.
        Ok(s) => s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

/// Removes what `state` records: stops its processes, deletes its
/// namespaces, BPF pins, logs and state file. Errors are collected; every
/// step is tried.
fn teardown(state: &LabState) -> Result<()> {
    let mut errors = Vec::new();
    let pids: Vec<u32> = state
        .hosts
        .iter()
        .filter_map(|h| h.daemon_pid)
        .chain(state.pids.iter().copied())
        .filter(|&p| is_lab_process(p, &state.name))
        .collect();
    for sig in ["-TERM", "-KILL"] {
        let live: Vec<u32> = pids.iter().copied().filter(|&p| !process_gone(p)).collect();
        if live.is_empty() {
            break;
        }
        for p in &live {
            let _ = Command::new("kill").args([sig, &p.to_string()]).status();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while live.iter().any(|&p| !process_gone(p)) && Instant::now() < deadline {
            std::thread::park_timeout(Duration::from_millis(5));
        }
    }
    for ns in state.namespaces() {
        if Path::new("/run/netns").join(&ns).exists()
            && let Err(e) = run(Command::new("ip").args(["netns", "del", &ns]))
        {
            errors.push(e.chain());
        }
    }
    if let Some(p) = &state.pins
        && p.exists()
        && let Err(e) = std::fs::remove_dir_all(p)
    {
        errors.push(format!("removing {}: {e}", p.display()));
    }
    if std::env::var_os("UET_LAB_KEEP_LOGS").is_none() && state.log_dir.exists() {
        let _ = std::fs::remove_dir_all(&state.log_dir);
    }
    let _ = std::fs::remove_file(LabState::path(&state.name));
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Teardown {
            lab: state.name.clone(),
            errors,
        })
    }
}

/// Removes lab `name` (`uet lab down --name`), from its state file.
pub fn down(name: &str) -> Result<()> {
    check_name(name)?;
    let state = LabState::load(name)?;
    teardown(&state)
}

/// The names of every lab with a state file.
pub fn list() -> Result<Vec<String>> {
    let mut names = Vec::new();
    let dir = match std::fs::read_dir(STATE_DIR) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(names),
        Err(e) => return Err(Error::io(format!("listing {STATE_DIR}"))(e)),
    };
    for e in dir {
        let p = e.map_err(Error::io(format!("listing {STATE_DIR}")))?.path();
        if p.extension().is_some_and(|x| x == "json")
            && let Some(stem) = p.file_stem().and_then(|s| s.to_str())
        {
            names.push(stem.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// Removes every lab with a state file (`uet lab down --all`); returns
/// their names.
pub fn down_all() -> Result<Vec<String>> {
    let names = list()?;
    let mut errors = Vec::new();
    for n in &names {
        if let Err(e) = down(n) {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(names)
    } else {
        Err(Error::Teardowns(errors))
    }
}

/// Switches the impairment program of the lab `state` describes.
pub fn impair_state(state: &LabState, imp: &Impairment) -> Result<()> {
    let receiver = receiver(state)?.port_ifindex;
    bpf::ImpairMaps::open(pins(state)?)?.configure(imp, receiver, state.detour_ifindex)
}

/// The BPF pins of the lab `state` describes.
fn pins(state: &LabState) -> Result<&Path> {
    state
        .pins
        .as_deref()
        .ok_or_else(|| Error::invalid("lab state", format!("lab {} has no BPF pins", state.name)))
}

/// The receiver (host 0) of the lab `state` describes.
fn receiver(state: &LabState) -> Result<&HostState> {
    state
        .hosts
        .first()
        .ok_or_else(|| Error::invalid("lab state", format!("lab {} has no hosts", state.name)))
}

/// One sample of the bottleneck: the TBF's counters and the ECN marker's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sample {
    /// The qdisc on the receiver's port.
    pub qdisc: QdiscStats,
    /// The ECN marker (its virtual backlog read right after the qdisc).
    pub ecn: EcnCounters,
}

/// Reads the bottleneck queue (rtnetlink, in the switch namespace) and the
/// ECN program's maps (pinned); one [`Sampler::sample`] is three syscalls
/// per source and takes microseconds, so ≥ 1 kHz sampling is cheap.
pub struct Sampler {
    qdisc: qdisc::QdiscReader,
    ecn: bpf::EcnMaps,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler").finish_non_exhaustive()
    }
}

impl Sampler {
    /// Opens the readers of the lab `state` describes (any process).
    pub fn open(state: &LabState) -> Result<Self> {
        let sw = state.switch.clone().ok_or_else(|| {
            Error::invalid("lab state", format!("lab {} has no switch", state.name))
        })?;
        let ifindex = receiver(state)?.port_ifindex;
        let file = File::open(Path::new("/run/netns").join(&sw))
            .map_err(Error::io(format!("opening namespace {sw}")))?;
        let qdisc = std::thread::spawn(move || -> Result<qdisc::QdiscReader> {
            uetd::sys::ns::enter_net_ns(&file)
                .map_err(std::io::Error::from)
                .map_err(Error::io(format!("entering the switch namespace {sw}")))?;
            qdisc::QdiscReader::open(ifindex)
        })
        .join()
        .map_err(|_| Error::Panicked("switch namespace".into()))??;
        let ecn = bpf::EcnMaps::open(pins(state)?)?;
        Ok(Self { qdisc, ecn })
    }

    /// The bottleneck qdisc's counters now.
    pub fn qdisc(&self) -> Result<QdiscStats> {
        self.qdisc.read()
    }

    /// The ECN marker's counters and virtual backlog now.
    pub fn ecn(&self) -> Result<EcnCounters> {
        self.ecn.read(uetd::sys::mem::monotonic_ns())
    }

    /// Both.
    pub fn sample(&self) -> Result<Sample> {
        let qdisc = self.qdisc()?;
        let ecn = self.ecn.read(qdisc.t_ns)?;
        Ok(Sample { qdisc, ecn })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trimming_bottleneck_gives_its_tbf_room_for_trims_and_a_late_host() {
        // Drop-tail: the TBF is the buffer.
        assert_eq!(tbf_limit(36_000, false, 100_000_000), 36_000);
        // Trimming at 100 Mb/s: 512 trimmed frames of 106 bytes and 10 ms
        // of data (125,000 bytes) beyond it.
        assert_eq!(
            tbf_limit(36_000, true, 100_000_000),
            36_000 + 54_272 + 125_000
        );
        let cfg = LabConfig {
            bottleneck: Some(1_000_000_000),
            buffer: Some(60_000),
            trim: true,
            ..LabConfig::default()
        };
        assert_eq!(cfg.tbf_limit(), Some(60_000 + 54_272 + 1_250_000));
    }

    #[test]
    fn a_daemon_stderr_summary_keeps_the_error_ahead_of_its_backtrace() {
        let mut err = String::from("Error: opening AF_XDP sockets on queue 0\n\nCaused by:\n");
        for i in 0..20 {
            err.push_str(&format!("  {i}: frame\n"));
        }
        let s = stderr_summary(&err);
        assert!(s.contains("Error: opening AF_XDP sockets"), "{s}");
        assert!(s.contains("19: frame") && !s.contains("  7: frame"), "{s}");
        assert_eq!(stderr_summary("one\ntwo"), r#"["one", "two"]"#);
    }

    #[test]
    fn a_config_that_cannot_work_is_refused_before_anything_is_built() {
        let e = Lab::up(LabConfig {
            hosts: 1,
            ..LabConfig::default()
        })
        .unwrap_err();
        assert!(
            matches!(&e, Error::Invalid { what: "lab config", why } if why.contains("at least 2")),
            "{e:?}"
        );
        let e = Lab::up(LabConfig {
            ecn: Some((1000, 2000)),
            ..LabConfig::default()
        })
        .unwrap_err();
        assert!(
            e.to_string().contains("ECN marking needs a bottleneck"),
            "{e}"
        );
        for bad in [
            LabConfig {
                direct: true,
                hosts: 3,
                ..LabConfig::default()
            },
            LabConfig {
                direct: true,
                bottleneck: Some(1_000_000_000),
                ..LabConfig::default()
            },
        ] {
            let e = Lab::up(bad).unwrap_err();
            assert!(
                e.to_string().contains("a direct lab (one veth pair)"),
                "{e}"
            );
        }
    }

    #[test]
    fn an_unknown_or_malformed_lab_name_says_which() {
        let e = down("no such lab").unwrap_err();
        assert!(
            matches!(
                &e,
                Error::Invalid {
                    what: "lab name",
                    ..
                }
            ),
            "{e:?}"
        );
        let name = format!("uet-t-absent-{}", std::process::id());
        let e = LabState::load(&name).unwrap_err();
        let Error::NoLab {
            name: n, source, ..
        } = &e
        else {
            panic!("{e:?}");
        };
        assert_eq!(n, &name);
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        assert!(
            e.to_string().starts_with(&format!("no lab {name:?}")),
            "{e}"
        );
    }

    /// A log file of its own for one test.
    fn log_file(tag: &str, stdout: &str, stderr: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("uet-lab-log-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("h0.log");
        std::fs::write(&log, stdout).unwrap();
        std::fs::write(log.with_extension("err"), stderr).unwrap();
        log
    }

    #[test]
    fn a_wait_on_a_log_ends_with_the_line_or_says_why_with_the_log_tail() {
        let log = log_file(
            "wait",
            "{\"event\":\"a\"}\n{\"event\":\"b\"}\n",
            "bind failed\n",
        );
        let mut r = LogReader::new(log.clone());
        let soon = Instant::now() + Duration::from_secs(5);
        let (i, l) = r.wait(0, |l| l.contains("\"b\""), soon, || true).unwrap();
        assert_eq!((i, l.as_str()), (1, "{\"event\":\"b\"}"));

        let e = r
            .wait(0, |l| l.contains("exposed"), soon, || false)
            .unwrap_err();
        let Error::Exited { log: tail } = &e else {
            panic!("{e:?}");
        };
        assert!(
            tail.contains("bind failed") && tail.contains("event"),
            "{tail}"
        );

        let e = r
            .wait(0, |l| l.contains("exposed"), Instant::now(), || true)
            .unwrap_err();
        let Error::Timeout { awaiting, state } = &e else {
            panic!("{e:?}");
        };
        assert!(awaiting.contains(&log.display().to_string()), "{awaiting}");
        assert!(state.contains("bind failed"), "{state}");
        std::fs::remove_dir_all(log.parent().unwrap()).unwrap();
    }

    #[test]
    fn the_chain_names_the_step_then_each_cause() {
        let e = Error::Daemon {
            host: 2,
            what: "did not come up".into(),
            source: Box::new(Error::Exited {
                log: "stderr: [\"no such interface\"]".into(),
            }),
        };
        assert_eq!(
            e.chain(),
            "uetd in host 2 did not come up: the process exited; stderr: [\"no such interface\"]"
        );
        let e = Error::during("installing the TBF bottleneck")(Error::Io {
            what: "running tc".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
        assert_eq!(
            e.chain(),
            "installing the TBF bottleneck: running tc: entity not found"
        );
    }
}
