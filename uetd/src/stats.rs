//! The daemon's counters per layer (issue 5): backend rx/tx packets and
//! bytes and drops, PDS drops by reason, retransmits, RTOs, NACKs by code,
//! ECN-CE received, SES operations, and per destination the congestion
//! context's window, bytes in flight and RCCC credit. Rendered as JSON
//! (`uetd --stats`, the lab's timelines) — one object per worker.

use serde_json::{Map, Value, json};
use uet_wire::pds::NackCode;

use crate::worker::WorkerStats;

/// One destination's congestion context, as last published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CccSnapshot {
    /// Destination FEP.
    pub dst: std::net::IpAddr,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Bytes in flight.
    pub inflight: i64,
    /// Bytes waiting to be sent.
    pub backlog: u64,
    /// RCCC credit available (bytes), when RCCC is on.
    pub credit: Option<i64>,
}

fn nack_map(codes: &uet_pds::NackCounts) -> Value {
    let mut m = Map::new();
    for (code, n) in codes.nonzero() {
        m.insert(NackCode::from(code).name().to_ascii_lowercase(), json!(n));
    }
    Value::Object(m)
}

/// The counters of every worker as one JSON object.
pub fn to_json(stats: &[WorkerStats]) -> Value {
    let workers: Vec<Value> = stats
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut drops = Map::new();
            for (reason, n) in s.pds.drop_counts() {
                if n > 0 {
                    drops.insert(reason.name().into(), json!(n));
                }
            }
            let cccs: Vec<Value> = s
                .cccs
                .iter()
                .map(|c| {
                    json!({
                        "dst": c.dst.to_string(),
                        "cwnd": c.cwnd,
                        "inflight": c.inflight,
                        "backlog": c.backlog,
                        "credit": c.credit,
                    })
                })
                .collect();
            json!({
                "worker": i,
                "io": {
                    "rx_packets": s.io.rx_packets,
                    "rx_bytes": s.io.rx_bytes,
                    "tx_packets": s.io.tx_packets,
                    "tx_bytes": s.io.tx_bytes,
                    "rx_dropped": s.io.rx_dropped,
                    "rx_bad_crc": s.io.rx_bad_crc,
                    "rx_other_encap": s.io.rx_other_encap,
                    "tx_dropped": s.io.tx_dropped,
                    "tx_no_neighbour": s.io.tx_no_neighbour,
                    "handed_off": s.io.handed_off,
                    "tx_ring_full": s.io.tx_ring_full,
                },
                "pds": {
                    "tx_data": s.pds.tx_data,
                    "tx_retransmits": s.pds.tx_retransmits,
                    "rtos": s.pds.rto_fired,
                    "sack_inferred": s.pds.sack_inferred,
                    "tail_probes": s.pds.tail_probes,
                    "tail_probe_lost": s.pds.tail_probe_lost,
                    "tx_acks": s.pds.tx_acks,
                    "rx_acks": s.pds.rx_acks,
                    "rx_data": s.pds.rx_data,
                    "rx_ce": s.pds.rx_ce,
                    "tx_nacks": nack_map(&s.pds.tx_nack_codes),
                    "rx_nacks": nack_map(&s.pds.rx_nack_codes),
                    "drops": drops,
                    "pdcs_opened": s.pds.pdcs_opened,
                    "pdcs_closed": s.pds.pdcs_closed,
                },
                "ses": {
                    "ops_ok": s.ses.ops_ok,
                    "ops_failed": s.ses.ops_failed,
                    "requests": s.ses.requests,
                    "refused": s.ses.refused,
                    "stray": s.ses.stray,
                    "in_flight": s.in_flight,
                },
                "ccc": cccs,
                "loop": { "iterations": s.iterations, "sleeps": s.sleeps },
            })
        })
        .collect();
    json!({ "workers": workers })
}
