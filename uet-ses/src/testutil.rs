//! Fixtures for the trace-style tests.

use uet_wire::{JobId, MessageId, PidOnFep, ResourceIndex};

use crate::types::RegionAddr;

pub(crate) fn job(v: u32) -> JobId {
    JobId::new(v).unwrap()
}

pub(crate) fn pid(v: u16) -> PidOnFep {
    PidOnFep::new(v).unwrap()
}

pub(crate) fn ri(v: u16) -> ResourceIndex {
    ResourceIndex::new(v).unwrap()
}

pub(crate) fn msg_id(v: u16) -> MessageId {
    MessageId::new(v).unwrap()
}

/// `(7, 3, ri)`.
pub(crate) fn addr(r: u16) -> RegionAddr {
    RegionAddr::new(job(7), pid(3), ri(r))
}

/// Local source data: byte `i` is `(i * 7 + seed) as u8`.
pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}
