//! Argument parsers shared by the subcommands.

use uetd::config::Size;

/// `KMIN,KMAX`: the ECN marking thresholds, each a size (`30000`, `64KiB`).
pub(crate) fn parse_ecn_pair(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once(',')
        .ok_or_else(|| format!("{s:?}: expected KMIN,KMAX"))?;
    let a: Size = a.parse()?;
    let b: Size = b.parse()?;
    Ok((a.0, b.0))
}
