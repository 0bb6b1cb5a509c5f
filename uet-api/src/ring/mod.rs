//! The shared-memory submission/completion ring between a client and the
//! daemon worker that serves it: the low-latency path for RMA writes and
//! reads (`docs/latency.md`).
//!
//! A client opts in with `RingOpen` (protocol version 2), passing a memfd
//! it created ([`ring_len`] bytes, sealed like a registered region); the
//! daemon answers `RingOpened` with a doorbell eventfd. From then on the
//! client writes operations into the submission queue (SQ) and reads
//! their ends from the completion queue (CQ) without a system call; the
//! socket stays the path for everything else.
//!
//! # Layout (all integers little-endian; one cache line per index)
//!
//! ```text
//! offset  0  magic "UETr", version u32 (1), sq_entries u32, cq_entries u32   client, informative
//! offset 64  sq_tail u32        client: entries written (free-running)
//! offset 128 sq_head u32        daemon: entries taken
//! offset 192 cq_tail u32        daemon: completions written; the client's futex word
//! offset 256 cq_head u32        client: completions read
//! offset 320 client_waits u32   client: 1 while it sleeps on cq_tail (futex)
//! offset 384 daemon_sleeps u32  daemon: 1 while the worker sleeps (ring the doorbell)
//! offset 448 broken u32         daemon: nonzero once it stopped serving the ring
//! offset 512 SQ: sq_entries × 128 bytes, then CQ: cq_entries × 32 bytes
//! ```
//!
//! Indices run freely and wrap at 2³²; entry `i` sits at slot
//! `i mod entries`. Both sizes are powers of two up to
//! [`MAX_RING_ENTRIES`].
//!
//! SQ entry (128 bytes): `op: u8` (1 write, 2 read), `flags: u8` (bit 0:
//! header data present; no other bit), `family: u8` (4/6), `generation:
//! u8`, `len: u32`, `tag: u64`, `handle: u32`, `job: u32`, `local_offset:
//! u64`, `key: u64`, `remote_offset: u64`, `header_data: u64`, `pid: u16`,
//! `ri: u16`, 4 reserved bytes, then at 64 the FEP address (16 bytes; an
//! IPv4 address in the first four) and 48 reserved bytes.
//!
//! CQ entry (32 bytes): `tag: u64`, `bytes: u64`, `kind: u8` (0 ok, 1
//! remote, 2 local, 3 transport), `return_code: u8`, `code: u16`, 12
//! reserved bytes. Local and transport failures carry their code only.
//!
//! # Rules the daemon enforces
//!
//! The ring is client-writable memory. The daemon keeps its own copy of
//! `sq_head` and `cq_tail`, reads each SQ entry once into a local copy and
//! decodes that ([`SqEntry::decode`]), so nothing the client changes later
//! can affect it. An entry that does not decode, names a handle the client
//! does not hold, lies out of bounds or addresses another job ends with an
//! error completion carrying its tag — the same codes the socket path uses.
//! An `sq_tail` more than `sq_entries` ahead of the daemon's head (or
//! behind it), or a `cq_head` that claims completions not yet written,
//! breaks the ring: the daemon counts a refusal, sets `broken` and serves
//! it no more (the connection and its other requests stay). It takes an
//! entry only while the CQ has room for every operation in flight, so
//! completions never overwrite unread ones.

mod shm;

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsFd;
use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

use crate::proto::{Completion, ErrorCode, Handle, LocalRef, RemoteRef, RemoteRegion, Status, Tag};
use shm::SharedMem;

/// The largest SQ or CQ, in entries.
pub const MAX_RING_ENTRIES: u32 = 4096;
/// Bytes of one SQ entry.
pub const SQ_ENTRY_LEN: usize = 128;
/// Bytes of one CQ entry.
pub const CQ_ENTRY_LEN: usize = 32;
/// Bytes before the SQ.
pub const HEADER_LEN: usize = 512;
/// The first four bytes of a ring.
pub const RING_MAGIC: [u8; 4] = *b"UETr";

const SQ_TAIL: usize = 64;
const SQ_HEAD: usize = 128;
const CQ_TAIL: usize = 192;
const CQ_HEAD: usize = 256;
const CLIENT_WAITS: usize = 320;
const DAEMON_SLEEPS: usize = 384;
const BROKEN: usize = 448;

/// SQ and CQ sizes, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingSizes {
    sq: u32,
    cq: u32,
}

impl RingSizes {
    /// `sq` and `cq` entries: powers of two in `1..=MAX_RING_ENTRIES`.
    ///
    /// # Errors
    ///
    /// A message naming the bad size.
    pub fn new(sq: u32, cq: u32) -> Result<Self, String> {
        for (what, n) in [("sq_entries", sq), ("cq_entries", cq)] {
            if !n.is_power_of_two() || n > MAX_RING_ENTRIES {
                return Err(format!(
                    "{what} {n}: a power of two up to {MAX_RING_ENTRIES}"
                ));
            }
        }
        Ok(Self { sq, cq })
    }

    /// SQ entries.
    #[must_use]
    pub const fn sq(self) -> u32 {
        self.sq
    }

    /// CQ entries.
    #[must_use]
    pub const fn cq(self) -> u32 {
        self.cq
    }

    /// Bytes of the whole ring.
    #[must_use]
    pub const fn len(self) -> usize {
        HEADER_LEN + self.sq as usize * SQ_ENTRY_LEN + self.cq as usize * CQ_ENTRY_LEN
    }

    /// Never: a ring has at least one entry each way.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        false
    }

    const fn sq_slot(self, i: u32) -> usize {
        HEADER_LEN + (i & (self.sq - 1)) as usize * SQ_ENTRY_LEN
    }

    const fn cq_slot(self, i: u32) -> usize {
        HEADER_LEN + self.sq as usize * SQ_ENTRY_LEN + (i & (self.cq - 1)) as usize * CQ_ENTRY_LEN
    }
}

/// What an SQ entry asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqOp {
    /// `UET_WRITE` from `local` to `remote`.
    Write {
        /// Header data delivered with the write.
        header_data: Option<u64>,
    },
    /// `UET_READ` from `remote` into `local`.
    Read,
}

/// One operation as the SQ carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqEntry {
    /// Write or read.
    pub op: SqOp,
    /// Echoed in the completion.
    pub tag: Tag,
    /// The client's buffer.
    pub local: LocalRef,
    /// The remote region.
    pub remote: RemoteRef,
    /// Bytes.
    pub len: u32,
}

/// Why an SQ entry does not decode; its tag (always readable) gets an
/// error completion with [`ErrorCode::Malformed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryError {
    /// An op code other than 1 or 2.
    Op(u8),
    /// A flag bit other than bit 0.
    Flags(u8),
    /// An address family other than 4 or 6.
    Family(u8),
}

impl std::fmt::Display for EntryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Op(o) => write!(f, "unknown ring op {o}"),
            Self::Flags(x) => write!(f, "undefined ring entry flags {x:#04x}"),
            Self::Family(x) => write!(f, "address family {x} (4 or 6)"),
        }
    }
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

impl SqEntry {
    /// Its 128 bytes.
    #[must_use]
    pub fn encode(&self) -> [u8; SQ_ENTRY_LEN] {
        let mut b = [0u8; SQ_ENTRY_LEN];
        let r = &self.remote.region;
        let (op, flags, hd) = match self.op {
            SqOp::Write { header_data } => (1, u8::from(header_data.is_some()), header_data),
            SqOp::Read => (2, 0, None),
        };
        b[0] = op;
        b[1] = flags;
        b[2] = if r.fep.is_ipv4() { 4 } else { 6 };
        b[3] = r.generation;
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..16].copy_from_slice(&self.tag.0.to_le_bytes());
        b[16..20].copy_from_slice(&self.local.handle.0.to_le_bytes());
        b[20..24].copy_from_slice(&r.job.to_le_bytes());
        b[24..32].copy_from_slice(&self.local.offset.to_le_bytes());
        b[32..40].copy_from_slice(&r.key.to_le_bytes());
        b[40..48].copy_from_slice(&self.remote.offset.to_le_bytes());
        b[48..56].copy_from_slice(&hd.unwrap_or(0).to_le_bytes());
        b[56..58].copy_from_slice(&r.pid.to_le_bytes());
        b[58..60].copy_from_slice(&r.ri.to_le_bytes());
        match r.fep {
            IpAddr::V4(a) => b[64..68].copy_from_slice(&a.octets()),
            IpAddr::V6(a) => b[64..80].copy_from_slice(&a.octets()),
        }
        b
    }

    /// The tag of an entry, whatever else it holds.
    #[must_use]
    pub fn tag_of(b: &[u8; SQ_ENTRY_LEN]) -> Tag {
        Tag(u64_at(b, 8))
    }

    /// Decodes a copy of an entry. Field ranges (job, pid and ri widths,
    /// handles, bounds) are the daemon's to check, as for socket messages.
    ///
    /// # Errors
    ///
    /// See [`EntryError`].
    pub fn decode(b: &[u8; SQ_ENTRY_LEN]) -> Result<Self, EntryError> {
        let flags = b[1];
        if flags & !1 != 0 {
            return Err(EntryError::Flags(flags));
        }
        let op = match b[0] {
            1 => SqOp::Write {
                header_data: (flags & 1 != 0).then(|| u64_at(b, 48)),
            },
            2 if flags == 0 => SqOp::Read,
            2 => return Err(EntryError::Flags(flags)),
            o => return Err(EntryError::Op(o)),
        };
        let fep = match b[2] {
            4 => IpAddr::V4(Ipv4Addr::new(b[64], b[65], b[66], b[67])),
            6 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(&b[64..80]);
                IpAddr::V6(Ipv6Addr::from(a))
            }
            f => return Err(EntryError::Family(f)),
        };
        Ok(Self {
            op,
            tag: Self::tag_of(b),
            local: LocalRef {
                handle: Handle(u32_at(b, 16)),
                offset: u64_at(b, 24),
            },
            remote: RemoteRef {
                region: RemoteRegion {
                    fep,
                    job: u32_at(b, 20),
                    pid: u16_at(b, 56),
                    ri: u16_at(b, 58),
                    generation: b[3],
                    key: u64_at(b, 32),
                },
                offset: u64_at(b, 40),
            },
            len: u32_at(b, 4),
        })
    }
}

/// A completion's 32 bytes (local and transport messages are not carried).
#[must_use]
pub fn encode_completion(c: &Completion) -> [u8; CQ_ENTRY_LEN] {
    let mut b = [0u8; CQ_ENTRY_LEN];
    b[0..8].copy_from_slice(&c.tag.0.to_le_bytes());
    b[8..16].copy_from_slice(&c.bytes.to_le_bytes());
    let (kind, rc, code) = match &c.status {
        Status::Ok => (0, 0, 0),
        Status::Remote { return_code } => (1, *return_code, 0),
        Status::Local { code, .. } => (2, 0, code.code()),
        Status::Transport { code, .. } => (3, 0, *code),
    };
    b[16] = kind;
    b[17] = rc;
    b[18..20].copy_from_slice(&code.to_le_bytes());
    b
}

/// Decodes a completion the daemon wrote (an unknown kind reads as a
/// local `Internal` failure).
#[must_use]
pub fn decode_completion(b: &[u8; CQ_ENTRY_LEN]) -> Completion {
    let code = u16_at(b, 18);
    let status = match b[16] {
        0 => Status::Ok,
        1 => Status::Remote { return_code: b[17] },
        2 => Status::Local {
            code: ErrorCode::from_code(code),
            message: String::new(),
        },
        3 => Status::Transport {
            code,
            message: String::new(),
        },
        k => Status::Local {
            code: ErrorCode::Internal,
            message: format!("completion kind {k}"),
        },
    };
    Completion {
        tag: Tag(u64_at(b, 0)),
        status,
        bytes: u64_at(b, 8),
    }
}

/// Why the daemon stopped serving a ring (the `broken` word).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// `sq_tail` moved backwards or more than `sq_entries` ahead.
    SqTail = 1,
    /// `cq_head` claims completions not yet written.
    CqHead = 2,
}

/// The client's end of a ring: writes the SQ, reads the CQ.
#[derive(Debug)]
pub struct ClientRing {
    mem: SharedMem,
    sizes: RingSizes,
    sq_tail: u32,
    cq_head: u32,
    doorbell: Option<std::os::fd::OwnedFd>,
    next_tag: u64,
}

/// The ring is full: reap completions first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingFull;

/// Why [`ClientRing::wait`] returned without a completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingWaitError {
    /// Nothing by the deadline.
    Timeout,
    /// The daemon stopped serving the ring ([`Broken`] code).
    Broken(u32),
}

impl ClientRing {
    /// Lays a fresh ring over `fd` (at least `sizes.len()` bytes, zeroed),
    /// writing its header. `doorbell` is set later ([`Self::set_doorbell`]).
    ///
    /// # Errors
    ///
    /// `mmap`'s error.
    pub fn create(fd: impl AsFd, sizes: RingSizes) -> io::Result<Self> {
        let mem = SharedMem::map(fd, sizes.len())?;
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&RING_MAGIC);
        h[4..8].copy_from_slice(&1u32.to_le_bytes());
        h[8..12].copy_from_slice(&sizes.sq.to_le_bytes());
        h[12..16].copy_from_slice(&sizes.cq.to_le_bytes());
        mem.write(0, &h);
        Ok(Self {
            mem,
            sizes,
            sq_tail: 0,
            cq_head: 0,
            doorbell: None,
            next_tag: 1 << 63,
        })
    }

    /// The eventfd that wakes the serving worker when it sleeps.
    pub fn set_doorbell(&mut self, fd: std::os::fd::OwnedFd) {
        self.doorbell = Some(fd);
    }

    /// Its sizes.
    #[must_use]
    pub const fn sizes(&self) -> RingSizes {
        self.sizes
    }

    /// A tag for the next operation: ring tags have the top bit set, so
    /// they never collide with the socket path's.
    pub fn next_tag(&mut self) -> Tag {
        self.next_tag += 1;
        Tag(self.next_tag)
    }

    /// Starts an RMA write of `len` bytes from `src` to `dst`.
    ///
    /// # Errors
    ///
    /// [`RingFull`].
    pub fn write(
        &mut self,
        src: LocalRef,
        dst: RemoteRef,
        len: u32,
        header_data: Option<u64>,
    ) -> Result<Tag, RingFull> {
        let tag = self.next_tag();
        self.submit(&SqEntry {
            op: SqOp::Write { header_data },
            tag,
            local: src,
            remote: dst,
            len,
        })?;
        Ok(tag)
    }

    /// Starts an RMA read of `len` bytes from `src` into `dst`.
    ///
    /// # Errors
    ///
    /// [`RingFull`].
    pub fn read(&mut self, dst: LocalRef, src: RemoteRef, len: u32) -> Result<Tag, RingFull> {
        let tag = self.next_tag();
        self.submit(&SqEntry {
            op: SqOp::Read,
            tag,
            local: dst,
            remote: src,
            len,
        })?;
        Ok(tag)
    }

    /// Places an entry in the SQ and, if the worker sleeps, rings the
    /// doorbell.
    ///
    /// # Errors
    ///
    /// [`RingFull`] while `sq_entries` entries await the daemon.
    pub fn submit(&mut self, e: &SqEntry) -> Result<(), RingFull> {
        self.submit_raw(&e.encode())
    }

    /// Places raw bytes as the next entry (what a hostile or broken client
    /// could write; for tests of the daemon's checks).
    ///
    /// # Errors
    ///
    /// As [`Self::submit`].
    pub fn submit_raw(&mut self, b: &[u8; SQ_ENTRY_LEN]) -> Result<(), RingFull> {
        let head = self.mem.word(SQ_HEAD).load(Ordering::Acquire);
        if self.sq_tail.wrapping_sub(head) >= self.sizes.sq {
            return Err(RingFull);
        }
        self.mem.write(self.sizes.sq_slot(self.sq_tail), b);
        self.sq_tail = self.sq_tail.wrapping_add(1);
        self.mem
            .word(SQ_TAIL)
            .store(self.sq_tail, Ordering::Release);
        // Pairs with the worker's fence between raising `daemon_sleeps`
        // and its last look at the tail: one of the two sees the other.
        fence(Ordering::SeqCst);
        if self.mem.word(DAEMON_SLEEPS).load(Ordering::Relaxed) != 0
            && let Some(d) = &self.doorbell
        {
            let _ = rustix::io::write(d, &1u64.to_ne_bytes());
        }
        Ok(())
    }

    /// Sets the raw `sq_tail` word (for tests of the daemon's checks).
    pub fn poke_sq_tail(&mut self, v: u32) {
        self.sq_tail = v;
        self.mem.word(SQ_TAIL).store(v, Ordering::Release);
    }

    /// Sets the raw `cq_head` word (for tests of the daemon's checks).
    pub fn poke_cq_head(&mut self, v: u32) {
        self.mem.word(CQ_HEAD).store(v, Ordering::Release);
    }

    /// The next completion, if one is there.
    pub fn poll(&mut self) -> Option<Completion> {
        let tail = self.mem.word(CQ_TAIL).load(Ordering::Acquire);
        if tail == self.cq_head {
            return None;
        }
        let mut b = [0u8; CQ_ENTRY_LEN];
        self.mem.read(self.sizes.cq_slot(self.cq_head), &mut b);
        self.cq_head = self.cq_head.wrapping_add(1);
        self.mem
            .word(CQ_HEAD)
            .store(self.cq_head, Ordering::Release);
        Some(decode_completion(&b))
    }

    /// Why the daemon stopped serving this ring, if it did.
    #[must_use]
    pub fn broken(&self) -> Option<u32> {
        match self.mem.word(BROKEN).load(Ordering::Acquire) {
            0 => None,
            b => Some(b),
        }
    }

    /// The next completion: polls for up to `spin`, then sleeps on the
    /// CQ's futex (the worker wakes it only while `client_waits` is up)
    /// until `timeout` (`None`: forever).
    ///
    /// # Errors
    ///
    /// See [`RingWaitError`].
    pub fn wait(
        &mut self,
        spin: Duration,
        timeout: Option<Duration>,
    ) -> Result<Completion, RingWaitError> {
        let start = Instant::now();
        let deadline = timeout.map(|t| start + t);
        loop {
            if let Some(c) = self.poll() {
                return Ok(c);
            }
            if let Some(b) = self.broken() {
                return Err(RingWaitError::Broken(b));
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(RingWaitError::Timeout);
            }
            if now.duration_since(start) < spin {
                std::hint::spin_loop();
                continue;
            }
            let waits = self.mem.word(CLIENT_WAITS);
            waits.store(1, Ordering::Relaxed);
            // Pairs with the worker's fence after it publishes cq_tail:
            // either it sees `client_waits` or this sees the new tail.
            fence(Ordering::SeqCst);
            let tail = self.mem.word(CQ_TAIL).load(Ordering::Relaxed);
            if tail == self.cq_head && self.broken().is_none() {
                let left = deadline.map(|d| d.saturating_duration_since(now));
                let ts = left.map(|l| rustix::thread::futex::Timespec {
                    tv_sec: l.as_secs().min(i64::MAX as u64) as i64,
                    tv_nsec: i64::from(l.subsec_nanos()),
                });
                // Shared (not private) futex: the worker is another process.
                let _ = rustix::thread::futex::wait(
                    self.mem.word(CQ_TAIL),
                    rustix::thread::futex::Flags::empty(),
                    tail,
                    ts.as_ref(),
                );
            }
            waits.store(0, Ordering::Relaxed);
        }
    }
}

/// The daemon's end of a ring: takes SQ entries, writes completions.
#[derive(Debug)]
pub struct ServerRing {
    mem: SharedMem,
    sizes: RingSizes,
    sq_head: u32,
    cq_tail: u32,
    in_flight: u32,
    broken: Option<Broken>,
}

/// What [`ServerRing::take`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// An entry that decoded.
    Entry(SqEntry),
    /// An entry that did not; answer its tag with an error completion.
    Malformed(Tag, EntryError),
}

impl ServerRing {
    /// Maps a client's ring. The caller checked the descriptor
    /// (`check_region_fd` for `sizes.len()` bytes).
    ///
    /// # Errors
    ///
    /// `mmap`'s error.
    pub fn map(fd: impl AsFd, sizes: RingSizes) -> io::Result<Self> {
        let mem = SharedMem::map(fd, sizes.len())?;
        // The daemon's indices start where the ring says it stands now: a
        // client may open a ring it used before (both at zero when new).
        let sq_head = mem.word(SQ_HEAD).load(Ordering::Acquire);
        let cq_tail = mem.word(CQ_TAIL).load(Ordering::Acquire);
        Ok(Self {
            mem,
            sizes,
            sq_head,
            cq_tail,
            in_flight: 0,
            broken: None,
        })
    }

    /// Why it is no longer served, if so.
    #[must_use]
    pub const fn broken(&self) -> Option<Broken> {
        self.broken
    }

    /// Operations taken and not completed.
    #[must_use]
    pub const fn in_flight(&self) -> u32 {
        self.in_flight
    }

    fn mark_broken(&mut self, why: Broken) {
        if self.broken.is_none() {
            self.broken = Some(why);
            self.mem.word(BROKEN).store(why as u32, Ordering::Release);
            self.wake_client();
        }
    }

    /// Entries waiting in the SQ (0 once broken). A tail that moved
    /// backwards or runs more than `sq_entries` ahead breaks the ring;
    /// the caller counts that ([`Self::broken`] turns `Some`).
    pub fn pending(&mut self) -> u32 {
        if self.broken.is_some() {
            return 0;
        }
        let tail = self.mem.word(SQ_TAIL).load(Ordering::Acquire);
        let n = tail.wrapping_sub(self.sq_head);
        if n > self.sizes.sq {
            self.mark_broken(Broken::SqTail);
            return 0;
        }
        n
    }

    /// The next entry, read once into a local copy, if there is one and
    /// the CQ has room for its completion besides every other operation
    /// in flight; the caller must end each taken entry with exactly one
    /// [`Self::complete`]. Call [`Self::pending`] first: `take` only moves
    /// within what it saw.
    pub fn take(&mut self, pending: &mut u32) -> Option<Taken> {
        if *pending == 0 || self.broken.is_some() {
            return None;
        }
        let head = self.mem.word(CQ_HEAD).load(Ordering::Acquire);
        let unread = self.cq_tail.wrapping_sub(head);
        if unread > self.sizes.cq {
            self.mark_broken(Broken::CqHead);
            return None;
        }
        if unread + self.in_flight >= self.sizes.cq {
            return None;
        }
        let mut b = [0u8; SQ_ENTRY_LEN];
        self.mem.read(self.sizes.sq_slot(self.sq_head), &mut b);
        self.sq_head = self.sq_head.wrapping_add(1);
        self.mem
            .word(SQ_HEAD)
            .store(self.sq_head, Ordering::Release);
        *pending -= 1;
        self.in_flight += 1;
        Some(match SqEntry::decode(&b) {
            Ok(e) => Taken::Entry(e),
            Err(e) => Taken::Malformed(SqEntry::tag_of(&b), e),
        })
    }

    /// Writes the completion of a taken entry and wakes the client if it
    /// sleeps.
    pub fn complete(&mut self, c: &Completion) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if self.broken.is_some() {
            return;
        }
        self.mem
            .write(self.sizes.cq_slot(self.cq_tail), &encode_completion(c));
        self.cq_tail = self.cq_tail.wrapping_add(1);
        self.mem
            .word(CQ_TAIL)
            .store(self.cq_tail, Ordering::Release);
        self.wake_client();
    }

    fn wake_client(&self) {
        // Pairs with the client's fence between raising `client_waits`
        // and its last look at cq_tail.
        fence(Ordering::SeqCst);
        if self.mem.word(CLIENT_WAITS).load(Ordering::Relaxed) != 0 {
            let _ = rustix::thread::futex::wake(
                self.mem.word(CQ_TAIL),
                rustix::thread::futex::Flags::empty(),
                1,
            );
        }
    }

    /// Says whether the worker sleeps (the client rings the doorbell only
    /// then); on going to sleep, returns whether entries arrived after
    /// all, in which case the worker should not sleep.
    pub fn set_sleeping(&mut self, sleeping: bool) -> bool {
        self.mem
            .word(DAEMON_SLEEPS)
            .store(u32::from(sleeping), Ordering::Relaxed);
        if !sleeping {
            return false;
        }
        fence(Ordering::SeqCst);
        self.pending() > 0
    }
}

#[cfg(test)]
mod tests;
