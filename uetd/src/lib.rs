//! # uetd — the uet daemon
//!
//! - [`config`]: the daemon's configuration (TOML file and flags);
//!   [`daemon`]: configuration → backends → workers.
//! - [`worker`]: the per-core loop driving a `uet_ses::Endpoint` over a
//!   [`io::PacketIo`] backend — [`udp`] (kernel sockets) or AF_XDP rings
//!   ([`xsk`]) fed by the [`xdp`] steering program, or in-memory queues
//!   (`memio`, in the unit tests); [`neigh`]: next-hop resolution from the
//!   kernel's tables.
//! - [`control`]: the control socket applications reach through `uet_api`;
//!   [`stats`]: counters of every layer, [`metrics`]: the same in the
//!   Prometheus format, served over HTTP; [`capture`]: the workers' frame
//!   mirror behind `uet capture`.
//! - [`sys`]: the one place the daemon meets the kernel: every system call
//!   goes through its safe wrappers, and all `unsafe` lives there.
//!
//! The lab (`uet-lab`), the `uet` command (`uet-cli`) and its tools
//! (`uet-tools`) are separate crates built on this one.

pub mod capture;
pub mod config;
pub mod control;
pub mod daemon;
pub mod io;
pub mod mem;
#[cfg(test)]
mod memio;
pub mod metrics;
pub mod neigh;
pub mod netlink;
pub mod packet;
pub mod stats;
pub mod sys;
pub mod tss;
pub mod udp;
pub mod worker;
pub mod xdp;
pub mod xsk;
