//! Programs a user copies, written against `uet-api` only (no daemon
//! internals):
//!
//! - `rma_write`: `rma_write expose SIZE` on one host prints an address;
//!   `rma_write send FILE ADDRESS` on another writes the file into it, and
//!   the exposing side prints the hash of what arrived.
//! - `pingpong`: small writes back and forth between two processes,
//!   latency percentiles.
//!
//! Both talk to the local `uetd` at `--socket PATH`, else `$UET_SOCKET`,
//! else `/run/uet/uetd.sock`.

use std::path::PathBuf;

/// The control socket: `$UET_SOCKET` or the default.
pub fn socket() -> PathBuf {
    std::env::var_os("UET_SOCKET").map_or_else(|| "/run/uet/uetd.sock".into(), PathBuf::from)
}

/// Takes `--socket PATH` (or `--socket=PATH`) out of `args`, wherever it
/// stands: the control socket it names, else [`socket`]'s, and the other
/// arguments in order.
///
/// # Errors
///
/// `--socket` without a path after it.
pub fn socket_arg(
    args: impl IntoIterator<Item = String>,
) -> anyhow::Result<(PathBuf, Vec<String>)> {
    let mut path = None;
    let mut rest = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if a == "--socket" {
            let p = it
                .next()
                .ok_or_else(|| anyhow::anyhow!("--socket needs a path"))?;
            path = Some(PathBuf::from(p));
        } else if let Some(p) = a.strip_prefix("--socket=") {
            path = Some(PathBuf::from(p));
        } else {
            rest.push(a);
        }
    }
    Ok((path.unwrap_or_else(socket), rest))
}

/// FNV-1a 64 of `data` (the examples' own small checksum).
pub fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_socket_flag_is_taken_out_wherever_it_stands() {
        let (p, rest) = socket_arg(args(&["ping", "--socket", "/s", "uet://x", "10"])).unwrap();
        assert_eq!(
            (p, rest),
            (PathBuf::from("/s"), args(&["ping", "uet://x", "10"]))
        );
        let (p, rest) = socket_arg(args(&["pong", "--socket=/t"])).unwrap();
        assert_eq!((p, rest), (PathBuf::from("/t"), args(&["pong"])));
        let (p, rest) = socket_arg(args(&["pong"])).unwrap();
        assert_eq!((p, rest), (socket(), args(&["pong"])));
        assert!(socket_arg(args(&["pong", "--socket"])).is_err());
    }
}
