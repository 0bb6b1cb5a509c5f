//! Posted receives and unexpected messages of one process `(job, pid)`.
//!
//! Matching rules (the notes list them as a gap, §10; these follow Portals 4
//! and libfabric, which UET's SES semantics derive from):
//!
//! * an untagged send (`UET_SEND`, `UET_DATAGRAM_SEND`) matches the oldest
//!   posted untagged receive;
//! * a tagged send (`UET_TAGGED_SEND`) with match bits `m` matches the oldest
//!   posted tagged receive whose `(m ^ match_bits) & !ignore_bits == 0`;
//! * untagged sends never match tagged receives, nor the other way round;
//! * the `initiator` field is not used for matching (any source matches);
//! * a send that matches nothing becomes an unexpected message; a later
//!   receive takes the oldest unexpected message it accepts.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

use uet_wire::{JobId, PidOnFep, ResourceIndex, RiGeneration};

use crate::types::{FepAddr, InitiatorId, MatchBits, RecvId, RegionAddr};

/// Where a receive puts the message: `len` bytes at `offset` in a region
/// registered with [`crate::Access::RECV`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvBuffer {
    /// The region's resource index (in the receive's job and pid).
    pub ri: ResourceIndex,
    /// Region-relative offset of the buffer.
    pub offset: u64,
    /// Buffer length: longer messages are truncated to it.
    pub len: u64,
}

/// What a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvKind {
    /// Untagged sends, in arrival order.
    Untagged,
    /// Tagged sends whose match bits equal `match_bits` outside
    /// `ignore_bits`.
    Tagged {
        /// Bits to compare.
        match_bits: MatchBits,
        /// Bits set here are not compared.
        ignore_bits: MatchBits,
    },
}

impl RecvKind {
    /// Whether a send with `tag` (`None`: untagged) matches.
    #[must_use]
    pub const fn accepts(self, tag: Option<MatchBits>) -> bool {
        match (self, tag) {
            (Self::Untagged, None) => true,
            (
                Self::Tagged {
                    match_bits,
                    ignore_bits,
                },
                Some(t),
            ) => (t.0 ^ match_bits.0) & !ignore_bits.0 == 0,
            _ => false,
        }
    }
}

/// A receive to post with [`crate::SesTarget::post_recv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvSpec {
    /// The receiving process's job.
    pub job: JobId,
    /// The receiving process.
    pub pid: PidOnFep,
    /// Where the message goes.
    pub buffer: RecvBuffer,
    /// What it accepts.
    pub kind: RecvKind,
    /// Only messages from this sender (libfabric `FI_DIRECTED_RECV`), or
    /// from anyone.
    pub from: Option<Sender>,
}

/// A sender a receive is directed at: the FEP it sends from and the
/// `initiator` field its requests carry (its `pid_on_fep`, for senders
/// that fill it in, as the libfabric provider does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sender {
    /// The sending FEP.
    pub fep: FepAddr,
    /// Its requests' `initiator` field.
    pub initiator: InitiatorId,
}

impl RecvSpec {
    /// Whether a send with `tag` from `fep` carrying `initiator` matches.
    #[must_use]
    pub fn accepts(&self, tag: Option<MatchBits>, fep: FepAddr, initiator: InitiatorId) -> bool {
        self.kind.accepts(tag)
            && self
                .from
                .is_none_or(|s| s.fep == fep && s.initiator == initiator)
    }

    /// The region the buffer lies in.
    #[must_use]
    pub const fn region(&self) -> RegionAddr {
        RegionAddr::new(self.job, self.pid, self.buffer.ri)
    }
}

/// One receive posted at several targets at once, of which exactly one
/// takes a message: a daemon whose workers each run a target (each owning
/// the PDCs of some peers) offers an any-source receive to all of them
/// with [`crate::SesTarget::post_shared_recv`]. The target that would match
/// a send with it first claims it and takes the send; every other copy is
/// dropped without an event, when a send would match it or at
/// [`crate::SesTarget::sweep_shared_recvs`]. One atomic swap per matched
/// message, none per packet.
///
/// Order: each target still matches its copies in the order they were
/// posted and skips only copies already taken, so receives posted in order
/// take the sends of one source (all of whose PDCs one target owns) in
/// order.
#[derive(Debug, Default)]
pub struct SharedRecv {
    claimed: AtomicBool,
}

impl SharedRecv {
    /// Not claimed yet.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            claimed: AtomicBool::new(false),
        }
    }

    /// Takes the receive: `true` for exactly one caller.
    pub fn claim(&self) -> bool {
        !self.claimed.swap(true, Ordering::AcqRel)
    }

    /// Whether some target (or the poster) has taken it.
    #[must_use]
    pub fn is_claimed(&self) -> bool {
        self.claimed.load(Ordering::Acquire)
    }
}

/// A receive waiting for (or bound to) a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PostedRecv {
    pub(crate) id: RecvId,
    pub(crate) spec: RecvSpec,
    /// The buffer region's generation when posted: if it changes (the region
    /// was deregistered), the buffer is gone.
    pub(crate) generation: RiGeneration,
}

/// Identifies an unexpected message in the target's pool.
pub(crate) type UnexpectedId = u64;

/// The receive side of one process.
#[derive(Debug, Default)]
pub(crate) struct RecvQueue {
    untagged: VecDeque<PostedRecv>,
    tagged: VecDeque<PostedRecv>,
    /// Unexpected messages not yet claimed by a receive, oldest first.
    pub(crate) unexpected: VecDeque<UnexpectedId>,
}

impl RecvQueue {
    /// Takes the receive a send with `tag` matches, if any.
    #[cfg(test)]
    pub(crate) fn take_posted(
        &mut self,
        tag: Option<MatchBits>,
        fep: FepAddr,
        initiator: InitiatorId,
    ) -> Option<PostedRecv> {
        self.take_posted_if(tag, fep, initiator, |_| true)
    }

    /// Takes the oldest receive a send with `tag` matches for which
    /// `claim` says yes; a matching receive it says no to is removed (it
    /// was taken elsewhere, see [`crate::SharedRecv`]) and the search goes
    /// on behind it.
    pub(crate) fn take_posted_if(
        &mut self,
        tag: Option<MatchBits>,
        fep: FepAddr,
        initiator: InitiatorId,
        mut claim: impl FnMut(&PostedRecv) -> bool,
    ) -> Option<PostedRecv> {
        let list = self.list_for(tag.is_some());
        loop {
            let pos = list
                .iter()
                .position(|r| r.spec.accepts(tag, fep, initiator))?;
            let r = list.remove(pos)?;
            if claim(&r) {
                return Some(r);
            }
        }
    }

    /// Appends a receive.
    pub(crate) fn push_back(&mut self, r: PostedRecv) {
        self.list_for(Self::is_tagged(&r)).push_back(r);
    }

    /// Puts a receive back at the head of its list (its message was
    /// abandoned before completing).
    pub(crate) fn push_front(&mut self, r: PostedRecv) {
        self.list_for(Self::is_tagged(&r)).push_front(r);
    }

    /// Removes a posted receive by ID.
    pub(crate) fn remove(&mut self, id: RecvId) -> Option<PostedRecv> {
        for list in [&mut self.untagged, &mut self.tagged] {
            if let Some(pos) = list.iter().position(|r| r.id == id) {
                return list.remove(pos);
            }
        }
        None
    }

    /// The IDs of every posted receive, untagged first.
    pub(crate) fn posted_ids(&self) -> impl Iterator<Item = RecvId> + '_ {
        self.untagged.iter().chain(&self.tagged).map(|r| r.id)
    }

    /// Number of posted receives.
    pub(crate) fn posted(&self) -> usize {
        self.untagged.len() + self.tagged.len()
    }

    const fn is_tagged(r: &PostedRecv) -> bool {
        matches!(r.spec.kind, RecvKind::Tagged { .. })
    }

    const fn list_for(&mut self, tagged: bool) -> &mut VecDeque<PostedRecv> {
        if tagged {
            &mut self.tagged
        } else {
            &mut self.untagged
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recv(id: u64, kind: RecvKind) -> PostedRecv {
        PostedRecv {
            id: RecvId(id),
            spec: RecvSpec {
                job: JobId::new(1).unwrap(),
                pid: PidOnFep::new(1).unwrap(),
                buffer: RecvBuffer {
                    ri: ResourceIndex::new(1).unwrap(),
                    offset: 0,
                    len: 8,
                },
                kind,
                from: None,
            },
            generation: RiGeneration::default(),
        }
    }

    const ANY: FepAddr = FepAddr::from_bits(1);

    fn tagged(bits: u64, ignore: u64) -> RecvKind {
        RecvKind::Tagged {
            match_bits: MatchBits(bits),
            ignore_bits: MatchBits(ignore),
        }
    }

    #[test]
    fn accepts() {
        assert!(RecvKind::Untagged.accepts(None));
        assert!(!RecvKind::Untagged.accepts(Some(MatchBits(0))));
        assert!(!tagged(0, 0).accepts(None));
        assert!(tagged(0x12, 0).accepts(Some(MatchBits(0x12))));
        assert!(!tagged(0x12, 0).accepts(Some(MatchBits(0x13))));
        assert!(tagged(0x12, 0x0f).accepts(Some(MatchBits(0x1f))));
        assert!(!tagged(0x12, 0x0f).accepts(Some(MatchBits(0x22))));
        assert!(tagged(0, u64::MAX).accepts(Some(MatchBits(u64::MAX))));
    }

    #[test]
    fn directed_receives_match_only_their_sender() {
        let (a, b) = (FepAddr::from_bits(0xa), FepAddr::from_bits(0xb));
        let mut q = RecvQueue::default();
        let mut directed = recv(1, tagged(0, u64::MAX));
        directed.spec.from = Some(Sender {
            fep: a,
            initiator: InitiatorId(2),
        });
        q.push_back(directed);
        q.push_back(recv(2, tagged(0, u64::MAX)));
        let t = Some(MatchBits(5));
        assert_eq!(q.take_posted(t, b, InitiatorId(2)).unwrap().id, RecvId(2));
        assert_eq!(q.take_posted(t, a, InitiatorId(3)), None);
        assert_eq!(q.take_posted(t, b, InitiatorId(2)), None);
        assert_eq!(q.take_posted(t, a, InitiatorId(2)).unwrap().id, RecvId(1));
    }

    #[test]
    fn oldest_matching_receive_wins() {
        let mut q = RecvQueue::default();
        q.push_back(recv(1, tagged(0xa, 0)));
        q.push_back(recv(2, RecvKind::Untagged));
        q.push_back(recv(3, tagged(0xb, 0)));
        q.push_back(recv(4, tagged(0x0, 0xf)));
        q.push_back(recv(5, RecvKind::Untagged));
        assert_eq!(q.posted(), 5);
        assert_eq!(
            q.take_posted(Some(MatchBits(0xb)), ANY, InitiatorId(0))
                .unwrap()
                .id,
            RecvId(3)
        );
        assert_eq!(
            q.take_posted(Some(MatchBits(0xb)), ANY, InitiatorId(0))
                .unwrap()
                .id,
            RecvId(4)
        );
        assert_eq!(
            q.take_posted(Some(MatchBits(0xb)), ANY, InitiatorId(0)),
            None
        );
        assert_eq!(
            q.take_posted(None, ANY, InitiatorId(0)).unwrap().id,
            RecvId(2)
        );
        assert_eq!(q.remove(RecvId(5)).unwrap().id, RecvId(5));
        assert_eq!(q.take_posted(None, ANY, InitiatorId(0)), None);
        q.push_front(recv(6, tagged(0xa, 0)));
        assert_eq!(
            q.take_posted(Some(MatchBits(0xa)), ANY, InitiatorId(0))
                .unwrap()
                .id,
            RecvId(6)
        );
        assert_eq!(
            q.take_posted(Some(MatchBits(0xa)), ANY, InitiatorId(0))
                .unwrap()
                .id,
            RecvId(1)
        );
    }
}
