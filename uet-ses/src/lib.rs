//! # uet-ses — Semantic Sublayer semantics, sans-IO
//!
//! Registered memory and its checks (`uet-spec-notes.md` §4). The target and
//! initiator sides follow.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod completion;
pub mod memory;
#[allow(dead_code)]
mod ranges;
pub mod types;

pub use completion::{Completion, CompletionError, LocalError};
pub use memory::{
    Access, AccessRequest, Addressing, Checked, MemEntry, MemError, MemoryTable, RegionSpec,
    RegisteredMemory, Registration,
};
pub use types::{
    FepAddr, InitiatorId, LocalBuf, LocalRegion, MatchBits, MemoryKey, RecvId, RegionAddr, Source,
};
