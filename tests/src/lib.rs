//! # uet-tests — the deterministic fabric simulator and integration tests
//!
//! [`fabric`] is a virtual-time network (links, drop-tail queues, ECN,
//! trimming, multipath, impairments) that drives the sans-IO endpoints.
#![forbid(unsafe_code)]

pub mod fabric;
pub mod frame_ops;
pub mod host;
pub mod scenario;
pub mod sealed;
pub mod topology;
