//! Frame capture behind `uet capture`: the workers mirror the
//! frames their datapath receives and sends into one bounded queue toward
//! the control thread, which streams them to the capturing client.
//!
//! Cost model:
//! - no capture: each worker iteration does one relaxed load of the
//!   state word ([`Capture::tap`] returns `None`) and the backends
//!   see no tap — nothing per frame;
//! - a capture: per frame of a wanted direction, a clock read, a copy of up
//!   to the snap length into a recycled buffer and a push onto a lock-free
//!   queue; when the queue is full the frame is counted in
//!   [`Capture::dropped`] and the datapath goes on (it never blocks on a
//!   capture). The worker makes no system call per frame: it wakes the
//!   control thread (a futex wake through the doorbell) only once
//!   [`RING_AT`] frames wait and the control thread has drained since the
//!   last ring; fewer are collected at its next tick. A wake per frame —
//!   a channel send to a sleeping receiver — had the worker and the
//!   control thread trade the CPU for every frame, which on two vCPUs
//!   cost the datapath a third of its rate during an ACK-only capture.
//!
//! Frames are whole Ethernet frames as on the wire. The AF_XDP backend has
//! them in the UMEM; the UDP backend sees only the UDP payload and rebuilds
//! Ethernet (zero MACs), IP (TTL 64, identification 0, its DSCP/ECN as
//! received or sent) and UDP (checksum filled) around it with the same
//! emitter the AF_XDP path sends with, so a capture reads the same either
//! way.
//!
//! Timestamps: CLOCK_MONOTONIC per frame (the daemon's clock), turned into
//! wall-clock time by the control thread with the realtime−monotonic offset
//! sampled when the capture started ([`Capture::start`]).
//!
//! One capture runs at a time; each has a generation, carried by its
//! frames, so a frame a worker queued just before a capture ended is never
//! delivered to the next one.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, Sender};
use crossbeam_queue::ArrayQueue;
pub use uet_api::{CaptureDirection, Direction};

use crate::sys::mem::monotonic_ns;

/// Frames the queue toward the control thread holds.
pub const QUEUE_FRAMES: usize = 8192;

/// Frames waiting in the queue before a worker rings the control thread
/// (at most once until it drains): a wake-up per batch, not per frame.
/// The control thread's tick (100 ms) collects a smaller remainder; at
/// a million frames a second the queue holds 8 ms of them, far more than
/// a batch.
pub const RING_AT: usize = 64;

/// Bits of the `state` word: directions (0-1), snap length (2-31),
/// generation (32-63); 0 is "no capture".
const DIR_MASK: u64 = 0b11;
const SNAP_SHIFT: u32 = 2;
const SNAP_MASK: u64 = (1 << 30) - 1;
const GEN_SHIFT: u32 = 32;

/// A frame a worker captured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapturedFrame {
    /// The capture it belongs to.
    pub generation: u32,
    /// CLOCK_MONOTONIC when the worker saw it, in nanoseconds.
    pub mono_ns: u64,
    /// Received or sent.
    pub direction: Direction,
    /// Its length on the wire.
    pub orig_len: u32,
    /// Its first bytes, up to the snap length.
    pub data: Vec<u8>,
}

/// The capture state the control thread and the workers share.
#[derive(Debug)]
pub struct Capture {
    /// 0, or directions | snap length | generation (see the bit layout
    /// above). Workers load it once per iteration.
    state: AtomicU64,
    queue: ArrayQueue<CapturedFrame>,
    /// A wake-up for the control thread (capacity 1).
    bell_tx: Sender<()>,
    bell_rx: Receiver<()>,
    /// Set by the worker that rang, cleared by the control thread when it
    /// drains: one ring per drain.
    rung: AtomicBool,
    /// Buffers the control thread gave back, for the workers to reuse.
    free: ArrayQueue<Vec<u8>>,
    dropped: AtomicU64,
    generation: AtomicU32,
}

/// What [`Capture::start`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Started {
    /// Frames of this capture carry it.
    pub generation: u32,
    /// Realtime minus monotonic, in nanoseconds, when it started.
    pub realtime_offset_ns: i128,
}

impl Started {
    /// Wall-clock nanoseconds since the Unix epoch of a monotonic time.
    pub fn wall_ns(&self, mono_ns: u64) -> u64 {
        let t = i128::from(mono_ns) + self.realtime_offset_ns;
        u64::try_from(t.max(0)).unwrap_or(u64::MAX)
    }
}

impl Capture {
    /// A capture switch with a queue of `queue` frames (at least 1).
    pub fn new(queue: usize) -> Self {
        let (bell_tx, bell_rx) = crossbeam_channel::bounded(1);
        Self {
            state: AtomicU64::new(0),
            queue: ArrayQueue::new(queue.max(1)),
            bell_tx,
            bell_rx,
            rung: AtomicBool::new(false),
            free: ArrayQueue::new(queue.max(1)),
            dropped: AtomicU64::new(0),
            generation: AtomicU32::new(0),
        }
    }

    /// Starts capturing `direction` frames, `snaplen` bytes of each (at
    /// least 1). Frames left from an earlier capture are discarded and the
    /// drop counter restarts.
    pub fn start(&self, direction: CaptureDirection, snaplen: u32) -> Started {
        self.state.store(0, Ordering::Relaxed);
        while let Some(f) = self.pop() {
            self.recycle(f.data);
        }
        self.dropped.store(0, Ordering::Relaxed);
        // Generation 0 is never used, so a state is never 0 while on.
        let mut generation = self
            .generation
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1);
        if generation == 0 {
            generation = self
                .generation
                .fetch_add(1, Ordering::Relaxed)
                .wrapping_add(1);
        }
        let snap = u64::from(snaplen.max(1)) & SNAP_MASK;
        let state = u64::from(direction.bits()) & DIR_MASK
            | snap << SNAP_SHIFT
            | u64::from(generation) << GEN_SHIFT;
        let realtime_offset_ns = realtime_ns() - i128::from(monotonic_ns());
        self.state.store(state, Ordering::Release);
        Started {
            generation,
            realtime_offset_ns,
        }
    }

    /// Stops capturing (the workers see it at their next iteration).
    pub fn stop(&self) {
        self.state.store(0, Ordering::Release);
    }

    /// Whether a capture runs.
    pub fn active(&self) -> bool {
        self.state.load(Ordering::Relaxed) != 0
    }

    /// Frames of the running capture that did not fit the queue.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The doorbell a worker rings when frames wait, for the control
    /// loop's `select!`; it then takes them with [`Capture::pop`].
    pub fn doorbell(&self) -> &Receiver<()> {
        &self.bell_rx
    }

    /// Frames waiting in the queue.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The next queued frame. An empty queue re-arms the doorbell, so a
    /// batch queued from then on rings it again.
    pub fn pop(&self) -> Option<CapturedFrame> {
        if let Some(f) = self.queue.pop() {
            return Some(f);
        }
        self.rung.store(false, Ordering::SeqCst);
        // A frame pushed between the failed pop and the re-arm found the
        // bell still rung: take it now rather than at the next tick.
        self.queue.pop()
    }

    /// Gives a frame's buffer back for reuse.
    pub fn recycle(&self, mut buf: Vec<u8>) {
        buf.clear();
        let _ = self.free.push(buf);
    }

    /// The worker's view for one iteration: `None` (one relaxed load, and
    /// nothing else) when no capture runs.
    #[inline]
    pub fn tap(&self) -> Option<Tap<'_>> {
        let s = self.state.load(Ordering::Relaxed);
        if s == 0 {
            return None;
        }
        Some(Tap {
            capture: self,
            directions: (s & DIR_MASK) as u8,
            snaplen: ((s >> SNAP_SHIFT) & SNAP_MASK) as usize,
            generation: (s >> GEN_SHIFT) as u32,
        })
    }
}

/// Nanoseconds since the Unix epoch (negative before it).
fn realtime_ns() -> i128 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// What a backend hands captured frames to while a capture runs.
#[derive(Debug)]
pub struct Tap<'a> {
    capture: &'a Capture,
    directions: u8,
    snaplen: usize,
    generation: u32,
}

impl Tap<'_> {
    /// Whether frames going `d` are wanted.
    #[inline]
    pub fn wants(&self, d: Direction) -> bool {
        self.directions & d.code() != 0
    }

    /// A frame as it is on the wire.
    pub fn frame(&mut self, d: Direction, frame: &[u8]) {
        if !self.wants(d) {
            return;
        }
        let mut buf = self.buffer();
        buf.extend_from_slice(&frame[..frame.len().min(self.snaplen)]);
        self.push(d, frame.len(), buf);
    }

    /// A frame of `len` bytes the backend writes with `fill` (its headers
    /// rebuilt around the bytes it has); `fill` returning false drops it.
    pub fn build(&mut self, d: Direction, len: usize, fill: impl FnOnce(&mut [u8]) -> bool) {
        if !self.wants(d) {
            return;
        }
        let mut buf = self.buffer();
        buf.resize(len, 0);
        if !fill(&mut buf) {
            self.capture.recycle(buf);
            return;
        }
        buf.truncate(self.snaplen);
        self.push(d, len, buf);
    }

    fn buffer(&self) -> Vec<u8> {
        self.capture
            .free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.snaplen.min(4096)))
    }

    fn push(&self, direction: Direction, orig_len: usize, data: Vec<u8>) {
        let f = CapturedFrame {
            generation: self.generation,
            mono_ns: monotonic_ns(),
            direction,
            orig_len: u32::try_from(orig_len).unwrap_or(u32::MAX),
            data,
        };
        let c = self.capture;
        match c.queue.push(f) {
            Ok(()) => {
                if c.queue.len() >= RING_AT && !c.rung.swap(true, Ordering::SeqCst) {
                    // Full means a ring is pending already.
                    let _ = c.bell_tx.try_send(());
                }
            }
            Err(f) => {
                c.dropped.fetch_add(1, Ordering::Relaxed);
                c.recycle(f.data);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: u8, len: usize) -> Vec<u8> {
        vec![n; len]
    }

    #[test]
    fn no_capture_no_tap() {
        let c = Capture::new(4);
        assert!(c.tap().is_none());
        let s = c.start(CaptureDirection::Both, 64);
        assert!(c.tap().is_some());
        c.stop();
        assert!(c.tap().is_none());
        assert_ne!(s.generation, 0);
    }

    #[test]
    fn a_full_queue_counts_drops_and_never_blocks() {
        let c = Capture::new(2);
        let started = c.start(CaptureDirection::Both, 8);
        let mut tap = c.tap().unwrap();
        tap.frame(Direction::Rx, &frame(1, 20));
        tap.frame(Direction::Tx, &frame(2, 5));
        // The queue holds two: these two are dropped and counted.
        tap.frame(Direction::Rx, &frame(3, 20));
        tap.build(Direction::Tx, 30, |b| {
            b.fill(4);
            true
        });
        assert_eq!(c.dropped(), 2);
        let a = c.pop().unwrap();
        let b = c.pop().unwrap();
        assert!(c.pop().is_none());
        assert_eq!(
            (a.direction, a.orig_len, a.data.as_slice()),
            (Direction::Rx, 20, &frame(1, 8)[..])
        );
        assert_eq!(
            (b.direction, b.orig_len, b.data.as_slice()),
            (Direction::Tx, 5, &frame(2, 5)[..])
        );
        assert_eq!(a.generation, started.generation);
        // Room again: the next frame is queued, the count stays.
        c.recycle(a.data);
        tap.frame(Direction::Rx, &frame(5, 3));
        assert_eq!(c.dropped(), 2);
        assert_eq!(c.pop().unwrap().data, frame(5, 3));
    }

    #[test]
    fn the_doorbell_rings_once_per_batch_not_per_frame() {
        let c = Capture::new(4 * RING_AT);
        c.start(CaptureDirection::Both, 16);
        let mut tap = c.tap().unwrap();
        for _ in 0..RING_AT - 1 {
            tap.frame(Direction::Rx, &frame(1, 4));
        }
        assert!(c.doorbell().try_recv().is_err(), "rung before a batch");
        for _ in 0..2 * RING_AT {
            tap.frame(Direction::Rx, &frame(2, 4));
        }
        assert!(c.doorbell().try_recv().is_ok());
        assert!(c.doorbell().try_recv().is_err(), "rung twice undrained");
        // Draining re-arms it: the next batch rings again.
        let mut n = 0;
        while c.pop().is_some() {
            n += 1;
        }
        assert_eq!(n, 3 * RING_AT - 1);
        for _ in 0..RING_AT {
            tap.frame(Direction::Tx, &frame(3, 4));
        }
        assert!(c.doorbell().try_recv().is_ok());
        assert_eq!(c.dropped(), 0);
    }

    #[test]
    fn direction_filter_and_build() {
        let c = Capture::new(8);
        c.start(CaptureDirection::Tx, 4);
        let mut tap = c.tap().unwrap();
        tap.frame(Direction::Rx, &frame(1, 10));
        tap.build(Direction::Rx, 10, |_| panic!("not wanted: not built"));
        tap.build(Direction::Tx, 10, |_| false);
        assert!(c.pop().is_none());
        tap.build(Direction::Tx, 10, |b| {
            b.copy_from_slice(&[9; 10]);
            true
        });
        let f = c.pop().unwrap();
        assert_eq!((f.orig_len, f.data), (10, vec![9; 4]));
        assert_eq!(c.dropped(), 0);
    }

    #[test]
    fn a_new_capture_starts_clean() {
        let c = Capture::new(1);
        let first = c.start(CaptureDirection::Both, 16);
        let mut tap = c.tap().unwrap();
        tap.frame(Direction::Rx, &frame(1, 4));
        tap.frame(Direction::Rx, &frame(2, 4));
        assert_eq!(c.dropped(), 1);
        let second = c.start(CaptureDirection::Both, 16);
        assert_ne!(first.generation, second.generation);
        assert_eq!(c.dropped(), 0);
        assert!(c.pop().is_none(), "the old frame was discarded");
        // A worker still holding the old tap queues frames of the old
        // generation, which the control thread tells apart.
        tap.frame(Direction::Rx, &frame(3, 4));
        assert_eq!(c.pop().unwrap().generation, first.generation);
    }

    #[test]
    fn wall_clock_follows_the_offset() {
        let s = Started {
            generation: 1,
            realtime_offset_ns: 1_000,
        };
        assert_eq!(s.wall_ns(5), 1_005);
        let s = Started {
            generation: 1,
            realtime_offset_ns: -10,
        };
        assert_eq!(s.wall_ns(5), 0);
    }
}
