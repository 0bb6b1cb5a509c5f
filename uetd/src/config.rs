//! The daemon's configuration: a TOML file, overridden by flags
//! (`uetd --help`). Every field has a default, so an empty file (or none)
//! plus `--interface` is a working configuration.
//!
//! ```toml
//! interface = "eth1"      # the NIC (required for the xdp backend)
//! backend = "xdp"         # xdp | udp
//! address = "10.0.0.1"    # default: the interface's first address
//! port = 4793             # UDP destination port of UET
//! workers = 1             # one per NIC queue (xdp); pinned when `pin`
//! cc = "rccc"             # none | nscc | rccc | nscc+rccc | pft
//! link_rate = "10G"       # bits/s the congestion control plans for
//! base_rtt_us = 50        # idle round trip the congestion control plans for
//! # fabric_rtt_us = 20    # the fabric's part of it, NSCC's delay target (default: base_rtt_us)
//! trimming = false        # the fabric's switches trim packets instead of dropping them
//! rccc_ecn_rate = true    # RCCC's pacer slows while the data arrives ECN-marked
//! pdc_idle_ms = 2000      # a PDC idle this long closes (its CC state with the last one)
//! rto_silent_us = 20000   # least RTO while the peer answers nothing sent since (0: off)
//! # profile = "refprov"   # the UEC reference provider's wire choices (below)
//! encap = "udp"           # udp (UDP to `port`) | ip (IP protocol `ip_protocol`)
//! ip_protocol = 253       # IP protocol number of native-IP UET
//! crc_trailer = false     # CRC32C trailer on every packet
//!
//! # Limits of the control socket (defaults shown): connections in all
//! # and per uid (SO_PEERCRED), the time a connection has to say Hello,
//! # and per client the registrations (remote and local together) and
//! # their bytes.
//! api_max_clients = 256
//! api_max_clients_per_uid = 64
//! api_hello_timeout_ms = 5000
//! api_max_registrations = 1024
//! api_max_registered_bytes = "16GiB"
//! busy_poll_us = 200        # an idle worker polls at most this long before it sleeps
//! worker_slice_us = 0       # a worker's scheduler slice, µs (0: the kernel's)
//! udp_offload = true        # udp backend: GSO sends of runs, GRO receives
//! udp_socket_buffer = "4MiB"  # udp backend: each socket's receive and send buffer
//! # ev_burst = 1            # packets per EV (default: a GSO send's worth with udp offloads)
//! # metrics_addr = "127.0.0.1:9464"  # serve /metrics (Prometheus) here
//!
//! # tss_start = "0rtt"    # secure PDC start: 0rtt (EXPECTED_0RTT_START) | 1rtt
//!
//! [[tss]]                 # the security domain of a job (docs/security.md)
//! job = 1
//! sdi = 0x10
//! key_file = "/etc/uet/job1.key"   # 32 raw bytes or 64 hex digits, mode 0600
//! # mode = "direct"       # direct | cluster
//! # epoch = 0
//! # rekey = true          # cluster mode: a new packet key every 256 packets
//! # replay_window = 1024
//! # ssi = 0x100           # needed with workers > 1: worker w sends as ssi + w
//!
//! [[expose]]              # regions the daemon itself exposes (tests, demos)
//! ri = 1
//! key = 0x5eed
//! size = "1GiB"
//! ```

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// Why a configuration was refused. Every culprit is the configuration
/// itself (its file, its text, or a value that parses but cannot work),
/// so each message names the setting and what it may be.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file's contents were refused.
    #[error("in {}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<Self>,
    },
    /// Not TOML, an unknown key, or a value of the wrong type or unit.
    #[error(transparent)]
    Toml(#[from] toml::de::Error),
    /// A congestion-control mode that does not exist.
    #[error("unknown cc {0:?} (none, nscc, rccc, nscc+rccc, pft)")]
    UnknownCc(String),
    /// A value that parses but cannot work.
    #[error("{0}")]
    Invalid(String),
}

/// Refuses the configuration with a formatted reason.
macro_rules! refuse {
    ($($t:tt)*) => {
        return Err(ConfigError::Invalid(format!($($t)*)))
    };
}

use serde::Deserialize;
use uet_pds::CcMode;
use uet_wire::encap::EncapConfig;

/// Which datapath.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// AF_XDP rings fed by the XDP steering program (root).
    Xdp,
    /// Kernel UDP sockets (no privileges).
    Udp,
}

/// How UET rides on IP (`docs/protocol-notes.md` §1). Both ends must agree:
/// nothing on the wire says which was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Encap {
    /// UDP to the UET port; the source port carries the entropy value.
    Udp,
    /// Directly over IP (protocol `ip_protocol`, 253 by default) behind the
    /// 4-byte entropy header, as the UEC reference provider sends it.
    Ip,
}

/// A preset of wire choices, so a user need not know the list. Settings
/// given explicitly (file or flags) win over the profile's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// The UEC reference provider (`ultraethernet/uet-ref-prov`): native IP
    /// with protocol 253, the CRC32C trailer on (it adds one whenever TSS
    /// is off), and its DSCPs — CS0 for requests, EF (46) for ACKs and
    /// control — which are the daemon's defaults already
    /// (`docs/protocol-notes.md` §1).
    Refprov,
}

/// How a PDC in a security domain agrees its Start_PSN
/// (`docs/protocol-notes.md` §2.12 "Secure PDCs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum TssStart {
    /// EXPECTED_0RTT_START: a new PDC starts at once, at the Start_PSN the
    /// target's last closing ACK named; the target refuses an older one
    /// (NEW_START_PSN) and the PDC starts again from its floor.
    #[default]
    #[serde(rename = "0rtt")]
    ZeroRtt,
    /// RANDOM_1RTT_START: the target names every secure PDC's Start_PSN
    /// (one round trip before data is placed).
    #[serde(rename = "1rtt")]
    OneRtt,
}

impl From<TssStart> for uet_pds::SecureStart {
    fn from(s: TssStart) -> Self {
        match s {
            TssStart::ZeroRtt => Self::Expected0Rtt,
            TssStart::OneRtt => Self::Random1Rtt,
        }
    }
}

/// How the XDP program attaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum XdpAttach {
    /// Native (driver) mode, generic if the driver refuses.
    #[default]
    Auto,
    /// Driver mode only.
    Native,
    /// Generic (skb) mode.
    Generic,
}

/// A region the daemon exposes by itself.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expose {
    /// `job_id` (default 1).
    #[serde(default = "one")]
    pub job: u32,
    /// `pid_on_fep` (default 0).
    #[serde(default)]
    pub pid: u16,
    /// `resource_index`.
    pub ri: u16,
    /// Memory key.
    pub key: u64,
    /// Bytes (`"1GiB"`, `"64K"`, or a number).
    pub size: Size,
}

fn one() -> u32 {
    1
}

/// A byte count written with an optional suffix. K, M, G and T are powers
/// of 1024 (as in iperf3's and perftest's sizes), and so are KiB, MiB, GiB
/// and TiB; a trailing `B` is optional: `4K` = `4KB` = `4KiB` = 4096.
/// Rates are [`Rate`]s, whose K, M and G are powers of 1000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "SizeRepr")]
pub struct Size(pub u64);

/// A rate in bits/s written with an optional suffix: K, M, G and T are
/// powers of 1000 (`10G` = 10^10 b/s), Ki, Mi, Gi powers of 1024; a
/// trailing `b`, `b/s` or `bps` is optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "SizeRepr")]
pub struct Rate(pub u64);

#[derive(Deserialize)]
#[serde(untagged)]
enum SizeRepr {
    N(u64),
    S(String),
}

impl TryFrom<SizeRepr> for Size {
    type Error = String;
    fn try_from(r: SizeRepr) -> Result<Self, String> {
        match r {
            SizeRepr::N(n) => Ok(Self(n)),
            SizeRepr::S(s) => s.parse(),
        }
    }
}

impl TryFrom<SizeRepr> for Rate {
    type Error = String;
    fn try_from(r: SizeRepr) -> Result<Self, String> {
        match r {
            SizeRepr::N(n) => Ok(Self(n)),
            SizeRepr::S(s) => s.parse(),
        }
    }
}

/// A number and its suffix; `decimal` says whether the bare K/M/G/T
/// suffixes are powers of 1000 (rates) or of 1024 (byte counts).
fn parse_scaled(s: &str, decimal: bool) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num: f64 = num.parse().map_err(|_| format!("not a size: {s:?}"))?;
    let unit = unit.trim();
    let unit = unit
        .strip_suffix("ps")
        .or_else(|| unit.strip_suffix("/s"))
        .unwrap_or(unit)
        .trim_end_matches(['b', 'B']);
    let base: u64 = if decimal { 1000 } else { 1024 };
    let exp = match unit {
        "" => 0,
        "K" | "k" | "Ki" => 1,
        "M" | "Mi" => 2,
        "G" | "g" | "Gi" => 3,
        "T" | "Ti" => 4,
        u => return Err(format!("unknown unit {u:?} in {s:?}")),
    };
    let mult = if unit.ends_with('i') { 1024u64 } else { base }.pow(exp);
    let v = num * mult as f64;
    if !v.is_finite() || v >= u64::MAX as f64 {
        return Err(format!("{s:?} is too large"));
    }
    Ok(v.round() as u64)
}

impl std::str::FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_scaled(s, false).map(Self)
    }
}

impl std::str::FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_scaled(s, true).map(Self)
    }
}

/// The daemon's configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The interface UET runs on.
    pub interface: Option<String>,
    /// Datapath.
    pub backend: Backend,
    /// The FEP address (default: the interface's first address).
    pub address: Option<IpAddr>,
    /// UDP destination port of UET.
    pub port: u16,
    /// Worker threads (xdp: one per NIC queue, queues 0..workers).
    pub workers: usize,
    /// Pin worker i to CPU i.
    pub pin: bool,
    /// IP MTU (default: the interface's, 1500 without one).
    pub mtu: Option<usize>,
    /// AF_XDP frame size (2048 or 4096).
    pub frame_size: usize,
    /// AF_XDP UMEM frames per worker (a power of two). The default, 16384
    /// (64 MiB of 4 KiB frames), keeps the fill ring stocked through a
    /// receiver's scheduling gaps: with 4096 frames and 2048-entry rings, a
    /// 1 GiB write on veth lost bursts at the receiving socket and paid
    /// 7–386 RTOs per run; with these, 0–3 (BENCHMARKS.md "Datapath").
    pub umem_frames: u32,
    /// RX and TX ring entries (a power of two); the fill and completion
    /// rings get twice as many.
    pub ring_size: u32,
    /// XDP attach mode.
    pub xdp_attach: XdpAttach,
    /// Force AF_XDP copy mode (veth and drivers without zero-copy use it
    /// anyway).
    pub xdp_copy: bool,
    /// Congestion control.
    pub cc: String,
    /// The bottleneck rate congestion control plans for, bits/s.
    pub link_rate: Rate,
    /// The idle round trip congestion control plans for, µs: the loop a
    /// window or a credit bound must cover, the hosts' time in it included.
    pub base_rtt_us: u64,
    /// The fabric's idle round trip without the hosts' time, µs: NSCC's
    /// target delay and the thresholds derived from it (its delay samples
    /// are timed from arrival stamps, so they hold the fabric's delay
    /// alone). `None`: `base_rtt_us`, as the spec has one base RTT.
    pub fabric_rtt_us: Option<u64>,
    /// The fabric's switches trim a packet they cannot queue instead of
    /// dropping it (UET packet trimming): NSCC then takes the spec's
    /// parameters for a trimming fabric — a target delay of 0.75 × the
    /// base RTT, quick adapt off — since a loss is a NACK one queue away
    /// rather than a timeout (`docs/protocol-notes.md`). Every daemon
    /// recognises trimmed packets either way; this only tunes NSCC.
    pub trimming: bool,
    /// RCCC's receiver scales its pacer's rate down while the data it
    /// receives arrives ECN-CE marked, and back up when it does not
    /// (`uet_cms::rccc::EcnRate`, updated once per `base_rtt_us`): a
    /// bottleneck that marks ahead of the receiver, or one its senders'
    /// hosts fill in bursts, keeps no standing queue. Without marks on the
    /// path (the spec recommends none at RCCC's last hop) it changes
    /// nothing.
    pub rccc_ecn_rate: bool,
    /// log2 of the entropy (EV) space.
    pub ev_bits: u8,
    /// PSN tracking window (MP_RANGE) in packets; bounds a PDC's packets in
    /// flight. The spec's REFPROV default is 128; the daemon's default,
    /// 1024, keeps a single flow from being window-bound when the round
    /// trip includes scheduling delay (veth, shared cores). A multiple of
    /// 128 (the wire carries MPR in units of 128).
    pub mp_range: u32,
    /// The window of cc = "none" (bytes in flight per destination).
    pub window: Size,
    /// First retransmission timeout (RTO_INIT_TIME), µs.
    pub rto_init_us: u64,
    /// The least RTO of a packet while the destination has answered
    /// nothing sent after it, µs (`uet_pds::PdsConfig::rto_silent`; 0:
    /// off, RTO_INIT_TIME then too). A host that stops
    /// running the target's daemon for longer than RTO_INIT_TIME (a busy
    /// machine, a VM whose vCPU the hypervisor takes away for 5–50 ms)
    /// would otherwise have every such stall resend a packet that was not
    /// lost. Losses on a path that answers are found by SACK, RACK and tail
    /// probes without waiting for it; a dead peer is found this
    /// much later (the retry budget backs off from it).
    pub rto_silent_us: u64,
    /// A PDC with nothing in flight and nothing queued for this long
    /// closes, ms; its congestion-control state goes with the last PDC
    /// toward that peer.
    pub pdc_idle_ms: u64,
    /// Seed of the endpoints' randomness (default: from the OS).
    pub seed: Option<u64>,
    /// Control socket path.
    pub socket: PathBuf,
    /// Where to serve the counters over HTTP at `/metrics`, in the
    /// Prometheus text format (`docs/metrics.md`); default: not served.
    /// Port 0 takes a free port (the daemon prints which).
    pub metrics_addr: Option<SocketAddr>,
    /// The job every application client is granted (clients cannot pick
    /// one; their operations may only address regions of this job).
    pub api_job: u32,
    /// Most control connections at once, all uids together (default
    /// 256). Connections that have not said `Hello` count too; at the
    /// limit a new connection replaces the oldest of those, or is refused.
    pub api_max_clients: usize,
    /// Most control connections of one uid (`SO_PEERCRED`) at once
    /// (default 64, below `api_max_clients` so one uid cannot take every
    /// slot). At the limit a new connection of that uid replaces its
    /// oldest one that has not said `Hello`, or is refused.
    pub api_max_clients_per_uid: usize,
    /// Milliseconds a new connection has to say `Hello` before it is
    /// closed (default 5000).
    pub api_hello_timeout_ms: u64,
    /// Microseconds an idle worker keeps polling before it sleeps, at
    /// most (default 200; 0 sleeps at once; at most 100000; also
    /// `uetd --busy-poll-us`). The spell adapts below it: it shrinks to
    /// nothing while work comes back later than this after a sleep, and
    /// grows back while it comes back sooner (`worker::IdlePolicy`).
    /// Longer cuts the latency of sparse operations, at the cost of CPU
    /// after each burst.
    pub busy_poll_us: u64,
    /// Microseconds of CPU the kernel's fair scheduler gives a worker
    /// thread per turn (also `uetd --worker-slice-us`; default 0, the
    /// kernel's own, 1.4 ms on two CPUs with Linux 6.18; else 100..=100000, 100
    /// being the kernel's least). A thread with a shorter slice than the
    /// one running is picked sooner when it wakes: a worker woken by a
    /// packet or its pacer's timer on a CPU that other work keeps busy
    /// runs within about its own slice instead of after the other's. Its
    /// share of the CPU stays the same, so this helps a worker that needs
    /// less than its share (an RCCC receiver's pacer among busy threads);
    /// one that needs more is cut into shorter turns. Linux ≥ 6.12 (EEVDF
    /// custom slices; older kernels keep their default, said in the log);
    /// a worker started real-time (`chrt`) is left so.
    pub worker_slice_us: u64,
    /// The udp backend's segmentation offloads (default on; also `uetd
    /// --udp-offload`): consecutive datagrams that leave by one EV's
    /// socket to one peer go out as one UDP GSO send, and the receive
    /// socket takes datagrams the kernel coalesced (GRO). Off with the
    /// CRC trailer and native IP. Each EV has its own socket, so a run
    /// needs consecutive packets on one EV: see `ev_burst`.
    pub udp_offload: bool,
    /// The udp backend's socket buffers, receive and send (default 4 MiB;
    /// 64 KiB..=1 GiB). As root the daemon sets them past the kernel's
    /// `rmem_max`/`wmem_max`; otherwise the kernel caps them there. A
    /// receive buffer too small for the time the worker can be away shows
    /// as `rx_socket_drops` in `uet stats`.
    pub udp_socket_buffer: Size,
    /// Consecutive packets of a destination that leave on one EV before
    /// the next is picked (also `uetd --ev-burst`; 1..=1024). Default:
    /// with the udp backend's offloads on and more than one EV, as many
    /// as one GSO send carries (64 datagrams and 64 KiB: 44 at MTU 1500),
    /// so the data is sprayed over the paths in runs (flowlets) that each
    /// leave by one send; otherwise 1, every packet sprayed on its own.
    /// A run ends early when its EV draws ECN, NACK or loss feedback.
    pub ev_burst: Option<u32>,
    /// Most regions one client holds registered at once, remote and local
    /// together (default 1024).
    pub api_max_registrations: usize,
    /// Most bytes one client holds registered at once, remote and local
    /// together (default 16 GiB); a registration past it is refused before
    /// it is mapped.
    pub api_max_registered_bytes: Size,
    /// Regions exposed by the daemon itself.
    pub expose: Vec<Expose>,
    /// Security domains, one per job (`docs/security.md`).
    pub tss: Vec<crate::tss::TssJob>,
    /// How secure PDCs agree their Start_PSN (both ends of a PDC need not
    /// agree: the target decides, the initiator follows).
    pub tss_start: TssStart,
    /// A preset of wire choices (`encap`, `ip_protocol`, `crc_trailer`);
    /// explicit settings win.
    pub profile: Option<Profile>,
    /// Encapsulation (default udp, or the profile's). One per daemon: see
    /// [`Config::encap_config`].
    pub encap: Option<Encap>,
    /// IP protocol number of native-IP UET (default 253).
    pub ip_protocol: Option<u8>,
    /// Add a CRC32C trailer to every packet sent and require a valid one on
    /// every packet received (default off, or the profile's).
    pub crc_trailer: Option<bool>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            interface: None,
            backend: Backend::Udp,
            address: None,
            port: uet_wire::encap::UET_UDP_PORT,
            workers: 1,
            pin: false,
            mtu: None,
            frame_size: 4096,
            umem_frames: 16384,
            ring_size: 4096,
            xdp_attach: XdpAttach::Auto,
            xdp_copy: false,
            cc: "none".into(),
            link_rate: Rate(10_000_000_000),
            base_rtt_us: 50,
            fabric_rtt_us: None,
            trimming: false,
            rccc_ecn_rate: true,
            ev_bits: 4,
            mp_range: 1024,
            window: Size(2 << 20),
            rto_init_us: 5_000,
            rto_silent_us: 20_000,
            pdc_idle_ms: 2_000,
            seed: None,
            socket: PathBuf::from("/run/uet/uetd.sock"),
            metrics_addr: None,
            api_job: 1,
            api_max_clients: 256,
            api_max_clients_per_uid: 64,
            api_hello_timeout_ms: 5_000,
            busy_poll_us: 200,
            worker_slice_us: 0,
            udp_offload: true,
            udp_socket_buffer: Size(4 << 20),
            ev_burst: None,
            api_max_registrations: 1024,
            api_max_registered_bytes: Size(16 << 30),
            expose: Vec::new(),
            tss: Vec::new(),
            tss_start: TssStart::default(),
            profile: None,
            encap: None,
            ip_protocol: None,
            crc_trailer: None,
        }
    }
}

impl Config {
    /// Reads a TOML file and checks it.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let c = Self::load_unchecked(path)?;
        c.check().map_err(|e| ConfigError::InFile {
            path: path.to_owned(),
            source: Box::new(e),
        })?;
        Ok(c)
    }

    /// Reads a TOML file without checking it: for a caller that lays
    /// flags over it first (an address given as a flag completes a file
    /// without one) and then calls [`Config::check`].
    pub fn load_unchecked(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::InFile {
            path: path.to_owned(),
            source: Box::new(e.into()),
        })
    }

    /// Parses TOML text and checks it.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let c: Self = toml::from_str(text)?;
        c.check()?;
        Ok(c)
    }

    /// The congestion-control mode.
    pub fn cc_mode(&self) -> Result<CcMode, ConfigError> {
        CcMode::parse(&self.cc).ok_or_else(|| ConfigError::UnknownCc(self.cc.clone()))
    }

    /// The encapsulation: explicit, else the profile's, else UDP.
    pub fn encap(&self) -> Encap {
        self.encap.unwrap_or(match self.profile {
            Some(Profile::Refprov) => Encap::Ip,
            None => Encap::Udp,
        })
    }

    /// Whether packets carry the CRC32C trailer: explicit, else the
    /// profile's, else no.
    pub fn crc_trailer(&self) -> bool {
        self.crc_trailer
            .unwrap_or(matches!(self.profile, Some(Profile::Refprov)))
    }

    /// The native-IP protocol number (default 253).
    pub fn ip_protocol(&self) -> u8 {
        self.ip_protocol.unwrap_or(uet_wire::encap::UET_IP_PROTOCOL)
    }

    /// The wire settings both backends frame and parse with.
    ///
    /// They hold for the whole daemon, not per peer: nothing in a UET 1.0
    /// packet says whether it ends in a trailer (`docs/protocol-notes.md` §9
    /// item 12), so a receiver must know beforehand, and a daemon's
    /// steering program and sockets take one encapsulation; the spec treats
    /// both as deployment choices, made for a whole fabric. A peer using
    /// the other settings is not guessed at: its frames are dropped and
    /// counted by reason (`rx_other_encap`, `rx_bad_crc`). A host that must
    /// serve both kinds runs two daemons on two addresses.
    pub fn encap_config(&self) -> EncapConfig {
        EncapConfig {
            udp_port: self.port,
            ip_protocol: self.ip_protocol(),
            crc_trailer: self.crc_trailer(),
            ..EncapConfig::default()
        }
    }

    /// Checks values that parse but cannot work.
    pub fn check(&self) -> Result<(), ConfigError> {
        self.cc_mode()?;
        if self.workers == 0 || self.workers > 64 {
            refuse!("workers must be 1..=64, not {}", self.workers);
        }
        if !matches!(self.frame_size, 2048 | 4096) {
            refuse!(
                "frame_size must be 2048 or 4096 (a power of two from AF_XDP's smallest chunk \
                 to a page), not {}",
                self.frame_size
            );
        }
        if self.mp_range == 0 || !self.mp_range.is_multiple_of(128) || self.mp_range > 128 * 255 {
            refuse!(
                "mp_range must be a multiple of 128 up to 32640, not {}",
                self.mp_range
            );
        }
        if self.window.0 < 4096 || self.window.0 > 1 << 30 {
            refuse!("window must be 4 KiB..1 GiB, not {}", self.window.0);
        }
        if !(10..=3_600_000).contains(&self.pdc_idle_ms) {
            refuse!("pdc_idle_ms must be 10..=3600000, not {}", self.pdc_idle_ms);
        }
        if !(100..=10_000_000).contains(&self.rto_init_us) {
            refuse!(
                "rto_init_us must be 100..=10000000, not {}",
                self.rto_init_us
            );
        }
        if self.rto_silent_us != 0 && !(100..=10_000_000).contains(&self.rto_silent_us) {
            refuse!(
                "rto_silent_us must be 0 (off) or 100..=10000000, not {}",
                self.rto_silent_us
            );
        }
        if !self.umem_frames.is_power_of_two() || !(512..=1 << 20).contains(&self.umem_frames) {
            refuse!(
                "umem_frames must be a power of two in 512..=1048576, not {}",
                self.umem_frames
            );
        }
        if !self.ring_size.is_power_of_two()
            || !(64..=1 << 16).contains(&self.ring_size)
            || self.ring_size * 2 > self.umem_frames
        {
            refuse!(
                "ring_size must be a power of two in 64..=65536 and at most umem_frames / 2, not {}",
                self.ring_size
            );
        }
        if let Some(p) = self.ip_protocol
            && matches!(p, 0 | 1 | 6 | 17 | 58)
        {
            refuse!(
                "ip_protocol {p} belongs to IP itself (0 hop-by-hop, 1 ICMP, 6 TCP, 17 UDP, \
                 58 ICMPv6); UET directly over IP uses 253 (RFC 3692 experimental) by default"
            );
        }
        if self.ev_bits > 10 {
            refuse!("ev_bits must be ≤ 10, not {}", self.ev_bits);
        }
        if !(1..=10_000_000).contains(&self.base_rtt_us) {
            refuse!("base_rtt_us must be 1..=10000000, not {}", self.base_rtt_us);
        }
        if let Some(f) = self.fabric_rtt_us
            && !(1..=self.base_rtt_us).contains(&f)
        {
            refuse!(
                "fabric_rtt_us must be 1..=base_rtt_us ({}), not {f}: the fabric's round trip \
                 is part of the loop",
                self.base_rtt_us
            );
        }
        if let Some(b) = self.ev_burst
            && !(1..=1024).contains(&b)
        {
            refuse!("ev_burst must be 1..=1024 packets, not {b}");
        }
        if let Some(m) = self.mtu
            && !(576..=9216).contains(&m)
        {
            refuse!("mtu must be 576..=9216, not {m}");
        }
        if self.link_rate.0 < 1_000_000 {
            refuse!("link_rate {} b/s is too low", self.link_rate.0);
        }
        if self.backend == Backend::Xdp && self.interface.is_none() {
            refuse!("the xdp backend needs an interface");
        }
        if self.interface.is_none() && self.address.is_none() {
            refuse!("give an interface or an address");
        }
        if !(1..=4095).contains(&self.api_max_clients) {
            refuse!(
                "api_max_clients must be 1..=4095 (one pid_on_fep each), not {}",
                self.api_max_clients
            );
        }
        if !(1..=self.api_max_clients).contains(&self.api_max_clients_per_uid) {
            refuse!(
                "api_max_clients_per_uid must be 1..=api_max_clients, not {}",
                self.api_max_clients_per_uid
            );
        }
        if self.busy_poll_us > 100_000 {
            refuse!(
                "busy_poll_us must be at most 100000, not {}",
                self.busy_poll_us
            );
        }
        if self.worker_slice_us != 0 && !(100..=100_000).contains(&self.worker_slice_us) {
            refuse!(
                "worker_slice_us must be 0 (the kernel's default) or 100..=100000, not {}",
                self.worker_slice_us
            );
        }
        if !(100..=600_000).contains(&self.api_hello_timeout_ms) {
            refuse!(
                "api_hello_timeout_ms must be 100..=600000, not {}",
                self.api_hello_timeout_ms
            );
        }
        if self.api_max_registrations == 0 {
            refuse!("api_max_registrations must be at least 1");
        }
        if !(64 << 10..=1 << 30).contains(&self.udp_socket_buffer.0) {
            refuse!(
                "udp_socket_buffer must be 64KiB..=1GiB, not {}",
                self.udp_socket_buffer.0
            );
        }
        if self.api_max_registered_bytes.0 < 4096 {
            refuse!(
                "api_max_registered_bytes must be at least 4096, not {}",
                self.api_max_registered_bytes.0
            );
        }
        for (i, t) in self.tss.iter().enumerate() {
            t.check(self.workers)?;
            if self.tss[..i]
                .iter()
                .any(|o| o.job == t.job || o.sdi == t.sdi)
            {
                refuse!(
                    "[[tss]] job {}: each job and each sdi may have one domain",
                    t.job
                );
            }
        }
        if !self.tss.is_empty() && self.crc_trailer() {
            refuse!(
                "[[tss]] and crc_trailer: a secured packet ends in its tag, not a CRC32C trailer (docs/security.md §1); turn crc_trailer off"
            );
        }
        for e in &self.expose {
            if e.ri >= 1 << 12 || e.pid >= 1 << 12 || e.job >= 1 << 24 {
                refuse!("expose: job < 2^24, pid and ri < 2^12");
            }
            if e.size.0 == 0 {
                refuse!("expose: size must not be 0");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let c = Config::parse(
            r#"
            interface = "eth1"
            backend = "xdp"
            address = "10.0.0.1"
            workers = 2
            cc = "rccc"
            link_rate = "10G"
            trimming = true
            rccc_ecn_rate = false
            [[expose]]
            ri = 1
            key = 0x5eed
            size = "1GiB"
            "#,
        )
        .unwrap();
        assert_eq!(c.backend, Backend::Xdp);
        assert_eq!(c.workers, 2);
        assert_eq!(c.link_rate, Rate(10_000_000_000));
        assert!(c.trimming && !Config::default().trimming);
        assert!(!c.rccc_ecn_rate && Config::default().rccc_ecn_rate);
        assert_eq!(c.expose[0].size, Size(1 << 30));
        assert_eq!(c.expose[0].job, 1);
        assert_eq!(c.cc_mode().unwrap(), CcMode::Rccc);
    }

    #[test]
    fn the_secure_pdc_start_is_chosen_by_name() {
        assert_eq!(Config::default().tss_start, TssStart::ZeroRtt);
        let c = Config::parse("address = \"10.0.0.1\"\ntss_start = \"1rtt\"").unwrap();
        assert_eq!(
            uet_pds::SecureStart::from(c.tss_start),
            uet_pds::SecureStart::Random1Rtt
        );
        let e = Config::parse("address = \"10.0.0.1\"\ntss_start = \"2rtt\"").unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains("0rtt") && e.contains("1rtt"), "{e}");
    }

    #[test]
    fn the_udp_socket_buffer_is_configurable_and_checked() {
        let e = |t: &str| format!("{:#}", Config::parse(t).unwrap_err());
        let c = Config::parse(r#"address = "10.0.0.1""#).unwrap();
        assert_eq!(c.udp_socket_buffer, Size(4 << 20));
        let c = Config::parse(
            r#"address = "10.0.0.1"
            udp_socket_buffer = "32MiB""#,
        )
        .unwrap();
        assert_eq!(c.udp_socket_buffer, Size(32 << 20));
        for bad in [r#""16KiB""#, r#""2GiB""#] {
            assert!(
                e(&format!(
                    "address = \"10.0.0.1\"\nudp_socket_buffer = {bad}"
                ))
                .contains("udp_socket_buffer must be 64KiB..=1GiB"),
                "{bad}"
            );
        }
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let e = |t: &str| format!("{:#}", Config::parse(t).unwrap_err());
        assert!(
            e(r#"address = "10.0.0.1"
            cc = "cubic""#)
            .contains("unknown cc")
        );
        assert!(
            e(r#"address = "10.0.0.1"
            workers = 0"#)
            .contains("workers")
        );
        assert!(e(r#"backend = "xdp""#).contains("needs an interface"));
        assert!(
            e(r#"address = "10.0.0.1"
            ev_burst = 0"#)
            .contains("ev_burst must be 1..=1024")
        );
        let c = Config::parse("address = \"10.0.0.1\"\nev_burst = 8").unwrap();
        assert_eq!(c.ev_burst, Some(8));
        assert!(
            e(r#"address = "10.0.0.1"
            base_rtt_us = 100
            fabric_rtt_us = 101"#)
            .contains("fabric_rtt_us must be 1..=base_rtt_us (100), not 101")
        );
        assert!(
            e(r#"address = "10.0.0.1"
            base_rtt_us = 0"#)
            .contains("base_rtt_us must be 1..=10000000, not 0")
        );
        let c = Config::parse("address = \"10.0.0.1\"\nbase_rtt_us = 400\nfabric_rtt_us = 130")
            .unwrap();
        assert_eq!((c.base_rtt_us, c.fabric_rtt_us), (400, Some(130)));
        assert!(
            e(r#"address = "10.0.0.1"
            pdc_idle_ms = 0"#)
            .contains("pdc_idle_ms must be 10..=3600000, not 0")
        );
        assert_eq!(Config::default().pdc_idle_ms, 2_000);
        let c = Config::parse("address = \"10.0.0.1\"\npdc_idle_ms = 300").unwrap();
        assert_eq!(c.pdc_idle_ms, 300);
        assert_eq!(Config::default().rto_silent_us, 20_000);
        assert!(
            e(r#"address = "10.0.0.1"
            rto_silent_us = 99"#)
            .contains("rto_silent_us must be 0 (off) or 100..=10000000, not 99")
        );
        let c = Config::parse("address = \"10.0.0.1\"\nrto_silent_us = 0").unwrap();
        assert_eq!(c.rto_silent_us, 0);
        assert!(
            e(r#"address = "10.0.0.1"
            colour = "blue""#)
            .contains("unknown field")
        );
        assert!(
            e(r#"address = "10.0.0.1"
            link_rate = "10 parsecs""#)
            .contains("unknown unit")
        );
        assert!(
            e(r#"address = "10.0.0.1"
            [[expose]]
            ri = 5000
            key = 1
            size = 10"#)
            .contains("ri")
        );
    }

    #[test]
    fn control_limits_have_documented_defaults_and_are_checked() {
        let c = Config::parse(r#"address = "10.0.0.1""#).unwrap();
        assert_eq!(c.api_max_clients, 256);
        assert_eq!(c.api_max_clients_per_uid, 64);
        assert_eq!(c.api_hello_timeout_ms, 5000);
        assert_eq!(c.api_max_registrations, 1024);
        assert_eq!(c.api_max_registered_bytes, Size(16 << 30));
        let c = Config::parse(
            r#"address = "10.0.0.1"
            api_max_clients = 8
            api_max_clients_per_uid = 2
            api_hello_timeout_ms = 300
            api_max_registrations = 3
            api_max_registered_bytes = "1MiB""#,
        )
        .unwrap();
        assert_eq!(
            (c.api_max_clients, c.api_max_clients_per_uid),
            (8, 2),
            "configurable"
        );
        assert_eq!(c.api_max_registered_bytes, Size(1 << 20));
        let e = |t: &str| format!("{:#}", Config::parse(t).unwrap_err());
        assert!(
            e(r#"address = "10.0.0.1"
            api_max_clients = 8
            api_max_clients_per_uid = 9"#)
            .contains("api_max_clients_per_uid")
        );
        assert!(
            e(r#"address = "10.0.0.1"
            api_hello_timeout_ms = 0"#)
            .contains("api_hello_timeout_ms")
        );
    }

    #[test]
    fn the_refprov_profile_sets_the_wire_choices_and_explicit_ones_win() {
        let c = Config::parse(
            r#"address = "10.0.0.1"
            profile = "refprov""#,
        )
        .unwrap();
        assert_eq!(c.encap(), Encap::Ip);
        let e = c.encap_config();
        assert_eq!((e.ip_protocol, e.crc_trailer), (253, true));
        let c = Config::parse(
            r#"address = "10.0.0.1"
            profile = "refprov"
            encap = "udp"
            crc_trailer = false
            ip_protocol = 254"#,
        )
        .unwrap();
        assert_eq!(c.encap(), Encap::Udp);
        let e = c.encap_config();
        assert_eq!((e.ip_protocol, e.crc_trailer), (254, false));
        let c = Config::parse(r#"address = "10.0.0.1""#).unwrap();
        assert_eq!((c.encap(), c.crc_trailer()), (Encap::Udp, false));
        let err = Config::parse(
            r#"address = "10.0.0.1"
            ip_protocol = 17"#,
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("ip_protocol 17"), "{err:#}");
    }

    #[test]
    fn the_metrics_address_is_an_ip_and_port() {
        let c = Config::parse(r#"address = "10.0.0.1""#).unwrap();
        assert_eq!(c.metrics_addr, None, "off by default");
        let c = Config::parse(
            r#"address = "10.0.0.1"
            metrics_addr = "127.0.0.1:9464""#,
        )
        .unwrap();
        assert_eq!(c.metrics_addr, Some("127.0.0.1:9464".parse().unwrap()));
        let e = Config::parse(
            r#"address = "10.0.0.1"
            metrics_addr = "localhost""#,
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("metrics_addr"), "{e:#}");
    }

    #[test]
    fn sizes_are_binary_and_rates_decimal() {
        let size = |s: &str| s.parse::<Size>().map(|v| v.0);
        assert_eq!(size("1GiB"), Ok(1 << 30));
        assert_eq!(size("1G"), Ok(1 << 30));
        assert_eq!(size("4K"), Ok(4096));
        assert_eq!(size("4KB"), Ok(4096));
        assert_eq!(size("4KiB"), Ok(4096));
        assert_eq!(size("64k"), Ok(64 << 10));
        assert_eq!(size("8M"), Ok(8 << 20));
        assert_eq!(size("1.5K"), Ok(1536));
        assert_eq!(size("4096"), Ok(4096));
        assert!(size("lots").is_err());
        assert!(size("4X").is_err());
        assert!(size("99999999999T").is_err());
        let rate = |s: &str| s.parse::<Rate>().map(|v| v.0);
        assert_eq!(rate("2.5G"), Ok(2_500_000_000));
        assert_eq!(rate("10G"), Ok(10_000_000_000));
        assert_eq!(rate("100Mb/s"), Ok(100_000_000));
        assert_eq!(rate("100Mbps"), Ok(100_000_000));
        assert_eq!(rate("64K"), Ok(64_000));
        assert_eq!(rate("1Gi"), Ok(1 << 30));
    }

    #[test]
    fn tss_tables_parse_and_refuse_what_cannot_work() {
        let base = "address = \"10.0.0.1\"\n";
        let c = Config::parse(&format!(
            "{base}[[tss]]\njob = 7\nsdi = 0x10\nkey_file = \"/k\"\nmode = \"cluster\"\nepoch = 2\n"
        ))
        .unwrap();
        assert_eq!(c.tss.len(), 1);
        let t = &c.tss[0];
        assert_eq!((t.job, t.sdi, t.epoch, t.replay_window), (7, 16, 2, 1024));
        assert_eq!(t.mode, crate::tss::TssMode::Cluster);
        for (extra, why) in [
            ("job = 7\nsdi = 1\n", "no key"),
            (
                "job = 7\nsdi = 16777216\nkey_file = \"/k\"\n",
                "sdi must be < 2^24",
            ),
            (
                "job = 7\nsdi = 1\nkey_file = \"/k\"\nrekey = true\n",
                "rekey needs",
            ),
            (
                "job = 7\nsdi = 1\nkey_file = \"/k\"\nkey = 1\n",
                "unknown field",
            ),
        ] {
            let e = Config::parse(&format!("{base}[[tss]]\n{extra}")).unwrap_err();
            assert!(format!("{e}").contains(why), "{extra}: {e}");
        }
        let two = "[[tss]]\njob = 7\nsdi = 1\nkey_file = \"/k\"\n";
        let e = Config::parse(&format!("{base}{two}{two}")).unwrap_err();
        assert!(format!("{e}").contains("one domain"), "{e}");
        let e = Config::parse(&format!("{base}crc_trailer = true\n{two}")).unwrap_err();
        assert!(format!("{e}").contains("crc_trailer"), "{e}");
        let e = Config::parse(&format!("{base}workers = 2\n{two}")).unwrap_err();
        assert!(format!("{e}").contains("set ssi"), "{e}");
    }
}
