//! The bottleneck's TBF: installed with `tc` (once, at set-up), read over
//! rtnetlink (`RTM_GETQDISC` for the root qdisc of one ifindex, one
//! request/answer, a few microseconds: fit for sampling at ≥ 1 kHz, where
//! spawning `tc -s -j` per sample is not). Constants from
//! <linux/rtnetlink.h>, <linux/gen_stats.h>, <linux/pkt_sched.h>.

use serde::Serialize;

use crate::error::{Error, Result};

use uetd::netlink::{self, Msg, NLM_F_REQUEST, Netlink};

const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const TCA_KIND: u16 = 1;
const TCA_STATS2: u16 = 7;
const TCA_STATS_BASIC: u16 = 1;
const TCA_STATS_QUEUE: u16 = 3;
const TC_H_ROOT: u32 = 0xffff_ffff;
/// A qdisc GET is answered through `rtnetlink_send`, which unicasts to the
/// asker only with NLM_F_ECHO (otherwise it goes to the RTNLGRP_TC group).
const NLM_F_ECHO: u16 = 0x8;
/// `struct tcmsg`: family, 3 pad bytes, ifindex, handle, parent, info.
const TCMSG_LEN: usize = 20;

/// One reading of a qdisc's counters (`tc -s qdisc show`), stamped with
/// CLOCK_MONOTONIC (the clock of the daemons and of the ECN program).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct QdiscStats {
    /// CLOCK_MONOTONIC when the answer was parsed, ns.
    pub t_ns: u64,
    /// The qdisc's kind (`tbf`, or `noqueue` without a bottleneck).
    pub kind: String,
    /// Bytes queued now.
    pub backlog: u32,
    /// Packets queued now.
    pub qlen: u32,
    /// Packets dropped so far.
    pub drops: u32,
    /// Times the shaper held packets back (`overlimits`).
    pub overlimits: u32,
    /// Requeues.
    pub requeues: u32,
    /// Bytes sent so far.
    pub bytes: u64,
    /// Packets sent so far.
    pub packets: u32,
}

/// Reads the root qdisc of one interface; the socket belongs to the
/// namespace it was opened in.
pub(crate) struct QdiscReader {
    nl: Netlink,
    ifindex: i32,
}

impl QdiscReader {
    /// Opens the socket; call on a thread inside the interface's namespace.
    pub(crate) fn open(ifindex: u32) -> Result<Self> {
        let ifindex = i32::try_from(ifindex)
            .map_err(|_| Error::invalid("qdisc reader", format!("ifindex {ifindex} too large")))?;
        Ok(Self {
            nl: Netlink::open().map_err(Error::kernel("opening an rtnetlink socket"))?,
            ifindex,
        })
    }

    pub(crate) fn read(&self) -> Result<QdiscStats> {
        let mut hdr = [0u8; TCMSG_LEN];
        hdr[4..8].copy_from_slice(&self.ifindex.to_ne_bytes());
        hdr[12..16].copy_from_slice(&TC_H_ROOT.to_ne_bytes());
        let req = Msg::new(RTM_GETQDISC, NLM_F_REQUEST | NLM_F_ECHO, &hdr).finish();
        let mut out = None;
        self.nl
            .transact(&req, |ty, payload| {
                if ty == RTM_NEWQDISC && payload.len() >= TCMSG_LEN {
                    out = Some(parse(&payload[TCMSG_LEN..]));
                }
                Ok(())
            })
            .map_err(Error::kernel(format!(
                "RTM_GETQDISC for ifindex {}",
                self.ifindex
            )))?;
        let Some(mut s) = out else {
            return Err(Error::Kernel {
                what: format!("no qdisc answer for ifindex {}", self.ifindex),
                source: None,
            });
        };
        s.t_ns = uetd::sys::mem::monotonic_ns();
        Ok(s)
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |x| u32::from_ne_bytes(x.try_into().expect("4")))
}

fn parse(attrs: &[u8]) -> QdiscStats {
    let mut s = QdiscStats::default();
    for (ty, p) in netlink::attrs(attrs) {
        match ty {
            TCA_KIND => {
                s.kind = String::from_utf8_lossy(p.split(|&c| c == 0).next().unwrap_or(&[]))
                    .into_owned();
            }
            TCA_STATS2 => {
                for (ty, p) in netlink::attrs(p) {
                    match ty {
                        // struct gnet_stats_basic { __u64 bytes; __u32 packets; }
                        TCA_STATS_BASIC if p.len() >= 12 => {
                            s.bytes = u64::from_ne_bytes(p[..8].try_into().expect("8"));
                            s.packets = u32_at(p, 8);
                        }
                        // struct gnet_stats_queue { qlen, backlog, drops,
                        // requeues, overlimits }
                        TCA_STATS_QUEUE if p.len() >= 20 => {
                            s.qlen = u32_at(p, 0);
                            s.backlog = u32_at(p, 4);
                            s.drops = u32_at(p, 8);
                            s.requeues = u32_at(p, 12);
                            s.overlimits = u32_at(p, 16);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(ty: u16, data: &[u8]) -> Vec<u8> {
        let mut v = ((4 + data.len()) as u16).to_ne_bytes().to_vec();
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(data);
        v.resize(netlink::align4(v.len()), 0);
        v
    }

    #[test]
    fn parses_kind_basic_and_queue_stats() {
        let mut basic = 123_456u64.to_ne_bytes().to_vec();
        basic.extend_from_slice(&789u32.to_ne_bytes());
        basic.extend_from_slice(&[0; 4]);
        let mut queue = Vec::new();
        for v in [3u32, 4500, 7, 0, 99] {
            queue.extend_from_slice(&v.to_ne_bytes());
        }
        let mut stats2 = attr(TCA_STATS_BASIC, &basic);
        stats2.extend(attr(TCA_STATS_QUEUE, &queue));
        let mut msg = attr(TCA_KIND, b"tbf\0");
        msg.extend(attr(TCA_STATS2 | netlink::NLA_F_NESTED, &stats2));
        let s = parse(&msg);
        assert_eq!(s.kind, "tbf");
        assert_eq!((s.bytes, s.packets), (123_456, 789));
        assert_eq!((s.qlen, s.backlog, s.drops, s.overlimits), (3, 4500, 7, 99));
    }
}
