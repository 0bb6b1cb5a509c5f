//! # uet-tools — what the `uet` command does outside the daemon
//!
//! - [`client`]: `serve`, `write`, `read`, `perf`, `stats` and `capture`,
//!   each a client of the local daemon through `uet_api`, the path an
//!   application takes.
//! - [`perf`]: `uet perf`, perftest's bandwidth and latency tests with
//!   iperf3-shaped JSON, against a served region or a `uet perf --server`.
//! - [`decode`]: the frame decoder behind `uet decode` (pcap or hex in,
//!   every header out as text or JSON).
//! - [`sample_pcap`]: the generator of `samples/uet-sample.pcap`, one frame
//!   of every PDS and SES header type.
//! - [`progress`]: progress bars on stderr when it is a terminal.
//! - [`blast`]: raw AF_XDP and kernel-UDP blasters and sinks that measure a
//!   link's ceiling, to report uet's throughput beside it.
//!
//! Errors are [`Error`], by culprit: the daemon, a file, the datapath
//! pieces, or the caller's input.

pub mod blast;
pub mod client;
pub mod decode;
mod error;
pub mod perf;
pub mod progress;
pub mod sample_pcap;

pub use error::{Error, Result};
