//! Loading and attaching the XDP steering program (`xdp-prog`, `docs/architecture.md`
//! §5) with aya, filling its XSKMAP with the daemon's AF_XDP sockets and
//! reading its counters.
//!
//! - [`SteerProgram::load`] loads and verifies the program and writes its
//!   config; [`SteerProgram::test_run`] runs it on a frame
//!   (`BPF_PROG_TEST_RUN`) without attaching it anywhere.
//! - [`SteerProgram::attach`] / [`XdpSteer::attach`] attach it to an
//!   interface: native (driver) mode first, generic (skb) mode when native
//!   fails and the mode is [`XdpMode::Auto`], or the mode the operator
//!   forced. Dropping the [`XdpSteer`] detaches it.
//! - Stale programs. aya attaches through a `bpf_link`, which the kernel
//!   releases when the owning process dies, so a crashed daemon normally
//!   leaves nothing behind. A program attached through netlink (an older
//!   daemon, or `ip link set dev X xdpgeneric obj …`) outlives its process;
//!   it also blocks the link attach (the kernel refuses a link over a
//!   netlink-attached program with `EBUSY`, and one mode while the other
//!   holds a program with `EEXIST`). Before attaching, the interface's XDP
//!   state is read over rtnetlink (`IFLA_XDP`); every attached program named
//!   `uet_steer` (or any program, with [`StalePolicy::ReplaceAny`]) is
//!   detached with `XDP_FLAGS_REPLACE` + `IFLA_XDP_EXPECTED_FD` (so only the
//!   program that was inspected is removed) and the replacement is logged.
//!   A program the kernel refuses to detach that way is held by a live
//!   `bpf_link` (another running daemon, or a pinned link): attaching fails
//!   with an error saying so, rather than stealing the interface. A foreign
//!   program under the default policy is an error too.
//!
//! Interfaces are per network namespace: call these from a thread in the
//! interface's namespace (`uet_lab::netns::NetNs::run`). Nothing here is on the
//! per-packet path.

use std::fmt;
use std::io;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd};

use crate::netlink::{Msg, NLM_F_ACK, NLM_F_REQUEST, Netlink, attrs};
use aya::maps::{Array, MapData, PerCpuArray, XskMap};
use aya::programs::xdp::XdpLinkId;
use aya::programs::{TestRun as _, TestRunOptions, Xdp, XdpMode as AyaMode, loaded_programs};
use aya::{Ebpf, EbpfLoader};
use tracing::{info, warn};
use xdp_prog::{ConfigRaw, counter};

/// Why loading, attaching or driving the steering program failed.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// The embedded object lacks a map or program uetd needs (a build
    /// defect).
    #[error("{0}")]
    Object(String),
    /// A system call (bpf(2) through aya, or rtnetlink) failed while doing
    /// what the message says; the source is the kernel's answer.
    #[error("{doing}")]
    Call {
        /// What was being done.
        doing: String,
        /// The failure.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A bpf(2) map operation failed (aya's error names the call).
    #[error(transparent)]
    Map(#[from] aya::maps::MapError),
    /// A bpf(2) program operation failed (aya's error names the call).
    #[error(transparent)]
    Program(#[from] aya::programs::ProgramError),
    /// An rtnetlink system call failed (the error names the call).
    #[error(transparent)]
    Netlink(#[from] io::Error),
    /// Queue beyond the XSKMAP (the caller's misuse).
    #[error("queue {queue} is beyond the XSKMAP ({max} entries)")]
    QueueOutOfRange {
        /// The queue asked for.
        queue: u32,
        /// XSKMAP entries.
        max: u32,
    },
    /// The interface runs another XDP program uetd may not take over.
    #[error("{0}")]
    Occupied(String),
}

/// Names what a failing call was doing.
trait Doing<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, XdpError>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Doing<T> for Result<T, E> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, XdpError> {
        self.map_err(|e| XdpError::Call {
            doing: what(),
            source: Box::new(e),
        })
    }
}

/// Refuses to take over an interface, with a formatted reason.
macro_rules! refuse {
    ($($t:tt)*) => {
        return Err(XdpError::Occupied(format!($($t)*)))
    };
}

/// How to attach: the operator's choice (`--xdp-mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum XdpMode {
    /// Native (driver) mode, falling back to generic mode when the driver
    /// refuses it (no XDP support, or e.g. an MTU too large for it).
    #[default]
    Auto,
    /// Native mode only; attaching fails where the driver cannot.
    Native,
    /// Generic (skb) mode: works on any interface, slower, copy-mode
    /// AF_XDP only.
    Generic,
}

/// The mode the program ended up attached in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttachedMode {
    /// Run by the driver (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// Run by the kernel stack on an skb (`XDP_FLAGS_SKB_MODE`).
    Generic,
}

impl fmt::Display for AttachedMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Native => "native",
            Self::Generic => "generic",
        })
    }
}

/// What the program steers to AF_XDP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SteerConfig {
    /// UDP destination port of UET (default 4793).
    pub udp_port: u16,
    /// Also steer native-IP UET frames with this IP protocol number
    /// (`None`, the default, steers UDP only; 253 is the usual choice).
    pub ip_proto: Option<u8>,
}

impl Default for SteerConfig {
    fn default() -> Self {
        Self {
            udp_port: xdp_prog::DEFAULT_UDP_PORT,
            ip_proto: None,
        }
    }
}

impl SteerConfig {
    fn raw(self) -> ConfigRaw {
        ConfigRaw {
            udp_port: self.udp_port,
            ip_proto: self.ip_proto.unwrap_or(xdp_prog::DEFAULT_IP_PROTO),
            flags: if self.ip_proto.is_some() {
                xdp_prog::CFG_FLAG_IP_PROTO
            } else {
                0
            },
        }
    }
}

/// Which XDP programs already on the interface [`SteerProgram::attach`]
/// may remove (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StalePolicy {
    /// Only programs named `uet_steer` (left by an earlier uetd); another
    /// program on the interface makes attaching fail.
    #[default]
    ReplaceOwn,
    /// Any netlink-attached program.
    ReplaceAny,
}

/// An interface, by name or by index (in the caller's namespace).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Iface {
    /// E.g. `eth0`.
    Name(String),
    /// An interface index.
    Index(u32),
}

impl From<&str> for Iface {
    fn from(name: &str) -> Self {
        Self::Name(name.to_owned())
    }
}

impl From<String> for Iface {
    fn from(name: String) -> Self {
        Self::Name(name)
    }
}

impl From<u32> for Iface {
    fn from(index: u32) -> Self {
        Self::Index(index)
    }
}

impl fmt::Display for Iface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(n) => f.write_str(n),
            Self::Index(i) => write!(f, "ifindex {i}"),
        }
    }
}

/// The program's counters summed over CPUs; `xdp-prog`'s C source defines
/// each. `seen == redirected + passed + malformed`, and `no_socket` is part
/// of `passed`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SteerCounters {
    /// Frames the program ran on.
    pub seen: u64,
    /// UET frames redirected to an AF_XDP socket.
    pub redirected: u64,
    /// Well-formed frames left to the kernel.
    pub passed: u64,
    /// Frames with a truncated or invalid header, left to the kernel.
    pub malformed: u64,
    /// UET frames left to the kernel because no socket serves their queue.
    pub no_socket: u64,
}

impl SteerCounters {
    /// The increase since `earlier` (counters only grow).
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            seen: self.seen.saturating_sub(earlier.seen),
            redirected: self.redirected.saturating_sub(earlier.redirected),
            passed: self.passed.saturating_sub(earlier.passed),
            malformed: self.malformed.saturating_sub(earlier.malformed),
            no_socket: self.no_socket.saturating_sub(earlier.no_socket),
        }
    }
}

/// The steering program, loaded (verified by the kernel) and configured,
/// not attached to an interface.
pub struct SteerProgram {
    ebpf: Ebpf,
    xsks: XskMap<MapData>,
    config: Array<MapData, u32>,
    counters: PerCpuArray<MapData, u64>,
    cfg: SteerConfig,
}

impl fmt::Debug for SteerProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SteerProgram")
            .field("program_id", &self.program_id().ok())
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl SteerProgram {
    /// Loads `xdp_prog::object()` into the kernel (the verifier runs here)
    /// and writes `cfg` to its config map.
    pub fn load(cfg: SteerConfig) -> Result<Self, XdpError> {
        let mut ebpf = EbpfLoader::new()
            .load(xdp_prog::object())
            .doing(|| "loading the XDP steering object".into())?;
        let take = |ebpf: &mut Ebpf, name: &str| {
            ebpf.take_map(name)
                .ok_or_else(|| XdpError::Object(format!("the XDP object has no map {name}")))
        };
        let xsks = XskMap::try_from(take(&mut ebpf, xdp_prog::XSKS_MAP)?)?;
        let config = Array::try_from(take(&mut ebpf, xdp_prog::CONFIG_MAP)?)?;
        let counters = PerCpuArray::try_from(take(&mut ebpf, xdp_prog::COUNTERS_MAP)?)?;
        let mut p = Self {
            ebpf,
            xsks,
            config,
            counters,
            cfg,
        };
        p.program_mut()?
            .load()
            .doing(|| "the kernel rejected the XDP steering program".into())?;
        p.set_config(cfg)?;
        Ok(p)
    }

    fn program(&self) -> Result<&Xdp, XdpError> {
        Ok(self
            .ebpf
            .program(xdp_prog::PROGRAM_NAME)
            .ok_or_else(|| {
                XdpError::Object(format!(
                    "the XDP object has no program {}",
                    xdp_prog::PROGRAM_NAME
                ))
            })?
            .try_into()?)
    }

    fn program_mut(&mut self) -> Result<&mut Xdp, XdpError> {
        Ok(self
            .ebpf
            .program_mut(xdp_prog::PROGRAM_NAME)
            .ok_or_else(|| {
                XdpError::Object(format!(
                    "the XDP object has no program {}",
                    xdp_prog::PROGRAM_NAME
                ))
            })?
            .try_into()?)
    }

    /// The kernel's id of the loaded program (`bpftool prog show id N`).
    pub fn program_id(&self) -> Result<u32, XdpError> {
        Ok(self.program()?.info()?.id())
    }

    /// The current steering config.
    pub fn config(&self) -> SteerConfig {
        self.cfg
    }

    /// Changes what is steered; takes effect for the next frame.
    pub fn set_config(&mut self, cfg: SteerConfig) -> Result<(), XdpError> {
        self.config
            .set(0, cfg.raw().to_ne_u32(), 0)
            .doing(|| "writing the XDP config map".into())?;
        self.cfg = cfg;
        Ok(())
    }

    /// The counters, summed over CPUs.
    pub fn counters(&self) -> Result<SteerCounters, XdpError> {
        let get = |idx: u32| -> Result<u64, XdpError> {
            let per_cpu = self
                .counters
                .get(&idx, 0)
                .doing(|| format!("reading XDP counter {idx}"))?;
            Ok(per_cpu.iter().copied().fold(0u64, u64::wrapping_add))
        };
        Ok(SteerCounters {
            seen: get(counter::SEEN)?,
            redirected: get(counter::REDIRECTED)?,
            passed: get(counter::PASSED)?,
            malformed: get(counter::MALFORMED)?,
            no_socket: get(counter::NO_SOCKET)?,
        })
    }

    /// Runs the program once on `frame` (`BPF_PROG_TEST_RUN`, RX queue 0)
    /// and returns its XDP action (`XDP_PASS` = 2, `XDP_REDIRECT` = 4).
    /// The counters count the run like a received frame.
    pub fn test_run(&self, frame: &[u8]) -> Result<u32, XdpError> {
        let r = self
            .program()?
            .test_run(TestRunOptions {
                data_in: Some(frame),
                ..TestRunOptions::default()
            })
            .doing(|| "BPF_PROG_TEST_RUN of the XDP program".into())?;
        Ok(r.return_value)
    }

    /// Attaches the program to `iface` in `mode`, after removing a stale
    /// program as `stale` allows (see the module documentation).
    pub fn attach(
        mut self,
        iface: impl Into<Iface>,
        mode: XdpMode,
        stale: StalePolicy,
    ) -> Result<XdpSteer, XdpError> {
        let iface = iface.into();
        let nl = Netlink::open()?;
        let link = nl
            .get_link(&iface)
            .doing(|| format!("looking up interface {iface}"))?;
        let ifindex = link.index;
        let ifname = link.name.clone();
        remove_stale(&nl, &link, stale)?;

        let prog = self.program_mut()?;
        let try_mode = |prog: &mut Xdp, m: AttachedMode| {
            let aya_mode = match m {
                AttachedMode::Native => AyaMode::Driver,
                AttachedMode::Generic => AyaMode::Skb,
            };
            prog.attach_to_if_index(ifindex, aya_mode)
                .doing(|| format!("attaching XDP to {ifname} in {m} mode"))
        };
        let (link_id, attached) = match mode {
            XdpMode::Native => (try_mode(prog, AttachedMode::Native)?, AttachedMode::Native),
            XdpMode::Generic => (
                try_mode(prog, AttachedMode::Generic)?,
                AttachedMode::Generic,
            ),
            XdpMode::Auto => match try_mode(prog, AttachedMode::Native) {
                Ok(id) => (id, AttachedMode::Native),
                Err(e) => {
                    warn!(
                        iface = %ifname,
                        error = format!("{e:#}"),
                        "native XDP refused; falling back to generic (skb) mode"
                    );
                    (
                        try_mode(prog, AttachedMode::Generic)?,
                        AttachedMode::Generic,
                    )
                }
            },
        };
        let steer = XdpSteer {
            prog: self,
            link: Some(link_id),
            ifindex,
            ifname,
            mode: attached,
        };
        info!(
            iface = %steer.ifname,
            ifindex,
            mode = %attached,
            program_id = steer.prog.program_id().ok(),
            udp_port = steer.prog.cfg.udp_port,
            ip_proto = steer.prog.cfg.ip_proto,
            "XDP steering attached"
        );
        Ok(steer)
    }
}

/// The steering program attached to an interface; detached on drop.
pub struct XdpSteer {
    prog: SteerProgram,
    link: Option<XdpLinkId>,
    ifindex: u32,
    ifname: String,
    mode: AttachedMode,
}

impl fmt::Debug for XdpSteer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XdpSteer")
            .field("ifname", &self.ifname)
            .field("ifindex", &self.ifindex)
            .field("mode", &self.mode)
            .field("prog", &self.prog)
            .finish_non_exhaustive()
    }
}

impl XdpSteer {
    /// Loads the program with `cfg` and attaches it to `iface` in `mode`,
    /// replacing a stale `uet_steer` left on the interface
    /// ([`StalePolicy::ReplaceOwn`]).
    pub fn attach(
        iface: impl Into<Iface>,
        mode: XdpMode,
        cfg: SteerConfig,
    ) -> Result<Self, XdpError> {
        SteerProgram::load(cfg)?.attach(iface, mode, StalePolicy::ReplaceOwn)
    }

    /// Makes the AF_XDP socket `fd` (bound to this interface's RX queue
    /// `queue`) receive the UET frames of that queue.
    pub fn register_socket(&mut self, queue: u32, fd: BorrowedFd<'_>) -> Result<(), XdpError> {
        check_queue(queue)?;
        self.prog
            .xsks
            .set(queue, fd, 0)
            .doing(|| format!("registering an AF_XDP socket for queue {queue}"))
    }

    /// Stops steering queue `queue` to its socket: its UET frames go to the
    /// kernel (counted as `no_socket`). Unregistering an empty slot is fine.
    pub fn unregister(&mut self, queue: u32) -> Result<(), XdpError> {
        check_queue(queue)?;
        match self.prog.xsks.unset(queue) {
            Ok(()) => Ok(()),
            Err(aya::maps::MapError::SyscallError(e))
                if e.io_error.raw_os_error() == Some(libc::ENOENT) =>
            {
                Ok(())
            }
            Err(e) => Err(e).doing(|| format!("unregistering the AF_XDP socket of queue {queue}")),
        }
    }

    /// The counters, summed over CPUs.
    pub fn counters(&self) -> Result<SteerCounters, XdpError> {
        self.prog.counters()
    }

    /// The mode the program is attached in.
    pub fn mode(&self) -> AttachedMode {
        self.mode
    }

    /// The interface's index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The interface's name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The loaded program (config, id, counters).
    pub fn program(&self) -> &SteerProgram {
        &self.prog
    }

    /// Changes what is steered; takes effect for the next frame.
    pub fn set_config(&mut self, cfg: SteerConfig) -> Result<(), XdpError> {
        self.prog.set_config(cfg)
    }
}

impl Drop for XdpSteer {
    fn drop(&mut self) {
        let Some(id) = self.link.take() else { return };
        let r = self.prog.program_mut().and_then(|p| Ok(p.detach(id)?));
        match r {
            Ok(()) => info!(iface = %self.ifname, "XDP steering detached"),
            // Dropping the Ebpf closes the link fd, which detaches too.
            Err(e) => warn!(iface = %self.ifname, error = format!("{e:#}"), "XDP detach"),
        }
    }
}

fn check_queue(queue: u32) -> Result<(), XdpError> {
    if queue >= xdp_prog::XSKS_MAX_ENTRIES {
        return Err(XdpError::QueueOutOfRange {
            queue,
            max: xdp_prog::XSKS_MAX_ENTRIES,
        });
    }
    Ok(())
}

/// Detaches the netlink-attached programs of `link` that `policy` allows,
/// and fails on any other program (see the module documentation).
fn remove_stale(nl: &Netlink, link: &LinkInfo, policy: StalePolicy) -> Result<(), XdpError> {
    for (flag, prog_id) in link.xdp_progs() {
        let mode = mode_name(flag);
        let info = loaded_programs()
            .filter_map(Result::ok)
            .find(|p| p.id() == prog_id);
        let name = info
            .as_ref()
            .and_then(|p| p.name_as_str().map(str::to_owned))
            .unwrap_or_default();
        if name != xdp_prog::PROGRAM_NAME && policy == StalePolicy::ReplaceOwn {
            refuse!(
                "{} already runs XDP program {name:?} (id {prog_id}, {mode} mode); remove it \
                 (`ip link set dev {} xdp off`) or allow replacing foreign programs",
                link.name,
                link.name
            );
        }
        // Gone since the link was read: nothing to remove (a program
        // attached meanwhile makes the attach itself fail).
        let Some(info) = info else { continue };
        let fd = info
            .fd()
            .doing(|| format!("opening XDP program id {prog_id}"))?;
        match nl.detach_xdp(link.index, flag, fd.as_fd()) {
            Ok(()) => warn!(
                iface = %link.name,
                program = %name,
                program_id = prog_id,
                mode,
                "removed a stale netlink-attached XDP program (left by a crashed or older \
                 daemon, or by hand)"
            ),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => refuse!(
                "{} runs XDP program {name:?} (id {prog_id}, {mode} mode) through a bpf_link \
                 held by a live process or a pin (another uetd?); not taking it over",
                link.name
            ),
            // EEXIST: replaced meanwhile by someone else; ENOENT-like
            // races are re-checked by the attach itself.
            Err(e) => {
                return Err(e).doing(|| {
                    format!(
                        "detaching stale XDP program id {prog_id} from {}",
                        link.name
                    )
                });
            }
        }
    }
    Ok(())
}

fn mode_name(flag: u32) -> &'static str {
    match flag {
        XDP_FLAGS_SKB_MODE => "generic",
        XDP_FLAGS_DRV_MODE => "native",
        _ => "offload",
    }
}

// ---- rtnetlink for IFLA_XDP (the socket and codec are crate::netlink) ----
//
// Constants from <linux/netlink.h>, <linux/rtnetlink.h>, <linux/if_link.h>.

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const IFLA_IFNAME: u16 = 3;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;
const IFLA_XDP_HW_PROG_ID: u16 = 7;
const IFLA_XDP_EXPECTED_FD: u16 = 8;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_FLAGS_HW_MODE: u32 = 1 << 3;
const XDP_FLAGS_REPLACE: u32 = 1 << 4;
const IFINFOMSG_LEN: usize = 16;

/// The part of an `RTM_NEWLINK` answer used here.
#[derive(Debug)]
struct LinkInfo {
    index: u32,
    name: String,
    drv_prog: u32,
    skb_prog: u32,
    hw_prog: u32,
}

impl LinkInfo {
    /// `(mode flag, program id)` of every attached XDP program.
    fn xdp_progs(&self) -> Vec<(u32, u32)> {
        [
            (XDP_FLAGS_SKB_MODE, self.skb_prog),
            (XDP_FLAGS_DRV_MODE, self.drv_prog),
            (XDP_FLAGS_HW_MODE, self.hw_prog),
        ]
        .into_iter()
        .filter(|&(_, id)| id != 0)
        .collect()
    }
}

impl Netlink {
    /// `RTM_GETLINK` by name or index.
    fn get_link(&self, iface: &Iface) -> io::Result<LinkInfo> {
        let mut msg = link_msg(RTM_GETLINK, NLM_F_REQUEST, iface_index(iface));
        if let Iface::Name(name) = iface {
            let mut z = name.as_bytes().to_vec();
            z.push(0);
            msg.attr(IFLA_IFNAME, &z);
        }
        let mut found = None;
        self.transact(&msg.finish(), |ty, payload| {
            if ty == RTM_NEWLINK {
                found = Some(parse_link(payload)?);
            }
            Ok(())
        })?;
        found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no RTM_NEWLINK answer"))
    }

    /// `RTM_SETLINK` with `IFLA_XDP { FD = -1, FLAGS = mode | REPLACE,
    /// EXPECTED_FD = prog }`: detaches `prog` from `mode` only if it is still
    /// the attached program there (`EEXIST` otherwise), and only if no
    /// bpf_link holds it (`EBUSY` otherwise).
    fn detach_xdp(&self, ifindex: u32, mode: u32, prog: BorrowedFd<'_>) -> io::Result<()> {
        let mut msg = link_msg(RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK, ifindex as i32);
        let nest = msg.begin_nest(IFLA_XDP);
        msg.attr(IFLA_XDP_FD, &(-1i32).to_ne_bytes());
        msg.attr(IFLA_XDP_FLAGS, &(mode | XDP_FLAGS_REPLACE).to_ne_bytes());
        msg.attr(IFLA_XDP_EXPECTED_FD, &prog.as_raw_fd().to_ne_bytes());
        msg.end_nest(nest);
        self.transact(&msg.finish(), |_, _| Ok(()))
    }
}

fn iface_index(iface: &Iface) -> i32 {
    match iface {
        Iface::Name(_) => 0,
        Iface::Index(i) => *i as i32,
    }
}

/// A request with a `struct ifinfomsg` (family, pad, type, index, flags,
/// change) for `ifindex`.
fn link_msg(ty: u16, flags: u16, ifindex: i32) -> Msg {
    let mut hdr = [0u8; IFINFOMSG_LEN];
    hdr[0] = libc::AF_UNSPEC as u8;
    hdr[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    Msg::new(ty, flags, &hdr)
}

fn parse_link(payload: &[u8]) -> io::Result<LinkInfo> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "short RTM_NEWLINK");
    let hdr = payload.get(..IFINFOMSG_LEN).ok_or_else(bad)?;
    let index = i32::from_ne_bytes(hdr[4..8].try_into().expect("4")) as u32;
    let mut link = LinkInfo {
        index,
        name: String::new(),
        drv_prog: 0,
        skb_prog: 0,
        hw_prog: 0,
    };
    let u32_of = |p: &[u8]| {
        p.get(..4)
            .map_or(0, |b| u32::from_ne_bytes(b.try_into().expect("4")))
    };
    for (ty, p) in attrs(&payload[IFINFOMSG_LEN..]) {
        match ty {
            IFLA_IFNAME => {
                let end = p.iter().position(|&c| c == 0).unwrap_or(p.len());
                link.name = String::from_utf8_lossy(&p[..end]).into_owned();
            }
            IFLA_XDP => {
                for (xty, xp) in attrs(p) {
                    match xty {
                        IFLA_XDP_DRV_PROG_ID => link.drv_prog = u32_of(xp),
                        IFLA_XDP_SKB_PROG_ID => link.skb_prog = u32_of(xp),
                        IFLA_XDP_HW_PROG_ID => link.hw_prog = u32_of(xp),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(link)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_encodes_the_c_struct() {
        let c = SteerConfig::default().raw();
        assert_eq!((c.udp_port, c.flags), (4793, 0));
        let c = SteerConfig {
            udp_port: 5000,
            ip_proto: Some(253),
        }
        .raw();
        assert_eq!((c.udp_port, c.ip_proto, c.flags), (5000, 253, 1));
    }

    #[test]
    fn netlink_request_layout() {
        let mut m = link_msg(RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK, 7);
        let nest = m.begin_nest(IFLA_XDP);
        m.attr(IFLA_XDP_FD, &(-1i32).to_ne_bytes());
        m.attr(IFLA_XDP_FLAGS, &XDP_FLAGS_SKB_MODE.to_ne_bytes());
        m.end_nest(nest);
        let b = m.finish();
        assert_eq!(b.len(), 16 + 16 + 4 + 8 + 8);
        assert_eq!(
            u32::from_ne_bytes(b[..4].try_into().unwrap()) as usize,
            b.len()
        );
        assert_eq!(i32::from_ne_bytes(b[20..24].try_into().unwrap()), 7);
        let top: Vec<_> = attrs(&b[32..]).collect();
        assert_eq!(top.len(), 1);
        assert_eq!(top[0].0, IFLA_XDP);
        let inner: Vec<_> = attrs(top[0].1).map(|(t, _)| t).collect();
        assert_eq!(inner, [IFLA_XDP_FD, IFLA_XDP_FLAGS]);
    }
}
