//! The AF_XDP backend (`docs/architecture.md` §1, §5): a worker's UMEM and sockets
//! ([`XskSet`]), the [`PacketIo`] implementation over them ([`XdpIo`]),
//! the hand-off of frames between workers ([`Handoff`]) and a raw
//! blaster/sink for measuring the ceiling ([`raw`]).
//!
//! The unsafe half (mmap, the rings' atomics, the syscalls) is in
//! `crate::sys::xdp_socket`; this module decides where frames go:
//!
//! ```text
//!            ┌──────── free list ◄──────────── completion ring ◄── TX ring ◄─┐
//!            │             ▲  ▲                                              │
//!            ▼             │  └─ return queue ◄── owner worker (handed off)  │
//!       fill ring ─► RX ring ─► parse ─► sink (in place) ─┘         send ────┘
//! ```
//!
//! Every frame is in exactly one of: the free list, a fill ring (or the
//! kernel's hands after it), a TX or completion ring, or lent to another
//! worker. [`FrameCounts`] counts each place; `free + fill + tx + lent`
//! equals the UMEM's frame count whenever no call is in progress.

use std::io;
use std::net::IpAddr;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use uet_pds::{RxMeta, Transmit};
use uet_wire::Layer;
use uet_wire::encap::{EncapConfig, Transport, emit_frame_with, parse_l2_l4_with};
use uet_wire::inet::{EtherType, EthernetAddress, EthernetRepr, IpRepr};

use crate::capture::{Capture, Direction, Tap};
use crate::io::{IoStats, NextHop, PacketIo};
use crate::neigh::Hints;
use crate::sys::eventfd::{EventFd, poll_in};
use crate::sys::xdp_socket::{
    self as sys, BindFlags, Frame, RingSizes, UmemArea, XDP_PACKET_HEADROOM, XskSocket,
};

/// How to bind the sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum XskMode {
    /// Zero-copy when the driver supports it, copy mode otherwise.
    #[default]
    Auto,
    /// Zero-copy or fail.
    ZeroCopy,
    /// Copy mode (works on every driver, veth included).
    Copy,
}

/// A worker's AF_XDP setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XskConfig {
    /// Interface name.
    pub ifname: String,
    /// NIC queues, one socket each, all sharing the worker's UMEM.
    pub queues: Vec<u32>,
    /// Copy or zero-copy.
    pub mode: XskMode,
    /// UMEM chunk size: 2048 or 4096.
    pub frame_size: u32,
    /// UMEM chunks.
    pub frame_count: u32,
    /// RX and TX ring entries (power of two).
    pub ring_size: u32,
    /// Fill and completion ring entries (power of two).
    pub fill_size: u32,
    /// Extra headroom in front of each packet (`xdp_umem_reg.headroom`),
    /// on top of the kernel's 256 bytes.
    pub umem_headroom: u32,
    /// Bind with `XDP_USE_NEED_WAKEUP` (kick only when the kernel asks).
    pub need_wakeup: bool,
    /// Most UMEM frames one packet may span, 1..=[`MAX_CHAIN`]; 0 derives
    /// it from the interface's MTU (what the largest frame the kernel may
    /// hand over needs). Above 1 the sockets are bound with `XDP_USE_SG`
    /// (multi-buffer AF_XDP): longer packets arrive and leave as chains of
    /// descriptors. A received chain longer than this is a counted drop.
    pub max_frags: u32,
    /// With multi-buffer sockets, group the UMEM's chunks in runs of
    /// `max_frags` consecutive chunks, of which only the first goes round
    /// the rings on its own: a packet is then written in place across its
    /// run and sent as a chain of descriptors into it, and a received
    /// chain is made contiguous by copying its later frames (the short
    /// tail) after its first, instead of gathering all of it into a
    /// buffer. Costs `max_frags - 1` idle chunks per run. Off: every
    /// chunk on its own (what the raw ceiling blaster measures); an
    /// [`XdpIo`] refuses such a set when its packets span several frames.
    pub contiguous_chains: bool,
}

impl Default for XskConfig {
    fn default() -> Self {
        Self {
            ifname: String::new(),
            queues: vec![0],
            mode: XskMode::Auto,
            frame_size: 4096,
            frame_count: 4096,
            ring_size: 2048,
            fill_size: 2048,
            umem_headroom: 0,
            need_wakeup: true,
            max_frags: 0,
            contiguous_chains: true,
        }
    }
}

/// Bytes of the next received packet prefetched while the current one is
/// handled: its headers and the first payload bytes (two cache lines). A
/// whole 1.5 KB packet (24 lines) stalled the loop on the CPU's line-fill
/// buffers; two lines take the first miss, where parsing began, off the
/// critical path, and the checksum's sequential read is left to the
/// hardware prefetcher (perf, 1 GiB xdp write at MTU 1500: parse, checksum
/// and ring handling at the target 15–25 % fewer samples than without,
/// against 5–10 % with the whole packet).
const RX_PREFETCH: u32 = 128;

/// Most frames one packet may span: enough for an MTU of 9216 in 2048-byte
/// frames (9234 bytes in 1792-byte rooms), well under the kernel's own
/// limit of `MAX_SKB_FRAGS + 1` (18) buffers per packet.
pub const MAX_CHAIN: u32 = 6;

/// Room for a VLAN tag beyond the Ethernet header when sizing the frames a
/// packet of the MTU needs.
const L2_ALLOWANCE: u32 = 14 + 4;

/// Frames of `room` bytes a frame of `mtu` (plus Ethernet header and a
/// VLAN tag) needs.
const fn frags_for_mtu(mtu: u32, room: u32) -> u32 {
    (mtu + L2_ALLOWANCE).div_ceil(room)
}

/// Where a worker's UMEM frames are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameCounts {
    /// Frames in the UMEM.
    pub total: u32,
    /// On the free list.
    pub free: u32,
    /// Given to the kernel for receiving (fill ring, or taken from it and
    /// not yet in the RX ring).
    pub fill: u32,
    /// Taken from the RX ring and not yet recycled: between calls, the
    /// first frames of a multi-buffer packet whose last frame the kernel
    /// has not published yet (zero otherwise).
    pub rx_held: u32,
    /// Given to the kernel for sending (TX ring, in flight, or in the
    /// completion ring).
    pub tx: u32,
    /// Handed to another worker and not yet returned.
    pub lent: u32,
    /// The later chunks of contiguous runs
    /// ([`XskConfig::contiguous_chains`]), held by the set between uses.
    pub spare: u32,
}

impl FrameCounts {
    /// Whether every frame is in exactly one place.
    #[must_use]
    pub const fn accounted(&self) -> bool {
        self.free + self.fill + self.rx_held + self.tx + self.lent + self.spare == self.total
    }
}

/// Kernel counters of one socket (`XDP_STATISTICS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XskKernelStats {
    /// Dropped for reasons other than invalid descriptors.
    pub rx_dropped: u64,
    /// Invalid RX descriptors.
    pub rx_invalid_descs: u64,
    /// Invalid TX descriptors.
    pub tx_invalid_descs: u64,
    /// Dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when the kernel wanted a frame.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the TX ring was empty when the kernel looked.
    pub tx_ring_empty_descs: u64,
}

/// A worker's AF_XDP socket counters: the kernel's and the multi-buffer
/// ones of the backend (what `uet stats` shows as `xsk`), so a drop at the
/// socket can be told from a drop on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XskCounters {
    /// `XDP_STATISTICS`, summed over the worker's sockets.
    pub kernel: XskKernelStats,
    /// The backend's counters beyond [`IoStats`].
    pub extra: XdpExtraStats,
}

/// How long a read of the kernel's counters is reused: they are read for
/// the stats path (a syscall per socket), never per packet.
const KERNEL_STATS_TTL: Duration = Duration::from_millis(10);

impl XskKernelStats {
    fn add(&mut self, s: &libc::xdp_statistics) {
        self.rx_dropped += s.rx_dropped;
        self.rx_invalid_descs += s.rx_invalid_descs;
        self.tx_invalid_descs += s.tx_invalid_descs;
        self.rx_ring_full += s.rx_ring_full;
        self.rx_fill_ring_empty_descs += s.rx_fill_ring_empty_descs;
        self.tx_ring_empty_descs += s.tx_ring_empty_descs;
    }
}

/// A worker's UMEM and its sockets (one per queue), with the frame
/// accounting. Open it on a thread in the interface's network namespace.
#[derive(Debug)]
pub struct XskSet {
    // Sockets first: they close before the UMEM is unmapped.
    socks: Vec<XskSocket>,
    queues: Vec<u32>,
    umem: Arc<UmemArea>,
    free: Vec<Frame>,
    /// Chunks per run (1: every chunk on its own); see
    /// [`XskConfig::contiguous_chains`].
    run: u32,
    /// Indexed by chunk: the later chunks of each run while the set holds
    /// them (`None` for a run's first chunk, and while in use).
    spare: Vec<Option<Frame>>,
    spare_count: u32,
    fill: Vec<u32>,
    fill_target: u32,
    tx: u32,
    lent: u32,
    zero_copy: bool,
    need_wakeup: bool,
    headroom: u32,
    max_frags: u32,
    ifindex: u32,
    mac: EthernetAddress,
    mtu: u32,
}

/// Resolves [`XskConfig::max_frags`] against the interface's MTU: the
/// configured bound, or (0) what the MTU needs; an error when the MTU needs
/// more than [`MAX_CHAIN`] frames or more than the configured bound allows.
fn resolve_max_frags(cfg: &XskConfig, headroom: u32, mtu: u32) -> io::Result<u32> {
    let room = cfg.frame_size - headroom;
    let need = frags_for_mtu(mtu, room);
    let n = if cfg.max_frags == 0 {
        need
    } else {
        cfg.max_frags
    };
    if n > MAX_CHAIN {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "an MTU of {mtu} needs {need} UMEM frames of {} bytes per packet; \
                 at most {MAX_CHAIN} are supported (use 4096-byte frames or a smaller MTU)",
                cfg.frame_size
            ),
        ));
    }
    Ok(n.max(1))
}

fn check_pow2(what: &str, v: u32) -> io::Result<()> {
    if v.is_power_of_two() {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} must be a power of two, not {v}"),
        ))
    }
}

impl XskSet {
    /// Maps the UMEM, opens and binds one socket per queue (the first
    /// registers the UMEM, the others share it with rings of their own)
    /// and fills the fill rings.
    pub fn open(cfg: &XskConfig) -> io::Result<Self> {
        if cfg.frame_size != 2048 && cfg.frame_size != 4096 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame size must be 2048 or 4096",
            ));
        }
        check_pow2("ring size", cfg.ring_size)?;
        check_pow2("fill ring size", cfg.fill_size)?;
        if cfg.queues.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no queues"));
        }
        let headroom = XDP_PACKET_HEADROOM + cfg.umem_headroom;
        if headroom + 512 > cfg.frame_size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "headroom leaves too little of the frame",
            ));
        }
        let info = sys::if_info(&cfg.ifname)?;
        let max_frags = resolve_max_frags(cfg, headroom, info.mtu)?;
        let modes: &[bool] = match cfg.mode {
            XskMode::Auto => &[true, false],
            XskMode::ZeroCopy => &[true],
            XskMode::Copy => &[false],
        };
        let mut last = None;
        for &zc in modes {
            match Self::open_mode(cfg, info, zc, headroom, max_frags) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        let e = last.unwrap_or_else(|| io::Error::other("no mode"));
        if max_frags > 1 {
            // The MTU needs multi-buffer sockets (XDP_USE_SG: Linux 6.6+
            // in copy mode; in zero-copy mode only drivers that declare
            // it), and the kernel refused them.
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "{e}: an MTU of {} needs {max_frags} UMEM frames per packet \
                     (multi-buffer AF_XDP, XDP_USE_SG), which this kernel or driver \
                     refused; an MTU of at most {} fits one {}-byte frame",
                    info.mtu,
                    cfg.frame_size - headroom - L2_ALLOWANCE,
                    cfg.frame_size
                ),
            ));
        }
        Err(e)
    }

    fn open_mode(
        cfg: &XskConfig,
        info: sys::IfInfo,
        zc: bool,
        headroom: u32,
        max_frags: u32,
    ) -> io::Result<Self> {
        let (umem, free) = UmemArea::new(cfg.frame_size, cfg.frame_count)?;
        let sizes = RingSizes {
            rx: cfg.ring_size,
            tx: cfg.ring_size,
            fill: cfg.fill_size,
            comp: cfg.fill_size.max(cfg.ring_size),
        };
        let flags = BindFlags {
            zero_copy: zc,
            need_wakeup: cfg.need_wakeup,
            multi_buffer: max_frags > 1,
        };
        let mut socks: Vec<XskSocket> = Vec::with_capacity(cfg.queues.len());
        for &q in &cfg.queues {
            let shared = socks.first().map(AsFd::as_fd);
            let s = XskSocket::open(
                &umem,
                info.index,
                q,
                sizes,
                flags,
                shared,
                cfg.umem_headroom,
            )?;
            socks.push(s);
        }
        let zero_copy = socks[0].zero_copy()?;
        Ok(Self::assemble(
            cfg,
            umem,
            free,
            socks,
            zero_copy,
            (headroom, max_frags),
            (info.index, EthernetAddress(info.mac), info.mtu),
        ))
    }

    /// The set over sockets opened already, its fill rings filled.
    fn assemble(
        cfg: &XskConfig,
        umem: UmemArea,
        free: Vec<Frame>,
        socks: Vec<XskSocket>,
        zero_copy: bool,
        (headroom, max_frags): (u32, u32),
        (ifindex, mac, mtu): (u32, EthernetAddress, u32),
    ) -> Self {
        let run = if cfg.contiguous_chains && max_frags > 1 {
            max_frags
        } else {
            1
        };
        // Only a run's first chunk goes round the rings on its own (a
        // last, incomplete run stays spare for good).
        let mut spare: Vec<Option<Frame>> = (0..umem.count()).map(|_| None).collect();
        let mut firsts = Vec::with_capacity(free.len());
        let mut spare_count = 0;
        for f in free {
            let i = umem.index(&f);
            if i.is_multiple_of(run) && i + run <= umem.count() {
                firsts.push(f);
            } else {
                spare[i as usize] = Some(f);
                spare_count += 1;
            }
        }
        // Half the runs wait in the fill rings, the rest are for sending.
        let n = cfg.queues.len() as u32;
        let fill_target = (firsts.len() as u32 / 2 / n).min(cfg.fill_size).max(1);
        let mut set = Self {
            fill: vec![0; socks.len()],
            socks,
            queues: cfg.queues.clone(),
            umem: Arc::new(umem),
            free: firsts,
            run,
            spare,
            spare_count,
            fill_target,
            tx: 0,
            lent: 0,
            zero_copy,
            need_wakeup: cfg.need_wakeup,
            headroom,
            max_frags,
            ifindex,
            mac,
            mtu,
        };
        set.refill();
        set
    }

    /// Whether the sockets run in zero-copy mode.
    pub const fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Most frames one packet may span (1: single-buffer sockets).
    pub const fn max_frags(&self) -> u32 {
        self.max_frags
    }

    /// The interface's index, MAC and MTU.
    pub const fn interface(&self) -> (u32, EthernetAddress, u32) {
        (self.ifindex, self.mac, self.mtu)
    }

    /// The queues, in socket order.
    pub fn queues(&self) -> &[u32] {
        &self.queues
    }

    /// The socket of each queue (for the XSKMAP), in queue order.
    pub fn fds(&self) -> impl Iterator<Item = (u32, BorrowedFd<'_>)> {
        self.queues
            .iter()
            .copied()
            .zip(self.socks.iter().map(AsFd::as_fd))
    }

    /// Where the frames are.
    pub fn counts(&self) -> FrameCounts {
        FrameCounts {
            total: self.umem.count(),
            free: self.free.len() as u32,
            fill: self.fill.iter().sum(),
            rx_held: 0,
            tx: self.tx,
            lent: self.lent,
            spare: self.spare_count,
        }
    }

    /// The kernel's counters, summed over the sockets.
    pub fn kernel_stats(&self) -> io::Result<XskKernelStats> {
        let mut k = XskKernelStats::default();
        for s in &self.socks {
            k.add(&s.statistics()?);
        }
        Ok(k)
    }

    /// Bytes of a frame before the packet (kernel headroom + UMEM
    /// headroom); packets are sent from the same offset.
    pub const fn headroom(&self) -> u32 {
        self.headroom
    }

    /// Tops every fill ring up to its target from the free list (one
    /// submit per ring) and wakes the driver when it asked.
    pub(crate) fn refill(&mut self) {
        for (s, sock) in self.socks.iter_mut().enumerate() {
            let want = self.fill_target.saturating_sub(self.fill[s]);
            if want == 0 || self.free.is_empty() {
                continue;
            }
            let n = want.min(sock.fill.free(want)).min(self.free.len() as u32);
            for _ in 0..n {
                let Some(f) = self.free.pop() else { break };
                if let Err(f) = sock.fill.push(f) {
                    self.free.push(f);
                    break;
                }
                self.fill[s] += 1;
            }
            sock.fill.submit();
            if self.need_wakeup && sock.fill.needs_wakeup() {
                sock.kick_rx();
            }
        }
    }

    /// Moves completed transmissions back to the free list (a run's
    /// later chunks back to the spares).
    pub(crate) fn reclaim(&mut self) -> u32 {
        let mut n = 0;
        for s in 0..self.socks.len() {
            while let Some(f) = self.socks[s].comp.pop() {
                self.release(f);
                n += 1;
            }
            self.socks[s].comp.release();
        }
        self.tx -= n;
        n
    }

    /// Takes a frame back: a run's first chunk to the free list, a later
    /// one to the spares.
    fn release(&mut self, f: Frame) {
        let i = self.umem.index(&f);
        if i.is_multiple_of(self.run) {
            self.free.push(f);
        } else {
            debug_assert!(self.spare[i as usize].is_none(), "a spare chunk twice");
            self.spare[i as usize] = Some(f);
            self.spare_count += 1;
        }
    }

    /// The later chunks of the run `head` begins, `n` of them (fewer
    /// than [`XskConfig::max_frags`]), into `out`; `false` (nothing
    /// taken) when the set does not group chunks in runs that long, or
    /// when one of them is still out: a run sent as a chain may come back
    /// from the completion ring first chunk first (a driver that
    /// completes descriptor by descriptor), and the first chunk may be
    /// used again before its spares are back.
    fn take_run(&mut self, head: &Frame, n: usize, out: &mut Vec<Frame>) -> bool {
        if n as u32 >= self.run {
            return false;
        }
        let i = self.umem.index(head) as usize;
        debug_assert!(
            (i as u32).is_multiple_of(self.run),
            "not a run's first chunk"
        );
        let spares = &mut self.spare[i + 1..=i + n];
        if spares.iter().any(Option::is_none) {
            return false;
        }
        out.extend(spares.iter_mut().filter_map(Option::take));
        self.spare_count -= n as u32;
        true
    }

    /// A free run whose `n` spares are all here, taken with them (into
    /// `out`), and how many free runs were passed over because a spare of
    /// theirs is still out (each goes to the bottom of the free list).
    fn pop_run(&mut self, n: usize, out: &mut Vec<Frame>) -> (Option<Frame>, u64) {
        let mut busy = 0;
        while (busy as usize) < self.free.len() {
            let f = self.free.pop().expect("not empty");
            if self.take_run(&f, n, out) {
                return (Some(f), busy);
            }
            self.free.push(f);
            let last = self.free.len() - 1;
            self.free.swap(0, last);
            busy += 1;
        }
        (None, busy)
    }

    /// Gives back the chunks [`Self::take_run`] took.
    fn put_run(&mut self, run: &mut Vec<Frame>) {
        for f in run.drain(..) {
            self.release(f);
        }
    }

    /// Pushes TX frames to the kernel and kicks it when it needs it: in
    /// copy mode the kernel sends at most 32 frames per kick, so it is
    /// kicked until the ring is drained or it stops for another reason.
    fn kick_tx(&mut self, s: usize) -> io::Result<()> {
        if self.need_wakeup && !self.socks[s].tx.needs_wakeup() {
            return Ok(());
        }
        let mut budget = self.socks[s].tx.in_kernel() / 32 + 2;
        while budget > 0 {
            budget -= 1;
            let again = self.socks[s].kick_tx()?;
            if !again || self.socks[s].tx.in_kernel() == 0 {
                break;
            }
            // A full completion ring stops the kernel too.
            self.reclaim();
        }
        Ok(())
    }
}

/// Descriptor-level use of a set with no protocol on it: what the raw
/// ceiling blaster and sink (`uet_tools::blast::xsk`) measure, so uetd's
/// throughput is reported beside what these same rings reach alone.
impl XskSet {
    /// Bytes a frame can carry after the headroom.
    pub fn frame_room(&self) -> usize {
        (self.umem.frame_size() - self.headroom) as usize
    }

    /// Writes a packet into every free frame once: `write(i, buf)` fills
    /// `buf` (the frame after the headroom) and returns the packet length.
    pub fn write_free_frames(
        &mut self,
        mut write: impl FnMut(usize, &mut [u8]) -> io::Result<u32>,
    ) -> io::Result<()> {
        let hr = self.headroom;
        for (i, f) in self.free.iter_mut().enumerate() {
            let len = write(i, &mut self.umem.chunk_mut(f)[hr as usize..])?;
            self.umem.set_span(f, hr, len);
        }
        Ok(())
    }

    /// Frames a packet of `len` bytes spans (each carries
    /// [`Self::frame_room`] bytes).
    pub fn frames_per_packet(&self, len: u32) -> u32 {
        len.div_ceil(self.umem.frame_size() - self.headroom).max(1)
    }

    /// Queues up to `n` packets of `len` bytes from free frames, as written
    /// by [`Self::write_free_frames`], on the first socket's TX ring and
    /// kicks the kernel; returns how many packets were queued. A packet
    /// longer than a frame goes out as a chain of
    /// [`Self::frames_per_packet`] frames (`XDP_PKT_CONTD`), queued only
    /// whole: a chain that does not fit the ring or the free list waits.
    /// Completions are reclaimed first.
    pub fn resend_free_frames(&mut self, n: u32, len: u32) -> io::Result<u32> {
        self.reclaim();
        let room = self.umem.frame_size() - self.headroom;
        let k = self.frames_per_packet(len);
        if k > self.max_frags {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a {len}-byte packet needs {k} frames, more than the sockets allow"),
            ));
        }
        let mut sent = 0;
        let mut frames = 0;
        if n > 0 {
            let mut slots = self.socks[0].tx.free(n * k);
            while sent < n && slots >= k && self.free.len() >= k as usize {
                let mut left = len;
                for i in 0..k {
                    let Some(mut f) = self.free.pop() else {
                        unreachable!("counted above")
                    };
                    // A completed frame comes back without its length.
                    let part = left.min(room);
                    left -= part;
                    self.umem.set_span(&mut f, self.headroom, part);
                    if let Err(f) = self.socks[0].tx.push_part(f, i + 1 < k) {
                        unreachable!("slot counted above: {f:?}");
                    }
                }
                slots -= k;
                frames += k;
                sent += 1;
            }
        }
        if sent > 0 {
            self.socks[0].tx.submit();
            self.tx += frames;
        }
        if self.socks[0].tx.in_kernel() > 0 {
            self.kick_tx(0)?;
        }
        Ok(sent)
    }

    /// Frames still with the kernel for transmission (after reclaiming
    /// completions).
    pub fn tx_outstanding(&mut self) -> u32 {
        self.reclaim();
        self.tx
    }

    /// Kicks the first socket's transmission.
    pub fn kick(&mut self) -> io::Result<()> {
        self.kick_tx(0)
    }

    /// Takes every received frame off the RX rings unread, refills the
    /// fill rings and returns (packets, bytes): a chain of frames
    /// (`XDP_PKT_CONTD`) is one packet, counted at its last frame.
    pub fn recycle_received(&mut self) -> (u32, u64) {
        let mut got = 0u32;
        let mut bytes = 0u64;
        let mut frames = 0u32;
        for s in 0..self.socks.len() {
            let mut popped = 0;
            while let Some((f, more)) = self.socks[s].rx.pop_part() {
                bytes += u64::from(f.len());
                self.free.push(f);
                popped += 1;
                got += u32::from(!more);
            }
            if popped > 0 {
                self.socks[s].rx.release();
                self.fill[s] -= popped;
                frames += popped;
            }
        }
        if frames > 0 {
            self.refill();
        }
        (got, bytes)
    }

    /// Waits until a socket has something to read, or `timeout`.
    pub fn wait_readable(&self, timeout: Duration) -> io::Result<()> {
        let mut fds = [self.socks[0].as_fd(); 16];
        let n = self.socks.len().min(16);
        for (d, s) in fds.iter_mut().zip(&self.socks) {
            *d = s.as_fd();
        }
        poll_in(&fds[..n], Some(timeout))?;
        Ok(())
    }
}

/// Turns transmit checksum offload of `ifname` on or off (what `ethtool -K
/// IF tx off` does), in the calling thread's network namespace.
///
/// Needed on a veth whose *kernel* traffic reaches AF_XDP on the peer: the
/// stack leaves the UDP checksum of a veth-bound datagram to the "device"
/// (CHECKSUM_PARTIAL), veth never fills it in, and XDP hands the frame to
/// AF_XDP as it is — with a checksum that does not verify. A real NIC
/// writes the checksum on the wire, so this is for veth labs only.
pub fn set_tx_checksum_offload(ifname: &str, on: bool) -> io::Result<()> {
    Ok(sys::set_tx_checksum(ifname, on)?)
}

/// The descriptors of a packet lent to another worker: the origin worker
/// (whose UMEM holds it), its frame, and the further frames of a
/// multi-buffer packet in order. No bytes are copied.
#[derive(Debug)]
struct Lent {
    origin: u16,
    frame: Frame,
    rest: [Option<Frame>; MAX_CHAIN as usize - 1],
    /// The packet's arrival stamp, taken (and cleared) by the worker that
    /// received it.
    arrived: Option<u64>,
}

impl Lent {
    fn frames(&self) -> impl Iterator<Item = &Frame> {
        std::iter::once(&self.frame).chain(self.rest.iter().flatten())
    }
}

/// Copies the data of `frames` one after the other into `scratch`; returns
/// the length. `scratch` holds [`MAX_CHAIN`] frames, the longest chain.
fn gather<'a>(
    scratch: &mut [u8],
    umem: &UmemArea,
    frames: impl Iterator<Item = &'a Frame>,
) -> usize {
    let mut at = 0;
    for f in frames {
        let d = umem.data(f);
        scratch[at..at + d.len()].copy_from_slice(d);
        at += d.len();
    }
    at
}

#[derive(Debug)]
struct Registered {
    umem: Arc<UmemArea>,
    returns: ArrayQueue<Frame>,
}

#[derive(Debug)]
struct Slot {
    reg: OnceLock<Registered>,
    inbox: ArrayQueue<Lent>,
    sleeping: AtomicBool,
    /// Signalled when a sleeping worker has frames to take.
    wakeup: EventFd,
}

/// The PDC owner of a peer: `Fn(peer) -> worker index`.
pub type OwnerFn = dyn Fn(IpAddr) -> usize + Send + Sync;

/// The hand-off between a daemon's workers: each PDC has one owning
/// worker (chosen by the owner function from the peer address); a frame
/// that arrives at another worker is passed to the owner through a
/// lock-free queue (descriptor only) and the owner returns it through the
/// origin's return queue once it has been processed. All UMEMs live in
/// this one process, so the owner reads the bytes where they are.
pub struct Handoff {
    owner: Box<OwnerFn>,
    slots: Box<[Slot]>,
}

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handoff")
            .field("workers", &self.slots.len())
            .finish_non_exhaustive()
    }
}

impl Handoff {
    /// A hand-off for `workers` workers (≤ 64) with inboxes of `capacity`
    /// frames each.
    pub fn new(workers: usize, capacity: usize, owner: Box<OwnerFn>) -> io::Result<Arc<Self>> {
        if workers == 0 || workers > 64 || capacity == 0 {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let slots = (0..workers)
            .map(|_| {
                Ok(Slot {
                    reg: OnceLock::new(),
                    inbox: ArrayQueue::new(capacity),
                    sleeping: AtomicBool::new(false),
                    wakeup: EventFd::new()?,
                })
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Arc::new(Self {
            owner,
            slots: slots.into(),
        }))
    }

    /// A hand-off for a single worker (nothing is ever handed off).
    pub fn single() -> io::Result<Arc<Self>> {
        Self::new(1, 1, Box::new(|_| 0))
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.slots.len()
    }

    fn owner_of(&self, peer: IpAddr) -> usize {
        (self.owner)(peer) % self.slots.len()
    }

    fn umem(&self, worker: u16) -> &Registered {
        self.slots[usize::from(worker)]
            .reg
            .get()
            .expect("a frame from an unregistered worker")
    }

    /// Wakes the sleeping workers among `mask` (bit i: worker i), after
    /// frames were pushed to their inbox or return queue.
    fn wake(&self, mask: u64) {
        if mask == 0 {
            return;
        }
        // Pairs with the fence in `XdpIo::wait`: either the sleeper sees
        // our push, or we see it sleeping and ring.
        fence(Ordering::SeqCst);
        for (i, s) in self.slots.iter().enumerate() {
            if mask & (1 << i) != 0 && s.sleeping.load(Ordering::SeqCst) {
                s.wakeup.signal();
            }
        }
    }
}

/// Everything an [`XdpIo`] needs besides its sockets.
#[derive(Debug, Clone)]
pub struct XdpIoConfig {
    /// Sockets and UMEM.
    pub xsk: XskConfig,
    /// Our address on the interface (frames to other addresses are
    /// dropped; sent frames carry it).
    pub local_ip: IpAddr,
    /// Encapsulation (UDP port, IP protocol, CRC trailer, trimming code
    /// points).
    pub encap: EncapConfig,
    /// Send UET directly over IP (`encap.ip_protocol`, entropy header)
    /// instead of UDP; frames received in the other encapsulation are
    /// dropped and counted (`rx_other_encap`).
    pub native_ip: bool,
    /// MTU override (default: the interface's).
    pub mtu: Option<u32>,
}

/// Counters beyond [`IoStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpExtraStats {
    /// Of `rx_dropped`: parsed but addressed to another IP.
    pub rx_not_for_us: u64,
    /// Of `rx_dropped`: the owner's inbox was full.
    pub handoff_full: u64,
    /// Frames received from other workers and processed here.
    pub handed_in: u64,
    /// Of `tx_ring_full`: no free frame to send from.
    pub tx_no_frame: u64,
    /// TX kicks (syscalls).
    pub tx_kicks: u64,
    /// Packets received as a chain of frames (multi-buffer).
    pub rx_multi_buffer: u64,
    /// Of those, gathered into a buffer (copied whole) because they could
    /// not be made contiguous in place: the chunks are not grouped in runs
    /// ([`XskConfig::contiguous_chains`]), the chain was longer than a
    /// run, its first frame was not filled to the end of its chunk, or
    /// another worker received it.
    pub rx_gathered: u64,
    /// Of `rx_dropped`: chains longer than the bound
    /// ([`XskConfig::max_frags`]).
    pub rx_chain_too_long: u64,
    /// Packets sent as a chain of frames (multi-buffer).
    pub tx_multi_buffer: u64,
    /// Free runs of chunks passed over for sending because a chunk of
    /// theirs was still on its way back from the kernel.
    pub tx_run_busy: u64,
}

/// The AF_XDP [`PacketIo`] of one worker.
pub struct XdpIo {
    set: XskSet,
    umem: Arc<UmemArea>,
    worker: usize,
    hub: Arc<Handoff>,
    next_hop: Arc<dyn NextHop>,
    /// Next hops learnt from frames delivered here, used only where
    /// `next_hop` has no entry.
    hints: Hints,
    wire: Wire,
    /// Mirrors frames while `uet capture` runs (attached by the worker).
    capture: Option<Arc<Capture>>,
    hdr_len: usize,
    max_uet: usize,
    /// Frames the largest packet spans on TX (1: written in place).
    tx_frags: u32,
    /// Per socket: the frames of a multi-buffer packet taken off its RX
    /// ring so far (counted in `rx_held`), and whether the rest of a chain
    /// found too long is being dropped.
    rx_chains: Vec<(Vec<Frame>, bool)>,
    /// A received multi-buffer packet gathered in one piece, where its
    /// frames cannot be joined in place.
    scratch: Box<[u8]>,
    /// The spare chunks of the run in use (RX: a chain made contiguous;
    /// TX: a packet written across its run).
    run_buf: Vec<Frame>,
    stats: IoStats,
    extra: XdpExtraStats,
    /// The kernel's counters as last read, and when.
    kernel: std::cell::Cell<Option<(Instant, XskKernelStats)>>,
}

impl std::fmt::Debug for XdpIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpIo")
            .field("worker", &self.worker)
            .field("set", &self.set)
            .field("local_ip", &self.wire.local_ip)
            .field("max_uet", &self.max_uet)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// L2-L4 header bytes in front of the UET bytes: Ethernet, IP, and UDP or
/// the entropy header.
const fn header_len(ip: IpAddr, native_ip: bool) -> usize {
    let ip_len = match ip {
        IpAddr::V4(_) => 20,
        IpAddr::V6(_) => 40,
    };
    14 + ip_len + if native_ip { 4 } else { 8 }
}

/// What the receive path checks a frame against: our address and wire
/// settings; and whether a mismatch was already warned about.
#[derive(Debug)]
struct Wire {
    encap: EncapConfig,
    native_ip: bool,
    local_ip: IpAddr,
    /// A warning was logged for: a bad trailer, the other encapsulation.
    warned: [bool; 2],
}

impl Wire {
    /// Parses a frame; `None` (counted) when it is not a UET frame for us.
    /// A trailer that does not match and a frame in the other
    /// encapsulation are counted by reason and warned about once: both
    /// mean the peer's wire settings differ from ours.
    fn parse(
        &mut self,
        stats: &mut IoStats,
        extra: &mut XdpExtraStats,
        data: &[u8],
    ) -> Option<(RxMeta, Range<usize>)> {
        let (h, range) = match parse_l2_l4_with(data, &self.encap, crate::sys::simd::data) {
            Ok(p) => p,
            Err(e) => {
                stats.rx_dropped += 1;
                if e.layer == Layer::Trailer {
                    stats.rx_bad_crc += 1;
                    if !std::mem::replace(&mut self.warned[0], true) {
                        tracing::warn!(
                            error = %e,
                            "dropping UET frames whose CRC32C trailer does not match \
                             (counted in rx_bad_crc): check that both ends agree on \
                             --crc-trailer"
                        );
                    }
                }
                return None;
            }
        };
        if matches!(h.transport, Transport::Entropy(_)) != self.native_ip {
            stats.rx_dropped += 1;
            stats.rx_other_encap += 1;
            if !std::mem::replace(&mut self.warned[1], true) {
                tracing::warn!(
                    peer = %h.ip.src_addr(),
                    received = %h.transport,
                    "dropping UET frames in the other encapsulation (counted in \
                     rx_other_encap): check that both ends agree on --encap"
                );
            }
            return None;
        }
        if h.ip.dst_addr() != self.local_ip {
            stats.rx_dropped += 1;
            extra.rx_not_for_us += 1;
            return None;
        }
        let meta = RxMeta {
            src: h.ip.src_addr(),
            ev: h.entropy,
            ecn: h.ip.ecn(),
            trimmed: h.trimmed,
            nominal_size: h.nominal_pktsize() as u32,
            sdi: None,
            arrived: None,
        };
        Some((meta, range))
    }
}

/// Where one receive call stands: how many more frames it may take, how
/// many it delivered, and which workers to wake (bit i: worker i) once it
/// has pushed frames to their inbox or return queue.
#[derive(Debug)]
struct RxBatch {
    left: usize,
    delivered: usize,
    wake: u64,
}

/// Delivers a UET frame to the worker's endpoint: learns the sender's
/// next hop from it (this worker owns the peer, so it keeps the hint),
/// counts it and lends the UET bytes (`uet` in `frame`) to `sink`.
#[inline]
fn deliver(
    hints: &mut Hints,
    next_hop: &dyn NextHop,
    stats: &mut IoStats,
    (mut meta, uet): (RxMeta, Range<usize>),
    arrived: Option<u64>,
    frame: &mut [u8],
    sink: &mut dyn FnMut(&RxMeta, &mut [u8]),
) {
    meta.arrived = arrived.map(uet_wire::time::Instant::from_nanos);
    hints.observe(next_hop, meta.src, frame);
    stats.rx_packets += 1;
    stats.rx_bytes += frame.len() as u64;
    sink(&meta, &mut frame[uet]);
}

impl XdpIo {
    /// Opens worker `worker`'s sockets (on the calling thread's network
    /// namespace) and registers its UMEM with the hand-off.
    pub fn new(
        worker: usize,
        cfg: &XdpIoConfig,
        hub: Arc<Handoff>,
        next_hop: Arc<dyn NextHop>,
    ) -> io::Result<Self> {
        let set = XskSet::open(&cfg.xsk)?;
        Self::with_set(worker, set, cfg, hub, next_hop)
    }

    /// Wraps sockets opened already.
    pub fn with_set(
        worker: usize,
        set: XskSet,
        cfg: &XdpIoConfig,
        hub: Arc<Handoff>,
        next_hop: Arc<dyn NextHop>,
    ) -> io::Result<Self> {
        let slot = hub
            .slots
            .get(worker)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no such worker"))?;
        let umem = Arc::clone(&set.umem);
        slot.reg
            .set(Registered {
                umem: Arc::clone(&umem),
                returns: ArrayQueue::new(umem.count() as usize),
            })
            .map_err(|_| io::Error::new(io::ErrorKind::AlreadyExists, "worker registered twice"))?;
        let hdr_len = header_len(cfg.local_ip, cfg.native_ip);
        let mtu = cfg.mtu.unwrap_or(set.mtu) as usize;
        let room = (umem.frame_size() - set.headroom) as usize;
        let by_frame = set.max_frags as usize * room - hdr_len;
        let by_mtu = mtu.saturating_sub(hdr_len - 14);
        let max_uet = by_frame.min(by_mtu).saturating_sub(cfg.encap.trailer_len());
        let tx_frags = (hdr_len + max_uet + cfg.encap.trailer_len()).div_ceil(room) as u32;
        let rx_chains = (0..set.socks.len())
            .map(|_| (Vec::with_capacity(MAX_CHAIN as usize), false))
            .collect();
        let scratch = vec![0; MAX_CHAIN as usize * umem.frame_size() as usize].into_boxed_slice();
        if tx_frags > set.run.max(1) {
            // Packets longer than a frame are written in place across a
            // run of chunks: the set must group them.
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "packets of {tx_frags} UMEM frames need the chunks grouped in runs \
                     (XskConfig::contiguous_chains)"
                ),
            ));
        }
        Ok(Self {
            set,
            umem,
            worker,
            hub,
            next_hop,
            hints: Hints::default(),
            wire: Wire {
                encap: cfg.encap,
                native_ip: cfg.native_ip,
                local_ip: cfg.local_ip,
                warned: [false; 2],
            },
            capture: None,
            hdr_len,
            max_uet,
            tx_frags,
            rx_chains,
            scratch,
            run_buf: Vec::with_capacity(MAX_CHAIN as usize),
            stats: IoStats::default(),
            extra: XdpExtraStats::default(),
            kernel: std::cell::Cell::new(None),
        })
    }

    /// The sockets.
    pub const fn xsk(&self) -> &XskSet {
        &self.set
    }

    /// Where this worker's frames are.
    pub fn frame_counts(&self) -> FrameCounts {
        let mut c = self.set.counts();
        c.rx_held = self.rx_chains.iter().map(|(c, _)| c.len() as u32).sum();
        c
    }

    /// Counters beyond [`IoStats`].
    pub const fn extra_stats(&self) -> XdpExtraStats {
        self.extra
    }

    /// The next hops this worker learnt from received frames.
    pub const fn hints(&self) -> &Hints {
        &self.hints
    }

    /// Housekeeping without traffic: reclaims completions and returned
    /// frames and refills. Call it before reading [`Self::frame_counts`]
    /// at shutdown.
    pub fn flush(&mut self) -> io::Result<()> {
        self.take_returns();
        self.set.reclaim();
        for s in 0..self.set.socks.len() {
            if self.set.socks[s].tx.in_kernel() > 0 {
                self.set.kick_tx(s)?;
            }
        }
        self.set.reclaim();
        self.set.refill();
        Ok(())
    }

    fn take_returns(&mut self) {
        let reg = self.hub.umem(self.worker as u16);
        while let Some(f) = reg.returns.pop() {
            self.set.free.push(f);
            self.set.lent -= 1;
        }
    }

    /// The next-hop MAC for `dst`: the kernel's, else a live hint.
    fn mac_for(&self, dst: IpAddr) -> Option<EthernetAddress> {
        self.next_hop
            .lookup(dst)
            .or_else(|| self.hints.get(dst, Instant::now()))
    }

    fn ip_repr(&self, t: &Transmit) -> Option<IpRepr> {
        IpRepr::udp(self.wire.local_ip, t.dst, t.dscp, t.ecn)
    }
}

impl XdpIo {
    /// Frames other workers received for peers this worker owns: captured
    /// here (the receiving worker handed them on uncaptured), delivered,
    /// and returned to their origin's UMEM. A multi-buffer packet is
    /// gathered into this worker's scratch buffer first.
    fn recv_handed_in(
        &mut self,
        b: &mut RxBatch,
        sink: &mut dyn FnMut(&RxMeta, &mut [u8]),
        mut tap: Option<&mut Tap<'_>>,
    ) {
        let inbox = &self.hub.slots[self.worker].inbox;
        while b.left > 0 {
            let Some(mut l) = inbox.pop() else { break };
            b.left -= 1;
            let reg = self.hub.umem(l.origin);
            let arrived = l.arrived;
            let data = if l.rest[0].is_some() {
                self.extra.rx_gathered += 1;
                let n = gather(&mut self.scratch, &reg.umem, l.frames());
                &mut self.scratch[..n]
            } else {
                reg.umem.data_mut(&mut l.frame)
            };
            self.extra.handed_in += 1;
            if let Some(t) = tap.as_deref_mut() {
                t.frame(Direction::Rx, data);
            }
            if let Some(p) = self.wire.parse(&mut self.stats, &mut self.extra, data) {
                deliver(
                    &mut self.hints,
                    &*self.next_hop,
                    &mut self.stats,
                    p,
                    arrived,
                    data,
                    sink,
                );
                b.delivered += 1;
            }
            // The return queue holds every frame of the origin's UMEM.
            let Lent { frame, rest, .. } = l;
            for f in std::iter::once(frame).chain(rest.into_iter().flatten()) {
                let _ = reg.returns.push(f);
            }
            b.wake |= 1 << l.origin;
        }
    }

    /// Frames of socket `s`'s RX ring: each packet (one frame, or a chain
    /// of frames marked `XDP_PKT_CONTD`) parsed, then delivered here when
    /// this worker owns its peer, handed to the owner otherwise, or
    /// dropped; the ring's slots go back to the kernel in one release. The
    /// budget counts packets, and a chain begun is taken whole; a chain
    /// longer than the bound is dropped (counted once) with the rest of
    /// its frames.
    fn recv_ring(
        &mut self,
        s: usize,
        b: &mut RxBatch,
        sink: &mut dyn FnMut(&RxMeta, &mut [u8]),
        mut tap: Option<&mut Tap<'_>>,
    ) {
        let mut popped = 0;
        loop {
            let (chain, discarding) = &self.rx_chains[s];
            if b.left == 0 && chain.is_empty() && !discarding {
                break;
            }
            let Some((f, more)) = self.set.socks[s].rx.pop_part() else {
                break;
            };
            popped += 1;
            // The next packet's headers start on their way into this CPU's
            // cache while this one is parsed and placed (copy mode: the
            // kernel wrote them on another CPU).
            if let Some((addr, len)) = self.set.socks[s].rx.peek() {
                // From the arrival stamp in front of the data, which lies
                // in the cache line before the packet's first.
                let meta = xdp_prog::rx_meta::LEN as u64;
                self.umem.prefetch(
                    addr.saturating_sub(meta),
                    len.min(RX_PREFETCH) + meta as u32,
                );
            }
            let (chain, discarding) = &mut self.rx_chains[s];
            if *discarding {
                self.set.free.push(f);
                *discarding = more;
                continue;
            }
            if !more && chain.is_empty() {
                b.left = b.left.saturating_sub(1);
                self.recv_frame(f, b, sink, tap.as_deref_mut());
                continue;
            }
            chain.push(f);
            if more && chain.len() as u32 >= self.set.max_frags {
                self.set.free.append(chain);
                *discarding = true;
                self.stats.rx_dropped += 1;
                self.extra.rx_chain_too_long += 1;
                b.left = b.left.saturating_sub(1);
                continue;
            }
            if !more {
                b.left = b.left.saturating_sub(1);
                self.recv_chain(s, b, sink, tap.as_deref_mut());
            }
        }
        if popped > 0 {
            self.set.fill[s] -= popped;
            self.set.socks[s].rx.release();
        }
    }

    /// One received single-frame packet, read in place.
    fn recv_frame(
        &mut self,
        mut f: Frame,
        b: &mut RxBatch,
        sink: &mut dyn FnMut(&RxMeta, &mut [u8]),
        tap: Option<&mut Tap<'_>>,
    ) {
        let arrived = self.umem.take_rx_stamp(&mut f);
        let data = self.umem.data(&f);
        let Some(p) = self.wire.parse(&mut self.stats, &mut self.extra, data) else {
            // Seen and dropped (malformed, not for us): captured, since
            // that is what a capture is for.
            if let Some(t) = tap {
                t.frame(Direction::Rx, data);
            }
            self.set.free.push(f);
            return;
        };
        let owner = self.hub.owner_of(p.0.src);
        if owner == self.worker {
            if let Some(t) = tap {
                t.frame(Direction::Rx, data);
            }
            deliver(
                &mut self.hints,
                &*self.next_hop,
                &mut self.stats,
                p,
                arrived,
                self.umem.data_mut(&mut f),
                sink,
            );
            b.delivered += 1;
            self.set.free.push(f);
        } else {
            let lent = Lent {
                origin: self.worker as u16,
                frame: f,
                rest: Default::default(),
                arrived,
            };
            if let Some(l) = self.hand_off(owner, lent, b) {
                if let Some(t) = tap {
                    t.frame(Direction::Rx, self.umem.data(&l.frame));
                }
                self.set.free.push(l.frame);
            }
        }
    }

    /// The multi-buffer packet collected in socket `s`'s chain, made
    /// contiguous — in place when its first frame begins a run of chunks
    /// and runs to the end of its chunk (its later frames, the short tail,
    /// copied into the run's spare chunks after it), else gathered into
    /// the scratch buffer — then parsed, delivered or handed off (as the
    /// chain of descriptors) or dropped.
    fn recv_chain(
        &mut self,
        s: usize,
        b: &mut RxBatch,
        sink: &mut dyn FnMut(&RxMeta, &mut [u8]),
        mut tap: Option<&mut Tap<'_>>,
    ) {
        self.extra.rx_multi_buffer += 1;
        let (head, tail) = self.rx_chains[s]
            .0
            .split_first_mut()
            .expect("a chain has frames");
        let arrived = self.umem.take_rx_stamp(head);
        let joined =
            self.umem.ends_chunk(head) && self.set.take_run(head, tail.len(), &mut self.run_buf);
        let data: &mut [u8] = if joined {
            let tail_len: usize = tail.iter().map(|f| f.len() as usize).sum();
            let (r0, rrest) = self.run_buf.split_first_mut().expect("taken above");
            let spill = self.umem.span_mut(r0, rrest, 0, tail_len);
            let mut at = 0;
            for f in tail.iter() {
                let d = self.umem.data(f);
                spill[at..at + d.len()].copy_from_slice(d);
                at += d.len();
            }
            let off = self.umem.offset(head);
            let len = head.len() as usize + tail_len;
            self.umem.span_mut(head, &mut self.run_buf, off, len)
        } else {
            self.extra.rx_gathered += 1;
            let n = gather(
                &mut self.scratch,
                &self.umem,
                std::iter::once(&*head).chain(tail.iter()),
            );
            &mut self.scratch[..n]
        };
        let parsed = self.wire.parse(&mut self.stats, &mut self.extra, data);
        let owner = parsed.as_ref().map(|p| self.hub.owner_of(p.0.src));
        match (parsed, owner) {
            (Some(p), Some(o)) if o == self.worker => {
                if let Some(t) = tap.as_deref_mut() {
                    t.frame(Direction::Rx, data);
                }
                deliver(
                    &mut self.hints,
                    &*self.next_hop,
                    &mut self.stats,
                    p,
                    arrived,
                    data,
                    sink,
                );
                b.delivered += 1;
            }
            (Some(_), Some(o)) => {
                let mut chain = self.rx_chains[s].0.drain(..);
                let frame = chain.next().expect("a chain has frames");
                let mut rest: [Option<Frame>; MAX_CHAIN as usize - 1] = Default::default();
                for (slot, f) in rest.iter_mut().zip(chain) {
                    *slot = Some(f);
                }
                let lent = Lent {
                    origin: self.worker as u16,
                    frame,
                    rest,
                    arrived,
                };
                if let Some(l) = self.hand_off(o, lent, b) {
                    if let Some(t) = tap.as_deref_mut() {
                        let n = gather(&mut self.scratch, &self.umem, l.frames());
                        t.frame(Direction::Rx, &self.scratch[..n]);
                    }
                    let Lent { frame, rest, .. } = l;
                    self.set.free.push(frame);
                    self.set.free.extend(rest.into_iter().flatten());
                }
            }
            _ => {
                if let Some(t) = tap {
                    t.frame(Direction::Rx, data);
                }
            }
        }
        self.set.put_run(&mut self.run_buf);
        self.set.free.append(&mut self.rx_chains[s].0);
    }

    /// Lends a packet's frames to worker `owner` (descriptors only); when
    /// its inbox is full the packet comes back (`Some`), counted as
    /// dropped, for the caller to capture and free.
    fn hand_off(&mut self, owner: usize, lent: Lent, b: &mut RxBatch) -> Option<Lent> {
        let frames = lent.frames().count() as u32;
        match self.hub.slots[owner].inbox.push(lent) {
            Ok(()) => {
                self.set.lent += frames;
                self.stats.handed_off += 1;
                b.wake |= 1 << owner;
                None
            }
            Err(l) => {
                self.stats.rx_dropped += 1;
                self.extra.handoff_full += 1;
                Some(l)
            }
        }
    }
}

/// Why a datagram cannot be sent (see [`XdpIo::headers_for`]).
#[derive(Debug, Clone, Copy)]
enum Unsendable {
    /// Not a valid IP pair, or longer than the MTU allows.
    Invalid,
    /// No next-hop MAC yet.
    NoNeighbour,
}

/// Counts a datagram [`XdpIo::headers_for`] refused.
fn count_unsendable(stats: &mut IoStats, u: Unsendable) {
    stats.tx_dropped += 1;
    if matches!(u, Unsendable::NoNeighbour) {
        stats.tx_no_neighbour += 1;
    }
}

impl XdpIo {
    /// The Ethernet, IP and transport headers of `t`, or why it cannot be
    /// sent: not a valid IP pair or longer than the MTU allows, or no next
    /// hop yet (one is requested). Takes `&self`, so the send loops can
    /// hold the UMEM borrowed from `self` meanwhile instead of a handle of
    /// their own (an atomic increment and decrement per call); they count
    /// the refusal with [`count_unsendable`].
    fn headers_for(&self, t: &Transmit) -> Result<(EthernetRepr, IpRepr, Transport), Unsendable> {
        let Some(ip) = self.ip_repr(t).filter(|_| t.len <= self.max_uet) else {
            return Err(Unsendable::Invalid);
        };
        let Some(dst_mac) = self.mac_for(t.dst) else {
            self.next_hop.request(t.dst);
            return Err(Unsendable::NoNeighbour);
        };
        let eth = EthernetRepr {
            dst: dst_mac,
            src: self.set.mac,
            vlan: None,
            ethertype: EtherType::Ipv4,
        };
        let transport = if self.wire.native_ip {
            Transport::Entropy(t.ev)
        } else {
            Transport::udp(t.ev, &self.wire.encap)
        };
        Ok((eth, ip, transport))
    }

    /// Kicks socket `s` when its TX ring holds descriptors.
    fn finish_send(&mut self, s: usize) -> io::Result<()> {
        if self.set.socks[s].tx.in_kernel() > 0 {
            self.extra.tx_kicks += 1;
            self.set.kick_tx(s)?;
        }
        Ok(())
    }

    /// [`PacketIo::send`] when every packet fits one frame: the source
    /// writes the UET bytes in place in the frame.
    fn send_frames(
        &mut self,
        max: usize,
        source: &mut dyn FnMut(&mut [u8]) -> Option<Transmit>,
        mut tap: Option<Tap<'_>>,
    ) -> io::Result<usize> {
        let s = 0;
        let room = self.set.socks[s].tx.free(max as u32).min(max as u32) as usize;
        if room == 0 {
            self.stats.tx_ring_full += 1;
            self.set.kick_tx(s)?;
            return Ok(0);
        }
        let hr = self.set.headroom as usize;
        let umem = &self.umem;
        let uet_at = hr + self.hdr_len;
        let mut sent = 0;
        // Every datagram the source produces counts against `max`, sent or
        // dropped, so a source that only yields undeliverable ones ends.
        for _ in 0..room {
            let Some(mut f) = self.set.free.pop() else {
                self.stats.tx_ring_full += 1;
                self.extra.tx_no_frame += 1;
                break;
            };
            let chunk = umem.chunk_mut(&mut f);
            let Some(t) = source(&mut chunk[uet_at..uet_at + self.max_uet]) else {
                self.set.free.push(f);
                break;
            };
            let (eth, ip, transport) = match self.headers_for(&t) {
                Ok(h) => h,
                Err(u) => {
                    count_unsendable(&mut self.stats, u);
                    self.set.free.push(f);
                    continue;
                }
            };
            // The UET bytes are in place: emit_frame writes the headers in
            // front, the checksum and the trailer.
            match emit_frame_with(
                &eth,
                &ip,
                &transport,
                &self.wire.encap,
                t.len,
                &mut chunk[hr..],
                |_| {},
                crate::sys::simd::data,
            ) {
                Ok(n) => {
                    if let Some(t) = tap.as_mut() {
                        t.frame(Direction::Tx, &chunk[hr..hr + n]);
                    }
                    umem.set_span(&mut f, hr as u32, n as u32);
                    if let Err(f) = self.set.socks[s].tx.push(f) {
                        // Cannot happen (room was reserved); keep the frame.
                        self.set.free.push(f);
                        self.stats.tx_dropped += 1;
                        continue;
                    }
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += n as u64;
                    sent += 1;
                }
                Err(_) => {
                    self.stats.tx_dropped += 1;
                    self.set.free.push(f);
                }
            }
        }
        if sent > 0 {
            self.set.socks[s].tx.submit();
            self.set.tx += sent as u32;
        }
        self.finish_send(s)?;
        Ok(sent)
    }

    /// [`PacketIo::send`] when the largest packet spans several frames
    /// and the chunks are grouped in runs that hold it: the source writes
    /// the UET bytes in place across a free run, and the packet leaves as
    /// a chain of descriptors over its run's chunks (`XDP_PKT_CONTD` on
    /// all but the last), the first after the headroom, the others whole
    /// from their start. Nothing is copied. The source is asked for a
    /// packet only while the TX ring can take the longest chain, so no
    /// chain is ever cut short.
    fn send_runs(
        &mut self,
        max: usize,
        source: &mut dyn FnMut(&mut [u8]) -> Option<Transmit>,
        mut tap: Option<Tap<'_>>,
    ) -> io::Result<usize> {
        let s = 0;
        let k_max = self.tx_frags;
        let mut slots = self.set.socks[s].tx.free(max as u32 * k_max);
        if slots < k_max {
            self.stats.tx_ring_full += 1;
            self.set.kick_tx(s)?;
            return Ok(0);
        }
        let hr = self.set.headroom;
        let fs = self.umem.frame_size() as usize;
        let room = fs - hr as usize;
        let span = k_max as usize * fs - hr as usize;
        let uet_at = self.hdr_len;
        let mut sent = 0;
        let mut frames = 0;
        for _ in 0..max {
            if slots < k_max {
                break;
            }
            let (f, busy) = self.set.pop_run(k_max as usize - 1, &mut self.run_buf);
            self.extra.tx_run_busy += busy;
            let Some(mut f) = f else {
                self.stats.tx_ring_full += 1;
                self.extra.tx_no_frame += 1;
                break;
            };
            let buf = self.umem.span_mut(&mut f, &mut self.run_buf, hr, span);
            let Some(t) = source(&mut buf[uet_at..uet_at + self.max_uet]) else {
                self.set.put_run(&mut self.run_buf);
                self.set.free.push(f);
                break;
            };
            let (eth, ip, transport) = match self.headers_for(&t) {
                Ok(h) => h,
                Err(u) => {
                    count_unsendable(&mut self.stats, u);
                    self.set.put_run(&mut self.run_buf);
                    self.set.free.push(f);
                    continue;
                }
            };
            let buf = self.umem.span_mut(&mut f, &mut self.run_buf, hr, span);
            let Ok(n) = emit_frame_with(
                &eth,
                &ip,
                &transport,
                &self.wire.encap,
                t.len,
                buf,
                |_| {},
                crate::sys::simd::data,
            ) else {
                self.stats.tx_dropped += 1;
                self.set.put_run(&mut self.run_buf);
                self.set.free.push(f);
                continue;
            };
            if let Some(t) = tap.as_mut() {
                t.frame(Direction::Tx, &buf[..n]);
            }
            let k = n.div_ceil(room).max(1);
            // The run's chunks the packet does not reach go back.
            for f in self.run_buf.drain(k - 1..) {
                self.set.release(f);
            }
            self.umem.set_span(&mut f, hr, n.min(room) as u32);
            if let Err(f) = self.set.socks[s].tx.push_part(f, k > 1) {
                unreachable!("k_max slots were reserved: {f:?}");
            }
            let mut left = n.saturating_sub(room);
            for (i, mut c) in self.run_buf.drain(..).enumerate() {
                let part = left.min(fs);
                left -= part;
                self.umem.set_span(&mut c, 0, part as u32);
                if let Err(c) = self.set.socks[s].tx.push_part(c, i + 2 < k) {
                    unreachable!("k_max slots were reserved: {c:?}");
                }
            }
            slots -= k as u32;
            frames += k as u32;
            sent += 1;
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += n as u64;
            self.extra.tx_multi_buffer += u64::from(k > 1);
        }
        if frames > 0 {
            self.set.socks[s].tx.submit();
            self.set.tx += frames;
        }
        self.finish_send(s)?;
        Ok(sent)
    }
}

impl PacketIo for XdpIo {
    fn attach_capture(&mut self, capture: Arc<Capture>) {
        self.capture = Some(capture);
    }

    fn recv(&mut self, max: usize, sink: &mut dyn FnMut(&RxMeta, &mut [u8])) -> io::Result<usize> {
        // Moved out for the call, as the steps borrow `self` mutably: one
        // relaxed load per call, nothing per frame while no capture runs.
        let capture = self.capture.take();
        let mut tap = capture.as_deref().and_then(Capture::tap);
        let mut b = RxBatch {
            left: max,
            delivered: 0,
            wake: 0,
        };
        self.take_returns();
        self.recv_handed_in(&mut b, sink, tap.as_mut());
        for s in 0..self.set.socks.len() {
            self.recv_ring(s, &mut b, sink, tap.as_mut());
        }
        self.set.refill();
        self.hub.wake(b.wake);
        self.capture = capture;
        Ok(b.delivered)
    }

    fn send(
        &mut self,
        max: usize,
        source: &mut dyn FnMut(&mut [u8]) -> Option<Transmit>,
    ) -> io::Result<usize> {
        self.take_returns();
        self.set.reclaim();
        // Moved out for the call, as in `recv`.
        let capture = self.capture.take();
        let tap = capture.as_deref().and_then(Capture::tap);
        let r = if self.tx_frags > 1 {
            self.send_runs(max, source, tap)
        } else {
            self.send_frames(max, source, tap)
        };
        self.capture = capture;
        r
    }

    fn wait(&mut self, timeout: Option<Duration>, wake: BorrowedFd<'_>) -> io::Result<()> {
        let slot = &self.hub.slots[self.worker];
        let reg = self.hub.umem(self.worker as u16);
        slot.sleeping.store(true, Ordering::SeqCst);
        // Pairs with the fence in `Handoff::wake`.
        fence(Ordering::SeqCst);
        if !slot.inbox.is_empty() || !reg.returns.is_empty() {
            slot.sleeping.store(false, Ordering::SeqCst);
            return Ok(());
        }
        let mut fds = [wake; 16];
        let mut n = 1;
        fds[n] = slot.wakeup.as_fd();
        for s in self.set.socks.iter().take(14) {
            n += 1;
            fds[n] = s.as_fd();
        }
        let r = poll_in(&fds[..=n], timeout)
            .map(drop)
            .map_err(io::Error::from);
        slot.sleeping.store(false, Ordering::SeqCst);
        slot.wakeup.drain();
        r
    }

    fn max_uet_len(&self) -> usize {
        self.max_uet
    }

    fn ready_for(&mut self, dst: IpAddr) -> bool {
        // The kernel's entry only: new operations never start on a hint.
        if self.next_hop.lookup(dst).is_some() {
            return true;
        }
        self.next_hop.request(dst);
        false
    }

    fn stats(&self) -> IoStats {
        self.stats
    }

    fn xsk_counters(&self) -> Option<XskCounters> {
        let now = Instant::now();
        let kernel = match self.kernel.get() {
            Some((at, k)) if now.duration_since(at) < KERNEL_STATS_TTL => k,
            last => match self.set.kernel_stats() {
                Ok(k) => {
                    self.kernel.set(Some((now, k)));
                    k
                }
                // Keep the last reading: counters never go back.
                Err(_) => last.map(|(_, k)| k).unwrap_or_default(),
            },
        };
        Some(XskCounters {
            kernel,
            extra: self.extra,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use uet_wire::{Dscp, Ecn, EntropyValue};

    use super::*;
    use crate::sys::xdp_socket::in_memory::Kernel;

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 9, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 9, 0, 2));
    /// A second peer of B's, owned by B's worker 1.
    const A1: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 9, 0, 3));
    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);

    /// Every destination's next hop is `MAC`.
    #[derive(Debug)]
    struct OneHop;
    impl NextHop for OneHop {
        fn lookup(&self, _: IpAddr) -> Option<EthernetAddress> {
            Some(MAC)
        }
        fn request(&self, _: IpAddr) {}
    }

    fn xsk_cfg() -> XskConfig {
        XskConfig {
            ifname: "mem0".into(),
            frame_size: 2048,
            frame_count: 64,
            ring_size: 16,
            fill_size: 16,
            ..XskConfig::default()
        }
    }

    /// A set whose rings are in plain memory (indices from `start`), with
    /// the kernel's end of each socket.
    fn in_memory(cfg: &XskConfig, start: u32) -> (XskSet, Vec<Kernel>) {
        in_memory_at(cfg, start, 1500)
    }

    /// [`in_memory`] on an interface of MTU `mtu`.
    fn in_memory_at(cfg: &XskConfig, start: u32, mtu: u32) -> (XskSet, Vec<Kernel>) {
        let (umem, free) = UmemArea::new(cfg.frame_size, cfg.frame_count).unwrap();
        let sizes = RingSizes {
            rx: cfg.ring_size,
            tx: cfg.ring_size,
            fill: cfg.fill_size,
            comp: cfg.fill_size.max(cfg.ring_size),
        };
        let (socks, kernels) = cfg
            .queues
            .iter()
            .map(|_| XskSocket::in_memory(&umem, sizes, start))
            .unzip();
        let headroom = XDP_PACKET_HEADROOM + cfg.umem_headroom;
        let max_frags = resolve_max_frags(cfg, headroom, mtu).unwrap();
        let set = XskSet::assemble(
            cfg,
            umem,
            free,
            socks,
            false,
            (headroom, max_frags),
            (1, MAC, mtu),
        );
        (set, kernels)
    }

    fn counts(free: u32, fill: u32, tx: u32, lent: u32) -> FrameCounts {
        FrameCounts {
            total: 64,
            free,
            fill,
            rx_held: 0,
            tx,
            lent,
            spare: 0,
        }
    }

    /// At rest, the 64 chunks of [`xsk_cfg`] grouped in runs of three (MTU
    /// 4200 in 2048-byte frames): 21 runs, of which 10 wait in the fill
    /// ring; 42 later chunks and the incomplete last run's one are spare.
    const RUNS_AT_REST: FrameCounts = FrameCounts {
        total: 64,
        free: 11,
        fill: 10,
        rx_held: 0,
        tx: 0,
        lent: 0,
        spare: 43,
    };

    #[test]
    fn frames_are_accounted_through_fill_rx_tx_and_completion() {
        let (mut set, k) = in_memory(&xsk_cfg(), u32::MAX - 5);
        // Half the frames (capped by the fill ring) wait for the kernel.
        assert_eq!(set.counts(), counts(48, 16, 0, 0));
        for i in 0..5u8 {
            assert!(k[0].receive(&set.umem, set.headroom, &[i; 100]));
        }
        assert_eq!(set.recycle_received(), (5, 500));
        // The five chunks went back to the free list and five others to
        // the fill ring.
        assert_eq!(set.counts(), counts(48, 16, 0, 0));
        assert_eq!(k[0].fill.indices().0.wrapping_sub(u32::MAX - 5), 21);

        set.write_free_frames(|i, buf| {
            buf[..60].fill(i as u8);
            Ok(60)
        })
        .unwrap();
        assert_eq!(set.resend_free_frames(10, 60).unwrap(), 10);
        assert_eq!(set.counts(), counts(38, 16, 10, 0));
        assert!(set.counts().accounted());
        for _ in 0..10 {
            assert_eq!(k[0].transmit(&set.umem).map(|f| f.len()), Some(60));
        }
        assert!(k[0].transmit(&set.umem).is_none());
        assert_eq!(set.tx_outstanding(), 0);
        assert_eq!(set.counts(), counts(48, 16, 0, 0));
    }

    #[test]
    fn the_kernel_is_kicked_only_when_it_asks() {
        let (mut set, k) = in_memory(&xsk_cfg(), 0);
        set.write_free_frames(|_, _| Ok(60)).unwrap();
        // No wakeup asked: queued without a syscall (on an eventfd, a kick
        // would fail with ENOTSOCK).
        assert_eq!(set.resend_free_frames(2, 60).unwrap(), 2);
        k[0].tx.set_need_wakeup(true);
        let e = set.resend_free_frames(2, 60).unwrap_err();
        let e = e
            .get_ref()
            .and_then(|e| e.downcast_ref::<crate::sys::Error>());
        assert_eq!(
            e.map(|e| (e.call(), e.raw_os_error())),
            Some(("sendto(AF_XDP)", Some(libc::ENOTSOCK)))
        );
    }

    fn io_cfg(local: IpAddr) -> XdpIoConfig {
        XdpIoConfig {
            xsk: xsk_cfg(),
            local_ip: local,
            encap: EncapConfig::default(),
            native_ip: false,
            mtu: None,
        }
    }

    fn io(worker: usize, local: IpAddr, hub: &Arc<Handoff>) -> (XdpIo, Kernel) {
        io_at(worker, local, hub, 1500, 0)
    }

    /// [`io`] on an interface of MTU `mtu`, packets bounded to `max_frags`
    /// frames (0: what the MTU needs).
    fn io_at(
        worker: usize,
        local: IpAddr,
        hub: &Arc<Handoff>,
        mtu: u32,
        max_frags: u32,
    ) -> (XdpIo, Kernel) {
        let mut cfg = io_cfg(local);
        cfg.xsk.max_frags = max_frags;
        let (set, mut k) = in_memory_at(&cfg.xsk, 0, mtu);
        let io = XdpIo::with_set(worker, set, &cfg, Arc::clone(hub), Arc::new(OneHop)).unwrap();
        (io, k.remove(0))
    }

    /// Frames `io` sends to `dst`, as the kernel takes them off its TX ring:
    /// UET bytes `[tag; 80]`.
    fn sent_frames(io: &mut XdpIo, k: &Kernel, dst: IpAddr, tags: &[u8]) -> Vec<Vec<u8>> {
        sent_frames_of(io, k, dst, tags, 80)
    }

    /// [`sent_frames`] with UET bytes `[tag; len]`.
    fn sent_frames_of(
        io: &mut XdpIo,
        k: &Kernel,
        dst: IpAddr,
        tags: &[u8],
        len: usize,
    ) -> Vec<Vec<u8>> {
        let n = queue(io, dst, tags, len);
        assert_eq!(n, tags.len());
        let frames: Vec<_> = std::iter::from_fn(|| k.transmit(&io.umem)).collect();
        io.flush().unwrap();
        frames
    }

    /// Offers `io` one datagram `[tag; len]` to `dst` per tag, in one send
    /// call; returns how many it sent.
    fn queue(io: &mut XdpIo, dst: IpAddr, tags: &[u8], len: usize) -> usize {
        let mut next = tags.iter();
        io.send(tags.len(), &mut |buf: &mut [u8]| {
            let &tag = next.next()?;
            buf[..len].fill(tag);
            Some(Transmit {
                dst,
                ev: EntropyValue::from_masked(u16::from(tag)),
                dscp: Dscp::from_masked(0),
                ecn: Ecn::NotEct,
                len,
                sdi: None,
            })
        })
        .unwrap()
    }

    #[test]
    fn received_frames_reach_the_owner_of_their_peer_and_come_back() {
        // B runs two workers; A1 is owned by worker 1, A by worker 0.
        let hub = Handoff::new(2, 8, Box::new(|p| usize::from(p == A1))).unwrap();
        let (mut w0, k0) = io(0, B, &hub);
        let (mut w1, _k1) = io(1, B, &hub);
        let single = Handoff::single().unwrap();
        let (mut a, ka) = io(0, A, &single);
        let (mut a1, ka1) = io(0, A1, &Handoff::single().unwrap());

        // Everything arrives at worker 0's queue.
        let mut frames = sent_frames(&mut a, &ka, B, &[1, 2]);
        frames.extend(sent_frames(&mut a1, &ka1, B, &[3, 4, 5]));
        frames.extend(sent_frames(&mut a, &ka, A1, &[6])); // not for B
        for f in &frames {
            assert!(k0.receive(&w0.set.umem, w0.set.headroom, f));
        }

        let mut got = Vec::new();
        let n = w0
            .recv(64, &mut |m, uet| got.push((m.src, uet[0], uet.len())))
            .unwrap();
        assert_eq!(n, 2);
        assert_eq!(got, [(A, 1, 80), (A, 2, 80)]);
        assert_eq!(w0.stats.handed_off, 3);
        assert_eq!(w0.extra.rx_not_for_us, 1);
        assert_eq!(w0.frame_counts().lent, 3);

        got.clear();
        let n = w1
            .recv(64, &mut |m, uet| got.push((m.src, uet[0], uet.len())))
            .unwrap();
        assert_eq!(n, 3);
        assert_eq!(got, [(A1, 3, 80), (A1, 4, 80), (A1, 5, 80)]);
        assert_eq!(w1.extra.handed_in, 3);

        // The lent frames are back in worker 0's UMEM after its next call.
        w0.flush().unwrap();
        let c = w0.frame_counts();
        assert_eq!((c.lent, c.fill, c.free), (0, 16, 48));
        assert!(c.accounted());
    }

    /// UET datagrams of 4000 bytes at MTU 4200 in 2048-byte frames (1792
    /// bytes of room): three frames each.
    const BIG: usize = 4000;

    #[test]
    fn a_packet_longer_than_a_frame_goes_out_and_comes_in_as_a_chain() {
        let (mut a, ka) = io_at(0, A, &Handoff::single().unwrap(), 4200, 0);
        let (mut b, kb) = io_at(0, B, &Handoff::single().unwrap(), 4200, 0);
        assert_eq!((a.set.max_frags(), a.tx_frags), (3, 3));
        assert!(a.max_uet_len() >= BIG);
        // Every TX descriptor but each packet's last says "more follows".
        assert_eq!(queue(&mut a, B, &[1, 2], BIG), 2);
        let descs: Vec<_> = std::iter::from_fn(|| ka.tx.consume_part()).collect();
        let more: Vec<bool> = descs.iter().map(|d| d.2).collect();
        assert_eq!(more, [true, true, false, true, true, false]);
        // Written in place across a run: the first after the headroom, the
        // others whole from the start of the next chunks.
        for chain in descs.chunks(3) {
            let base = chain[0].0 - 256;
            assert_eq!(base % (3 * 2048), 0, "{chain:?}");
            assert_eq!(chain[0].1, 2048 - 256);
            assert_eq!((chain[1].0, chain[1].1), (base + 2048, 2048));
            assert_eq!(
                (chain[2].0, chain[2].1),
                (base + 4096, 42 + BIG as u32 - 1792 - 2048)
            );
        }
        for (addr, _, _) in &descs {
            assert!(ka.comp.produce(*addr, 0));
        }
        a.flush().unwrap();
        assert_eq!(a.frame_counts(), RUNS_AT_REST);
        assert_eq!(a.extra.tx_multi_buffer, 2);

        let frames = sent_frames_of(&mut a, &ka, B, &[3, 4], BIG);
        assert_eq!(frames.len(), 2);
        for f in &frames {
            assert_eq!(f.len(), 42 + BIG);
            assert!(kb.receive(&b.set.umem, b.set.headroom, f));
        }
        let mut got = Vec::new();
        let n = b
            .recv(64, &mut |m, uet| {
                got.push((m.src, uet.len(), uet.iter().all(|&x| x == uet[0]), uet[0]));
            })
            .unwrap();
        assert_eq!(n, 2);
        assert_eq!(got, [(A, BIG, true, 3), (A, BIG, true, 4)]);
        // Made contiguous in place, not gathered.
        assert_eq!((b.extra.rx_multi_buffer, b.extra.rx_gathered), (2, 0));
        assert_eq!(b.stats.rx_bytes, 2 * (42 + BIG as u64));
        // The six frames went back to the fill ring.
        assert_eq!(b.frame_counts(), RUNS_AT_REST);
    }

    #[test]
    fn a_chain_cut_short_by_the_ring_is_held_and_completed_by_the_next_call() {
        let (mut a, ka) = io_at(0, A, &Handoff::single().unwrap(), 4200, 0);
        let (mut b, kb) = io_at(0, B, &Handoff::single().unwrap(), 4200, 0);
        let frames = sent_frames_of(&mut a, &ka, B, &[7], BIG);
        let descs = kb.place(&b.set.umem, b.set.headroom, &frames[0]).unwrap();
        assert_eq!(descs.len(), 3);
        // The kernel has published two of the three descriptors.
        for &(addr, len, more) in &descs[..2] {
            assert!(kb.rx.produce_part(addr, len, more));
        }
        let mut got = Vec::new();
        assert_eq!(b.recv(64, &mut |_, uet| got.push(uet.len())).unwrap(), 0);
        // Two frames are held; the fill ring got two others (the third of
        // the chain is still the kernel's, counted in `fill`).
        let c = b.frame_counts();
        assert_eq!((c.rx_held, c.fill, c.free), (2, 10, 9));
        assert!(c.accounted(), "{c:?}");
        let (addr, len, more) = descs[2];
        assert!(kb.rx.produce_part(addr, len, more));
        assert_eq!(b.recv(64, &mut |_, uet| got.push(uet.len())).unwrap(), 1);
        assert_eq!(got, [BIG]);
        assert_eq!(b.frame_counts(), RUNS_AT_REST);
    }

    #[test]
    fn a_chain_longer_than_the_bound_is_dropped_counted_and_its_frames_return() {
        let (mut a, ka) = io_at(0, A, &Handoff::single().unwrap(), 4200, 0);
        // B takes packets of at most two frames.
        let (mut b, kb) = io_at(0, B, &Handoff::single().unwrap(), 4200, 2);
        let frames = sent_frames_of(&mut a, &ka, B, &[1, 2], BIG);
        let small = sent_frames_of(&mut a, &ka, B, &[3], 100);
        assert!(kb.receive(&b.set.umem, b.set.headroom, &frames[0]));
        assert!(kb.receive(&b.set.umem, b.set.headroom, &small[0]));
        // The second long one's last frame arrives in a later call.
        let descs = kb.place(&b.set.umem, b.set.headroom, &frames[1]).unwrap();
        for &(addr, len, more) in &descs[..2] {
            assert!(kb.rx.produce_part(addr, len, more));
        }
        let mut got = Vec::new();
        assert_eq!(b.recv(64, &mut |_, uet| got.push(uet[0])).unwrap(), 1);
        assert_eq!(got, [3]);
        assert_eq!((b.stats.rx_dropped, b.extra.rx_chain_too_long), (2, 2));
        let (addr, len, more) = descs[2];
        assert!(kb.rx.produce_part(addr, len, more));
        assert_eq!(b.recv(64, &mut |_, uet| got.push(uet[0])).unwrap(), 0);
        assert_eq!(
            b.stats.rx_dropped, 2,
            "the rest of a dropped chain is not a packet"
        );
        // Runs of two chunks: 32 runs, half of them in the fill ring.
        let rest = FrameCounts {
            spare: 32,
            ..counts(16, 16, 0, 0)
        };
        assert_eq!(b.frame_counts(), rest);
        // The next packet is taken as usual.
        assert!(kb.receive(&b.set.umem, b.set.headroom, &small[0]));
        assert_eq!(b.recv(64, &mut |_, uet| got.push(uet[0])).unwrap(), 1);
    }

    #[test]
    fn chains_are_queued_only_whole_when_the_tx_ring_runs_short() {
        let (mut a, ka) = io_at(0, A, &Handoff::single().unwrap(), 4200, 0);
        // 16 TX slots hold five chains of three; the sixth waits.
        assert_eq!(queue(&mut a, B, &[1, 2, 3, 4, 5, 6, 7], BIG), 5);
        let c = a.frame_counts();
        assert_eq!((c.tx, c.free, c.spare), (15, 6, 33));
        assert!(c.accounted());
        // One slot is left: nothing more fits, nothing is cut.
        assert_eq!(queue(&mut a, B, &[8], BIG), 0);
        assert_eq!(a.stats.tx_ring_full, 1);
        let sent: Vec<_> = std::iter::from_fn(|| ka.transmit(&a.umem)).collect();
        assert_eq!(sent.len(), 5);
        assert!(sent.iter().all(|f| f.len() == 42 + BIG));
        a.flush().unwrap();
        assert_eq!(a.frame_counts(), RUNS_AT_REST);
    }

    #[test]
    fn a_chain_for_another_workers_peer_is_lent_whole_and_comes_back() {
        let hub = Handoff::new(2, 8, Box::new(|p| usize::from(p == A1))).unwrap();
        let (mut w0, k0) = io_at(0, B, &hub, 4200, 0);
        let (mut w1, _k1) = io_at(1, B, &hub, 4200, 0);
        let (mut a1, ka1) = io_at(0, A1, &Handoff::single().unwrap(), 4200, 0);
        for f in sent_frames_of(&mut a1, &ka1, B, &[5, 6], BIG) {
            assert!(k0.receive(&w0.set.umem, w0.set.headroom, &f));
        }
        assert_eq!(w0.recv(64, &mut |_, _| panic!("not ours")).unwrap(), 0);
        assert_eq!(w0.frame_counts().lent, 6);
        let mut got = Vec::new();
        assert_eq!(
            w1.recv(64, &mut |m, uet| got.push((m.src, uet.len(), uet[BIG - 1])))
                .unwrap(),
            2
        );
        assert_eq!(got, [(A1, BIG, 5), (A1, BIG, 6)]);
        // Another worker's chunks are not its to group: gathered.
        assert_eq!(w1.extra.rx_gathered, 2);
        w0.flush().unwrap();
        assert_eq!(w0.frame_counts(), RUNS_AT_REST);
    }

    #[test]
    fn packets_of_every_size_around_the_frame_boundaries_arrive_whole() {
        // UET lengths around each frame boundary, and an ACK-sized one.
        let lens = [
            80,
            1791 - 42,
            1792 - 42,
            1793 - 42,
            3584 - 42,
            3585 - 42,
            BIG,
        ];
        let (mut a, ka) = io_at(0, A, &Handoff::single().unwrap(), 4200, 0);
        let (mut b, kb) = io_at(0, B, &Handoff::single().unwrap(), 4200, 0);
        let mut got = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            for f in sent_frames_of(&mut a, &ka, B, &[i as u8 + 1], len) {
                assert_eq!(f.len(), 42 + len);
                assert!(kb.receive(&b.set.umem, b.set.headroom, &f));
            }
            b.recv(64, &mut |m, uet| got.push((m.src, uet.to_vec())))
                .unwrap();
        }
        assert_eq!(got.len(), lens.len());
        for ((src, uet), (i, &len)) in got.iter().zip(lens.iter().enumerate()) {
            assert_eq!((*src, uet.len()), (A, len));
            assert!(uet.iter().all(|&x| x == i as u8 + 1), "length {len}");
        }
        let chains = lens.iter().filter(|&&l| 42 + l > 1792).count() as u64;
        assert_eq!((b.extra.rx_multi_buffer, b.extra.rx_gathered), (chains, 0));
        assert_eq!(a.extra.tx_multi_buffer, chains);
        assert_eq!(a.frame_counts(), RUNS_AT_REST);
        b.flush().unwrap();
        assert_eq!(b.frame_counts(), RUNS_AT_REST);
    }

    #[test]
    fn a_set_without_runs_is_refused_for_packets_longer_than_a_frame() {
        let mut cfg = io_cfg(A);
        cfg.xsk.contiguous_chains = false;
        let (set, _k) = in_memory_at(&cfg.xsk, 0, 4200);
        let e = XdpIo::with_set(0, set, &cfg, Handoff::single().unwrap(), Arc::new(OneHop))
            .unwrap_err();
        assert!(e.to_string().contains("contiguous_chains"), "{e}");
        // One frame per packet needs no runs.
        let (set, _k) = in_memory_at(&cfg.xsk, 0, 1500);
        assert!(
            XdpIo::with_set(0, set, &cfg, Handoff::single().unwrap(), Arc::new(OneHop)).is_ok()
        );
    }

    #[test]
    fn a_run_whose_spares_are_still_out_is_passed_over() {
        let (mut a, ka) = io_at(0, A, &Handoff::single().unwrap(), 4200, 0);
        let (mut b, kb) = io_at(0, B, &Handoff::single().unwrap(), 4200, 0);
        assert_eq!(queue(&mut a, B, &[1], BIG), 1);
        let descs: Vec<_> = std::iter::from_fn(|| ka.tx.consume_part()).collect();
        assert_eq!(descs.len(), 3);
        // The kernel completes the chain's first descriptor alone: the
        // run's first chunk is free again, its spares are not.
        assert!(ka.comp.produce(descs[0].0, 0));
        a.flush().unwrap();
        let c = a.frame_counts();
        assert_eq!((c.free, c.tx, c.spare), (11, 2, 41));
        assert!(c.accounted(), "{c:?}");
        // The next packet skips that run and goes out whole from another.
        let sent = sent_frames_of(&mut a, &ka, B, &[2], BIG);
        assert_eq!(a.extra.tx_run_busy, 1);
        assert_eq!(sent.len(), 1);
        assert!(kb.receive(&b.set.umem, b.set.headroom, &sent[0]));
        let mut got = Vec::new();
        assert_eq!(b.recv(64, &mut |_, uet| got.push(uet.to_vec())).unwrap(), 1);
        assert_eq!(got, [vec![2; BIG]]);
        // The rest of the first chain comes back; everything is home.
        for &(addr, _, _) in &descs[1..] {
            assert!(ka.comp.produce(addr, 0));
        }
        a.flush().unwrap();
        assert_eq!(a.frame_counts(), RUNS_AT_REST);
    }

    #[test]
    fn a_chain_whose_first_frame_stops_short_of_its_chunk_is_gathered() {
        let (mut a, ka) = io_at(0, A, &Handoff::single().unwrap(), 4200, 0);
        let (mut b, kb) = io_at(0, B, &Handoff::single().unwrap(), 4200, 0);
        let frame = sent_frames_of(&mut a, &ka, B, &[9], BIG).remove(0);
        // A driver that fills 1,500 bytes per buffer: the first frame does
        // not reach the end of its chunk, so the tail cannot follow it.
        let descs = kb
            .place_in(&b.set.umem, b.set.headroom, &frame, 1500)
            .unwrap();
        assert_eq!(descs.len(), 3);
        for (addr, len, more) in descs {
            assert!(kb.rx.produce_part(addr, len, more));
        }
        let mut got = Vec::new();
        assert_eq!(b.recv(64, &mut |_, uet| got.push(uet.to_vec())).unwrap(), 1);
        assert_eq!(got, [vec![9; BIG]]);
        assert_eq!((b.extra.rx_multi_buffer, b.extra.rx_gathered), (1, 1));
    }

    #[test]
    fn the_frames_a_packet_needs_follow_the_mtu() {
        let cfg = XskConfig::default(); // 4096-byte frames: 3840 bytes of room
        let hr = XDP_PACKET_HEADROOM;
        assert_eq!(resolve_max_frags(&cfg, hr, 1500).unwrap(), 1);
        assert_eq!(resolve_max_frags(&cfg, hr, 3498).unwrap(), 1);
        assert_eq!(resolve_max_frags(&cfg, hr, 4200).unwrap(), 2);
        assert_eq!(resolve_max_frags(&cfg, hr, 9000).unwrap(), 3);
        let small = XskConfig {
            frame_size: 2048,
            ..XskConfig::default()
        };
        assert_eq!(resolve_max_frags(&small, hr, 9216).unwrap(), 6);
        let e = resolve_max_frags(&small, hr + 1024, 9216).unwrap_err();
        assert!(e.to_string().contains("at most 6"), "{e}");
    }
}
