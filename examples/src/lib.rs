//! Programs a user copies, written against `uet-api` only (no daemon
//! internals):
//!
//! - `rma_write`: `rma_write expose SIZE` on one host prints an address;
//!   `rma_write send FILE ADDRESS` on another writes the file into it, and
//!   the exposing side prints the hash of what arrived.
//! - `pingpong`: small writes back and forth between two processes,
//!   latency percentiles.
//!
//! Both talk to the local `uetd` at `$UET_SOCKET` (default
//! `/run/uet/uetd.sock`).

/// The control socket: `$UET_SOCKET` or the default.
pub fn socket() -> std::path::PathBuf {
    std::env::var_os("UET_SOCKET")
        .map_or_else(|| "/run/uet/uetd.sock".into(), std::path::PathBuf::from)
}

/// FNV-1a 64 of `data` (the examples' own small checksum).
pub fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
