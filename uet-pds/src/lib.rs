//! # uet-pds — the Packet Delivery Sublayer, sans-IO
//!
//! PDC lifecycle, RUD/ROD/RUDI/UUD delivery, PSN windows, cumulative and
//! selective ACKs, NACKs, retransmission with RTO backoff
//! (`docs/protocol-notes.md` §2–§3). No I/O, no clocks, no threads: time comes in
//! as `now`, randomness from a seeded `Rng`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod cc_mode;
mod ccc_table;
pub mod config;
pub mod counters;
mod deadline_heap;
pub mod engine;
mod pdc_table;
mod pkt_queue;
mod pkt_ref;
pub mod rto;
pub mod rx_window;
mod tail_probe;
pub mod tx_ledger;

pub use cc_mode::CcMode;
pub use config::{PdsConfig, SecureStart};
pub use counters::{Counters, DropReason, NackCounts};
pub use engine::{
    InitiatorKey, OpenError, PdcRoundTrip, Pds, PdsError, PdsEvent, PktRef, Reply, RxMeta,
    RxRequest, RxSes, SesHooks, Transmit,
};
pub use rx_window::{RxOutcome, RxWindow};
pub use tx_ledger::{TxEntry, TxLedger};
pub use uet_cms::CccTrace;

#[cfg(test)]
mod tests;
