//! # uetd — the uet daemon and the `uet` CLI
//!
//! - [`daemon`]: configuration → backends → workers; [`worker`]: the
//!   per-core loop driving a `uet_ses::Endpoint` over a [`io::PacketIo`]
//!   backend — [`udp`] (kernel sockets) or AF_XDP rings fed by the [`xdp`]
//!   steering program.
//! - [`decode`]: the frame decoder behind `uet decode`.
//! - [`netns`]: namespaces and veth for the lab and the real-kernel tests.
//! - All `unsafe` lives in the private `sys` module.

pub mod apps;
pub mod config;
pub mod control;
pub mod daemon;
pub mod decode;
pub mod io;
pub mod mem;
pub mod neigh;
mod netlink;
pub mod netns;
pub mod sample;
pub mod stats;
mod sys;
pub mod udp;
pub mod worker;
pub mod xdp;
pub mod xsk;
