//! The daemon's counters per layer: backend rx/tx packets and
//! bytes and drops, PDS drops by reason, retransmits, RTOs, NACKs by code,
//! ECN-CE received, SES operations, per destination the congestion
//! context's window, bytes in flight and RCCC credit, and for the xdp
//! backend the AF_XDP sockets' counters (`xsk`: the kernel's
//! `XDP_STATISTICS` and the multi-buffer ones). Rendered as JSON
//! (`uetd --stats`, the lab's timelines) — one object per worker, with the
//! daemon's build (`build`) — and from that JSON as Prometheus text
//! ([`crate::metrics`]). Every metric is described in `docs/metrics.md`.
//!
//! On the control socket the document goes out whole however long it is
//! (thousands of destinations make it megabytes): streamed in `StatsChunk`
//! frames to `StatsStream`, and cut to one frame for the older `Stats`
//! request (each worker's `ccc` list then left empty and counted in
//! `ccc_omitted`) — never a frame over the protocol's limit.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use uet_api::proto::{DaemonMsg, HEADER_LEN, MAX_FRAME_LEN, stats_chunks};
use uet_wire::pds::NackCode;

use crate::neigh::{NeighCounts, Neighbours};
use crate::worker::{PER_PEER_WAIT, Published, WorkerStats};

/// A duration in whole nanoseconds, for the document.
fn ns(d: uet_wire::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The non-zero NACK counts by lower-case spec name; the reserved codes
/// all count under `unknown`.
fn nack_map(codes: &uet_pds::NackCounts) -> Value {
    let mut m = Map::new();
    for (code, n) in codes.nonzero() {
        let name = NackCode::from(code).name().to_ascii_lowercase();
        let sum = m.get(&name).and_then(Value::as_u64).unwrap_or(0) + n;
        m.insert(name, json!(sum));
    }
    Value::Object(m)
}

/// The build of this daemon, as the `build` object of the document:
/// its version, and whether it was built with optimisations (`release`)
/// or without (`debug`).
fn build() -> Value {
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
    })
}

/// The counters the workers publish (the snapshots the control socket
/// reads too) and the next-hop resolver's, for readers on other threads —
/// the metrics endpoint. Reading takes each worker's snapshot lock as
/// long as a copy takes; the workers' loops are not otherwise touched.
#[derive(Debug, Clone)]
pub struct StatsSource {
    workers: Vec<Arc<Published>>,
    neigh: Option<Arc<Neighbours>>,
}

impl StatsSource {
    /// The source of the workers' published snapshots and the resolver.
    pub fn new(workers: Vec<Arc<Published>>, neigh: Option<Arc<Neighbours>>) -> Self {
        Self { workers, neigh }
    }

    /// The document [`to_json`] makes of the workers' counters, each with
    /// a fresh per-peer snapshot (every worker is asked first, then each
    /// answer is awaited).
    pub fn to_json(&self) -> Value {
        let asked: Vec<u64> = self.workers.iter().map(|p| p.request()).collect();
        let stats: Vec<WorkerStats> = self
            .workers
            .iter()
            .zip(asked)
            .map(|(p, n)| p.answer(n, PER_PEER_WAIT))
            .collect();
        to_json(&stats, self.neigh.as_ref().map(|n| n.counts()).as_ref())
    }
}

/// The counters of every worker as one JSON object, with the next-hop
/// resolver's (`neigh`: destinations held, resolved, and what its bounds
/// turned away) when the backend has one, and the daemon's `build`.
pub fn to_json(stats: &[WorkerStats], neigh: Option<&NeighCounts>) -> Value {
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
                        "srtt_ns": c.round_trip.map(|r| ns(r.srtt)),
                        "rttvar_ns": c.round_trip.map(|r| ns(r.rttvar)),
                        "rto_ns": c.round_trip.map(|r| ns(r.rto)),
                    })
                })
                .collect();
            let mut w = json!({
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
                    "first_rtt_resent": s.pds.first_rtt_resent,
                    "rtos": s.pds.rto_fired,
                    "sack_inferred": s.pds.sack_inferred,
                    "tail_probes": s.pds.tail_probes,
                    "tail_probe_lost": s.pds.tail_probe_lost,
                    "tx_acks": s.pds.tx_acks,
                    "tx_control": s.pds.tx_control,
                    "rx_acks": s.pds.rx_acks,
                    "rx_data": s.pds.rx_data,
                    "rx_ce": s.pds.rx_ce,
                    "tx_nacks": nack_map(&s.pds.tx_nack_codes),
                    "rx_nacks": nack_map(&s.pds.rx_nack_codes),
                    "drops": drops,
                    "pdcs_opened": s.pds.pdcs_opened,
                    "pdcs_closed": s.pds.pdcs_closed,
                    "pdcs_pending_evicted": s.pds.pending_evicted,
                    "pdcs_reopened": s.pds.pdcs_reopened,
                    "nack_backoffs": s.pds.nack_backoffs,
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
                "loop": {
                    "iterations": s.iterations,
                    "sleeps": s.sleeps,
                    "host_stalls": s.host_stalls,
                },
                "ring": { "ops": s.ring_ops, "refused": s.ring_refused },
            });
            if let Some(r) = &s.rccc_receiver {
                // Only where the daemon paces RCCC sources.
                w["rccc_receiver"] = json!({
                    "ticks": r.ticks,
                    "grants": r.grants,
                    "granted_bytes": r.granted_bytes,
                    "received_bytes": r.received_bytes,
                    "speculative_bytes": r.speculative_bytes,
                    "outstanding_limited": r.outstanding_limited,
                    "late_bytes": r.late_bytes,
                    "withheld_bytes": r.withheld_bytes,
                    "unclaimed_bytes": r.unclaimed_bytes,
                    "ecn_slowed_bytes": r.ecn_slowed_bytes,
                    "ecn_packets": r.ecn_packets,
                    "ecn_marked": r.ecn_marked,
                    "ecn_decreases": r.ecn_decreases,
                    "credit_requests": r.credit_requests,
                    "write_offs": r.write_offs,
                    "idle_evictions": r.idle_evictions,
                    "last_hop_trims": r.last_hop_trims,
                });
                if let Some((pacing, ecn)) = s.rccc_rate_ppm {
                    w["rccc_receiver"]["pacing_ppm"] = json!(pacing);
                    w["rccc_receiver"]["ecn_rate_ppm"] = json!(ecn);
                }
            }
            if let Some(t) = &s.tss {
                // Only with `[[tss]]` domains.
                let drops: Map<String, Value> = t
                    .drops
                    .iter()
                    .map(|(k, v)| ((*k).into(), json!(v)))
                    .collect();
                w["tss"] = json!({
                    "sealed": t.sealed,
                    "opened": t.opened,
                    "seal_failed": t.seal_failed,
                    "rotations": t.rotations,
                    "drops": drops,
                });
            }
            if let Some(x) = &s.xsk {
                // Added for the xdp backend only; readers of older documents
                // find no `xsk` object.
                w["xsk"] = json!({
                    "rx_dropped": x.kernel.rx_dropped,
                    "rx_invalid_descs": x.kernel.rx_invalid_descs,
                    "tx_invalid_descs": x.kernel.tx_invalid_descs,
                    "rx_ring_full": x.kernel.rx_ring_full,
                    "rx_fill_ring_empty_descs": x.kernel.rx_fill_ring_empty_descs,
                    "tx_ring_empty_descs": x.kernel.tx_ring_empty_descs,
                    "rx_multi_buffer": x.extra.rx_multi_buffer,
                    "rx_gathered": x.extra.rx_gathered,
                    "tx_multi_buffer": x.extra.tx_multi_buffer,
                    "tx_run_busy": x.extra.tx_run_busy,
                    "rx_chain_too_long": x.extra.rx_chain_too_long,
                    "rx_not_for_us": x.extra.rx_not_for_us,
                    "handoff_full": x.extra.handoff_full,
                    "tx_no_frame": x.extra.tx_no_frame,
                    "tx_kicks": x.extra.tx_kicks,
                });
            }
            if let Some(u) = &s.udp {
                w["udp"] = json!({
                    "gso_sends": u.gso_sends,
                    "gso_datagrams": u.gso_datagrams,
                    "gro_buffers": u.gro_buffers,
                    "gro_datagrams": u.gro_datagrams,
                    "rx_socket_drops": u.rx_socket_drops,
                });
            }
            w
        })
        .collect();
    match neigh {
        Some(n) => json!({
            "build": build(),
            "workers": workers,
            "neigh": {
                "destinations": n.destinations,
                "resolved": n.resolved,
                "attempts": n.attempts,
                "forgotten": n.forgotten,
                "evicted": n.evicted,
                "refused": n.refused,
                "requests_dropped": n.requests_dropped,
            },
        }),
        None => json!({ "build": build(), "workers": workers }),
    }
}

/// The most document bytes a `StatsReply` carries: the frame limit less the
/// header and the string's length.
const ONE_FRAME_DOC: usize = MAX_FRAME_LEN - HEADER_LEN - 2;

/// The frames answering a stats request for counters `stats`: the
/// document in `StatsChunk`s when `streamed` (`StatsStream`), else one
/// `StatsReply` ([`one_frame`]). None exceeds the frame limit.
pub fn replies(
    stats: &[WorkerStats],
    neigh: Option<&NeighCounts>,
    streamed: bool,
) -> Vec<DaemonMsg> {
    let doc = to_json(stats, neigh);
    if streamed {
        return stats_chunks(&doc.to_string()).collect();
    }
    vec![match one_frame(doc) {
        Some(json) => DaemonMsg::StatsReply { json },
        None => DaemonMsg::Error {
            code: uet_api::ErrorCode::Refused,
            message: "the counters do not fit one frame even without the per-destination \
                      entries: ask with StatsStream (`uet stats` does)"
                .into(),
        },
    }]
}

/// `doc` as text within one `StatsReply`: whole when it fits, else with
/// every worker's `ccc` list emptied and its length in `ccc_omitted`;
/// `None` when even that does not fit.
pub fn one_frame(mut doc: Value) -> Option<String> {
    let whole = doc.to_string();
    if whole.len() <= ONE_FRAME_DOC {
        return Some(whole);
    }
    if let Some(ws) = doc["workers"].as_array_mut() {
        for w in ws {
            let n = w["ccc"].as_array().map_or(0, Vec::len);
            w["ccc"] = json!([]);
            w["ccc_omitted"] = json!(n);
        }
    }
    let cut = doc.to_string();
    (cut.len() <= ONE_FRAME_DOC).then_some(cut)
}

#[cfg(test)]
mod tests {
    use uet_api::proto::Message as _;

    use super::*;
    use crate::worker::CccSnapshot;

    /// Two workers with `n` destinations each.
    fn with_cccs(n: usize) -> Vec<WorkerStats> {
        (0..2u8)
            .map(|w| WorkerStats {
                cccs: (0..n)
                    .map(|i| CccSnapshot {
                        dst: std::net::IpAddr::from([10, w, (i / 250) as u8, (i % 250) as u8]),
                        cwnd: 2 << 20,
                        inflight: 1 << 20,
                        backlog: 123_456,
                        credit: Some(65_536),
                        round_trip: None,
                    })
                    .collect(),
                ..WorkerStats::default()
            })
            .collect()
    }

    fn frame_lengths(msgs: &[DaemonMsg]) -> Vec<usize> {
        msgs.iter()
            .map(|m| m.to_frame().expect("every reply encodes").len())
            .collect()
    }

    #[test]
    fn thousands_of_destinations_stream_whole_in_frames_within_the_limit() {
        let stats = with_cccs(3000);
        let doc = to_json(&stats, None).to_string();
        assert!(doc.len() > 4 * MAX_FRAME_LEN, "{} bytes", doc.len());
        // As one frame, the document does not encode.
        assert!(
            DaemonMsg::StatsReply { json: doc.clone() }
                .to_frame()
                .is_err()
        );
        let replies = replies(&stats, None, true);
        assert!(replies.len() > 4);
        assert!(frame_lengths(&replies).iter().all(|&l| l <= MAX_FRAME_LEN));
        let mut back = String::new();
        for (i, r) in replies.iter().enumerate() {
            let DaemonMsg::StatsChunk { data, last } = r else {
                panic!("{r:?}");
            };
            assert_eq!(*last, i + 1 == replies.len());
            back.push_str(data);
        }
        assert_eq!(back, doc);
        let v: Value = serde_json::from_str(&back).unwrap();
        assert_eq!(v["workers"][1]["ccc"].as_array().unwrap().len(), 3000);
    }

    #[test]
    fn the_one_frame_reply_drops_the_destinations_and_counts_them() {
        // Small: whole, in one reply.
        let small = with_cccs(3);
        let [DaemonMsg::StatsReply { json }] = &replies(&small, None, false)[..] else {
            panic!("one StatsReply");
        };
        assert_eq!(*json, to_json(&small, None).to_string());
        // Large: one frame, valid JSON, the entries counted.
        let large = with_cccs(3000);
        let r = replies(&large, None, false);
        assert_eq!(frame_lengths(&r).len(), 1);
        assert!(frame_lengths(&r)[0] <= MAX_FRAME_LEN);
        let [DaemonMsg::StatsReply { json }] = &r[..] else {
            panic!("one StatsReply: {r:?}");
        };
        let v: Value = serde_json::from_str(json).unwrap();
        for w in v["workers"].as_array().unwrap() {
            assert_eq!(w["ccc"], json!([]));
            assert_eq!(w["ccc_omitted"], 3000);
            assert!(w["pds"]["tx_data"].is_number(), "the counters stay");
        }
    }

    #[test]
    fn the_resolver_counters_go_in_the_document_when_there_is_one() {
        let n = NeighCounts {
            destinations: 7,
            refused: 2,
            ..NeighCounts::default()
        };
        let doc = to_json(&[], Some(&n));
        assert_eq!(doc["neigh"]["destinations"], 7);
        assert_eq!(doc["neigh"]["refused"], 2);
        assert!(to_json(&[], None).get("neigh").is_none());
    }
}
