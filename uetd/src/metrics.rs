//! The daemon's counters in the Prometheus text format (version 0.0.4):
//! [`encode`] renders the stats document ([`crate::stats::to_json`]), and
//! [`MetricsServer`] serves it over HTTP at `/metrics` (`uetd
//! --metrics-addr`, `metrics_addr` in the configuration). `uet stats
//! --prometheus` reads the same document over the control socket and
//! prints what [`encode`] makes of it, so the two never differ.
//!
//! Every metric carries the `uet_` prefix, counters end in `_total`,
//! sizes are in bytes; every known drop reason and NACK code is present
//! from the first scrape (at 0), so no series appears only once something
//! goes wrong. The names, types, labels and meanings are listed in
//! `docs/metrics.md`.
//!
//! The exposition is made by the `prometheus` crate's registry and text
//! encoder, which check names, label sets and duplicates and escape label
//! values; the document is read field by field with 0 for what an older
//! daemon's document lacks.

use std::io::{self, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prometheus::core::Collector;
use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder};
use serde_json::Value;
use uet_pds::DropReason;
use uet_wire::pds::NackCode;

/// The content type of what [`encode`] makes.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Counter or gauge.
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// A per-worker metric read from one field of a worker's object:
/// (section, field, metric name, kind, help).
type Field = (&'static str, &'static str, &'static str, Kind, &'static str);

use Kind::{Counter, Gauge};

/// Every per-worker metric that is one field of the document.
const WORKER_FIELDS: &[Field] = &[
    (
        "io",
        "rx_packets",
        "uet_io_rx_packets_total",
        Counter,
        "Datagrams the backend handed to the worker.",
    ),
    (
        "io",
        "rx_bytes",
        "uet_io_rx_bytes_total",
        Counter,
        "Bytes of the datagrams received: whole frames on the xdp backend, UDP payloads on the udp backend.",
    ),
    (
        "io",
        "tx_packets",
        "uet_io_tx_packets_total",
        Counter,
        "Datagrams sent (xdp: queued to the NIC).",
    ),
    (
        "io",
        "tx_bytes",
        "uet_io_tx_bytes_total",
        Counter,
        "Bytes of the datagrams sent, counted as uet_io_rx_bytes_total is.",
    ),
    (
        "io",
        "rx_dropped",
        "uet_io_rx_dropped_total",
        Counter,
        "Received frames the backend dropped before the protocol saw them: not UET, bad checksum, not for this address, malformed.",
    ),
    (
        "io",
        "rx_bad_crc",
        "uet_io_rx_bad_crc_total",
        Counter,
        "Of uet_io_rx_dropped_total: a CRC32C trailer missing or wrong (the peer's crc_trailer setting differs).",
    ),
    (
        "io",
        "rx_other_encap",
        "uet_io_rx_other_encap_total",
        Counter,
        "Of uet_io_rx_dropped_total: UET in the other encapsulation (the peer's encap setting differs).",
    ),
    (
        "io",
        "tx_dropped",
        "uet_io_tx_dropped_total",
        Counter,
        "Datagrams the worker produced that could not be sent: no neighbour entry, no route, address family, send error.",
    ),
    (
        "io",
        "tx_no_neighbour",
        "uet_io_tx_no_neighbour_total",
        Counter,
        "Of uet_io_tx_dropped_total: no neighbour entry yet (its resolution was requested).",
    ),
    (
        "io",
        "handed_off",
        "uet_io_handed_off_total",
        Counter,
        "Received frames handed to the worker that owns their PDC.",
    ),
    (
        "io",
        "tx_ring_full",
        "uet_io_tx_ring_full_total",
        Counter,
        "Transmit attempts that found the TX ring (udp: the socket buffer) full.",
    ),
    (
        "pds",
        "tx_data",
        "uet_pds_tx_data_total",
        Counter,
        "Data packets sent for the first time; resends are in uet_pds_tx_retransmits_total only.",
    ),
    (
        "pds",
        "tx_retransmits",
        "uet_pds_tx_retransmits_total",
        Counter,
        "Packets sent again, whatever the cause (RTO, SACK inference, NACK, tail probe), including ACK requests for packets already SACKed.",
    ),
    (
        "pds",
        "first_rtt_resent",
        "uet_pds_first_rtt_resent_total",
        Counter,
        "Of uet_pds_tx_retransmits_total: first resends of data packets sent before their PDC heard from the target (losses in a PDC's first round trip).",
    ),
    (
        "pds",
        "rtos",
        "uet_pds_rtos_total",
        Counter,
        "Retransmission timeouts that fired (one per expiry; the resends that follow are in uet_pds_tx_retransmits_total).",
    ),
    (
        "pds",
        "sack_inferred",
        "uet_pds_sack_inferred_total",
        Counter,
        "Packets presumed lost from SACK information (inferences, not resends: may exceed uet_pds_tx_retransmits_total).",
    ),
    (
        "pds",
        "tail_probes",
        "uet_pds_tail_probes_total",
        Counter,
        "Tail loss probes sent (probe control packets of PDCs silent for a probe timeout).",
    ),
    (
        "pds",
        "tail_probe_lost",
        "uet_pds_tail_probe_lost_total",
        Counter,
        "Of uet_pds_sack_inferred_total: packets a tail probe's answer found lost.",
    ),
    (
        "pds",
        "tx_acks",
        "uet_pds_tx_acks_total",
        Counter,
        "ACKs sent.",
    ),
    (
        "pds",
        "rx_acks",
        "uet_pds_rx_acks_total",
        Counter,
        "ACKs received.",
    ),
    (
        "pds",
        "tx_control",
        "uet_pds_tx_control_total",
        Counter,
        "Control packets sent (ACK requests, probes, credit, close).",
    ),
    (
        "pds",
        "rx_data",
        "uet_pds_rx_data_total",
        Counter,
        "Request packets accepted and handed to the semantic sublayer.",
    ),
    (
        "pds",
        "rx_ce",
        "uet_pds_rx_ce_total",
        Counter,
        "Of uet_pds_rx_data_total: packets that arrived marked ECN-CE.",
    ),
    (
        "pds",
        "pdcs_opened",
        "uet_pds_pdcs_opened_total",
        Counter,
        "PDCs opened.",
    ),
    (
        "pds",
        "pdcs_closed",
        "uet_pds_pdcs_closed_total",
        Counter,
        "PDCs closed, normally or in error.",
    ),
    (
        "pds",
        "pdcs_pending_evicted",
        "uet_pds_pdcs_pending_evicted_total",
        Counter,
        "PDCs opened by a SYN and not yet confirmed, evicted to make room for a newer SYN.",
    ),
    (
        "pds",
        "pdcs_reopened",
        "uet_pds_pdcs_reopened_total",
        Counter,
        "PDCs reopened after the peer answered INV_DPDCID (it restarted or forgot the PDC).",
    ),
    (
        "pds",
        "nack_backoffs",
        "uet_pds_nack_backoffs_total",
        Counter,
        "Resends held back after a NACK for want of a resource at the peer.",
    ),
    (
        "ses",
        "requests",
        "uet_ses_requests_total",
        Counter,
        "Request packets the target placed or answered.",
    ),
    (
        "ses",
        "refused",
        "uet_ses_refused_total",
        Counter,
        "Requests refused for lack of message state (NACKed; the initiator resends them).",
    ),
    (
        "ses",
        "stray",
        "uet_ses_stray_total",
        Counter,
        "Packets for no known operation (late duplicates or strays).",
    ),
    (
        "ses",
        "in_flight",
        "uet_ses_ops_in_flight",
        Gauge,
        "Operations submitted and not yet completed.",
    ),
    (
        "loop",
        "iterations",
        "uet_worker_loop_iterations_total",
        Counter,
        "Iterations of the worker's loop.",
    ),
    (
        "loop",
        "sleeps",
        "uet_worker_loop_sleeps_total",
        Counter,
        "Of uet_worker_loop_iterations_total: those that slept in poll() for want of work.",
    ),
    (
        "loop",
        "host_stalls",
        "uet_worker_loop_host_stalls_total",
        Counter,
        "Times the worker did not run for over 2 ms (the host took its CPU); its timers waited as long after each.",
    ),
    (
        "ring",
        "ops",
        "uet_worker_ring_ops_total",
        Counter,
        "Operations taken from clients' shared submission rings.",
    ),
    (
        "ring",
        "refused",
        "uet_worker_ring_refused_total",
        Counter,
        "Ring entries refused (bad handle, bounds, job, destination, undecodable) and rings broken.",
    ),
];

/// The AF_XDP sockets' counters (xdp backend only), summed over a worker's
/// sockets: (field, metric name, help).
/// A counter family of a worker's stats section: (field, metric name,
/// help).
type SectionField = (&'static str, &'static str, &'static str);

/// The kernel-UDP backend's segmentation offloads and socket drops (`udp`
/// in a worker's stats).
const UDP_FIELDS: &[SectionField] = &[
    (
        "gso_sends",
        "uet_udp_gso_sends_total",
        "UDP GSO sends: one sendmsg for a run of datagrams to one peer.",
    ),
    (
        "gso_datagrams",
        "uet_udp_gso_datagrams_total",
        "Datagrams those GSO sends carried.",
    ),
    (
        "gro_buffers",
        "uet_udp_gro_buffers_total",
        "Received buffers holding datagrams the kernel coalesced (UDP GRO).",
    ),
    (
        "gro_datagrams",
        "uet_udp_gro_datagrams_total",
        "Datagrams those buffers held.",
    ),
    (
        "rx_socket_drops",
        "uet_udp_rx_socket_drops_total",
        "Datagrams the kernel dropped at the receiving socket, its buffer full (SO_RXQ_OVFL): the worker fell behind, not loss on the wire.",
    ),
];

const XSK_FIELDS: &[SectionField] = &[
    (
        "rx_dropped",
        "uet_xsk_rx_dropped_total",
        "Frames the kernel dropped at the socket (XDP_STATISTICS rx_dropped), never seen by the daemon.",
    ),
    (
        "rx_invalid_descs",
        "uet_xsk_rx_invalid_descs_total",
        "Invalid fill-ring descriptors (XDP_STATISTICS).",
    ),
    (
        "tx_invalid_descs",
        "uet_xsk_tx_invalid_descs_total",
        "Invalid TX-ring descriptors (XDP_STATISTICS).",
    ),
    (
        "rx_ring_full",
        "uet_xsk_rx_ring_full_total",
        "Frames the kernel dropped because the RX ring was full (XDP_STATISTICS).",
    ),
    (
        "rx_fill_ring_empty_descs",
        "uet_xsk_rx_fill_ring_empty_descs_total",
        "Times the kernel found the fill ring empty (XDP_STATISTICS).",
    ),
    (
        "tx_ring_empty_descs",
        "uet_xsk_tx_ring_empty_descs_total",
        "Times the kernel found the TX ring empty (XDP_STATISTICS).",
    ),
    (
        "rx_multi_buffer",
        "uet_xsk_rx_multi_buffer_total",
        "Packets received as a chain of frames (multi-buffer).",
    ),
    (
        "rx_gathered",
        "uet_xsk_rx_gathered_total",
        "Of uet_xsk_rx_multi_buffer_total: chains copied whole into a buffer, not made contiguous in place.",
    ),
    (
        "tx_multi_buffer",
        "uet_xsk_tx_multi_buffer_total",
        "Packets sent as a chain of frames (multi-buffer).",
    ),
    (
        "tx_run_busy",
        "uet_xsk_tx_run_busy_total",
        "Free runs of UMEM chunks passed over for sending: a chunk of theirs not yet completed.",
    ),
    (
        "rx_chain_too_long",
        "uet_xsk_rx_chain_too_long_total",
        "Of uet_io_rx_dropped_total: frame chains longer than a packet may span.",
    ),
    // The JSON field's `us` would read as microseconds in a metric name.
    (
        "rx_not_for_us",
        "uet_xsk_rx_other_address_total",
        "Of uet_io_rx_dropped_total: UET frames addressed to another IP address.",
    ),
    (
        "handoff_full",
        "uet_xsk_handoff_full_total",
        "Of uet_io_rx_dropped_total: frames for another worker dropped at its full inbox.",
    ),
    (
        "tx_no_frame",
        "uet_xsk_tx_no_frame_total",
        "Of uet_io_tx_ring_full_total: no free UMEM frame to send from.",
    ),
    (
        "tx_kicks",
        "uet_xsk_tx_kicks_total",
        "TX kicks: sendto() calls that wake the kernel's transmit path.",
    ),
];

/// The next-hop resolver's counters (xdp backend only): (field, name, kind,
/// help).
const NEIGH_FIELDS: &[(&str, &str, Kind, &str)] = &[
    (
        "destinations",
        "uet_neigh_destinations",
        Gauge,
        "Destinations the resolver holds, resolved and pending.",
    ),
    (
        "resolved",
        "uet_neigh_resolved",
        Gauge,
        "Of uet_neigh_destinations: those resolved (published to the datapath).",
    ),
    (
        "attempts",
        "uet_neigh_attempts_total",
        Counter,
        "Resolution attempts that asked the kernel.",
    ),
    (
        "forgotten",
        "uet_neigh_forgotten_total",
        Counter,
        "Destinations forgotten for want of use.",
    ),
    (
        "evicted",
        "uet_neigh_evicted_total",
        Counter,
        "Pending destinations evicted by newer ones at a full table.",
    ),
    (
        "refused",
        "uet_neigh_refused_total",
        Counter,
        "New destinations refused at a table full of resolved ones.",
    ),
    (
        "requests_dropped",
        "uet_neigh_requests_dropped_total",
        Counter,
        "Resolution requests dropped at a full request queue.",
    ),
];

/// The per-destination congestion state: (field, name, help). Labels
/// `worker` and `peer` (the destination's address).
const CCC_FIELDS: &[(&str, &str, &str)] = &[
    (
        "cwnd",
        "uet_ccc_cwnd_bytes",
        "Congestion window towards the peer (NSCC's; the fixed window with cc none; the credit held with RCCC alone).",
    ),
    (
        "inflight",
        "uet_ccc_inflight_bytes",
        "Bytes in flight towards the peer.",
    ),
    (
        "backlog",
        "uet_ccc_backlog_bytes",
        "Bytes of new data queued for the peer and not yet sent (waiting retransmissions not included).",
    ),
    (
        "credit",
        "uet_ccc_credit_bytes",
        "RCCC credit balance for the peer (only when RCCC is on; negative after an RTO forced a resend past it).",
    ),
];

/// The round trip of the destination's PDC with the longest RTO, in
/// seconds: (JSON field in ns, name, help). Labels `worker` and `peer`;
/// no series before the first sample.
const CCC_TIME_FIELDS: &[(&str, &str, &str)] = &[
    (
        "srtt_ns",
        "uet_ccc_srtt_seconds",
        "Smoothed round trip of the PDC to the peer whose RTO is the longest.",
    ),
    (
        "rttvar_ns",
        "uet_ccc_rttvar_seconds",
        "Round-trip variation of that PDC.",
    ),
    (
        "rto_ns",
        "uet_ccc_rto_seconds",
        "The RTO a packet sent now on that PDC would get (before any timeout's doubling).",
    ),
];

/// Every NACK code's label value (the lower-case spec name), `unknown`
/// (every reserved code) last.
fn nack_code_labels() -> impl Iterator<Item = String> {
    (0u8..=255)
        .map(NackCode::from_u8)
        .filter(|c| !matches!(c, NackCode::Unknown(_)))
        .map(|c| c.name().to_ascii_lowercase())
        .chain(std::iter::once("unknown".to_owned()))
}

/// The registry being filled for one rendering.
struct Exposition {
    registry: Registry,
}

impl Exposition {
    /// Registers `m` (made from names and labels that are valid here).
    fn register<M: Collector + Clone + 'static>(&self, m: prometheus::Result<M>) -> M {
        let m = m.expect("the metric names and labels here are valid");
        self.registry
            .register(Box::new(m.clone()))
            .expect("each metric is registered once");
        m
    }

    fn counter(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        self.register(IntCounterVec::new(Opts::new(name, help), labels))
    }

    fn gauge(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        self.register(IntGaugeVec::new(Opts::new(name, help), labels))
    }

    fn gauge_f64(&self, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
        self.register(GaugeVec::new(Opts::new(name, help), labels))
    }

    /// A counter or gauge family named `name`, with `labels`.
    fn family(&self, kind: Kind, name: &str, help: &str, labels: &[&str]) -> Metric {
        match kind {
            Counter => Metric::Counter(self.counter(name, help, labels)),
            Gauge => Metric::Gauge(self.gauge(name, help, labels)),
        }
    }
}

enum Metric {
    Counter(IntCounterVec),
    Gauge(IntGaugeVec),
}

impl Metric {
    fn put(&self, labels: &[&str], v: &Value) {
        match self {
            Self::Counter(c) => c.with_label_values(labels).inc_by(v.as_u64().unwrap_or(0)),
            Self::Gauge(g) => g.with_label_values(labels).set(as_i64(v)),
        }
    }
}

/// A gauge's value: the document's integers fit i64 (windows, byte
/// counts, table sizes); anything else reads as 0.
fn as_i64(v: &Value) -> i64 {
    v.as_i64()
        .or_else(|| v.as_u64().map(|u| i64::try_from(u).unwrap_or(i64::MAX)))
        .unwrap_or(0)
}

/// The security sublayer's counters (`tss`, only with `[[tss]]` domains):
/// JSON field, metric name, help.
const TSS_FIELDS: &[(&str, &str, &str)] = &[
    (
        "sealed",
        "uet_tss_sealed_total",
        "Datagrams sealed (encrypted and tagged) in a security domain.",
    ),
    (
        "opened",
        "uet_tss_opened_total",
        "Received datagrams authenticated and decrypted.",
    ),
    (
        "seal_failed",
        "uet_tss_seal_failed_total",
        "Datagrams that could not be sealed (no key, counter exhausted); the PDS resends them.",
    ),
    (
        "rotations",
        "uet_tss_rotations_total",
        "Keys installed by rotation (SIGHUP with a changed key file).",
    ),
];

/// The RCCC receiver pacer's rate now (`rccc_receiver`): JSON field,
/// gauge name, help.
const RCCC_RATE_FIELDS: &[(&str, &str, &str)] = &[
    (
        "pacing_ppm",
        "uet_rccc_pacing_ppm",
        "The pacer's rate before the ECN cut, ppm of the link rate (1000000 once the path has marked).",
    ),
    (
        "ecn_rate_ppm",
        "uet_rccc_ecn_rate_ppm",
        "The ECN rate control's factor on the pacer's rate now, ppm.",
    ),
];

/// The RCCC receiver's pacer (`rccc_receiver`, only where the daemon paces
/// RCCC sources): JSON field, metric name, help.
const RCCC_RECEIVER_FIELDS: &[(&str, &str, &str)] = &[
    (
        "ticks",
        "uet_rccc_pacer_ticks_total",
        "Ticks of the RCCC receiver's pacer.",
    ),
    (
        "grants",
        "uet_rccc_grants_total",
        "Credit grants the RCCC receiver's pacer handed out.",
    ),
    (
        "granted_bytes",
        "uet_rccc_granted_bytes_total",
        "Bytes of credit the pacer granted (initial windows not counted).",
    ),
    (
        "received_bytes",
        "uet_rccc_received_bytes_total",
        "Data bytes received from RCCC sources (nominal sizes, untrimmed packets).",
    ),
    (
        "speculative_bytes",
        "uet_rccc_speculative_bytes_total",
        "Data bytes received on RCCC sources' speculative first windows.",
    ),
    (
        "outstanding_limited",
        "uet_rccc_outstanding_limited_total",
        "Pacer ticks that granted less than their budget: the credit not yet spent reached its cap.",
    ),
    (
        "late_bytes",
        "uet_rccc_late_bytes_total",
        "Pacer budget lost to ticks that came later than the pacer may catch up, bytes.",
    ),
    (
        "withheld_bytes",
        "uet_rccc_withheld_bytes_total",
        "Pacer budget withheld because the credit not yet spent reached its cap, bytes.",
    ),
    (
        "unclaimed_bytes",
        "uet_rccc_unclaimed_bytes_total",
        "Pacer budget no active source had demand for, bytes.",
    ),
    (
        "ecn_slowed_bytes",
        "uet_rccc_ecn_slowed_bytes_total",
        "Pacer budget held back by the ECN rate control while the data arrived marked, bytes.",
    ),
    (
        "ecn_packets",
        "uet_rccc_ecn_packets_total",
        "Untrimmed data packets the ECN rate control counted.",
    ),
    (
        "ecn_marked",
        "uet_rccc_ecn_marked_total",
        "Of those, packets that arrived with ECN-CE.",
    ),
    (
        "ecn_decreases",
        "uet_rccc_ecn_decreases_total",
        "ECN rate control updates that lowered the pacer's rate.",
    ),
    (
        "credit_requests",
        "uet_rccc_credit_requests_total",
        "CREDIT_REQ control packets received.",
    ),
    (
        "write_offs",
        "uet_rccc_write_offs_total",
        "CREDIT_REQs that wrote off a source's outstanding credit.",
    ),
    (
        "idle_evictions",
        "uet_rccc_idle_evictions_total",
        "Sources dropped from the pacer's active table for not answering grants.",
    ),
    (
        "last_hop_trims",
        "uet_rccc_last_hop_trims_total",
        "Packets from RCCC sources trimmed at the last hop.",
    ),
];

/// Every reason the security sublayer drops a datagram for.
fn tss_drop_reasons() -> impl Iterator<Item = &'static str> {
    uet_tss::DropReason::ALL
        .iter()
        .map(|r| r.name())
        .chain([crate::tss::PLAINTEXT, crate::tss::WRONG_JOB])
}

/// The Prometheus text of a stats document (what [`crate::stats::to_json`]
/// makes, or `uet stats` receives): every worker's counters labelled
/// `worker`, drops by `reason`, NACKs by `code`, operations by `result`,
/// the congestion state by `worker` and `peer`, the AF_XDP and resolver
/// counters when the document has them, and `uet_build_info`.
pub fn encode(doc: &Value) -> String {
    let x = Exposition {
        registry: Registry::new(),
    };
    let empty = Vec::new();
    let workers = doc["workers"].as_array().unwrap_or(&empty);

    let build = x.gauge(
        "uet_build_info",
        "The daemon's build: its version and profile (release or debug); always 1.",
        &["version", "profile"],
    );
    let label = |v: &Value| v.as_str().unwrap_or("unknown").to_owned();
    build
        .with_label_values(&[
            label(&doc["build"]["version"]).as_str(),
            label(&doc["build"]["profile"]).as_str(),
        ])
        .set(1);

    let fields: Vec<Metric> = WORKER_FIELDS
        .iter()
        .map(|&(_, _, name, kind, help)| x.family(kind, name, help, &["worker"]))
        .collect();
    let drops = x.counter(
        "uet_pds_drops_total",
        "Received packets the packet delivery sublayer dropped or refused, by reason.",
        &["worker", "reason"],
    );
    let nacks = [
        (
            "tx_nacks",
            x.counter(
                "uet_pds_tx_nacks_total",
                "NACKs sent, by code.",
                &["worker", "code"],
            ),
        ),
        (
            "rx_nacks",
            x.counter(
                "uet_pds_rx_nacks_total",
                "NACKs received, by code.",
                &["worker", "code"],
            ),
        ),
    ];
    let ops = x.counter(
        "uet_ses_ops_total",
        "Operations completed, by result (ok or failed).",
        &["worker", "result"],
    );
    let ccc_count = x.gauge(
        "uet_ccc_destinations",
        "Destinations with a congestion context (at most the PDC table's size, 1024 per worker).",
        &["worker"],
    );
    let ccc: Vec<IntGaugeVec> = CCC_FIELDS
        .iter()
        .map(|&(_, name, help)| x.gauge(name, help, &["worker", "peer"]))
        .collect();
    let ccc_time: Vec<GaugeVec> = CCC_TIME_FIELDS
        .iter()
        .map(|&(_, name, help)| x.gauge_f64(name, help, &["worker", "peer"]))
        .collect();
    // Per-backend sections: families only when some worker has one.
    let sections: Vec<(&str, &[SectionField], Vec<IntCounterVec>)> =
        [("xsk", XSK_FIELDS), ("udp", UDP_FIELDS)]
            .into_iter()
            .filter(|(key, _)| workers.iter().any(|w| w.get(key).is_some()))
            .map(|(key, fields)| {
                let families = fields
                    .iter()
                    .map(|&(_, name, help)| x.counter(name, help, &["worker"]))
                    .collect();
                (key, fields, families)
            })
            .collect();

    for (i, w) in workers.iter().enumerate() {
        let id = w["worker"].as_u64().unwrap_or(i as u64).to_string();
        let id = id.as_str();
        for (&(section, field, ..), m) in WORKER_FIELDS.iter().zip(&fields) {
            m.put(&[id], &w[section][field]);
        }
        for reason in DropReason::ALL {
            let name = reason.name();
            drops
                .with_label_values(&[id, name])
                .inc_by(w["pds"]["drops"][name].as_u64().unwrap_or(0));
        }
        for (field, c) in &nacks {
            for code in nack_code_labels() {
                c.with_label_values(&[id, code.as_str()])
                    .inc_by(w["pds"][field][code.as_str()].as_u64().unwrap_or(0));
            }
        }
        for (result, field) in [("ok", "ops_ok"), ("failed", "ops_failed")] {
            ops.with_label_values(&[id, result])
                .inc_by(w["ses"][field].as_u64().unwrap_or(0));
        }
        let listed = w["ccc"].as_array().unwrap_or(&empty);
        let omitted = w["ccc_omitted"].as_u64().unwrap_or(0);
        let count = listed.len() as u64 + omitted;
        ccc_count
            .with_label_values(&[id])
            .set(i64::try_from(count).unwrap_or(i64::MAX));
        for c in listed {
            let peer = label(&c["dst"]);
            for (&(field, ..), g) in CCC_FIELDS.iter().zip(&ccc) {
                // Credit exists only with RCCC: no series without it.
                if !c[field].is_null() {
                    g.with_label_values(&[id, peer.as_str()])
                        .set(as_i64(&c[field]));
                }
            }
            for (&(field, ..), g) in CCC_TIME_FIELDS.iter().zip(&ccc_time) {
                if let Some(ns) = c[field].as_u64() {
                    g.with_label_values(&[id, peer.as_str()])
                        .set(ns as f64 / 1e9);
                }
            }
        }
        for (key, fields, families) in &sections {
            for (&(field, ..), c) in fields.iter().zip(families) {
                c.with_label_values(&[id])
                    .inc_by(w[*key][field].as_u64().unwrap_or(0));
            }
        }
    }

    if workers.iter().any(|w| w.get("tss").is_some()) {
        let tss: Vec<IntCounterVec> = TSS_FIELDS
            .iter()
            .map(|&(_, name, help)| x.counter(name, help, &["worker"]))
            .collect();
        let tss_drops = x.counter(
            "uet_tss_drops_total",
            "Received datagrams the security sublayer dropped, by reason.",
            &["worker", "reason"],
        );
        for (i, w) in workers.iter().enumerate() {
            let id = w["worker"].as_u64().unwrap_or(i as u64).to_string();
            for (&(field, ..), c) in TSS_FIELDS.iter().zip(&tss) {
                c.with_label_values(&[id.as_str()])
                    .inc_by(w["tss"][field].as_u64().unwrap_or(0));
            }
            for reason in tss_drop_reasons() {
                tss_drops
                    .with_label_values(&[id.as_str(), reason])
                    .inc_by(w["tss"]["drops"][reason].as_u64().unwrap_or(0));
            }
        }
    }

    if workers.iter().any(|w| w.get("rccc_receiver").is_some()) {
        let families: Vec<IntCounterVec> = RCCC_RECEIVER_FIELDS
            .iter()
            .map(|&(_, name, help)| x.counter(name, help, &["worker"]))
            .collect();
        let rates: Vec<IntGaugeVec> = RCCC_RATE_FIELDS
            .iter()
            .map(|&(_, name, help)| x.gauge(name, help, &["worker"]))
            .collect();
        for (i, w) in workers.iter().enumerate() {
            let id = w["worker"].as_u64().unwrap_or(i as u64).to_string();
            for (&(field, ..), c) in RCCC_RECEIVER_FIELDS.iter().zip(&families) {
                c.with_label_values(&[id.as_str()])
                    .inc_by(w["rccc_receiver"][field].as_u64().unwrap_or(0));
            }
            for (&(field, ..), g) in RCCC_RATE_FIELDS.iter().zip(&rates) {
                if let Some(v) = w["rccc_receiver"].get(field) {
                    g.with_label_values(&[id.as_str()]).set(as_i64(v));
                }
            }
        }
    }

    if let Some(n) = doc.get("neigh") {
        for &(field, name, kind, help) in NEIGH_FIELDS {
            x.family(kind, name, help, &[]).put(&[], &n[field]);
        }
    }

    let mut out = String::new();
    TextEncoder::new()
        .encode_utf8(&x.registry.gather(), &mut out)
        .expect("counters and gauges always encode");
    out
}

/// How the endpoint treats its clients.
#[derive(Debug, Clone, Copy)]
pub struct ServerLimits {
    /// The longest request head (request line and headers) read; a longer
    /// one is answered 431 and the connection closed.
    pub max_request: usize,
    /// How long one connection may take, from accept to the last byte of
    /// the answer: a client that sends or reads slower is cut off.
    pub deadline: Duration,
    /// Connections served at once; past it a new one is answered 503.
    pub max_connections: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_request: 8192,
            deadline: Duration::from_secs(5),
            max_connections: 8,
        }
    }
}

/// The HTTP endpoint ([`MetricsListener::serve`]): a thread accepting and a short-lived thread
/// per connection (at most [`ServerLimits::max_connections`]), each cut off
/// at its deadline. It only reads the counters the workers publish; a
/// client that is slow, malformed or gone costs its own connection and
/// nothing else. Stopped and joined on drop.
#[derive(Debug)]
pub struct MetricsServer {
    local: SocketAddr,
    stop: Arc<AtomicBool>,
    wake: Arc<crate::sys::eventfd::EventFd>,
    thread: Option<JoinHandle<()>>,
}

/// The endpoint's socket, bound and not yet served: bound before the
/// daemon starts, so a bad or taken address fails first.
#[derive(Debug)]
pub struct MetricsListener(TcpListener);

impl MetricsListener {
    /// Binds `addr` (port 0: any free port, see [`Self::local_addr`]).
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Self(listener))
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }

    /// Answers `GET /metrics` with what `render` returns, from now on.
    pub fn serve(
        self,
        limits: ServerLimits,
        render: impl Fn() -> String + Send + Sync + 'static,
    ) -> io::Result<MetricsServer> {
        let local = self.0.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(crate::sys::eventfd::EventFd::new().map_err(io::Error::from)?);
        let (s2, w2, listener) = (stop.clone(), wake.clone(), self.0);
        let thread = std::thread::Builder::new()
            .name("uetd-metrics".into())
            .spawn(move || accept_loop(&listener, &s2, &w2, limits, Arc::new(render)))?;
        Ok(MetricsServer {
            local,
            stop,
            wake,
            thread: Some(thread),
        })
    }
}

impl MetricsServer {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.wake.signal();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

type Render = Arc<dyn Fn() -> String + Send + Sync>;

fn accept_loop(
    listener: &TcpListener,
    stop: &AtomicBool,
    wake: &crate::sys::eventfd::EventFd,
    limits: ServerLimits,
    render: Render,
) {
    use std::os::fd::AsFd as _;
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Acquire) {
        if crate::sys::eventfd::poll_in(&[listener.as_fd(), wake.as_fd()], None).is_err() {
            // Only EINVAL/ENOMEM: nothing to wait on; end rather than spin.
            tracing::warn!("metrics endpoint: poll failed, no longer serving");
            return;
        }
        loop {
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // A connection reset before it was accepted, or out of
                // descriptors for now: the next poll tries again.
                Err(_) => break,
            };
            let _ = stream.set_nonblocking(false);
            if active.load(Ordering::Acquire) >= limits.max_connections {
                busy(stream, limits);
                continue;
            }
            active.fetch_add(1, Ordering::AcqRel);
            let (a, r) = (active.clone(), render.clone());
            let spawned = std::thread::Builder::new()
                .name("uetd-metrics-conn".into())
                .spawn(move || {
                    let _ = serve_one(stream, limits, &*r);
                    a.fetch_sub(1, Ordering::AcqRel);
                });
            if spawned.is_err() {
                active.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// How long a connection past the limit has to send its request before
/// it is answered 503, and then to take the answer (the accept thread
/// waits on it, so this is short).
const BUSY_WAIT: Duration = Duration::from_millis(100);

/// The most bytes read and discarded after an answer.
const MAX_DRAIN: usize = 1 << 20;

/// Answers 503 to a connection past the limit.
fn busy(mut stream: TcpStream, limits: ServerLimits) {
    let until = Instant::now() + BUSY_WAIT;
    let _ = read_head(&mut stream, limits.max_request, until);
    let _ = stream.set_write_timeout(Some(BUSY_WAIT));
    let _ = stream.write_all(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    finish(&mut stream, until + BUSY_WAIT);
}

/// What came of reading a request head.
enum Head {
    /// The head, up to its blank line.
    Complete(Vec<u8>),
    /// More than the limit without a blank line.
    TooLong,
    /// The client closed first.
    Closed,
}

/// Reads a request head of at most `max` bytes until `until`.
fn read_head(stream: &mut TcpStream, max: usize, until: Instant) -> io::Result<Head> {
    let mut head = vec![0u8; max];
    let mut len = 0;
    loop {
        let got = &head[..len];
        if got.windows(4).any(|w| w == b"\r\n\r\n") || got.windows(2).any(|w| w == b"\n\n") {
            head.truncate(len);
            return Ok(Head::Complete(head));
        }
        if len == max {
            return Ok(Head::TooLong);
        }
        stream.set_read_timeout(Some(left(until)?))?;
        match stream.read(&mut head[len..])? {
            0 => return Ok(Head::Closed),
            n => len += n,
        }
    }
}

/// What is left until `until`; an error once it has passed.
fn left(until: Instant) -> io::Result<Duration> {
    until
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| io::Error::from(io::ErrorKind::TimedOut))
}

/// Ends an answered connection: FIN, then what the client still sends is
/// read and discarded (up to [`MAX_DRAIN`] bytes, until `until`) so that
/// closing with unread bytes does not reset the connection and lose the
/// answer on the way.
fn finish(stream: &mut TcpStream, until: Instant) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 4096];
    let mut drained = 0;
    while drained < MAX_DRAIN {
        let Ok(t) = left(until) else { return };
        if stream.set_read_timeout(Some(t)).is_err() {
            return;
        }
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}

/// The answer to a request head.
struct Answer {
    status: &'static str,
    extra: &'static str,
    body: String,
    head_only: bool,
}

fn answer(head: &[u8], render: &dyn Fn() -> String) -> Answer {
    let plain = |status, body: &str| Answer {
        status,
        extra: "",
        body: format!("{body}\n"),
        head_only: false,
    };
    let line = head
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return plain("400 Bad Request", "bad request line");
    };
    if !version.starts_with("HTTP/1.") {
        return plain("400 Bad Request", "HTTP/1.x only");
    }
    let path = target.split('?').next().unwrap_or("");
    if path != "/metrics" {
        return plain("404 Not Found", "not found: the counters are at /metrics");
    }
    match method {
        "GET" | "HEAD" => Answer {
            status: "200 OK",
            extra: "",
            body: render(),
            head_only: method == "HEAD",
        },
        _ => Answer {
            extra: "Allow: GET, HEAD\r\n",
            ..plain("405 Method Not Allowed", "GET or HEAD only")
        },
    }
}

/// Reads one request head within the limits and answers it; the
/// connection is closed after the answer.
fn serve_one(
    mut stream: TcpStream,
    limits: ServerLimits,
    render: &dyn Fn() -> String,
) -> io::Result<()> {
    let deadline = Instant::now() + limits.deadline;
    let _ = stream.set_nodelay(true);
    let a = match read_head(&mut stream, limits.max_request, deadline)? {
        Head::Complete(head) => answer(&head, render),
        Head::TooLong => Answer {
            status: "431 Request Header Fields Too Large",
            extra: "",
            body: format!("request head over {} bytes\n", limits.max_request),
            head_only: false,
        },
        Head::Closed => return Ok(()),
    };
    let content_type = if a.status.starts_with("200") {
        CONTENT_TYPE
    } else {
        "text/plain; charset=utf-8"
    };
    let mut out = format!(
        "HTTP/1.1 {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
        a.status,
        a.body.len(),
        a.extra
    )
    .into_bytes();
    if !a.head_only {
        out.extend_from_slice(a.body.as_bytes());
    }
    // In pieces, each with what is left of the deadline: a client that
    // reads slowly is cut off at the deadline, not at each write's timeout.
    for piece in out.chunks(64 * 1024) {
        stream.set_write_timeout(Some(left(deadline)?))?;
        stream.write_all(piece)?;
    }
    finish(&mut stream, deadline);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::net::{IpAddr, TcpStream};

    use serde_json::json;
    use uet_pds::DropReason;

    use super::*;
    use crate::neigh::NeighCounts;
    use crate::stats::to_json;
    use crate::worker::{CccSnapshot, WorkerStats};

    /// The sample lines of `text` (no comments) as (series, value).
    fn samples(text: &str) -> Vec<(&str, &str)> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.rsplit_once(' ').expect("a sample line is `series value`"))
            .collect()
    }

    fn value<'a>(text: &'a str, series: &str) -> Option<&'a str> {
        samples(text)
            .into_iter()
            .find(|(s, _)| *s == series)
            .map(|(_, v)| v)
    }

    #[test]
    fn every_drop_reason_nack_code_and_result_is_there_at_zero() {
        let text = encode(&to_json(&[WorkerStats::default()], None));
        for r in DropReason::ALL {
            let series = format!(
                "uet_pds_drops_total{{reason=\"{}\",worker=\"0\"}}",
                r.name()
            );
            assert_eq!(value(&text, &series), Some("0"), "{series}\n{text}");
        }
        let mut codes = 0;
        for code in nack_code_labels() {
            for dir in ["tx", "rx"] {
                let series = format!("uet_pds_{dir}_nacks_total{{code=\"{code}\",worker=\"0\"}}");
                assert_eq!(value(&text, &series), Some("0"), "{series}");
            }
            codes += 1;
        }
        // 28 assigned codes (UET 1.0, docs/protocol-notes.md §2.9) and `unknown`.
        assert_eq!(codes, 29);
        for result in ["ok", "failed"] {
            let series = format!("uet_ses_ops_total{{result=\"{result}\",worker=\"0\"}}");
            assert_eq!(value(&text, &series), Some("0"), "{series}");
        }
        assert_eq!(
            value(&text, "uet_worker_loop_iterations_total{worker=\"0\"}"),
            Some("0")
        );
        assert_eq!(
            value(&text, "uet_ccc_destinations{worker=\"0\"}"),
            Some("0")
        );
    }

    /// What `promtool check metrics` (2.42) takes for abbreviated units.
    const ABBREVIATED_UNITS: &[&str] = &[
        "s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d",
    ];

    #[test]
    fn counters_end_in_total_and_every_family_has_help_and_type() {
        let mut s = WorkerStats {
            xsk: Some(crate::xsk::XskCounters::default()),
            udp: Some(crate::udp::UdpOffloadCounts::default()),
            rccc_receiver: Some(uet_cms::rccc::RcccReceiverStats::default()),
            rccc_rate_ppm: Some((990_000, 1_000_000)),
            ..WorkerStats::default()
        };
        s.cccs.push(CccSnapshot {
            dst: IpAddr::from([10, 0, 0, 2]),
            cwnd: 1,
            inflight: 2,
            backlog: 3,
            credit: Some(4),
            round_trip: None,
        });
        let text = encode(&to_json(&[s], Some(&NeighCounts::default())));
        let (mut helps, mut types) = (Vec::new(), Vec::new());
        for l in text.lines() {
            if let Some(h) = l.strip_prefix("# HELP ") {
                helps.push(h.split(' ').next().unwrap());
            } else if let Some(t) = l.strip_prefix("# TYPE ") {
                let (name, kind) = t.split_once(' ').unwrap();
                assert_eq!(kind == "counter", name.ends_with("_total"), "{l}");
                // promtool's lint refuses abbreviated units as name parts.
                for part in name.split('_') {
                    assert!(
                        !ABBREVIATED_UNITS.contains(&part),
                        "{name}: `{part}` reads as a unit"
                    );
                }
                assert!(matches!(kind, "counter" | "gauge"), "{l}");
                types.push(name);
            }
        }
        assert_eq!(helps, types);
        for (series, _) in samples(&text) {
            let name = series.split('{').next().unwrap();
            assert!(name.starts_with("uet_"), "{series}");
            assert!(types.contains(&name), "{series} has no TYPE line");
        }
        for family in [
            "uet_xsk_rx_ring_full_total",
            "uet_udp_gso_datagrams_total",
            "uet_neigh_destinations",
            "uet_ccc_cwnd_bytes",
            "uet_ccc_credit_bytes",
        ] {
            assert!(types.contains(&family), "{family}");
        }
    }

    #[test]
    fn the_values_are_the_counters() {
        let mut s = WorkerStats::default();
        s.pds.tx_data = 7;
        s.pds.tx_retransmits = 2;
        s.pds.drop(DropReason::OutOfWindow);
        s.pds.drop(DropReason::OutOfWindow);
        s.pds.tx_nack_codes.count(NackCode::PsnOorWindow.code());
        // Two reserved codes: both count as `unknown`.
        s.pds.rx_nack_codes.count(0x00);
        s.pds.rx_nack_codes.count(0x0c);
        s.ses.ops_ok = 3;
        s.ses.ops_failed = 1;
        s.io.rx_bytes = 1 << 40;
        s.iterations = 99;
        s.rccc_receiver = Some(uet_cms::rccc::RcccReceiverStats {
            outstanding_limited: 6,
            granted_bytes: 3000,
            late_bytes: 700,
            ecn_slowed_bytes: 250,
            ..Default::default()
        });
        s.rccc_rate_ppm = Some((1_000_000, 975_000));
        s.cccs = vec![
            CccSnapshot {
                dst: IpAddr::from([10, 0, 0, 2]),
                cwnd: 65536,
                inflight: -5,
                backlog: 0,
                credit: None,
                round_trip: Some(uet_pds::PdcRoundTrip {
                    peer: IpAddr::from([10, 0, 0, 2]),
                    srtt: Duration::from_micros(120),
                    rttvar: Duration::from_micros(30),
                    rto: Duration::from_millis(5),
                }),
            },
            CccSnapshot {
                dst: "fd00::3".parse().unwrap(),
                cwnd: 1,
                inflight: 2,
                backlog: 3,
                credit: Some(4096),
                round_trip: None,
            },
        ];
        let other = WorkerStats {
            sleeps: 5,
            ..WorkerStats::default()
        };
        let t = encode(&to_json(&[s, other], None));
        for (series, v) in [
            ("uet_pds_tx_data_total{worker=\"0\"}", "7"),
            ("uet_pds_tx_retransmits_total{worker=\"0\"}", "2"),
            (
                "uet_pds_drops_total{reason=\"out_of_window\",worker=\"0\"}",
                "2",
            ),
            (
                "uet_pds_drops_total{reason=\"out_of_window\",worker=\"1\"}",
                "0",
            ),
            (
                "uet_pds_tx_nacks_total{code=\"psn_oor_window\",worker=\"0\"}",
                "1",
            ),
            ("uet_pds_rx_nacks_total{code=\"unknown\",worker=\"0\"}", "2"),
            ("uet_ses_ops_total{result=\"ok\",worker=\"0\"}", "3"),
            ("uet_ses_ops_total{result=\"failed\",worker=\"0\"}", "1"),
            ("uet_io_rx_bytes_total{worker=\"0\"}", "1099511627776"),
            ("uet_worker_loop_iterations_total{worker=\"0\"}", "99"),
            ("uet_worker_loop_sleeps_total{worker=\"1\"}", "5"),
            ("uet_rccc_outstanding_limited_total{worker=\"0\"}", "6"),
            ("uet_rccc_granted_bytes_total{worker=\"0\"}", "3000"),
            ("uet_rccc_late_bytes_total{worker=\"0\"}", "700"),
            ("uet_rccc_ecn_slowed_bytes_total{worker=\"0\"}", "250"),
            ("uet_rccc_pacing_ppm{worker=\"0\"}", "1000000"),
            ("uet_rccc_ecn_rate_ppm{worker=\"0\"}", "975000"),
            // A worker without a pacer reads as 0.
            ("uet_rccc_granted_bytes_total{worker=\"1\"}", "0"),
            ("uet_ccc_destinations{worker=\"0\"}", "2"),
            (
                "uet_ccc_cwnd_bytes{peer=\"10.0.0.2\",worker=\"0\"}",
                "65536",
            ),
            (
                "uet_ccc_inflight_bytes{peer=\"10.0.0.2\",worker=\"0\"}",
                "-5",
            ),
            ("uet_ccc_backlog_bytes{peer=\"fd00::3\",worker=\"0\"}", "3"),
            (
                "uet_ccc_credit_bytes{peer=\"fd00::3\",worker=\"0\"}",
                "4096",
            ),
            (
                "uet_ccc_srtt_seconds{peer=\"10.0.0.2\",worker=\"0\"}",
                "0.00012",
            ),
            (
                "uet_ccc_rttvar_seconds{peer=\"10.0.0.2\",worker=\"0\"}",
                "0.00003",
            ),
            (
                "uet_ccc_rto_seconds{peer=\"10.0.0.2\",worker=\"0\"}",
                "0.005",
            ),
        ] {
            assert_eq!(value(&t, series), Some(v), "{series}\n{t}");
        }
        // No round-trip sample towards fd00::3 yet: no series.
        assert_eq!(
            value(&t, "uet_ccc_rto_seconds{peer=\"fd00::3\",worker=\"0\"}"),
            None
        );
        // No RCCC towards 10.0.0.2: no credit series for it.
        assert_eq!(
            value(&t, "uet_ccc_credit_bytes{peer=\"10.0.0.2\",worker=\"0\"}"),
            None
        );
        // The udp backend has neither AF_XDP sockets nor a resolver.
        assert!(!t.contains("uet_xsk_"));
        assert!(!t.contains("uet_neigh_"));
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            t.lines().any(|l| l.starts_with("uet_build_info{")
                && l.contains(&format!("version=\"{version}\""))
                && l.ends_with(" 1")),
            "{t}"
        );
    }

    #[test]
    fn the_document_sent_over_the_socket_encodes_to_the_same_text() {
        let mut s = WorkerStats::default();
        s.pds.rx_data = 12;
        s.cccs.push(CccSnapshot {
            dst: IpAddr::from([10, 9, 0, 1]),
            cwnd: 10,
            inflight: 20,
            backlog: 30,
            credit: Some(-40),
            round_trip: None,
        });
        let n = NeighCounts {
            destinations: 3,
            ..NeighCounts::default()
        };
        let doc = to_json(&[s], Some(&n));
        let sent: Value = serde_json::from_str(&doc.to_string()).unwrap();
        assert_eq!(encode(&doc), encode(&sent));
    }

    #[test]
    fn a_document_missing_fields_reads_as_zeros() {
        let t = encode(&json!({ "workers": [ { "worker": 0 } ] }));
        assert_eq!(value(&t, "uet_pds_tx_data_total{worker=\"0\"}"), Some("0"));
        assert_eq!(
            value(&t, "uet_pds_drops_total{reason=\"malformed\",worker=\"0\"}"),
            Some("0")
        );
        assert_eq!(
            value(
                &t,
                "uet_build_info{profile=\"unknown\",version=\"unknown\"}"
            ),
            Some("1")
        );
        // Not even workers: the build alone.
        let t = encode(&json!({}));
        assert_eq!(samples(&t).len(), 1, "{t}");
    }

    /// Sends `request` to `addr` and returns everything answered before the
    /// server closed (a 5 s bound).
    fn http(addr: SocketAddr, request: &[u8]) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(request).unwrap();
        let mut out = Vec::new();
        c.read_to_end(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn server(limits: ServerLimits) -> MetricsServer {
        MetricsListener::bind("127.0.0.1:0".parse().unwrap())
            .unwrap()
            .serve(limits, || "uet_test_total 1\n".to_owned())
            .unwrap()
    }

    #[test]
    fn metrics_is_served_and_everything_else_refused() {
        let s = server(ServerLimits::default());
        let a = s.local_addr();
        let ok = http(a, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains(&format!("Content-Type: {CONTENT_TYPE}\r\n")),
            "{ok}"
        );
        assert!(ok.contains("Content-Length: 17\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\nuet_test_total 1\n"), "{ok}");
        let q = http(a, b"GET /metrics?name[]=x HTTP/1.0\r\n\r\n");
        assert!(q.starts_with("HTTP/1.1 200 OK"), "{q}");
        let head = http(a, b"HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(
            head.starts_with("HTTP/1.1 200 OK") && head.ends_with("\r\n\r\n"),
            "{head}"
        );
        for (req, status) in [
            (&b"GET / HTTP/1.1\r\n\r\n"[..], "404"),
            (b"GET /metricsx HTTP/1.1\r\n\r\n", "404"),
            (b"POST /metrics HTTP/1.1\r\n\r\n", "405"),
            (b"GET /metrics\r\n\r\n", "400"),
            (b"\x00\xff garbage\r\n\r\n", "400"),
            (b"GET /metrics SPDY/3\r\n\r\n", "400"),
        ] {
            let r = http(a, req);
            assert!(
                r.starts_with(&format!("HTTP/1.1 {status} ")),
                "{req:?}: {r}"
            );
        }
    }

    #[test]
    fn an_oversized_request_is_refused_and_the_next_one_served() {
        let s = server(ServerLimits::default());
        let mut big = b"GET /metrics HTTP/1.1\r\n".to_vec();
        big.extend(std::iter::repeat_n(b'a', 20_000));
        let r = http(s.local_addr(), &big);
        assert!(r.starts_with("HTTP/1.1 431 "), "{r}");
        let ok = http(s.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
    }

    #[test]
    fn a_silent_client_is_cut_off_at_the_deadline_and_holds_up_no_one() {
        let deadline = Duration::from_millis(500);
        let s = server(ServerLimits {
            deadline,
            ..ServerLimits::default()
        });
        let t0 = Instant::now();
        let mut silent = TcpStream::connect(s.local_addr()).unwrap();
        // Meanwhile another client is answered at once.
        let ok = http(s.local_addr(), b"GET /metrics HTTP/1.1\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        assert!(t0.elapsed() < deadline, "{:?}", t0.elapsed());
        // The silent one is closed once its deadline has passed.
        silent
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut b = [0u8; 16];
        let n = silent.read(&mut b).expect("closed, not timed out");
        assert_eq!(n, 0);
        let took = t0.elapsed();
        assert!(
            took >= deadline && took < Duration::from_secs(5),
            "{took:?}"
        );
    }

    #[test]
    fn connections_past_the_limit_are_answered_busy_and_slots_come_back() {
        let s = server(ServerLimits {
            max_connections: 2,
            ..ServerLimits::default()
        });
        let a = s.local_addr();
        let silent: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(a).unwrap()).collect();
        // Once the server has taken both, a third client finds it busy.
        let until = Instant::now() + Duration::from_secs(4);
        loop {
            let r = http(a, b"GET /metrics HTTP/1.1\r\n\r\n");
            if r.starts_with("HTTP/1.1 503 ") {
                break;
            }
            assert!(r.starts_with("HTTP/1.1 200 "), "{r}");
            assert!(Instant::now() < until, "never busy with two silent clients");
        }
        drop(silent);
        let until = Instant::now() + Duration::from_secs(4);
        loop {
            let r = http(a, b"GET /metrics HTTP/1.1\r\n\r\n");
            if r.starts_with("HTTP/1.1 200 ") {
                break;
            }
            assert!(Instant::now() < until, "the slots never came back: {r}");
        }
    }

    #[test]
    fn dropping_the_server_closes_its_socket() {
        let s = server(ServerLimits::default());
        let a = s.local_addr();
        drop(s);
        assert!(TcpStream::connect(a).is_err());
    }
}
