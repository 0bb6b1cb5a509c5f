//! The switch's tc programs (`xdp_prog::ecn_object`, `impair_object`):
//! loaded with aya inside the switch namespace, attached with TCX on the
//! ports' egress, and pinned — links and maps — under
//! `/sys/fs/bpf/uet-lab/<lab>/`, so that they outlive the process that
//! built the lab (`uet lab up` returns) and another process can read the
//! counters and switch impairments on. Deleting the namespace detaches the
//! programs (their devices go); `lab down` removes the pins.

use std::path::{Path, PathBuf};

use aya::maps::{Array, Map, MapData};
use aya::programs::links::FdLink;
use aya::programs::tc::TcAttachOptions;
use aya::programs::{LinkOrder, SchedClassifier, TcAttachType};
use aya::{Ebpf, EbpfLoader};
use serde::{Deserialize, Serialize};
use xdp_prog::{ecn, impair};

use crate::error::{Error, Result};

/// Where bpffs is mounted by convention (systemd mounts it at boot).
const BPFFS: &str = "/sys/fs/bpf";

/// Where a lab's pins live.
pub(crate) fn pin_dir(lab: &str) -> PathBuf {
    PathBuf::from(BPFFS).join("uet-lab").join(lab)
}

/// Makes sure [`BPFFS`] is a BPF filesystem, mounting one if not: a
/// machine booted without systemd (a Firecracker VM, a container's init)
/// has the directory but nothing mounted there, and pinning then fails
/// with ENOENT.
pub(crate) fn ensure_bpffs() -> Result<()> {
    let root = Path::new(BPFFS);
    if uetd::sys::bpffs::is_bpffs(root)
        .map_err(std::io::Error::from)
        .map_err(Error::io(format!("statfs {BPFFS}")))?
    {
        return Ok(());
    }
    uetd::sys::bpffs::mount_bpffs(root)
        .map_err(std::io::Error::from)
        .map_err(Error::io(format!(
            "{BPFFS} is not a BPF filesystem, and mounting one there failed"
        )))?;
    tracing::info!("mounted a BPF filesystem on {BPFFS}");
    Ok(())
}

/// What [`attach`] needs to know about the switch; runs inside it.
pub(crate) struct Attach<'a> {
    pub(crate) pins: &'a Path,
    /// Every switch port (`p0` first: the receiver's, the bottleneck).
    pub(crate) ports: &'a [String],
    /// The detour pair (sent into `.0`, comes back on `.1`).
    pub(crate) detour: (&'a str, &'a str),
}

fn load(bytes: &[u8], what: &str) -> Result<Ebpf> {
    EbpfLoader::new()
        .load(bytes)
        .map_err(Error::kernel(format!("loading the {what} object")))
}

fn classifier<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut SchedClassifier> {
    let missing = || Error::Kernel {
        what: format!("no program {name} in its object"),
        source: None,
    };
    let p = ebpf.program_mut(name).ok_or_else(missing)?;
    <&mut SchedClassifier>::try_from(p)
        .map_err(Error::kernel(format!("{name} is not a tc classifier")))
}

fn attach_pinned(
    p: &mut SchedClassifier,
    ifname: &str,
    ty: TcAttachType,
    pin: &Path,
) -> Result<()> {
    let id = p
        .attach_with_options(ifname, ty, TcAttachOptions::TcxOrder(LinkOrder::default()))
        .map_err(Error::kernel(format!("attaching to {ifname} ({ty:?})")))?;
    let link: FdLink = p
        .take_link(id)
        .map_err(Error::kernel(format!("taking the link on {ifname}")))?
        .try_into()
        .map_err(Error::kernel(format!("the link on {ifname} as an fd link")))?;
    link.pin(pin)
        .map_err(Error::kernel(format!("pinning {}", pin.display())))?;
    Ok(())
}

fn pin_maps(ebpf: &Ebpf, names: &[&str], dir: &Path) -> Result<()> {
    for name in names {
        ebpf.map(name)
            .ok_or_else(|| Error::Kernel {
                what: format!("no map {name}"),
                source: None,
            })?
            .pin(dir.join(name))
            .map_err(Error::kernel(format!("pinning map {name}")))?;
    }
    Ok(())
}

/// Loads both objects and attaches: on every port's egress the impairment
/// program first (it may drop, so the marker after it sees only what goes
/// on), then on `p0` the ECN marker; the detour return on the detour peer's
/// ingress. Must run on a thread inside the switch namespace.
pub(crate) fn attach(a: &Attach<'_>) -> Result<()> {
    std::fs::create_dir_all(a.pins).map_err(Error::io(format!("creating {}", a.pins.display())))?;
    let mut imp = load(xdp_prog::impair_object(), "impairment")?;
    {
        let p = classifier(&mut imp, impair::PROGRAM)?;
        p.load()
            .map_err(Error::kernel("the kernel rejected uet_impair"))?;
        for port in a.ports {
            attach_pinned(
                p,
                port,
                TcAttachType::Egress,
                &a.pins.join(format!("impair_{port}")),
            )?;
        }
    }
    {
        let p = classifier(&mut imp, impair::DETOUR_PROGRAM)?;
        p.load()
            .map_err(Error::kernel("the kernel rejected uet_detour"))?;
        attach_pinned(p, a.detour.1, TcAttachType::Ingress, &a.pins.join("detour"))?;
    }
    pin_maps(&imp, &[impair::CONFIG_MAP, impair::COUNTERS_MAP], a.pins)?;

    let mut ecn_obj = load(xdp_prog::ecn_object(), "ECN")?;
    {
        let p = classifier(&mut ecn_obj, ecn::PROGRAM)?;
        p.load()
            .map_err(Error::kernel("the kernel rejected uet_ecn"))?;
        attach_pinned(p, &a.ports[0], TcAttachType::Egress, &a.pins.join("ecn"))?;
    }
    pin_maps(
        &ecn_obj,
        &[ecn::CONFIG_MAP, ecn::STATE_MAP, ecn::COUNTERS_MAP],
        a.pins,
    )?;
    Ok(())
}

fn array(pins: &Path, name: &str) -> Result<Array<MapData, u64>> {
    let path = pins.join(name);
    let md =
        MapData::from_pin(&path).map_err(Error::kernel(format!("opening {}", path.display())))?;
    Array::try_from(Map::Array(md)).map_err(Error::kernel(format!(
        "{} as an array of u64",
        path.display()
    )))
}

/// `map[i]` of a pinned array (`name` for the error only).
fn get(map: &Array<MapData, u64>, name: &'static str, i: u32) -> Result<u64> {
    map.get(&i, 0).map_err(|e| Error::Kernel {
        what: format!("reading {name}[{i}]"),
        source: Some(e.into()),
    })
}

/// Sets `map[i] = v` in a pinned array (`name` for the error only).
fn set(map: &mut Array<MapData, u64>, name: &'static str, i: u32, v: u64) -> Result<()> {
    map.set(i, v, 0).map_err(|e| Error::Kernel {
        what: format!("writing {name}[{i}]"),
        source: Some(e.into()),
    })
}

/// The ECN marker's settings (`xdp_prog::ecn`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EcnSettings {
    /// Drain rate of the virtual queue, bits/s (R·γ); 0 = off.
    pub rate_bps: u64,
    /// Marking thresholds (bytes of virtual backlog); `None`: no marking.
    pub thresholds: Option<(u64, u64)>,
    /// The buffer, bytes (virtual drops above it); 0 = unbounded.
    pub limit: u64,
    /// A trimming switch: a UET frame that would overflow `limit` is
    /// trimmed to [`crate::TRIM_TO`] bytes of UDP payload and forwarded,
    /// marked [`crate::TRIM_DSCP`], instead of dropped (the TBF needs room
    /// beyond `limit` for them). `false`: drop-tail.
    #[serde(default)]
    pub trim: bool,
}

/// The ECN marker's counters, plus its virtual backlog now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EcnCounters {
    /// Packets seen on the bottleneck port.
    pub seen: u64,
    /// Packets marked CE.
    pub marked: u64,
    /// Packets chosen for marking that were Not-ECT.
    pub not_ect: u64,
    /// Packets over the virtual queue's limit.
    pub vq_drops: u64,
    /// Peak virtual backlog, bytes.
    pub vq_peak: u64,
    /// Bytes admitted to the virtual queue.
    pub vq_bytes: u64,
    /// Frames trimmed for the limit (a trimming switch).
    pub trimmed: u64,
    /// Frames whose trimming failed in a helper (dropped).
    pub trim_errors: u64,
    /// The virtual backlog at the time of reading, bytes.
    pub vq_backlog: u64,
}

/// Open handles on the pinned ECN maps.
pub(crate) struct EcnMaps {
    config: Array<MapData, u64>,
    state: Array<MapData, u64>,
    counters: Array<MapData, u64>,
}

impl EcnMaps {
    pub(crate) fn open(pins: &Path) -> Result<Self> {
        Ok(Self {
            config: array(pins, ecn::CONFIG_MAP)?,
            state: array(pins, ecn::STATE_MAP)?,
            counters: array(pins, ecn::COUNTERS_MAP)?,
        })
    }

    pub(crate) fn configure(&mut self, s: &EcnSettings) -> Result<()> {
        // Picoseconds per byte: 8e12 / rate.
        let ps = 8_000_000_000_000u64
            .checked_div(s.rate_bps)
            .map_or(0, |p| p.max(1));
        let (kmin, kmax) = s.thresholds.unwrap_or((0, 0));
        let mut flags = 0;
        if s.thresholds.is_some() {
            flags |= ecn::FLAG_MARK;
        }
        if s.trim {
            flags |= ecn::FLAG_TRIM;
        }
        // Thresholds and limit first, the rate (which turns the queue on)
        // last.
        let trim_to = u64::from(crate::TRIM_TO);
        set(&mut self.config, ecn::CONFIG_MAP, ecn::CFG_TRIM_TO, trim_to)?;
        let dscp = u64::from(crate::TRIM_DSCP);
        set(&mut self.config, ecn::CONFIG_MAP, ecn::CFG_TRIM_DSCP, dscp)?;
        set(&mut self.config, ecn::CONFIG_MAP, ecn::CFG_KMIN, kmin)?;
        set(&mut self.config, ecn::CONFIG_MAP, ecn::CFG_KMAX, kmax)?;
        set(&mut self.config, ecn::CONFIG_MAP, ecn::CFG_LIMIT, s.limit)?;
        set(&mut self.config, ecn::CONFIG_MAP, ecn::CFG_FLAGS, flags)?;
        set(&mut self.config, ecn::CONFIG_MAP, ecn::CFG_PS_PER_BYTE, ps)?;
        Ok(())
    }

    /// Reads the counters; `now_ns` is CLOCK_MONOTONIC (for the backlog).
    pub(crate) fn read(&self, now_ns: u64) -> Result<EcnCounters> {
        let c = |i| get(&self.counters, ecn::COUNTERS_MAP, i);
        let ps = get(&self.config, ecn::CONFIG_MAP, ecn::CFG_PS_PER_BYTE)?;
        let finish = get(&self.state, ecn::STATE_MAP, 0)?;
        let now_ps = now_ns.saturating_mul(1000);
        let vq_backlog = finish.saturating_sub(now_ps).checked_div(ps).unwrap_or(0);
        Ok(EcnCounters {
            seen: c(ecn::CNT_SEEN)?,
            marked: c(ecn::CNT_MARKED)?,
            not_ect: c(ecn::CNT_NOT_ECT)?,
            vq_drops: c(ecn::CNT_VQ_DROPS)?,
            vq_peak: c(ecn::CNT_VQ_PEAK)?,
            vq_bytes: c(ecn::CNT_VQ_BYTES)?,
            trimmed: c(ecn::CNT_TRIMMED)?,
            trim_errors: c(ecn::CNT_TRIM_ERRORS)?,
            vq_backlog,
        })
    }
}

/// What the impairment program does to UET frames (all off by default).
/// Probabilities are in [0, 1].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Impairment {
    /// Drop probability.
    pub loss: f64,
    /// Duplication probability.
    pub duplicate: f64,
    /// Probability a frame takes the detour (is overtaken by a few others).
    pub reorder: f64,
    /// Trimming probability.
    pub trim: f64,
    /// UDP payload bytes a trimmed frame keeps (0: headers only).
    pub trim_to: u32,
    /// Impair only frames toward the receiver (host 0), not the ACKs back.
    pub toward_receiver_only: bool,
}

/// The impairment program's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ImpairCounters {
    /// UET frames considered.
    pub seen: u64,
    /// Dropped.
    pub dropped: u64,
    /// Duplicated.
    pub duplicated: u64,
    /// Sent on the detour.
    pub detoured: u64,
    /// Back from the detour.
    pub returned: u64,
    /// Trimmed.
    pub trimmed: u64,
    /// Helper failures.
    pub errors: u64,
}

fn probability(p: f64) -> Result<u64> {
    crate::error::require((0.0..=1.0).contains(&p), "impairment", || {
        format!("probability {p} is not in [0, 1]")
    })?;
    Ok((p * 4_294_967_296.0).round() as u64)
}

/// Open handles on the pinned impairment maps.
pub(crate) struct ImpairMaps {
    config: Array<MapData, u64>,
    counters: Array<MapData, u64>,
}

impl ImpairMaps {
    pub(crate) fn open(pins: &Path) -> Result<Self> {
        Ok(Self {
            config: array(pins, impair::CONFIG_MAP)?,
            counters: array(pins, impair::COUNTERS_MAP)?,
        })
    }

    /// Writes `imp`; `receiver_port` and `detour` are ifindexes in the
    /// switch.
    pub(crate) fn configure(
        &mut self,
        imp: &Impairment,
        receiver_port: u32,
        detour: u32,
    ) -> Result<()> {
        let only = if imp.toward_receiver_only {
            receiver_port
        } else {
            0
        };
        // Turn everything off first, then set the scope, then the
        // probabilities: no frame sees a half-written setting that does
        // more than either the old or the new one.
        for i in [
            impair::CFG_LOSS,
            impair::CFG_DUP,
            impair::CFG_REORDER,
            impair::CFG_TRIM,
        ] {
            set(&mut self.config, impair::CONFIG_MAP, i, 0)?;
        }
        let cfg = &mut self.config;
        let map = impair::CONFIG_MAP;
        set(cfg, map, impair::CFG_IFINDEX, u64::from(only))?;
        set(cfg, map, impair::CFG_DETOUR, u64::from(detour))?;
        set(cfg, map, impair::CFG_TRIM_TO, u64::from(imp.trim_to))?;
        set(cfg, map, impair::CFG_LOSS, probability(imp.loss)?)?;
        set(cfg, map, impair::CFG_DUP, probability(imp.duplicate)?)?;
        set(cfg, map, impair::CFG_REORDER, probability(imp.reorder)?)?;
        set(cfg, map, impair::CFG_TRIM, probability(imp.trim)?)?;
        Ok(())
    }

    pub(crate) fn read(&self) -> Result<ImpairCounters> {
        let c = |i| get(&self.counters, impair::COUNTERS_MAP, i);
        Ok(ImpairCounters {
            seen: c(impair::CNT_SEEN)?,
            dropped: c(impair::CNT_DROPPED)?,
            duplicated: c(impair::CNT_DUPLICATED)?,
            detoured: c(impair::CNT_DETOURED)?,
            returned: c(impair::CNT_RETURNED)?,
            trimmed: c(impair::CNT_TRIMMED)?,
            errors: c(impair::CNT_ERRORS)?,
        })
    }
}
