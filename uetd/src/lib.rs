//! # uetd — the uet daemon and the `uet` CLI
//!
//! - [`daemon`]: configuration → backends → workers; [`worker`]: the
//!   per-core loop driving a `uet_ses::Endpoint` over a [`io::PacketIo`]
//!   backend — [`udp`] (kernel sockets) or AF_XDP rings fed by the [`xdp`]
//!   steering program.
//! - [`decode`]: the frame decoder behind `uet decode`; [`capture`]: the
//!   workers' frame mirror behind `uet capture`.
//! - [`netns`]: namespaces and veth for the lab and the real-kernel tests.
//! - [`lab`]: the veth lab (hosts, switch, bottleneck, ECN and impairment
//!   programs, daemons) behind `uet lab` ([`cli::lab`]).
//! - All `unsafe` lives in the private `sys` module.

pub mod apps;
pub mod capture;
pub mod cli;
pub mod config;
pub mod control;
pub mod daemon;
pub mod decode;
pub mod io;
pub mod lab;
pub mod mem;
pub mod neigh;
mod netlink;
pub mod netns;
pub mod packet;
pub mod sample;
pub mod stats;
mod sys;
pub mod udp;
pub mod worker;
pub mod xdp;
pub mod xsk;
