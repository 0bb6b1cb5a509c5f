//! AF_XDP on the kernel ABI (`linux/if_xdp.h`, through the `libc` crate's
//! definitions): the UMEM mapping, the socket, its four rings and the
//! syscalls around them. Everything here is `unsafe` underneath and safe
//! on top; the policy (which frame goes where, batching, accounting) lives
//! in [`crate::xsk`].
//!
//! Ring protocol (kernel `net/xdp/xsk_queue.h`, the comment "The structure
//! of the shared state of the rings are a simple circular buffer"): the
//! producer writes descriptors, then publishes its index with a *release*
//! store; the consumer reads the producer index with an *acquire* load,
//! reads the descriptors, then publishes its own index with a *release*
//! store so the producer may overwrite the slots. Both sides cache the
//! other's index and only reload it when the cache says the ring is empty
//! (consumer) or full (producer), so a batch costs one atomic load and one
//! store, not one per descriptor.
//!
//! Frames are owned through [`Frame`] tokens: a token is made only for a
//! chunk no kernel ring holds (at start, or when the RX or completion ring
//! hands one back) and is consumed when the chunk goes back into the fill
//! or TX ring. That is what makes [`UmemArea::data`] and
//! [`UmemArea::chunk_mut`] sound: a chunk has at most one token, and the
//! kernel only writes chunks it was given.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};

use libc::{c_int, c_void, socklen_t};

use super::{Error, Result, cvt};

/// Headroom the kernel leaves in front of received data in every chunk
/// (`XDP_PACKET_HEADROOM`, include/uapi/linux/bpf.h; not exported by libc).
pub(crate) const XDP_PACKET_HEADROOM: u32 = 256;

static NEXT_UMEM_ID: AtomicU16 = AtomicU16::new(1);

/// A memory mapping owned by this value (unmapped on drop).
#[derive(Debug)]
struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; who may touch
// which bytes is governed by the ring protocol and the Frame tokens.
unsafe impl Send for Mmap {}
// SAFETY: as above; shared references only hand out bytes through
// methods whose callers prove ownership (Frame tokens) or through atomics.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// A private anonymous mapping of `len` bytes for a UMEM, populated,
    /// and backed by transparent huge pages where the kernel gives them.
    ///
    /// The kernel pins a UMEM's pages when it is registered and unpins and
    /// frees them, one page at a time, in a workqueue item after the last
    /// socket closes (`xdp_umem_release`). That loop does not reschedule,
    /// so on a kernel without full preemption it holds its CPU for the
    /// whole area: 10–20 ms for 16 MiB of 4 KiB pages on a 2-vCPU VM, long
    /// enough to time out a neighbour's packets (BENCHMARKS.md, "Where the
    /// stalls at a daemon's start and stop come from"). With 2 MiB pages it
    /// is 512 times fewer folios. So the area starts on a 2 MiB boundary,
    /// is advised `MADV_HUGEPAGE` (honoured when transparent huge pages are
    /// `always` or `madvise`) and populated afterwards; without them it is
    /// the same memory in 4 KiB pages.
    fn anonymous(len: usize) -> Result<Self> {
        const HUGE: usize = 2 << 20;
        let align = if len >= HUGE { HUGE } else { 1 };
        let span = len + (align - 1);
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // affected, and the result is checked against MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::last("mmap"));
        }
        let base = p as usize;
        let start = base.next_multiple_of(align);
        let end = start + len;
        // SAFETY: the head [base, start) and the tail [end, base + span)
        // lie inside the mapping just made and nothing refers to them; the
        // kernel rounds the tail's length up to whole pages, and `start`,
        // `end` are page-aligned because `base` and `len` are.
        unsafe {
            if start > base {
                libc::munmap(p, start - base);
            }
            if base + span > end {
                libc::munmap(end as *mut c_void, base + span - end);
            }
        }
        let area = start as *mut c_void;
        // SAFETY: [start, end) is the mapping kept; advice changes neither
        // its contents nor its validity. A kernel without transparent huge
        // pages refuses the first (EINVAL), which leaves 4 KiB pages.
        // Populated after the advice, so in huge pages where it was taken.
        // SAFETY (populate_zeroed): the private mapping just made, zero,
        // which nothing else uses yet.
        unsafe {
            libc::madvise(area, len, libc::MADV_HUGEPAGE);
            super::mem::populate_zeroed(area.cast(), len);
        }
        Self::checked(area, len)
    }

    fn ring(fd: BorrowedFd<'_>, len: usize, pgoff: u64) -> Result<Self> {
        // SAFETY: maps a ring of an AF_XDP socket we hold open at the page
        // offset the ABI defines for that ring; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        Self::checked(p, len)
    }

    fn checked(p: *mut c_void, len: usize) -> Result<Self> {
        if p == libc::MAP_FAILED {
            return Err(Error::last("mmap"));
        }
        NonNull::new(p.cast::<u8>())
            .map(|ptr| Self { ptr, len })
            .ok_or_else(|| Error::new("mmap", io::Error::other("mapped at address 0")))
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping this value created and nobody
        // else unmaps; all borrows of it ended with the borrow of self.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// A frame (UMEM chunk) this process owns: no kernel ring holds it. Made
/// only by this module; consumed when the chunk goes back to the kernel.
/// `addr` may point anywhere in the chunk (received data starts after the
/// headroom); `len` is the length of the data there.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a Frame that is dropped leaks its UMEM chunk"]
pub(crate) struct Frame {
    umem: u16,
    addr: u64,
    len: u32,
}

impl Frame {
    /// Length of its data.
    pub(crate) const fn len(&self) -> u32 {
        self.len
    }
}

/// The UMEM: `count` chunks of `frame_size` bytes, registered with the
/// first socket of a worker and shared by its other sockets.
#[derive(Debug)]
pub(crate) struct UmemArea {
    map: Mmap,
    id: u16,
    frame_size: u32,
    count: u32,
}

impl UmemArea {
    /// Maps `count` chunks of `frame_size` (a power of two ≥ 2048) bytes
    /// and returns the area with one token per chunk.
    pub(crate) fn new(frame_size: u32, count: u32) -> Result<(Self, Vec<Frame>)> {
        if !frame_size.is_power_of_two() || frame_size < 2048 || count == 0 {
            return Err(Error::invalid(
                "mmap",
                "UMEM chunks must be a power of two of at least 2048 bytes, at least one",
            ));
        }
        let len = frame_size as usize * count as usize;
        let map = Mmap::anonymous(len)?;
        let id = NEXT_UMEM_ID.fetch_add(1, Ordering::Relaxed);
        let frames = (0..u64::from(count))
            .map(|i| Frame {
                umem: id,
                addr: i * u64::from(frame_size),
                len: 0,
            })
            .collect();
        Ok((
            Self {
                map,
                id,
                frame_size,
                count,
            },
            frames,
        ))
    }

    /// Chunk size.
    pub(crate) const fn frame_size(&self) -> u32 {
        self.frame_size
    }
    /// Number of chunks.
    pub(crate) const fn count(&self) -> u32 {
        self.count
    }

    fn base_of(&self, addr: u64) -> u64 {
        addr & !u64::from(self.frame_size - 1)
    }

    /// Checks `f` belongs here and returns the start of its chunk.
    #[inline]
    fn chunk_of(&self, f: &Frame) -> u64 {
        assert_eq!(f.umem, self.id, "frame of another UMEM");
        let base = self.base_of(f.addr);
        assert!(base < self.map.len as u64, "frame outside its UMEM");
        base
    }

    /// Checks `f` belongs here and returns its data's byte range, clamped
    /// to its chunk (a kernel descriptor is trusted, but never past the
    /// chunk).
    fn span(&self, f: &Frame) -> (usize, usize) {
        let base = self.chunk_of(f);
        let end = (f.addr + u64::from(f.len)).min(base + u64::from(self.frame_size));
        (f.addr as usize, (end - f.addr) as usize)
    }

    /// The data of a frame (`addr .. addr + len`).
    pub(crate) fn data<'a>(&'a self, f: &'a Frame) -> &'a [u8] {
        let (off, len) = self.span(f);
        // SAFETY: off+len lies inside the mapping (span checks the chunk
        // and clamps to it); the Frame token proves no kernel ring holds
        // the chunk, so the kernel does not write it while this borrow of
        // the token lives, and a &mut borrow of the same token cannot
        // coexist with it.
        unsafe { std::slice::from_raw_parts(self.map.ptr.as_ptr().add(off), len) }
    }

    /// The data of a frame, to change in place (a received packet opened
    /// where it lies).
    pub(crate) fn data_mut<'a>(&'a self, f: &'a mut Frame) -> &'a mut [u8] {
        let (off, len) = self.span(f);
        // SAFETY: as in `data`; the token is borrowed mutably, so this is
        // the only borrow of these bytes.
        unsafe { std::slice::from_raw_parts_mut(self.map.ptr.as_ptr().add(off), len) }
    }

    /// The arrival stamp the steering program left in front of a received
    /// frame's data (`xdp_prog::rx_meta`): CLOCK_MONOTONIC nanoseconds
    /// when the frame reached the host, or `None` when the frame carries
    /// none (a driver without XDP metadata, a frame not from the program).
    /// The stamp's magic is cleared, so a chunk received again without
    /// metadata cannot show a stale one.
    pub(crate) fn take_rx_stamp(&self, f: &mut Frame) -> Option<u64> {
        use xdp_prog::rx_meta::{ARRIVED_NS, LEN, MAGIC, MAGIC_AT};
        let base = self.chunk_of(f);
        if f.addr < base + LEN as u64 {
            return None;
        }
        let at = (f.addr - LEN as u64) as usize;
        // SAFETY: [at, at + LEN) lies in the frame's chunk, before its data
        // (checked above); the token is borrowed mutably and no kernel ring
        // holds the chunk, so this is the only access to these bytes.
        let meta = unsafe { std::slice::from_raw_parts_mut(self.map.ptr.as_ptr().add(at), LEN) };
        let magic = u32::from_ne_bytes(meta[MAGIC_AT..MAGIC_AT + 4].try_into().expect("4 bytes"));
        if magic != MAGIC {
            return None;
        }
        meta[MAGIC_AT..MAGIC_AT + 4].fill(0);
        Some(u64::from_ne_bytes(
            meta[ARRIVED_NS..ARRIVED_NS + 8]
                .try_into()
                .expect("8 bytes"),
        ))
    }

    /// Asks the CPU to bring the first `len` bytes at `addr` (a received
    /// descriptor's data, still in a ring) into its cache: in copy mode
    /// the kernel wrote them on whichever CPU ran the softirq, so reading
    /// a packet begins with cache misses. Issued for the next packet while
    /// this one is parsed and placed, they overlap with that work. A hint
    /// only: nothing is read, and an address outside the UMEM is ignored.
    #[inline]
    pub(crate) fn prefetch(&self, addr: u64, len: u32) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let base = self.base_of(addr);
            if base >= self.map.len as u64 {
                return;
            }
            let end = (addr + u64::from(len)).min(base + u64::from(self.frame_size));
            let mut at = addr & !63;
            while at < end {
                // SAFETY: a prefetch reads nothing and cannot fault; `at`
                // lies inside the mapping (its chunk was checked above).
                unsafe {
                    _mm_prefetch::<_MM_HINT_T0>(self.map.ptr.as_ptr().add(at as usize).cast());
                }
                at += 64;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (addr, len);
    }

    /// The whole chunk of a frame, for writing a packet into it.
    pub(crate) fn chunk_mut<'a>(&'a self, f: &'a mut Frame) -> &'a mut [u8] {
        let base = self.chunk_of(f);
        // SAFETY: the chunk lies inside the mapping; the token is unique
        // per chunk and borrowed mutably, and no kernel ring holds the
        // chunk, so this is the only access to these bytes.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.map.ptr.as_ptr().add(base as usize),
                self.frame_size as usize,
            )
        }
    }

    /// The chunk's index in the area.
    pub(crate) fn index(&self, f: &Frame) -> u32 {
        assert_eq!(f.umem, self.id, "frame of another UMEM");
        (f.addr / u64::from(self.frame_size)) as u32
    }

    /// Where `f`'s data starts in its chunk.
    pub(crate) fn offset(&self, f: &Frame) -> u32 {
        (f.addr - self.base_of(f.addr)) as u32
    }

    /// Whether `f`'s data runs to the end of its chunk (the frames of a
    /// received chain but its last do, as the kernel fills them whole).
    pub(crate) fn ends_chunk(&self, f: &Frame) -> bool {
        f.addr + u64::from(f.len) == self.base_of(f.addr) + u64::from(self.frame_size)
    }

    /// `len` bytes from `offset` in `head`'s chunk, running on into the
    /// chunks of `rest`, which must follow it in order in the area: one
    /// contiguous view of several chunks, for a packet longer than a
    /// chunk written or read in place. Panics when `rest` does not follow
    /// `head` or the bytes leave the chunks given.
    pub(crate) fn span_mut<'a>(
        &'a self,
        head: &'a mut Frame,
        rest: &'a mut [Frame],
        offset: u32,
        len: usize,
    ) -> &'a mut [u8] {
        assert_eq!(head.umem, self.id, "frame of another UMEM");
        let base = self.base_of(head.addr);
        let fs = u64::from(self.frame_size);
        for (i, f) in rest.iter().enumerate() {
            assert_eq!(f.umem, self.id, "frame of another UMEM");
            assert_eq!(
                self.base_of(f.addr),
                base + (i as u64 + 1) * fs,
                "chunks not in order"
            );
        }
        let chunks = (rest.len() as u64 + 1) * fs;
        let end = u64::from(offset) + len as u64;
        assert!(end <= chunks && base + chunks <= self.map.len as u64);
        // SAFETY: the bytes lie in the chunks of `head` and `rest` (checked
        // above), inside the mapping; every one of those tokens is
        // borrowed mutably for 'a and no kernel ring holds their chunks,
        // so this is the only access to these bytes.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.map
                    .ptr
                    .as_ptr()
                    .add((base + u64::from(offset)) as usize),
                len,
            )
        }
    }

    /// Points `f` at `len` bytes from `offset` in its chunk (what the TX
    /// descriptor will say). Panics when that leaves the chunk.
    pub(crate) fn set_span(&self, f: &mut Frame, offset: u32, len: u32) {
        assert!(
            offset
                .checked_add(len)
                .is_some_and(|e| e <= self.frame_size)
        );
        f.addr = self.base_of(f.addr) + u64::from(offset);
        f.len = len;
    }
}

/// The shared part of one ring: its mapping and the pointers into it.
/// (The mapping is shared only with the in-memory kernel of the tests.)
#[derive(Debug)]
#[cfg_attr(test, derive(Clone))]
struct RingMap {
    _map: Arc<Mmap>,
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    desc: NonNull<u8>,
    size: u32,
}

// SAFETY: the pointers address a mapping owned by `_map`; the ring is
// driven by one thread at a time (its owner holds `&mut`).
unsafe impl Send for RingMap {}

impl RingMap {
    fn new(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_ring_offset,
        size: u32,
        desc_size: usize,
        pgoff: u64,
    ) -> Result<Self> {
        let len = off.desc as usize + size as usize * desc_size;
        let map = Mmap::ring(fd, len, pgoff)?;
        let at = |o: u64| {
            // SAFETY: the kernel's offsets lie inside the mapping it sized
            // (desc is last, len covers it); the pointer is non-null.
            unsafe { NonNull::new_unchecked(map.ptr.as_ptr().add(o as usize)) }
        };
        Ok(Self {
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            desc: at(off.desc),
            size,
            _map: Arc::new(map),
        })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: a 4-byte aligned u32 in the live mapping, shared with the
        // kernel, which accesses it atomically (READ_ONCE/smp_store_release).
        unsafe { self.producer.as_ref() }
    }
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }
    fn flags(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.flags.as_ref() }
    }
}

/// A ring this process produces into (fill: `u64` addresses; TX:
/// `xdp_desc`).
#[derive(Debug)]
pub(crate) struct ProdRing {
    ring: RingMap,
    cached_prod: u32,
    cached_cons: u32,
    umem: u16,
    frame_mask: u64,
    desc: bool,
}

impl ProdRing {
    fn new(ring: RingMap, umem: &UmemArea, desc: bool) -> Self {
        let cached_prod = ring.producer().load(Ordering::Relaxed);
        let cached_cons = ring
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(ring.size);
        Self {
            ring,
            cached_prod,
            cached_cons,
            umem: umem.id,
            frame_mask: !u64::from(umem.frame_size - 1),
            desc,
        }
    }

    /// Free slots (reloads the consumer index only when the cache is short
    /// of `want`).
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        self.cached_cons = self
            .ring
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(self.ring.size);
        self.cached_cons.wrapping_sub(self.cached_prod)
    }

    /// Writes a frame into the next slot (not yet visible to the kernel:
    /// see [`Self::submit`]). Gives the frame back when the ring is full.
    pub(crate) fn push(&mut self, f: Frame) -> std::result::Result<(), Frame> {
        self.push_part(f, false)
    }

    /// [`Self::push`] for one buffer of a multi-buffer packet: `more` sets
    /// `XDP_PKT_CONTD` (another buffer of the same packet follows; TX ring
    /// only). The caller makes sure the ring has room for the whole chain
    /// before it pushes the first buffer (the kernel must never see a chain
    /// without its last buffer).
    pub(crate) fn push_part(&mut self, f: Frame, more: bool) -> std::result::Result<(), Frame> {
        if f.umem != self.umem || self.free(1) == 0 {
            return Err(f);
        }
        let i = (self.cached_prod & (self.ring.size - 1)) as usize;
        if self.desc {
            let d = libc::xdp_desc {
                addr: f.addr,
                len: f.len,
                options: if more { libc::XDP_PKT_CONTD } else { 0 },
            };
            // SAFETY: slot i < size lies in the descriptor array of the
            // mapping; the slot is ours (between the kernel's consumer
            // index and our producer index) until submit publishes it.
            unsafe {
                self.ring
                    .desc
                    .cast::<libc::xdp_desc>()
                    .as_ptr()
                    .add(i)
                    .write(d);
            }
        } else {
            // SAFETY: as above, for the fill ring's u64 addresses (the
            // chunk base: aligned mode wants the chunk, not the data).
            unsafe {
                self.ring
                    .desc
                    .cast::<u64>()
                    .as_ptr()
                    .add(i)
                    .write(f.addr & self.frame_mask);
            }
        }
        self.cached_prod = self.cached_prod.wrapping_add(1);
        Ok(())
    }

    /// Publishes every pushed slot to the kernel (one release store).
    pub(crate) fn submit(&mut self) {
        self.ring
            .producer()
            .store(self.cached_prod, Ordering::Release);
    }

    /// Slots submitted that the kernel has not consumed yet.
    pub(crate) fn in_kernel(&self) -> u32 {
        self.ring
            .producer()
            .load(Ordering::Relaxed)
            .wrapping_sub(self.ring.consumer().load(Ordering::Acquire))
    }

    /// Whether the kernel asked to be woken (`XDP_RING_NEED_WAKEUP`).
    pub(crate) fn needs_wakeup(&self) -> bool {
        self.ring.flags().load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// A ring this process consumes from (RX: `xdp_desc`; completion: `u64`).
#[derive(Debug)]
pub(crate) struct ConsRing {
    ring: RingMap,
    cached_prod: u32,
    cached_cons: u32,
    umem: u16,
    desc: bool,
}

impl ConsRing {
    fn new(ring: RingMap, umem: &UmemArea, desc: bool) -> Self {
        let cached_cons = ring.consumer().load(Ordering::Relaxed);
        let cached_prod = ring.producer().load(Ordering::Acquire);
        Self {
            ring,
            cached_prod,
            cached_cons,
            umem: umem.id,
            desc,
        }
    }

    /// Entries ready (reloads the producer index only when the cache is
    /// empty).
    pub(crate) fn available(&mut self) -> u32 {
        let n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n > 0 {
            return n;
        }
        self.cached_prod = self.ring.producer().load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// Takes the next entry; its slot is handed back to the kernel by
    /// [`Self::release`].
    pub(crate) fn pop(&mut self) -> Option<Frame> {
        self.pop_part().map(|(f, _)| f)
    }

    /// [`Self::pop`] with the RX descriptor's `XDP_PKT_CONTD`: true when
    /// the next descriptor continues the same packet (multi-buffer RX).
    pub(crate) fn pop_part(&mut self) -> Option<(Frame, bool)> {
        if self.available() == 0 {
            return None;
        }
        let i = (self.cached_cons & (self.ring.size - 1)) as usize;
        let (addr, len, more) = if self.desc {
            // SAFETY: slot i < size is in the descriptor array and between
            // our consumer index and the producer index we acquired, so the
            // kernel has finished writing it and will not touch it before
            // release.
            let d = unsafe {
                self.ring
                    .desc
                    .cast::<libc::xdp_desc>()
                    .as_ptr()
                    .add(i)
                    .read()
            };
            (d.addr, d.len, d.options & libc::XDP_PKT_CONTD != 0)
        } else {
            // SAFETY: as above, for a completion ring's u64 address.
            let a = unsafe { self.ring.desc.cast::<u64>().as_ptr().add(i).read() };
            (a, 0, false)
        };
        self.cached_cons = self.cached_cons.wrapping_add(1);
        Some((
            Frame {
                umem: self.umem,
                addr,
                len,
            },
            more,
        ))
    }

    /// The address and length of the descriptor [`Self::pop_part`] would
    /// return next, without taking it; only from what the last producer
    /// load showed (no atomic load here), `None` for a completion ring.
    #[inline]
    pub(crate) fn peek(&self) -> Option<(u64, u32)> {
        if !self.desc || self.cached_prod == self.cached_cons {
            return None;
        }
        let i = (self.cached_cons & (self.ring.size - 1)) as usize;
        // SAFETY: as in `pop_part`: slot i lies between our consumer index
        // and the producer index we acquired, so the kernel is done with it.
        let d = unsafe {
            self.ring
                .desc
                .cast::<libc::xdp_desc>()
                .as_ptr()
                .add(i)
                .read()
        };
        Some((d.addr, d.len))
    }

    /// Hands the slots of every popped entry back (one release store).
    pub(crate) fn release(&mut self) {
        self.ring
            .consumer()
            .store(self.cached_cons, Ordering::Release);
    }
}

/// Ring sizes (powers of two).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RingSizes {
    pub(crate) rx: u32,
    pub(crate) tx: u32,
    pub(crate) fill: u32,
    pub(crate) comp: u32,
}

/// How to bind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BindFlags {
    pub(crate) zero_copy: bool,
    pub(crate) need_wakeup: bool,
    /// `XDP_USE_SG`: packets larger than a chunk arrive and leave as
    /// chains of descriptors (`XDP_PKT_CONTD`); without it the kernel drops
    /// them.
    pub(crate) multi_buffer: bool,
}

/// An AF_XDP socket with its rings, bound to one queue.
#[derive(Debug)]
pub(crate) struct XskSocket {
    // Rings before fd: unmapped before the socket closes.
    pub(crate) rx: ConsRing,
    pub(crate) tx: ProdRing,
    pub(crate) fill: ProdRing,
    pub(crate) comp: ConsRing,
    fd: OwnedFd,
}

fn setsockopt<T>(fd: BorrowedFd<'_>, opt: c_int, val: &T) -> Result<()> {
    // SAFETY: passes a pointer to a live T and its exact size; the kernel
    // only reads it.
    cvt("setsockopt(SOL_XDP)", unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            std::ptr::from_ref(val).cast(),
            size_of::<T>() as socklen_t,
        )
    })
    .map(drop)
}

fn getsockopt<T>(fd: BorrowedFd<'_>, opt: c_int) -> Result<(T, usize)> {
    // SAFETY: T is a plain C struct of integers, for which all-zero is a
    // valid value.
    let mut v: T = unsafe { zeroed() };
    let mut len = size_of::<T>() as socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v` and updates
    // len; both pointers are to live locals.
    cvt("getsockopt(SOL_XDP)", unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            std::ptr::from_mut(&mut v).cast(),
            &mut len,
        )
    })?;
    Ok((v, len as usize))
}

impl XskSocket {
    /// Creates a socket bound to `ifindex`/`queue`. `shared` is `None` for
    /// the socket that registers `umem` (the worker's first), or the first
    /// socket to share its UMEM with (`XDP_SHARED_UMEM`; this socket still
    /// gets its own fill and completion rings, as a socket on another queue
    /// must).
    pub(crate) fn open(
        umem: &UmemArea,
        ifindex: u32,
        queue: u32,
        sizes: RingSizes,
        flags: BindFlags,
        shared: Option<BorrowedFd<'_>>,
        umem_headroom: u32,
    ) -> Result<Self> {
        // SAFETY: plain socket(2) call; the result is checked and owned.
        let raw = cvt("socket(AF_XDP)", unsafe {
            libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0)
        })?;
        // SAFETY: raw is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let b = fd.as_fd();
        if shared.is_none() {
            let reg = libc::xdp_umem_reg {
                addr: umem.map.ptr.as_ptr() as u64,
                len: umem.map.len as u64,
                chunk_size: umem.frame_size,
                headroom: umem_headroom,
                flags: 0,
                tx_metadata_len: 0,
            };
            setsockopt(b, libc::XDP_UMEM_REG, &reg)?;
        }
        setsockopt(b, libc::XDP_UMEM_FILL_RING, &sizes.fill)?;
        setsockopt(b, libc::XDP_UMEM_COMPLETION_RING, &sizes.comp)?;
        setsockopt(b, libc::XDP_RX_RING, &sizes.rx)?;
        setsockopt(b, libc::XDP_TX_RING, &sizes.tx)?;
        let (off, len) = getsockopt::<libc::xdp_mmap_offsets>(b, libc::XDP_MMAP_OFFSETS)?;
        if len != size_of::<libc::xdp_mmap_offsets>() {
            // Pre-5.4 layout without ring flags: need_wakeup unsupported.
            return Err(Error::new(
                "getsockopt(XDP_MMAP_OFFSETS)",
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    "kernel AF_XDP ABI without ring flags",
                ),
            ));
        }
        let dsz = size_of::<libc::xdp_desc>();
        let rx = RingMap::new(b, &off.rx, sizes.rx, dsz, libc::XDP_PGOFF_RX_RING as u64)?;
        let tx = RingMap::new(b, &off.tx, sizes.tx, dsz, libc::XDP_PGOFF_TX_RING as u64)?;
        let fill = RingMap::new(b, &off.fr, sizes.fill, 8, libc::XDP_UMEM_PGOFF_FILL_RING)?;
        let comp = RingMap::new(
            b,
            &off.cr,
            sizes.comp,
            8,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        )?;

        // SAFETY: all-zero is a valid sockaddr_xdp.
        let mut sa: libc::sockaddr_xdp = unsafe { zeroed() };
        sa.sxdp_family = libc::AF_XDP as u16;
        sa.sxdp_ifindex = ifindex;
        sa.sxdp_queue_id = queue;
        match shared {
            Some(first) => {
                // Flags are inherited from the UMEM's socket; the kernel
                // refuses them here.
                sa.sxdp_flags = libc::XDP_SHARED_UMEM;
                sa.sxdp_shared_umem_fd = first.as_raw_fd() as u32;
            }
            None => {
                sa.sxdp_flags = if flags.zero_copy {
                    libc::XDP_ZEROCOPY
                } else {
                    libc::XDP_COPY
                };
                if flags.need_wakeup {
                    sa.sxdp_flags |= libc::XDP_USE_NEED_WAKEUP;
                }
                if flags.multi_buffer {
                    sa.sxdp_flags |= libc::XDP_USE_SG;
                }
            }
        }
        // SAFETY: passes a live sockaddr_xdp and its exact size.
        cvt("bind(AF_XDP)", unsafe {
            libc::bind(
                b.as_raw_fd(),
                std::ptr::from_ref(&sa).cast(),
                size_of::<libc::sockaddr_xdp>() as socklen_t,
            )
        })?;
        Ok(Self {
            rx: ConsRing::new(rx, umem, true),
            tx: ProdRing::new(tx, umem, true),
            fill: ProdRing::new(fill, umem, false),
            comp: ConsRing::new(comp, umem, false),
            fd,
        })
    }

    /// Whether the kernel bound it in zero-copy mode (`XDP_OPTIONS`).
    pub(crate) fn zero_copy(&self) -> Result<bool> {
        let (o, _) = getsockopt::<libc::xdp_options>(self.fd.as_fd(), libc::XDP_OPTIONS)?;
        Ok(o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
    }

    /// The kernel's counters (`XDP_STATISTICS`).
    pub(crate) fn statistics(&self) -> Result<libc::xdp_statistics> {
        getsockopt::<libc::xdp_statistics>(self.fd.as_fd(), libc::XDP_STATISTICS).map(|(s, _)| s)
    }

    /// Kicks transmission (`sendto(MSG_DONTWAIT)`). `Ok(true)`: the kernel
    /// stopped early (its batch limit, a busy queue or a full completion
    /// ring) and more may be sent by kicking again.
    pub(crate) fn kick_tx(&self) -> Result<bool> {
        // SAFETY: a zero-length send with null buffer and address, which
        // AF_XDP defines as "process the TX ring".
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc >= 0 {
            return Ok(false);
        }
        let e = Error::last("sendto(AF_XDP)");
        match e.raw_os_error() {
            Some(libc::EAGAIN) => Ok(true),
            // Dropped by the device or device busy/down: the descriptors
            // still complete; not an error of ours.
            Some(libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN) => Ok(false),
            _ => Err(e),
        }
    }

    /// Wakes the driver's RX path after refilling (`recvfrom(MSG_DONTWAIT)`),
    /// for when the fill ring says it needs it.
    pub(crate) fn kick_rx(&self) {
        // SAFETY: a zero-length receive with null buffer and address, which
        // AF_XDP defines as a wakeup.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
        }
    }
}

impl AsFd for XskSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// What an interface is, in the calling thread's network namespace.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IfInfo {
    pub(crate) index: u32,
    pub(crate) mac: [u8; 6],
    pub(crate) mtu: u32,
}

fn ifreq_for(call: &'static str, name: &str) -> Result<libc::ifreq> {
    // SAFETY: all-zero is a valid ifreq.
    let mut req: libc::ifreq = unsafe { zeroed() };
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= req.ifr_name.len() || bytes.contains(&0) {
        return Err(Error::invalid(call, "not an interface name"));
    }
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(req)
}

fn inet_socket() -> Result<OwnedFd> {
    // SAFETY: plain socket(2); checked and owned.
    let raw = cvt("socket(AF_INET)", unsafe {
        libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0)
    })?;
    // SAFETY: a fresh fd nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `ETHTOOL_STXCSUM` (include/uapi/linux/ethtool.h; not in libc).
const ETHTOOL_STXCSUM: u32 = 0x17;

/// `struct ethtool_value`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// Turns the transmit checksum offload of an interface on or off (the
/// legacy `ETHTOOL_STXCSUM` request, which the kernel maps onto the
/// checksum feature bits).
pub(crate) fn set_tx_checksum(name: &str, on: bool) -> Result<()> {
    let mut req = ifreq_for("ioctl(SIOCETHTOOL)", name)?;
    let mut v = EthtoolValue {
        cmd: ETHTOOL_STXCSUM,
        data: u32::from(on),
    };
    req.ifr_ifru.ifru_data = std::ptr::from_mut(&mut v).cast();
    let s = inet_socket()?;
    // SAFETY: SIOCETHTOOL reads the name and the ethtool_value the union
    // points at; both live until the call returns.
    cvt("ioctl(SIOCETHTOOL)", unsafe {
        libc::ioctl(
            s.as_raw_fd(),
            libc::SIOCETHTOOL,
            std::ptr::from_mut(&mut req),
        )
    })
    .map(drop)
}

/// Looks an interface up by name (SIOCGIFINDEX, SIOCGIFHWADDR, SIOCGIFMTU).
pub(crate) fn if_info(name: &str) -> Result<IfInfo> {
    let mut req = ifreq_for("ioctl(SIOCGIFINDEX)", name)?;
    let s = inet_socket()?;
    let ioctl = |req: &mut libc::ifreq, call: &'static str, op: libc::Ioctl| -> Result<()> {
        // SAFETY: these SIOCGIF* requests read the name and write the union
        // of a live ifreq.
        cvt(call, unsafe {
            libc::ioctl(s.as_raw_fd(), op, std::ptr::from_mut(req))
        })
        .map(drop)
    };
    ioctl(&mut req, "ioctl(SIOCGIFINDEX)", libc::SIOCGIFINDEX)?;
    // SAFETY: SIOCGIFINDEX filled the ifindex member of the union.
    let index = unsafe { req.ifr_ifru.ifru_ifindex } as u32;
    ioctl(&mut req, "ioctl(SIOCGIFHWADDR)", libc::SIOCGIFHWADDR)?;
    // SAFETY: SIOCGIFHWADDR filled the hwaddr member.
    let hw = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(hw.sa_data.iter()) {
        *d = *s as u8;
    }
    ioctl(&mut req, "ioctl(SIOCGIFMTU)", libc::SIOCGIFMTU)?;
    // SAFETY: SIOCGIFMTU filled the mtu member.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu } as u32;
    Ok(IfInfo { index, mac, mtu })
}

/// The kernel's side of the four rings, played in memory: rings laid out
/// as the kernel would (producer, consumer and flags words, then the
/// descriptors) in anonymous memory instead of the socket's mapping, so
/// the ring protocol and the frame accounting above it run in tests
/// without root or an AF_XDP socket.
#[cfg(test)]
pub(crate) mod in_memory {
    use super::*;

    /// Offsets of the in-memory ring layout (one cache line per index).
    const OFFSETS: libc::xdp_ring_offset = libc::xdp_ring_offset {
        producer: 0,
        consumer: 64,
        desc: 192,
        flags: 128,
    };

    impl RingMap {
        /// A ring of `size` descriptors of `desc_size` bytes in plain
        /// memory, both indices starting at `start`.
        fn in_memory(size: u32, desc_size: usize, start: u32) -> Self {
            let len = OFFSETS.desc as usize + size as usize * desc_size;
            let map = Mmap::anonymous(len).expect("anonymous memory");
            let at = |o: u64| {
                // SAFETY: the offsets lie inside the mapping, sized above.
                unsafe { NonNull::new_unchecked(map.ptr.as_ptr().add(o as usize)) }
            };
            let r = Self {
                producer: at(OFFSETS.producer).cast(),
                consumer: at(OFFSETS.consumer).cast(),
                flags: at(OFFSETS.flags).cast(),
                desc: at(OFFSETS.desc),
                size,
                _map: Arc::new(map),
            };
            r.producer().store(start, Ordering::Relaxed);
            r.consumer().store(start, Ordering::Relaxed);
            r
        }

        /// A ring of 16-byte (`desc`) or 8-byte (address) entries in plain
        /// memory, and the kernel's end of it.
        fn with_kernel_end(size: u32, desc: bool, start: u32) -> (Self, KernelRing) {
            let r = Self::in_memory(size, if desc { 16 } else { 8 }, start);
            let k = KernelRing { ring: r.clone() };
            (r, k)
        }
    }

    impl ProdRing {
        /// A producer ring (fill: `desc` false; TX: true) in plain memory,
        /// with the kernel's end of it.
        pub(crate) fn in_memory(
            umem: &UmemArea,
            size: u32,
            desc: bool,
            start: u32,
        ) -> (Self, KernelRing) {
            let (r, k) = RingMap::with_kernel_end(size, desc, start);
            (Self::new(r, umem, desc), k)
        }
    }

    impl ConsRing {
        /// A consumer ring (RX: `desc` true; completion: false) in plain
        /// memory, with the kernel's end of it.
        pub(crate) fn in_memory(
            umem: &UmemArea,
            size: u32,
            desc: bool,
            start: u32,
        ) -> (Self, KernelRing) {
            let (r, k) = RingMap::with_kernel_end(size, desc, start);
            (Self::new(r, umem, desc), k)
        }
    }

    /// The kernel's end of one ring: it consumes what the process
    /// produces (fill, TX) and produces what the process consumes (RX,
    /// completion), with the kernel's memory ordering (acquire the other
    /// side's index, release its own).
    #[derive(Debug)]
    pub(crate) struct KernelRing {
        ring: RingMap,
    }

    impl KernelRing {
        /// Takes the next entry the process published: (address, length;
        /// 0 for an address ring).
        pub(crate) fn consume(&self) -> Option<(u64, u32)> {
            self.consume_part().map(|(a, l, _)| (a, l))
        }

        /// [`Self::consume`] with the descriptor's `XDP_PKT_CONTD`.
        pub(crate) fn consume_part(&self) -> Option<(u64, u32, bool)> {
            let cons = self.ring.consumer().load(Ordering::Relaxed);
            let prod = self.ring.producer().load(Ordering::Acquire);
            if cons == prod {
                return None;
            }
            let i = (cons & (self.ring.size - 1)) as usize;
            // SAFETY: slot i < size, published by the producer's release
            // store that the acquire load above saw.
            let e = unsafe { self.read(i) };
            self.ring
                .consumer()
                .store(cons.wrapping_add(1), Ordering::Release);
            Some(e)
        }

        /// Publishes one entry for the process; false when the ring is full.
        pub(crate) fn produce(&self, addr: u64, len: u32) -> bool {
            self.produce_part(addr, len, false)
        }

        /// [`Self::produce`] of one buffer of a packet: `more` sets
        /// `XDP_PKT_CONTD`.
        pub(crate) fn produce_part(&self, addr: u64, len: u32, more: bool) -> bool {
            let prod = self.ring.producer().load(Ordering::Relaxed);
            let cons = self.ring.consumer().load(Ordering::Acquire);
            if prod.wrapping_sub(cons) == self.ring.size {
                return false;
            }
            let i = (prod & (self.ring.size - 1)) as usize;
            // SAFETY: slot i < size lies in the descriptor array, and the
            // process released it (it is outside producer..consumer).
            unsafe { self.write(i, addr, len, more) };
            self.ring
                .producer()
                .store(prod.wrapping_add(1), Ordering::Release);
            true
        }

        /// Free slots.
        pub(crate) fn room(&self) -> u32 {
            let (p, c) = self.indices();
            self.ring.size - p.wrapping_sub(c)
        }

        /// Sets or clears `XDP_RING_NEED_WAKEUP`.
        pub(crate) fn set_need_wakeup(&self, on: bool) {
            let v = if on { libc::XDP_RING_NEED_WAKEUP } else { 0 };
            self.ring.flags().store(v, Ordering::Relaxed);
        }

        /// The (producer, consumer) indices.
        pub(crate) fn indices(&self) -> (u32, u32) {
            (
                self.ring.producer().load(Ordering::Acquire),
                self.ring.consumer().load(Ordering::Acquire),
            )
        }

        fn is_desc(&self) -> bool {
            self.ring.size as usize * 16 + OFFSETS.desc as usize == self.ring._map.len
        }

        /// # Safety
        /// `i < size`, and the slot is not being written.
        unsafe fn read(&self, i: usize) -> (u64, u32, bool) {
            // SAFETY: per the caller, within the descriptor array.
            unsafe {
                if self.is_desc() {
                    let d = self
                        .ring
                        .desc
                        .cast::<libc::xdp_desc>()
                        .as_ptr()
                        .add(i)
                        .read();
                    (d.addr, d.len, d.options & libc::XDP_PKT_CONTD != 0)
                } else {
                    (
                        self.ring.desc.cast::<u64>().as_ptr().add(i).read(),
                        0,
                        false,
                    )
                }
            }
        }

        /// # Safety
        /// `i < size`, and the process does not read the slot.
        unsafe fn write(&self, i: usize, addr: u64, len: u32, more: bool) {
            // SAFETY: per the caller, within the descriptor array.
            unsafe {
                if self.is_desc() {
                    let d = libc::xdp_desc {
                        addr,
                        len,
                        options: if more { libc::XDP_PKT_CONTD } else { 0 },
                    };
                    self.ring
                        .desc
                        .cast::<libc::xdp_desc>()
                        .as_ptr()
                        .add(i)
                        .write(d);
                } else {
                    self.ring.desc.cast::<u64>().as_ptr().add(i).write(addr);
                }
            }
        }
    }

    /// The kernel's ends of one socket's four rings.
    #[derive(Debug)]
    pub(crate) struct Kernel {
        pub(crate) rx: KernelRing,
        pub(crate) tx: KernelRing,
        pub(crate) fill: KernelRing,
        pub(crate) comp: KernelRing,
    }

    impl Kernel {
        /// Receives `frame` as the kernel does: into the next chunk of the
        /// fill ring, after `headroom` bytes, then an RX descriptor; a
        /// frame longer than a chunk's room spans several chunks, every
        /// descriptor but the last with `XDP_PKT_CONTD` (the kernel's
        /// multi-buffer copy mode). False when the fill ring has too few
        /// chunks or the RX ring too few slots for the whole frame (the
        /// frame is dropped, as the kernel would).
        pub(crate) fn receive(&self, umem: &UmemArea, headroom: u32, frame: &[u8]) -> bool {
            let Some(descs) = self.place(umem, headroom, frame) else {
                return false;
            };
            for (addr, len, more) in descs {
                assert!(self.rx.produce_part(addr, len, more), "counted in place");
            }
            true
        }

        /// The first half of [`Self::receive`]: copies `frame` into chunks
        /// taken from the fill ring and returns the RX descriptors
        /// (address, length, `XDP_PKT_CONTD`) without publishing them, so
        /// a test can publish a chain in pieces.
        pub(crate) fn place(
            &self,
            umem: &UmemArea,
            headroom: u32,
            frame: &[u8],
        ) -> Option<Vec<(u64, u32, bool)>> {
            self.place_in(umem, headroom, frame, (umem.frame_size - headroom) as usize)
        }

        /// [`Self::place`] as a driver that puts at most `room` bytes in
        /// each chunk.
        pub(crate) fn place_in(
            &self,
            umem: &UmemArea,
            headroom: u32,
            frame: &[u8],
            room: usize,
        ) -> Option<Vec<(u64, u32, bool)>> {
            assert!(room > 0 && room <= (umem.frame_size - headroom) as usize);
            let parts = frame.len().div_ceil(room).max(1);
            let (fp, fc) = self.fill.indices();
            if (fp.wrapping_sub(fc) as usize) < parts || (self.rx.room() as usize) < parts {
                return None;
            }
            let mut descs = Vec::with_capacity(parts);
            for n in 0..parts {
                let part = &frame[(n * room).min(frame.len())..((n + 1) * room).min(frame.len())];
                let (chunk, _) = self.fill.consume().expect("counted above");
                assert!(chunk + u64::from(umem.frame_size) <= umem.map.len as u64);
                // SAFETY: the chunk is inside the UMEM (checked) and the fill
                // ring gave it to the kernel, so no Frame token exists for it;
                // the part fits after the headroom (room).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        part.as_ptr(),
                        umem.map
                            .ptr
                            .as_ptr()
                            .add((chunk + u64::from(headroom)) as usize),
                        part.len(),
                    );
                }
                descs.push((
                    chunk + u64::from(headroom),
                    part.len() as u32,
                    n + 1 < parts,
                ));
            }
            Some(descs)
        }

        /// Transmits the next packet of the TX ring as the kernel does:
        /// reads its descriptors (several when chained with
        /// `XDP_PKT_CONTD`) and completes each chunk. `None` when the TX
        /// ring is empty.
        pub(crate) fn transmit(&self, umem: &UmemArea) -> Option<Vec<u8>> {
            let mut out = Vec::new();
            let mut first = true;
            loop {
                let Some((addr, len, more)) = self.tx.consume_part() else {
                    assert!(first, "a chain without its last descriptor");
                    return None;
                };
                first = false;
                assert!(addr + u64::from(len) <= umem.map.len as u64);
                let at = out.len();
                out.resize(at + len as usize, 0);
                // SAFETY: in the UMEM (checked); the TX ring gave the chunk
                // to the kernel, so no Frame token exists for it.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        umem.map.ptr.as_ptr().add(addr as usize),
                        out[at..].as_mut_ptr(),
                        len as usize,
                    );
                }
                assert!(self.comp.produce(addr, 0), "completion ring full");
                if !more {
                    return Some(out);
                }
            }
        }
    }

    impl XskSocket {
        /// A socket whose four rings are in plain memory, with the kernel's
        /// ends; its fd is an eventfd, so a kick (only made when a ring
        /// asks for a wakeup) fails with ENOTSOCK.
        pub(crate) fn in_memory(umem: &UmemArea, sizes: RingSizes, start: u32) -> (Self, Kernel) {
            let (rx, krx) = ConsRing::in_memory(umem, sizes.rx, true, start);
            let (tx, ktx) = ProdRing::in_memory(umem, sizes.tx, true, start);
            let (fill, kfill) = ProdRing::in_memory(umem, sizes.fill, false, start);
            let (comp, kcomp) = ConsRing::in_memory(umem, sizes.comp, false, start);
            let fd =
                rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).expect("eventfd");
            (
                Self {
                    rx,
                    tx,
                    fill,
                    comp,
                    fd,
                },
                Kernel {
                    rx: krx,
                    tx: ktx,
                    fill: kfill,
                    comp: kcomp,
                },
            )
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn umem() -> (UmemArea, Vec<Frame>) {
            UmemArea::new(2048, 16).unwrap()
        }

        #[test]
        fn a_producer_ring_fills_publishes_on_submit_and_reloads_when_short() {
            let (umem, mut frames) = umem();
            let (mut fill, k) = ProdRing::in_memory(&umem, 4, false, 0);
            for _ in 0..4 {
                fill.push(frames.pop().unwrap()).unwrap();
            }
            // Full: the fifth comes back.
            let f = fill.push(frames.pop().unwrap()).unwrap_err();
            // Nothing is visible before submit.
            assert_eq!(k.consume(), None);
            fill.submit();
            assert_eq!(fill.in_kernel(), 4);
            // Addresses are chunk bases, in order (frames pop from the end).
            assert_eq!(k.consume(), Some((15 * 2048, 0)));
            // The cached consumer index says full until reloaded.
            assert_eq!(fill.free(1), 1);
            fill.push(f).unwrap();
            fill.submit();
            assert_eq!(k.indices(), (5, 1));
            assert_eq!(fill.in_kernel(), 4);
        }

        #[test]
        fn indices_wrap_past_u32_max_without_losing_order() {
            let (umem, mut frames) = umem();
            let start = u32::MAX - 2;
            let (mut tx, ktx) = ProdRing::in_memory(&umem, 4, true, start);
            let (mut comp, kcomp) = ConsRing::in_memory(&umem, 4, false, start);
            let mut sent = Vec::new();
            // Three rounds of three frames cross the wrap of both rings.
            for round in 0..3u32 {
                for i in 0..3u32 {
                    let mut f = frames.pop().unwrap();
                    umem.set_span(&mut f, 256, 60 + round * 3 + i);
                    sent.push((f.addr, f.len));
                    tx.push(f).unwrap();
                }
                tx.submit();
                for _ in 0..3 {
                    let (addr, len) = ktx.consume().unwrap();
                    assert_eq!(Some(&(addr, len)), sent.first());
                    sent.remove(0);
                    assert!(kcomp.produce(addr, 0));
                }
                assert_eq!(comp.available(), 3);
                for _ in 0..3 {
                    let f = comp.pop().unwrap();
                    assert_eq!(f.addr % 2048, 256);
                    frames.insert(0, f);
                }
                assert!(comp.pop().is_none());
                comp.release();
            }
            assert_eq!(
                ktx.indices(),
                (start.wrapping_add(9), start.wrapping_add(9))
            );
            assert_eq!(
                kcomp.indices(),
                (start.wrapping_add(9), start.wrapping_add(9))
            );
            assert_eq!(frames.len(), 16);
        }

        #[test]
        fn a_consumer_ring_hands_slots_back_only_on_release() {
            let (umem, _frames) = umem();
            let (mut rx, k) = ConsRing::in_memory(&umem, 2, true, 7);
            assert!(k.produce(2048 + 256, 100));
            assert!(k.produce(4096 + 256, 200));
            assert!(!k.produce(0, 1), "a full ring refuses");
            let a = rx.pop().unwrap();
            let b = rx.pop().unwrap();
            assert_eq!((a.addr, a.len, b.addr, b.len), (2304, 100, 4352, 200));
            // Popped but not released: the kernel still sees a full ring.
            assert!(!k.produce(0, 1));
            rx.release();
            assert!(k.produce(6144 + 256, 300));
            assert_eq!(rx.pop().map(|f| f.len), Some(300));
            // The tokens end here; their chunks are not reused.
            let _ = (a, b);
        }

        #[test]
        fn peek_shows_the_next_descriptor_without_taking_it() {
            let (umem, _frames) = umem();
            let (mut rx, k) = ConsRing::in_memory(&umem, 4, true, u32::MAX);
            assert_eq!(rx.peek(), None, "nothing produced");
            assert!(k.produce(2048 + 256, 100));
            assert!(k.produce(4096 + 256, 200));
            // Only what a producer load showed: none was made yet.
            assert_eq!(rx.peek(), None);
            let a = rx.pop().unwrap();
            assert_eq!((a.addr, a.len), (2304, 100));
            // Across the index wrap: the second, and still the second.
            assert_eq!(rx.peek(), Some((4352, 200)));
            assert_eq!(rx.peek(), Some((4352, 200)));
            let b = rx.pop().unwrap();
            assert_eq!((b.addr, b.len), (4352, 200));
            assert_eq!(rx.peek(), None, "all taken");
            // A completion ring has no descriptors to peek at.
            let (comp, kc) = ConsRing::in_memory(&umem, 4, false, 0);
            assert!(kc.produce(2048, 0));
            assert_eq!(comp.peek(), None);
            // Prefetching any of these, or past the UMEM, is harmless.
            umem.prefetch(4352, 200);
            umem.prefetch(u64::MAX - 64, 4096);
        }

        #[test]
        fn need_wakeup_is_read_from_the_flags_word() {
            let (umem, _) = umem();
            let (fill, k) = ProdRing::in_memory(&umem, 4, false, 0);
            assert!(!fill.needs_wakeup());
            k.set_need_wakeup(true);
            assert!(fill.needs_wakeup());
            k.set_need_wakeup(false);
            assert!(!fill.needs_wakeup());
        }
    }
}

#[cfg(test)]
mod umem_mapping_tests {
    use super::*;

    /// `AnonHugePages` of the mapping that starts at `addr` in this
    /// process, in bytes.
    fn anon_huge_bytes(addr: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((lo, _)) = range.split_once('-')
                && let Ok(lo) = usize::from_str_radix(lo, 16)
            {
                inside = lo == addr;
                continue;
            }
            if inside && let Some(kb) = line.strip_prefix("AnonHugePages:") {
                let kb = kb.trim().trim_end_matches(" kB").trim();
                return kb.parse::<u64>().unwrap() * 1024;
            }
        }
        panic!("no mapping starts at {addr:#x}");
    }

    #[test]
    fn a_umem_starts_on_a_huge_page_boundary_populated_and_in_huge_pages() {
        let len = 16 << 20;
        let (umem, frames) = UmemArea::new(4096, (len / 4096) as u32).unwrap();
        assert_eq!(frames.len(), len / 4096);
        let addr = umem.map.ptr.as_ptr() as usize;
        assert_eq!(addr % (2 << 20), 0, "{addr:#x} is not 2 MiB-aligned");
        assert_eq!(umem.map.len, len);
        // Populated: every page resident before anything touched it.
        let mut resident = vec![0u8; len / 4096];
        // SAFETY: mincore reads the page tables of our own mapping into a
        // vector of one byte per page.
        let rc = unsafe { libc::mincore(addr as *mut c_void, len, resident.as_mut_ptr()) };
        assert_eq!(rc, 0);
        assert!(resident.iter().all(|r| r & 1 == 1), "pages not populated");
        // In huge pages wherever the kernel offers them for advised memory
        // (it may fall short of a few when memory is fragmented).
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if thp.contains("[always]") || thp.contains("[madvise]") {
            let huge = anon_huge_bytes(addr);
            assert!(
                huge >= len as u64 / 2,
                "only {huge} of {len} bytes in huge pages"
            );
        }
    }
}
