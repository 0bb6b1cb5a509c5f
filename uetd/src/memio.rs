//! An in-memory [`PacketIo`]: two ends joined by bounded queues, so the
//! worker loop and whole endpoints run against each other in a test
//! without root, sockets or a network namespace.
//!
//! A datagram is the UET bytes the endpoint wrote and the [`RxMeta`] the
//! receiving end would have parsed (source, EV, ECN as sent; never
//! trimmed). A full queue drops, like a full ring: counted in
//! `tx_ring_full`/`tx_dropped`, and the PDS recovers it as a loss. There
//! are no wire frames, so a capture sees nothing of this backend.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use uet_pds::{RxMeta, Transmit};
use uet_wire::encap::nominal_pktsize;

use crate::capture::Capture;
use crate::io::{IoStats, PacketIo};
use crate::sys::eventfd::{EventFd, poll_in};

/// UDP header the datagrams would travel under, for their nominal size.
const UDP_HEADER_LEN: usize = 8;

/// One direction: datagrams in flight and the receiver's wake-up.
#[derive(Debug)]
struct Lane {
    queue: ArrayQueue<(RxMeta, Box<[u8]>)>,
    ready: EventFd,
}

/// One end of an in-memory link.
#[derive(Debug)]
pub(crate) struct MemIo {
    local: IpAddr,
    rx: Arc<Lane>,
    tx: Arc<Lane>,
    buf: Box<[u8]>,
    stats: IoStats,
}

impl MemIo {
    /// Two ends, at addresses `a` and `b`, each direction holding up to
    /// `capacity` datagrams of up to `max_uet` UET bytes.
    pub(crate) fn pair(
        a: IpAddr,
        b: IpAddr,
        capacity: usize,
        max_uet: usize,
    ) -> io::Result<(Self, Self)> {
        let lane = || -> io::Result<Arc<Lane>> {
            Ok(Arc::new(Lane {
                queue: ArrayQueue::new(capacity.max(1)),
                ready: EventFd::new()?,
            }))
        };
        let (ab, ba) = (lane()?, lane()?);
        let end = |local, rx, tx| Self {
            local,
            rx,
            tx,
            buf: vec![0; max_uet].into(),
            stats: IoStats::default(),
        };
        Ok((end(a, Arc::clone(&ba), Arc::clone(&ab)), end(b, ab, ba)))
    }
}

impl PacketIo for MemIo {
    fn recv(&mut self, max: usize, sink: &mut dyn FnMut(&RxMeta, &mut [u8])) -> io::Result<usize> {
        let mut n = 0;
        while n < max {
            let Some((meta, mut bytes)) = self.rx.queue.pop() else {
                break;
            };
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += bytes.len() as u64;
            sink(&meta, &mut bytes);
            n += 1;
        }
        Ok(n)
    }

    fn send(
        &mut self,
        max: usize,
        source: &mut dyn FnMut(&mut [u8]) -> Option<Transmit>,
    ) -> io::Result<usize> {
        let mut sent = 0;
        for _ in 0..max {
            let Some(t) = source(&mut self.buf) else {
                break;
            };
            let meta = RxMeta {
                src: self.local,
                ev: t.ev,
                ecn: t.ecn,
                trimmed: None,
                nominal_size: nominal_pktsize(UDP_HEADER_LEN + t.len) as u32,
                sdi: None,
                arrived: None,
            };
            let bytes = Box::from(&self.buf[..t.len]);
            if self.tx.queue.push((meta, bytes)).is_err() {
                self.stats.tx_ring_full += 1;
                self.stats.tx_dropped += 1;
                continue;
            }
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += t.len as u64;
            sent += 1;
        }
        if sent > 0 {
            self.tx.ready.signal();
        }
        Ok(sent)
    }

    fn attach_capture(&mut self, _capture: Arc<Capture>) {}

    fn wait(&mut self, timeout: Option<Duration>, wake: BorrowedFd<'_>) -> io::Result<()> {
        if self.rx.queue.is_empty() {
            poll_in(&[self.rx.ready.as_fd(), wake], timeout)?;
        }
        self.rx.ready.drain();
        Ok(())
    }

    fn max_uet_len(&self) -> usize {
        self.buf.len()
    }

    fn stats(&self) -> IoStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Instant;

    use uet_ses::{
        Access, EndpointConfig, LocalBuf, MemoryKey, Operation, RegionAddr, RegionSpec, RemoteAddr,
    };
    use uet_wire::{JobId, PidOnFep, ResourceIndex};

    use super::*;
    use crate::mem::SharedRegion;
    use crate::tss::{TssJob, WorkerTss};
    use crate::worker::{self, DaemonEndpoint, Output};

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 8, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 8, 0, 2));

    /// A write of 256 KiB from A to B over in-memory queues, each
    /// worker with its security sublayer (or none): the stats of both, and
    /// whether the target's bytes are the source's, once the write ended or
    /// `until` held of B's stats.
    fn write(
        tss: [Option<WorkerTss>; 2],
        until: impl Fn(&worker::WorkerStats) -> bool,
    ) -> (worker::WorkerStats, worker::WorkerStats, bool) {
        write_starting(tss, uet_pds::SecureStart::default(), until)
    }

    /// [`write`] with the target's way of agreeing a secure PDC's
    /// Start_PSN.
    fn write_starting(
        tss: [Option<WorkerTss>; 2],
        start: uet_pds::SecureStart,
        until: impl Fn(&worker::WorkerStats) -> bool,
    ) -> (worker::WorkerStats, worker::WorkerStats, bool) {
        let (io_a, io_b) = MemIo::pair(A, B, 1024, 8192).unwrap();
        let mut config = EndpointConfig::default();
        config.pds.secure_start = start;
        write_over(
            [Box::new(io_a), Box::new(io_b)],
            tss,
            &config,
            256 * 1024,
            until,
        )
    }

    /// A write of `len` bytes from the worker on `io[0]` (at A) to the one
    /// on `io[1]` (at B), both endpoints configured as `config`.
    fn write_over(
        io: [Box<dyn PacketIo + Send>; 2],
        tss: [Option<WorkerTss>; 2],
        config: &EndpointConfig,
        len: usize,
        until: impl Fn(&worker::WorkerStats) -> bool,
    ) -> (worker::WorkerStats, worker::WorkerStats, bool) {
        let [io_a, io_b] = io;
        let capture = Arc::new(Capture::new(1));
        let (out_a, outputs_a) = crossbeam_channel::unbounded();
        let (out_b, _outputs_b) = crossbeam_channel::unbounded();
        let ep = |seed| DaemonEndpoint::new(config.clone(), seed);
        let [tss_a, tss_b] = tss;
        let mut wa = worker::spawn_with_tss(
            0,
            io_a,
            ep(1),
            out_a,
            Arc::clone(&capture),
            worker::ThreadConfig::default(),
            tss_a,
        )
        .unwrap();
        let mut wb = worker::spawn_with_tss(
            0,
            io_b,
            ep(2),
            out_b,
            capture,
            worker::ThreadConfig::default(),
            tss_b,
        )
        .unwrap();

        let region = RegionAddr::new(
            JobId::new(1).unwrap(),
            PidOnFep::new(0).unwrap(),
            ResourceIndex::new(3).unwrap(),
        );
        let target = SharedRegion::anonymous(len).unwrap();
        let spec = RegionSpec::new(region, MemoryKey(0x5eed), Access::REMOTE_WRITE);
        let reg = wb.register(spec, target.clone()).unwrap().unwrap();

        let src = SharedRegion::anonymous(len).unwrap();
        src.fill_pattern(7, len);
        let local = wa.register_local(src.clone()).unwrap();
        wa.send(worker::Command::Submit {
            tag: 42,
            dst: B,
            op: Operation::Write {
                dst: RemoteAddr {
                    region,
                    generation: reg.generation,
                    key: MemoryKey(0x5eed),
                    offset: 0,
                },
                src: LocalBuf::new(local, 0),
                len: len as u32,
                header_data: None,
            },
        });

        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match outputs_a.recv_timeout(left.min(Duration::from_millis(10))) {
                Ok((
                    _,
                    Output::Completed {
                        tag: 42,
                        completion,
                    },
                )) => {
                    assert_eq!(
                        completion.status,
                        Ok(()),
                        "{:?} {:?}",
                        wa.stats().io,
                        wb.stats().io
                    );
                    break;
                }
                Ok((_, Output::Rejected { error, .. })) => panic!("refused: {error}"),
                Ok(_) => {}
                Err(_) if until(&wb.stats()) => break,
                Err(_) => assert!(Instant::now() < deadline, "no completion"),
            }
        }
        let same = target.hash(len) == src.hash(len);
        // Stopped first: a worker publishes its counters every millisecond
        // and once more as it stops, so only then are they complete.
        wa.stop();
        wb.stop();
        let (a, b) = (wa.stats(), wb.stats());
        assert!(a.io.tx_packets >= len.div_ceil(4096) as u64, "{:?}", a.io);
        (a, b, same)
    }

    #[test]
    fn two_workers_complete_an_rma_write_over_in_memory_queues() {
        let (a, b, same) = write([None, None], |_| false);
        assert!(same);
        assert!(b.io.rx_packets >= 64, "{:?}", b.io);
        assert!(a.tss.is_none() && b.tss.is_none());
    }

    fn tss(local: IpAddr, key: u8) -> Option<WorkerTss> {
        let job = TssJob::with_key_file(1, "unused".into());
        Some(WorkerTss::new(
            0,
            &[job],
            vec![uet_tss::SecretKey::new([key; 32])],
            local,
            4793,
            false,
            crate::io::EvMap::IDENTITY,
        ))
    }

    /// Job 1 in a security domain on both ends: every datagram either way
    /// is sealed and opened, and the bytes arrive.
    #[test]
    fn a_write_in_a_security_domain_is_sealed_and_opened() {
        let (a, b, same) = write([tss(A, 7), tss(B, 7)], |_| false);
        assert!(same);
        let (ta, tb) = (a.tss.unwrap(), b.tss.unwrap());
        assert!(ta.sealed >= 64, "{ta:?}");
        // Every data packet opened at B; the workers stop once the write
        // completed, so a last control packet either way (a CLEAR, an
        // ACK) may still be on its way.
        assert!(tb.opened >= 64 && tb.opened <= ta.sealed, "{tb:?}");
        assert!(
            ta.opened > 0 && ta.opened <= tb.sealed,
            "ACKs too: {ta:?} {tb:?}"
        );
        assert!(ta.drops.is_empty() && tb.drops.is_empty(), "{ta:?} {tb:?}");
        assert_eq!(b.pds.drop_counts().map(|(_, n)| n).sum::<u64>(), 0);
    }

    /// RANDOM_1RTT_START: the target names the secure PDC's Start_PSN in a
    /// NEW_START_PSN NACK, sealed like everything else; the initiator
    /// starts the PDC again from it and the write arrives whole.
    #[test]
    fn a_secure_pdc_started_in_one_round_trip_delivers_the_write() {
        let (a, b, same) = write_starting(
            [tss(A, 7), tss(B, 7)],
            uet_pds::SecureStart::Random1Rtt,
            |_| false,
        );
        assert!(same);
        let new_start = uet_wire::pds::NackCode::NewStartPsn.code();
        let told = a.pds.rx_nack_codes.nonzero().find(|(c, _)| *c == new_start);
        assert!(told.is_some_and(|(_, n)| n >= 1), "{:?}", a.pds);
        assert!(b.pds.drops(uet_pds::DropReason::NewStartPsn) >= 1);
        assert_eq!(a.pds.pdcs_reopened, 1, "started again once");
        let (ta, tb) = (a.tss.unwrap(), b.tss.unwrap());
        assert!(ta.drops.is_empty() && tb.drops.is_empty(), "{ta:?} {tb:?}");
    }

    /// Keys that differ: every datagram fails its tag at B, nothing is
    /// placed and nothing is answered.
    #[test]
    fn a_wrong_key_places_nothing() {
        let (a, b, same) = write([tss(A, 7), tss(B, 8)], |b| {
            b.tss
                .as_ref()
                .is_some_and(|t| t.drops.get("bad_tag") >= Some(&64))
        });
        assert!(!same);
        let tb = b.tss.unwrap();
        assert_eq!(tb.opened, 0);
        assert_eq!(tb.sealed, 0, "no answer to a packet that did not verify");
        assert_eq!(b.pds.rx_data, 0);
        assert_eq!(a.pds.rx_acks, 0);
    }

    /// A sender in the clear for a job the receiver secures: dropped as
    /// `plaintext`, nothing placed, nothing answered.
    #[test]
    fn plaintext_for_a_secured_job_places_nothing() {
        let (_, b, same) = write([None, tss(B, 7)], |b| {
            b.tss
                .as_ref()
                .is_some_and(|t| t.drops.get("plaintext") >= Some(&64))
        });
        assert!(!same);
        let tb = b.tss.unwrap();
        assert_eq!((tb.opened, tb.sealed, b.pds.rx_data), (0, 0, 0));
    }

    /// One end of an in-memory link whose worker loses its thread where a
    /// descheduled worker would: in `recv` until it has sent a datagram,
    /// or in `send` right after its first datagram left (until an answer
    /// waits and `stall` has passed, after which `junk` datagrams the
    /// engine drops come in ahead of it, a full batch of other traffic).
    /// Every `send` that carries a datagram can be made late by
    /// `send_delay`, a peer slow to answer. The stalls sleep: they stand
    /// for time the thread does not run, nothing waits on them.
    struct Stalling {
        inner: MemIo,
        stall_recv_until_sent: Duration,
        stall_after_first_send: Duration,
        junk: usize,
        send_delay: Duration,
        sent_any: bool,
        junk_left: usize,
    }

    impl Stalling {
        fn new(inner: MemIo) -> Self {
            Self {
                inner,
                stall_recv_until_sent: Duration::ZERO,
                stall_after_first_send: Duration::ZERO,
                junk: 0,
                send_delay: Duration::ZERO,
                sent_any: false,
                junk_left: 0,
            }
        }
    }

    impl PacketIo for Stalling {
        fn recv(
            &mut self,
            max: usize,
            sink: &mut dyn FnMut(&RxMeta, &mut [u8]),
        ) -> io::Result<usize> {
            if !self.sent_any {
                std::thread::sleep(self.stall_recv_until_sent);
            }
            if self.junk_left > 0 {
                let n = self.junk_left.min(max);
                let meta = RxMeta {
                    src: B,
                    ev: uet_wire::EntropyValue::default(),
                    ecn: uet_wire::Ecn::NotEct,
                    trimmed: None,
                    nominal_size: 64,
                    sdi: None,
                    arrived: None,
                };
                for _ in 0..n {
                    sink(&meta, &mut [0xff; 4]);
                }
                self.junk_left -= n;
                return Ok(n);
            }
            self.inner.recv(max, sink)
        }

        fn send(
            &mut self,
            max: usize,
            source: &mut dyn FnMut(&mut [u8]) -> Option<Transmit>,
        ) -> io::Result<usize> {
            let first = !self.sent_any;
            let delay = self.send_delay;
            let mut any = false;
            let sent = self.inner.send(max, &mut |buf| {
                let t = source(buf);
                if t.is_some() && !any {
                    // Late before the batch's first datagram is queued.
                    std::thread::sleep(delay);
                    any = true;
                }
                t
            })?;
            self.sent_any |= any;
            if first && any && !self.stall_after_first_send.is_zero() {
                let start = Instant::now();
                let deadline = start + Duration::from_secs(10);
                while (self.inner.rx.queue.is_empty()
                    || start.elapsed() < self.stall_after_first_send)
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                self.junk_left = self.junk;
            }
            Ok(sent)
        }

        fn attach_capture(&mut self, _capture: Arc<Capture>) {}

        fn wait(&mut self, timeout: Option<Duration>, wake: BorrowedFd<'_>) -> io::Result<()> {
            if self.junk_left > 0 {
                return Ok(());
            }
            self.inner.wait(timeout, wake)
        }

        fn max_uet_len(&self) -> usize {
            self.inner.max_uet_len()
        }

        fn stats(&self) -> IoStats {
            self.inner.stats()
        }
    }

    /// Endpoints whose RTO is 200 ms (no sample yet), so only a fault of
    /// the loop, not a slow test machine, can make one fire below.
    fn slow_rto() -> EndpointConfig {
        let mut config = EndpointConfig::default();
        config.pds.rto_init = Duration::from_millis(200);
        config
    }

    /// The worker loses its thread for 400 ms between the start of a loop
    /// iteration and the send of a write's only packet, and the target
    /// answers 5 ms after it arrives: the packet's RTO runs from when it
    /// left, so it does not fire. (Stamped with the iteration's start, the
    /// packet looked 400 ms old when it left and timed out at once.)
    #[test]
    fn a_stall_before_a_send_does_not_age_the_packet() {
        let (io_a, io_b) = MemIo::pair(A, B, 1024, 8192).unwrap();
        let mut a = Stalling::new(io_a);
        a.stall_recv_until_sent = Duration::from_millis(400);
        let mut b = Stalling::new(io_b);
        b.send_delay = Duration::from_millis(5);
        let (a, _, same) = write_over(
            [Box::new(a), Box::new(b)],
            [None, None],
            &slow_rto(),
            4096,
            |_| false,
        );
        assert!(same);
        assert_eq!(
            (a.pds.rto_fired, a.pds.tx_retransmits),
            (0, 0),
            "{:?}",
            a.pds
        );
    }

    /// The worker loses its thread for 400 ms right after a write's only
    /// packet left; meanwhile the ACK came, behind a full batch of other
    /// datagrams. The loop reads on to the ACK before it expires the RTO.
    #[test]
    fn an_ack_behind_a_full_batch_is_read_before_the_rto_expires() {
        let (io_a, io_b) = MemIo::pair(A, B, 1024, 8192).unwrap();
        let mut a = Stalling::new(io_a);
        a.stall_after_first_send = Duration::from_millis(400);
        a.junk = 64;
        let (a, _, same) = write_over(
            [Box::new(a), Box::new(Stalling::new(io_b))],
            [None, None],
            &slow_rto(),
            4096,
            |_| false,
        );
        assert!(same);
        assert!(a.io.rx_packets >= 1);
        assert_eq!(
            (a.pds.rto_fired, a.pds.tx_retransmits),
            (0, 0),
            "{:?}",
            a.pds
        );
    }
}
