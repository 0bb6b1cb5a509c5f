//! The `Endpoint`: PDS + SES (+ CMS through the PDS) as one sans-IO object,
//! the thing the daemon's workers and the simulator drive (`docs/architecture.md` §2,
//! §3).
//!
//! Inputs: [`Endpoint::submit`], [`Endpoint::handle_datagram`],
//! [`Endpoint::handle_timeout`]. Outputs: [`Endpoint::poll_transmit`],
//! [`Endpoint::poll_timeout`], [`Endpoint::poll_completion`] (the
//! initiator's operations) and [`Endpoint::poll_event`] (what arrived for
//! the target's application: writes with header data, receives).
//!
//! Completion (delivery complete): a write or send completes when the
//! target's final response arrives — the target sends it, flagged for
//! guaranteed delivery, once every byte of the message is placed — or with
//! the first error response; a read completes when its last byte is placed
//! locally. A lost final response is recovered by the PDS's guaranteed
//! delivery, never guessed from ACKs.
//!
//! Zero copy: a request's payload is read from the local buffer when the
//! PDS transmits (or retransmits) the packet, and incoming writes are placed
//! straight into registered memory; read-response data is read from
//! registered memory at transmit time and placed straight into the local
//! buffer.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;
use std::net::IpAddr;

use uet_pds::{
    InitiatorKey, Pds, PdsConfig, PdsError, PdsEvent, PktRef, Reply, RxMeta, RxRequest, RxSes,
    SesHooks, Transmit,
};
use uet_wire::pds::{NackCode, NextHeader, ReliableMode};
use uet_wire::ses::{ReturnCode, SesRepr, SesResponseRepr};
use uet_wire::time::Instant;
use uet_wire::{JobId, MessageId, PdcId, PidOnFep, TrafficClass};

use crate::completion::{Completion, CompletionError, LocalError};
use crate::error::SubmitError;
use crate::initiator::{Operation, OutgoingMessage, ReadProgress, ReadSink};
use crate::memory::{MemError, MemoryTable, RegionSpec, RegisteredMemory, Registration};
use crate::read::ReadResponder;
use crate::responder::{
    PostError, RecvKind, RecvSpec, SesTarget, TargetConfig, TargetEvent, TargetOutcome, Unexpected,
    UnexpectedRef,
};
use crate::slots::Slots;
use crate::types::{InitiatorId, LocalRegion, RecvId, RegionAddr, Source};

/// Configuration of an endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointConfig {
    /// Packet delivery (and, inside it, congestion control).
    pub pds: PdsConfig,
    /// The target side's limits.
    pub target: TargetConfig,
    /// Default traffic class of operations.
    pub tc: TrafficClass,
    /// The `initiator` field (§4.2) of every request this endpoint sends:
    /// the sender's identity as the receiving application sees it in
    /// [`crate::RecvEvent::initiator`] (a libfabric provider puts its
    /// `pid_on_fep` here so that a receiver can name the sender). Default 0.
    pub initiator: InitiatorId,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            pds: PdsConfig::default(),
            target: TargetConfig::default(),
            tc: TrafficClass::from_masked(0),
            initiator: InitiatorId::default(),
        }
    }
}

/// Handle of a submitted operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u64);

/// Why an operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpError {
    /// The target answered with an error return code.
    Remote(ReturnCode),
    /// A local buffer problem.
    Local(LocalError),
    /// Packet delivery gave up (retry budget, NACK, PDC closed).
    Transport(PdsError),
}

impl core::fmt::Display for OpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Remote(rc) => write!(f, "target returned {}", rc.name()),
            Self::Local(e) => write!(f, "local error: {e:?}"),
            Self::Transport(e) => write!(f, "delivery failed: {e:?}"),
        }
    }
}

impl std::error::Error for OpError {}

/// The end of an operation, as the initiator sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpCompletion {
    /// The operation.
    pub op: OpId,
    /// Success, or why not.
    pub status: Result<(), OpError>,
    /// Bytes placed at the destination (the response's `modified_length`)
    /// or, for a read, bytes received.
    pub modified_length: u64,
}

/// Counters of the SES part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SesCounters {
    /// Operations completed successfully.
    pub ops_ok: u64,
    /// Operations completed with an error.
    pub ops_failed: u64,
    /// Request packets the target placed or answered.
    pub requests: u64,
    /// Requests refused for lack of message state (NACKed, resent).
    pub refused: u64,
    /// Packets that were not for any known operation (late or stray).
    pub stray: u64,
}

#[derive(Debug)]
enum Slot {
    /// Our operation: a message we send.
    Out {
        id: OpId,
        /// The PDC carrying it.
        pdc: PdcId,
        msg: OutgoingMessage,
        pending: u32,
        /// The final SES response (writes, sends) or the read sink state.
        result: Option<Result<u64, OpError>>,
        sink: Option<ReadSink>,
        done: bool,
    },
    /// Read-response data we send back as the target.
    ReadBack { resp: ReadResponder, pending: u32 },
}

/// The SES half of an endpoint: operations in flight (message slots), the
/// target, local buffers. The PDS calls into it through [`SesHooks`] while
/// it handles a packet, a timer or a transmit poll; what it needs the PDS
/// to do in return it queues (`return_q`, `release_q`) for
/// [`Endpoint::apply_deferred`], since the PDS is busy calling it.
struct SesState<M> {
    target: SesTarget<M>,
    locals: Vec<Option<M>>,
    slots: Slots<Slot>,
    /// Read message IDs (ours) → slot token, for return-direction data.
    reads: HashMap<u16, u64>,
    next_token: u64,
    next_op: u64,
    next_msg: u16,
    in_flight_msgs: HashMap<u16, u64>,
    completions: VecDeque<OpCompletion>,
    /// Read responders to queue on a PDC once the PDS returns.
    return_q: Vec<(PdcId, ReadResponder)>,
    /// Holds (for reads awaiting data) to release once the PDS returns.
    release_q: Vec<PdcId>,
    counters: SesCounters,
}

impl<M> core::fmt::Debug for SesState<M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SesState")
            .field("slots", &self.slots.len())
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl<M: RegisteredMemory> SesState<M> {
    /// `n` packets of `token` acknowledged: exactly what `n` calls of
    /// `on_acked` do, with one slot lookup. The slot lives until `pending`
    /// reaches 0 once it is done (at the latest after the first call);
    /// calls after it went count as stray.
    fn acked_run(&mut self, token: u64, n: usize) {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        let (pending, done) = match self.slots.get_mut(&token) {
            Some(Slot::Out { pending, done, .. }) => (pending, *done),
            Some(Slot::ReadBack { pending, .. }) => (pending, true),
            None => {
                self.counters.stray += u64::from(n);
                return;
            }
        };
        let live = if done { (*pending).max(1).min(n) } else { n };
        *pending = pending.saturating_sub(live);
        if done && *pending == 0 {
            self.slots.remove(&token);
            self.counters.stray += u64::from(n - live);
        }
    }

    fn finish(&mut self, token: u64) {
        let Some(Slot::Out {
            id,
            pdc,
            result: Some(r),
            done,
            msg,
            sink,
            ..
        }) = self.slots.get_mut(&token)
        else {
            return;
        };
        if *done {
            return;
        }
        *done = true;
        if sink.is_some() {
            self.release_q.push(*pdc);
        }
        let (status, len) = match *r {
            Ok(n) => (Ok(()), n),
            Err(e) => (Err(e), 0),
        };
        if status.is_ok() {
            self.counters.ops_ok += 1;
        } else {
            self.counters.ops_failed += 1;
        }
        let mid = msg.message_id().get();
        self.in_flight_msgs.remove(&mid);
        self.reads.remove(&mid);
        self.completions.push_back(OpCompletion {
            op: *id,
            status,
            modified_length: len,
        });
    }

    /// Drops a slot once it is complete and no packet of it is in the PDS.
    fn reap(&mut self, token: u64) {
        let gone = match self.slots.get(&token) {
            Some(Slot::Out { pending, done, .. }) => *pending == 0 && *done,
            Some(Slot::ReadBack { pending, .. }) => *pending == 0,
            None => false,
        };
        if gone {
            self.slots.remove(&token);
        }
    }

    fn set_result(&mut self, token: u64, r: Result<u64, OpError>) {
        if let Some(Slot::Out { result, .. }) = self.slots.get_mut(&token)
            && (result.is_none() || r.is_err() && result.is_some_and(|x| x.is_ok()))
        {
            *result = Some(r);
        }
        self.finish(token);
    }

    fn on_read_data(&mut self, hdr_ses: &SesRepr, data: &[u8]) {
        let (mid, is_data) = match hdr_ses {
            SesRepr::ResponseData(h) => (h.read_request_message_id.get(), true),
            SesRepr::Response(r) => (r.message_id.get(), false),
            _ => return,
        };
        let Some(&token) = self.reads.get(&mid) else {
            self.counters.stray += 1;
            return;
        };
        let Some(Slot::Out {
            sink: Some(sink), ..
        }) = self.slots.get_mut(&token)
        else {
            self.counters.stray += 1;
            return;
        };
        let progress = match (hdr_ses, is_data) {
            (SesRepr::ResponseData(h), true) => {
                let region = sink.destination().region;
                match self
                    .locals
                    .get_mut(region.0 as usize)
                    .and_then(Option::as_mut)
                {
                    Some(mem) => sink.on_data(h, data, mem),
                    None => ReadProgress::Complete(Completion {
                        message_id: sink.message_id(),
                        status: Err(CompletionError::Local(LocalError::LocalOutOfBounds)),
                        modified_length: 0,
                    }),
                }
            }
            (SesRepr::Response(r), _) => sink.on_response(r),
            _ => return,
        };
        if let ReadProgress::Complete(c) = progress {
            let r = completion_result(&c);
            self.set_result(token, r);
            self.reap(token);
        }
    }
}

fn completion_result(c: &Completion) -> Result<u64, OpError> {
    match c.status {
        Ok(()) => Ok(c.modified_length),
        Err(CompletionError::Remote(rc)) => Err(OpError::Remote(rc)),
        Err(CompletionError::Local(l)) => Err(OpError::Local(l)),
    }
}

impl<M: RegisteredMemory> SesHooks for SesState<M> {
    fn write_request(&mut self, _now: Instant, pkt: &PktRef, buf: &mut [u8]) -> NextHeader {
        match self.slots.get(&pkt.token) {
            Some(Slot::Out { msg, .. }) => {
                let region = msg.operation().local().region;
                if let Some(Some(mem)) = self.locals.get(region.0 as usize)
                    && let Ok((nh, _)) = msg.write_packet(pkt.frag as usize, mem, buf)
                {
                    return nh;
                }
            }
            Some(Slot::ReadBack { resp, .. })
                if resp
                    .write_fragment(pkt.frag as usize, self.target.memory(), buf)
                    .is_ok() =>
            {
                return NextHeader::ResponseData;
            }
            _ => {}
        }
        // Submission checked bounds; reaching here means local memory went
        // away. Send an empty header-less packet; the target refuses it.
        buf.fill(0);
        NextHeader::None
    }

    fn on_request(&mut self, _now: Instant, rx: &RxRequest<'_>) -> Reply {
        let Some(pdc) = rx.pdc else {
            // RUDI and UUD requests: this endpoint executes operations on
            // PDCs only (message state is keyed by PDC). Refused as an
            // unsupported feature (UNEXP_EVENT, §2.9), never answered as
            // done: a RUDI initiator gets the NACK, a UUD one nothing.
            self.counters.refused += 1;
            return Reply::Reject(NackCode::UnexpEvent);
        };
        let Some(ses) = rx.ses else {
            self.counters.stray += 1;
            return Reply::None;
        };
        // Return-direction read data (or a read's error) for one of ours.
        if let RxSes::Parsed(ses @ (SesRepr::ResponseData(_) | SesRepr::Response(_))) = ses {
            self.on_read_data(ses, rx.payload);
            return Reply::None;
        }
        self.counters.requests += 1;
        let src = Source::new(rx.peer, pdc);
        let outcome = match ses {
            // The usual packet of a write, placed: nothing to answer.
            RxSes::Standard(v) if self.target.write_continuation(src, &v, rx.payload) => {
                return Reply::None;
            }
            RxSes::Standard(v) => self.target.handle_standard_general(src, v, rx.payload),
            RxSes::Parsed(ses) => self.target.handle_request(src, ses, rx.payload),
        };
        match outcome {
            TargetOutcome::Accepted | TargetOutcome::Duplicate | TargetOutcome::NotARequest => {
                Reply::None
            }
            TargetOutcome::Respond(r) => Reply::Response {
                response: r.header,
                guaranteed: r.guaranteed,
            },
            TargetOutcome::Read(resp) => {
                self.return_q.push((pdc, resp));
                Reply::None
            }
            TargetOutcome::NoResource => {
                self.counters.refused += 1;
                Reply::Reject(NackCode::NoSesMsgAvail)
            }
        }
    }

    fn on_acked(&mut self, _now: Instant, pkt: PktRef) {
        // What `reap` decides, on the slot already at hand (one lookup per
        // acknowledged packet instead of two).
        let gone = match self.slots.get_mut(&pkt.token) {
            Some(Slot::Out { pending, done, .. }) => {
                *pending = pending.saturating_sub(1);
                *pending == 0 && *done
            }
            Some(Slot::ReadBack { pending, .. }) => {
                *pending = pending.saturating_sub(1);
                *pending == 0
            }
            None => {
                self.counters.stray += 1;
                return;
            }
        };
        if gone {
            self.slots.remove(&pkt.token);
        }
    }

    fn on_acked_all(&mut self, _now: Instant, pkts: &[PktRef]) {
        for run in pkts.chunk_by(|a, b| a.token == b.token) {
            self.acked_run(run[0].token, run.len());
        }
    }

    fn on_response(&mut self, _now: Instant, pkt: PktRef, response: &SesRepr, data: &[u8]) {
        let token = pkt.token;
        match self.slots.get(&token) {
            Some(Slot::Out {
                sink: Some(_), msg, ..
            }) => {
                // A read's request was answered in the ACK: an error, or
                // (from other implementations) data in the ACK.
                let _ = msg;
                self.on_read_data(response, data);
            }
            Some(Slot::Out { msg, .. }) => {
                if let SesRepr::Response(r) = response
                    && !is_default(r)
                {
                    let c = msg.complete(r);
                    let r = completion_result(&c);
                    self.set_result(token, r);
                }
            }
            _ => self.counters.stray += 1,
        }
    }

    fn on_failed(&mut self, _now: Instant, pkt: PktRef, error: PdsError) {
        match self.slots.get_mut(&pkt.token) {
            Some(Slot::Out { pending, .. } | Slot::ReadBack { pending, .. }) => {
                *pending = pending.saturating_sub(1);
            }
            None => return,
        }
        if matches!(self.slots.get(&pkt.token), Some(Slot::Out { .. })) {
            self.set_result(pkt.token, Err(OpError::Transport(error)));
        }
        self.reap(pkt.token);
    }
}

/// The "default response" a target sends for duplicates (§3): no news.
fn is_default(r: &SesResponseRepr) -> bool {
    r.opcode == uet_wire::ses::ResponseOpcode::DefaultResponse
}

/// A UET endpoint: one FEP's PDS, SES and CMS state.
pub struct Endpoint<M = Box<dyn RegisteredMemory + Send>> {
    config: EndpointConfig,
    pds: Pds,
    ses: SesState<M>,
    peers: HashMap<PdcId, IpAddr>,
}

impl<M> core::fmt::Debug for Endpoint<M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Endpoint")
            .field("pds", &self.pds)
            .field("ses", &self.ses)
            .finish_non_exhaustive()
    }
}

impl<M: RegisteredMemory> Endpoint<M> {
    /// A new endpoint; `seed` drives every random choice.
    pub fn new(mut config: EndpointConfig, seed: u64) -> Self {
        // A read-response fragment is a 20-byte header plus data and must
        // fit the packet size the PDS was given (negotiated from the MTU);
        // a larger configured payload would build packets that never fit.
        let fit = config
            .pds
            .max_ses_len
            .saturating_sub(uet_wire::ses::SES_RESPONSE_DATA_HEADER_LEN)
            .max(1);
        config.target.max_read_payload = config.target.max_read_payload.min(fit);
        let pds = Pds::new(config.pds.clone(), seed);
        let target = SesTarget::new(config.target.clone());
        Self {
            config,
            pds,
            ses: SesState {
                target,
                locals: Vec::new(),
                slots: Slots::default(),
                reads: HashMap::default(),
                next_token: 1,
                next_op: 1,
                next_msg: 1,
                in_flight_msgs: HashMap::default(),
                completions: VecDeque::new(),
                return_q: Vec::new(),
                release_q: Vec::new(),
                counters: SesCounters::default(),
            },
            peers: HashMap::default(),
        }
    }

    /// Registers memory that remote peers may access (writes land in it,
    /// reads come from it); the registration names what a peer needs.
    pub fn register(&mut self, spec: RegionSpec, mem: M) -> Result<Registration, MemError> {
        self.ses.target.memory_mut().register(spec, mem)
    }

    /// Deregisters a region; its generation moves on, so stale keys fail
    /// with `BAD_GENERATION`.
    pub fn deregister(&mut self, addr: RegionAddr) -> Result<M, MemError> {
        self.ses.target.memory_mut().deregister(addr)
    }

    /// The registered-memory table.
    pub fn memory(&self) -> &MemoryTable<M> {
        self.ses.target.memory()
    }

    /// Registers a local buffer that operations send from or read into.
    pub fn register_local(&mut self, mem: M) -> LocalRegion {
        let r = LocalRegion(self.ses.locals.len() as u32);
        self.ses.locals.push(Some(mem));
        r
    }

    /// Withdraws a local buffer and returns it. Its handle is never reused;
    /// an operation still using it fails (a read completes with
    /// `LocalOutOfBounds`, a write's remaining packets carry nothing the
    /// target accepts), and nothing reads the withdrawn memory again.
    pub fn deregister_local(&mut self, r: LocalRegion) -> Option<M> {
        self.ses.locals.get_mut(r.0 as usize).and_then(Option::take)
    }

    /// A local buffer.
    pub fn local(&self, r: LocalRegion) -> Option<&M> {
        self.ses.locals.get(r.0 as usize).and_then(Option::as_ref)
    }

    /// A local buffer, mutably (e.g. to fill it before a write).
    pub fn local_mut(&mut self, r: LocalRegion) -> Option<&mut M> {
        self.ses
            .locals
            .get_mut(r.0 as usize)
            .and_then(Option::as_mut)
    }

    /// Posts a receive buffer for sends.
    pub fn post_recv(&mut self, spec: RecvSpec) -> Result<RecvId, PostError> {
        self.ses.target.post_recv(spec)
    }

    /// Posts a receive shared with other endpoints
    /// ([`SesTarget::post_shared_recv`]).
    pub fn post_shared_recv(
        &mut self,
        spec: RecvSpec,
        claim: std::sync::Arc<crate::SharedRecv>,
    ) -> Result<Option<RecvId>, PostError> {
        self.ses.target.post_shared_recv(spec, claim)
    }

    /// Drops copies of shared receives taken elsewhere
    /// ([`SesTarget::sweep_shared_recvs`]).
    pub fn sweep_shared_recvs(&mut self) -> Vec<RecvId> {
        self.ses.target.sweep_shared_recvs()
    }

    /// The oldest unexpected message of `(job, pid)` a receive of `kind`
    /// would take, left in place ([`SesTarget::peek_unexpected`]).
    #[must_use]
    pub fn peek_unexpected(&self, job: JobId, pid: PidOnFep, kind: RecvKind) -> Option<Unexpected> {
        self.ses.target.peek_unexpected(job, pid, kind)
    }

    /// [`SesTarget::peek_unexpected_from`]: the same for a receive directed
    /// at one sender.
    #[must_use]
    pub fn peek_unexpected_from(
        &self,
        job: JobId,
        pid: PidOnFep,
        kind: RecvKind,
        from: Option<crate::Sender>,
    ) -> Option<Unexpected> {
        self.ses.target.peek_unexpected_from(job, pid, kind, from)
    }

    /// Takes an unexpected message out of matching
    /// ([`SesTarget::claim_unexpected`]).
    pub fn claim_unexpected(&mut self, id: UnexpectedRef) -> bool {
        self.ses.target.claim_unexpected(id)
    }

    /// Delivers a claimed message into a buffer
    /// ([`SesTarget::post_claimed`]).
    pub fn post_claimed(&mut self, id: UnexpectedRef, spec: RecvSpec) -> Result<RecvId, PostError> {
        self.ses.target.post_claimed(id, spec)
    }

    /// Drops a claimed message ([`SesTarget::discard_claimed`]).
    pub fn discard_claimed(&mut self, id: UnexpectedRef) -> bool {
        self.ses.target.discard_claimed(id)
    }

    /// Removes a posted receive no message has matched yet
    /// ([`SesTarget::cancel_recv`]).
    pub fn cancel_recv(&mut self, id: RecvId) -> bool {
        self.ses.target.cancel_recv(id)
    }

    /// Forgets a process that has gone: its posted receives and the
    /// unexpected messages held for it ([`crate::SesTarget::release_process`]).
    pub fn release_process(&mut self, job: JobId, pid: PidOnFep) -> Vec<RecvId> {
        self.ses.target.release_process(job, pid)
    }

    /// Puts `job`'s new PDCs in the security domain `sdi`, or in none
    /// ([`Pds::set_job_domain`]): the caller seals what they send and
    /// opens what they receive (`docs/security.md`).
    pub fn set_job_domain(&mut self, job: JobId, sdi: Option<uet_wire::pds::tss::Sdi>) {
        self.pds.set_job_domain(job, sdi);
    }

    /// The PDS engine (counters, PDC count).
    pub fn pds(&self) -> &Pds {
        &self.pds
    }

    /// Hands every queued congestion-control state change to `f`
    /// ([`Pds::drain_cc_traces`]).
    pub fn drain_cc_traces(&mut self, f: impl FnMut(IpAddr, TrafficClass, uet_pds::CccTrace)) {
        self.pds.drain_cc_traces(f);
    }

    /// SES counters.
    pub fn counters(&self) -> SesCounters {
        self.ses.counters
    }

    /// Operations not yet completed.
    pub fn in_flight(&self) -> usize {
        self.ses.in_flight_msgs.len()
    }

    /// Submits an operation to `dst` over RUD in the default traffic class.
    pub fn submit(
        &mut self,
        now: Instant,
        dst: IpAddr,
        op: Operation,
    ) -> Result<OpId, SubmitError> {
        self.submit_with(now, dst, op, ReliableMode::Rud, self.config.tc)
    }

    /// Submits an operation with an explicit delivery mode and class.
    pub fn submit_with(
        &mut self,
        now: Instant,
        dst: IpAddr,
        op: Operation,
        mode: ReliableMode,
        tc: TrafficClass,
    ) -> Result<OpId, SubmitError> {
        let local = op.local();
        let mem = self
            .ses
            .locals
            .get(local.region.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(SubmitError::UnknownLocalRegion)?;
        let end = local
            .offset
            .checked_add(u64::from(op.len()))
            .ok_or(SubmitError::LocalOutOfBounds)?;
        if end > mem.len() {
            return Err(SubmitError::LocalOutOfBounds);
        }
        let job = match &op {
            Operation::Write { dst, .. } => dst.region.job,
            Operation::Read { src, .. } => src.region.job,
            Operation::Send { dst, .. } | Operation::TaggedSend { dst, .. } => dst.job,
        };
        // A message ID not in flight (16 bits, wrapping, 0 avoided).
        let mut mid = None;
        for _ in 0..=u16::MAX {
            let m = self.ses.next_msg;
            self.ses.next_msg = self.ses.next_msg.wrapping_add(1).max(1);
            if !self.ses.in_flight_msgs.contains_key(&m) {
                mid = Some(m);
                break;
            }
        }
        let mid = mid.ok_or(SubmitError::TooManyInFlight)?;
        let max_ses = self.config.pds.max_ses_len;
        let mut msg = OutgoingMessage::new(op, MessageId::from_masked(mid), max_ses)?;
        if self.config.initiator != InitiatorId::default() {
            msg = msg.with_initiator(self.config.initiator);
        }
        let pdc = self
            .pds
            .open(now, InitiatorKey { job, dst, tc, mode })
            .map_err(|_| SubmitError::NoPdc)?;
        let token = self.ses.next_token;
        self.ses.next_token += 1;
        let id = OpId(self.ses.next_op);
        self.ses.next_op += 1;
        let n = msg.packet_count();
        // Queued as one message (frags 0..n, only the last one shorter): no
        // list of the packets is built.
        let (len, last_len) = msg.packet_lens();
        let sink = msg.read_sink();
        if sink.is_some() {
            self.ses.reads.insert(mid, token);
        }
        self.ses.in_flight_msgs.insert(mid, token);
        self.ses.slots.insert(
            token,
            Slot::Out {
                id,
                pdc,
                msg,
                pending: n as u32,
                result: None,
                sink,
                done: false,
            },
        );
        let queued =
            self.pds
                .enqueue_message(now, pdc, token, n as u32, len as u32, last_len as u32);
        if queued.is_err() {
            self.ses.slots.remove(&token);
            self.ses.in_flight_msgs.remove(&mid);
            self.ses.reads.remove(&mid);
            return Err(SubmitError::NoPdc);
        }
        if self.ses.reads.contains_key(&mid) {
            // The read's data comes back as return-direction requests after
            // its request is acknowledged: keep the PDC until it is done.
            self.pds.hold(pdc);
        }
        Ok(id)
    }

    /// A datagram's UET bytes arrived.
    pub fn handle_datagram(&mut self, now: Instant, meta: &RxMeta, bytes: &[u8]) {
        self.pds.handle_datagram(now, meta, bytes, &mut self.ses);
        self.apply_deferred(now);
    }

    /// Timers are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.pds.handle_timeout(now, &mut self.ses);
        self.apply_deferred(now);
    }

    /// Holds the timers that take a packet for lost by time alone until
    /// `until` ([`Pds::hold_loss_timers`]): for a caller whose host did not
    /// run it for a while.
    pub fn hold_loss_timers(&mut self, until: Instant) {
        self.pds.hold_loss_timers(until);
    }

    /// Writes the next datagram's UET bytes into `buf`.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let t = self.pds.poll_transmit(now, buf, &mut self.ses);
        self.apply_deferred(now);
        t
    }

    /// Next timer.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.pds.poll_timeout()
    }

    /// The next finished operation.
    #[must_use]
    pub fn poll_completion(&mut self) -> Option<OpCompletion> {
        self.ses.completions.pop_front()
    }

    /// The next thing that arrived for the application (writes with header
    /// data, completed receives).
    #[must_use]
    pub fn poll_event(&mut self) -> Option<TargetEvent> {
        self.ses.target.poll_event()
    }

    /// Does what the [`SesHooks`] calls could not do while the PDS was
    /// calling them: releases holds of finished reads, queues read
    /// responses on their PDCs, and handles the PDS's [`PdsEvent`]s (PDC
    /// opened: remember its peer; PDC closed: end its operations, forget
    /// its target state). Runs after every call into the PDS, and there is
    /// nearly never anything to do.
    ///
    /// The per-packet calls stay calls rather than events (see
    /// [`SesHooks`]): they either answer a question the PDS needs at once
    /// or borrow the packet's buffer. PDC lifecycle already arrives as
    /// events, drained here in quinn-proto's `poll_event` style.
    #[inline]
    fn apply_deferred(&mut self, now: Instant) {
        if !self.ses.release_q.is_empty() || !self.ses.return_q.is_empty() || self.pds.has_events()
        {
            self.apply_deferred_work(now);
        }
    }

    /// [`Endpoint::apply_deferred`] when there is something to do.
    fn apply_deferred_work(&mut self, now: Instant) {
        while let Some(pdc) = self.ses.release_q.pop() {
            self.pds.release(now, pdc);
        }
        while let Some((pdc, resp)) = self.ses.return_q.pop() {
            let token = self.ses.next_token;
            self.ses.next_token += 1;
            let n = resp.fragment_count();
            let pkts: Vec<PktRef> = (0..n)
                .map(|i| PktRef {
                    token,
                    frag: i as u32,
                    len: resp.fragment_len(i).unwrap_or(0) as u32,
                    last: i + 1 == n,
                })
                .collect();
            self.ses.slots.insert(
                token,
                Slot::ReadBack {
                    resp,
                    pending: n as u32,
                },
            );
            if self.pds.enqueue(now, pdc, pkts).is_err() {
                self.ses.slots.remove(&token);
            }
        }
        while let Some(ev) = self.pds.poll_event() {
            match ev {
                PdsEvent::PdcOpened { pdc, peer, .. } => {
                    self.peers.insert(pdc, peer);
                }
                PdsEvent::PdcClosed { pdc, error } => {
                    if let Some(peer) = self.peers.remove(&pdc) {
                        self.ses.target.forget_source(Source::new(peer, pdc));
                    }
                    // Every unfinished operation on the PDC ends now: no
                    // packet of it may be left in the PDS to fail later (a
                    // read whose request was acknowledged waits for data).
                    let err = OpError::Transport(error.unwrap_or(PdsError::Closed));
                    let bound: Vec<u64> = self
                        .ses
                        .slots
                        .iter()
                        .filter(|(_, s)| matches!(s, Slot::Out { pdc: p, done: false, .. } if *p == pdc))
                        .map(|(t, _)| *t)
                        .collect();
                    for t in bound {
                        self.ses.set_result(t, Err(err));
                        if let Some(Slot::Out { pending, .. }) = self.ses.slots.get_mut(&t) {
                            *pending = 0;
                        }
                        self.ses.reap(t);
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::initiator::RemoteAddr;
    use crate::testutil::{addr, msg_id};
    use crate::types::{LocalBuf, LocalRegion, MemoryKey};

    /// An endpoint whose slot `t` holds `Some((pending, done))` or nothing.
    fn with_slots(slots: &[Option<(u32, bool)>]) -> Endpoint<Vec<u8>> {
        let mut ep = Endpoint::<Vec<u8>>::new(EndpointConfig::default(), 1);
        let op = Operation::Write {
            dst: RemoteAddr {
                region: addr(1),
                generation: uet_wire::RiGeneration::from_masked(0),
                key: MemoryKey(1),
                offset: 0,
            },
            src: LocalBuf::new(LocalRegion(0), 0),
            len: 64,
            header_data: None,
        };
        for (t, s) in slots.iter().enumerate() {
            if let Some((pending, done)) = *s {
                let msg = OutgoingMessage::new(op, msg_id(1), 1024).unwrap();
                let slot = Slot::Out {
                    id: OpId(t as u64),
                    pdc: PdcId::new(1).unwrap(),
                    msg,
                    pending,
                    result: None,
                    sink: None,
                    done,
                };
                ep.ses.slots.insert(t as u64, slot);
            }
        }
        ep
    }

    fn state(ep: &Endpoint<Vec<u8>>, n: usize) -> (Vec<Option<u32>>, u64) {
        let slots = (0..n as u64)
            .map(|t| match ep.ses.slots.get(&t) {
                Some(Slot::Out { pending, .. } | Slot::ReadBack { pending, .. }) => Some(*pending),
                None => None,
            })
            .collect();
        (slots, ep.ses.counters.stray)
    }

    proptest! {
        /// `on_acked_all` (one lookup per run of a token) leaves the slots
        /// and the stray counter exactly as `on_acked` per packet does.
        #[test]
        fn acked_runs_match_acked_packets(
            slots in proptest::collection::vec(proptest::option::of((0u32..6, any::<bool>())), 4),
            tokens in proptest::collection::vec(0u64..5, 0..24),
        ) {
            let pkts: Vec<PktRef> = tokens
                .iter()
                .enumerate()
                .map(|(i, &token)| PktRef { token, frag: i as u32, len: 64, last: false })
                .collect();
            let now = Instant::ZERO;
            let mut one = with_slots(&slots);
            for &p in &pkts {
                one.ses.on_acked(now, p);
            }
            let mut all = with_slots(&slots);
            all.ses.on_acked_all(now, &pkts);
            prop_assert_eq!(state(&one, 5), state(&all, 5));
        }
    }
}
