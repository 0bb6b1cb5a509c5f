//! The files of an incast invocation: `results.json` (the whole
//! [`Report`]), `results.csv` (one row per run: its key and every
//! [`Metrics`] field) and `report.md` (set-up, calibration and its checks,
//! the `docs/congestion-evaluation.md` metrics per (N, size) group as median (p90, max) over
//! seeds, the target checks with their margins, a none vs RCCC vs NSCC
//! comparison written from the numbers, and the figures of
//! [`super::plot`]). One invocation of `--senders N --size S` and a sweep
//! produce the same files; a sweep has more groups.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

use super::metrics::{
    Stat, Summary, TargetCheck, check_calibration, check_targets, size_label, summarize,
};
use super::model::{Metrics, Report};
use super::plot;

/// Writes `results.json`, `results.csv` and `report.md` into `dir`
/// (created if needed); returns their paths. `report.md` links the figures
/// [`plot::figures`] writes into the same directory (by their planned
/// names, so the order of the two calls does not matter).
pub fn write(dir: &Path, report: &Report) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(Error::io(format!("creating {}", dir.display())))?;
    let json =
        serde_json::to_string_pretty(report).map_err(Error::json("encoding results.json"))?;
    let files = [
        ("results.json", json + "\n"),
        ("results.csv", csv(report)),
        ("report.md", markdown(report)),
    ];
    let mut out = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(Error::io(format!("writing {}", path.display())))?;
        out.push(path);
    }
    Ok(out)
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

/// A CSV column: its name and its value for one run.
type MetricColumn = (&'static str, fn(&Metrics) -> String);

/// The CSV columns after cc, senders, size and seed: one per [`Metrics`]
/// field, named as in `results.json`.
const METRIC_COLUMNS: &[MetricColumn] = &[
    ("ict_ns", |m| m.ict_ns.to_string()),
    ("ideal_ns", |m| m.ideal_ns.to_string()),
    ("ict_over_ideal", |m| m.ict_over_ideal.to_string()),
    ("spread", |m| m.spread.to_string()),
    ("jain", |m| m.jain.to_string()),
    ("jain_windowed", |m| opt(m.jain_windowed)),
    ("jain_window_ns", |m| m.jain_window_ns.to_string()),
    ("drops", |m| m.drops.to_string()),
    ("drops_after_first_rtt", |m| {
        m.drops_after_first_rtt.to_string()
    }),
    ("trimmed", |m| m.trimmed.to_string()),
    ("trimmed_after_first_rtt", |m| {
        m.trimmed_after_first_rtt.to_string()
    }),
    ("virtual_overflows", |m| m.virtual_overflows.to_string()),
    ("retransmits_per_packet", |m| {
        m.retransmits_per_packet.to_string()
    }),
    ("rtos", |m| m.rtos.to_string()),
    ("peak_queue_bytes", |m| m.peak_queue_bytes.to_string()),
    ("steady_queue_p50_bytes", |m| {
        m.steady_queue_p50_bytes.to_string()
    }),
    ("steady_queue_p99_bytes", |m| {
        m.steady_queue_p99_bytes.to_string()
    }),
    ("steady_delay_p50_ns", |m| m.steady_delay_p50_ns.to_string()),
    ("utilisation", |m| m.utilisation.to_string()),
    ("acks_per_data", |m| m.acks_per_data.to_string()),
    ("ce_per_data", |m| m.ce_per_data.to_string()),
    ("victim_cif_avg", |m| opt(m.victim_cif_avg)),
    ("victim_cif_p99", |m| opt(m.victim_cif_p99)),
    ("victim_bw_cif", |m| opt(m.victim_bw_cif)),
    ("f_c", |m| opt(m.f_c)),
    ("failed_flows", |m| m.failed_flows.to_string()),
    ("cpu_busy", |m| m.cpu_busy.to_string()),
    ("cpu_steal", |m| m.cpu_steal.to_string()),
];

/// A CSV field, quoted when it needs to be (RFC 4180).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `results.csv`: a header and one row per run; absent optional values
/// are empty fields.
pub fn csv(report: &Report) -> String {
    let mut out = String::from("cc,senders,size,seed");
    for (name, _) in METRIC_COLUMNS {
        out.push(',');
        out.push_str(name);
    }
    out.push('\n');
    for r in &report.runs {
        let _ = write!(out, "{},{},{},{}", field(&r.cc), r.senders, r.size, r.seed);
        for (_, value) in METRIC_COLUMNS {
            out.push(',');
            out.push_str(&value(&r.metrics));
        }
        out.push('\n');
    }
    out
}

/// A number with `decimals`, without a fractional part when it is whole.
fn num(v: f64, decimals: usize) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.decimals$}")
    }
}

fn ratio(v: f64) -> String {
    format!("{v:.3}")
}

fn count(v: f64) -> String {
    num(v, 1)
}

fn kib(bytes: f64) -> String {
    format!("{:.1}", bytes / 1024.0)
}

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

fn ms(ns: f64) -> String {
    format!("{:.2}", ns / 1e6)
}

fn pct(v: f64) -> String {
    format!("{:.1} %", v * 100.0)
}

fn mbps(bps: f64) -> String {
    format!("{:.0} Mb/s", bps / 1e6)
}

/// "median (p90, max)", or the one value when they coincide.
fn cell(s: Stat, f: fn(f64) -> String) -> String {
    let (m, p, x) = (f(s.median), f(s.p90), f(s.max));
    if m == p && p == x {
        m
    } else {
        format!("{m} ({p}, {x})")
    }
}

fn opt_cell(s: Option<Stat>, f: fn(f64) -> String) -> String {
    s.map_or_else(|| "–".to_string(), |s| cell(s, f))
}

type Column = (&'static str, fn(&Summary) -> String);

/// The summary tables of a group (title, columns); a column whose every
/// cell is "–" (a metric no run had, e.g. the victim's without a victim)
/// is left out.
const SUMMARY_TABLES: &[(&str, &[Column])] = &[
    (
        "Completion and fairness",
        &[
            ("ICT (ms)", |s| cell(s.ict_ns, ms)),
            ("ICT/ideal", |s| cell(s.ict_over_ideal, ratio)),
            ("spread", |s| cell(s.spread, ratio)),
            ("Jain", |s| cell(s.jain, ratio)),
            ("Jain (windowed)", |s| opt_cell(s.jain_windowed, ratio)),
            ("utilisation", |s| cell(s.utilisation, pct)),
            ("CPUs busy", |s| cell(s.cpu_busy, pct)),
            ("of them stolen", |s| cell(s.cpu_steal, pct)),
            ("failed flows", |s| cell(s.failed_flows, count)),
        ],
    ),
    (
        "Queue and loss",
        &[
            ("drops", |s| cell(s.drops, count)),
            ("drops after 1st RTT", |s| {
                cell(s.drops_after_first_rtt, count)
            }),
            ("trimmed", |s| cell(s.trimmed, count)),
            ("trims after 1st RTT", |s| {
                cell(s.trimmed_after_first_rtt, count)
            }),
            ("buffer full at R (virtual)", |s| {
                cell(s.virtual_overflows, count)
            }),
            ("rtx/packet", |s| cell(s.retransmits_per_packet, ratio)),
            ("RTOs", |s| cell(s.rtos, count)),
            ("peak queue (KiB)", |s| cell(s.peak_queue_bytes, kib)),
            ("steady queue p50 (KiB)", |s| {
                cell(s.steady_queue_p50_bytes, kib)
            }),
            ("steady queue p99 (KiB)", |s| {
                cell(s.steady_queue_p99_bytes, kib)
            }),
            ("steady delay p50 (µs)", |s| {
                cell(s.steady_delay_p50_ns, us)
            }),
        ],
    ),
    (
        "Overhead and victim",
        &[
            ("ACKs/data", |s| cell(s.acks_per_data, ratio)),
            ("CE/data", |s| cell(s.ce_per_data, ratio)),
            ("victim CIF avg", |s| opt_cell(s.victim_cif_avg, ratio)),
            ("victim CIF p99", |s| opt_cell(s.victim_cif_p99, ratio)),
            ("victim BW CIF", |s| opt_cell(s.victim_bw_cif, ratio)),
            ("F_C", |s| opt_cell(s.f_c, ratio)),
        ],
    ),
];

/// `report.md`.
pub fn markdown(report: &Report) -> String {
    let summaries = summarize(&report.runs);
    let mut md = String::new();
    let _ = writeln!(md, "# `uet lab incast` report\n");
    let _ = writeln!(md, "```\n{}\n```\n", report.command);
    setup_section(&mut md, report);
    calibration_section(&mut md, report);
    results_section(&mut md, report, &summaries);
    let checks: Vec<TargetCheck> = summaries
        .iter()
        .flat_map(|s| check_targets(s, &report.setup, &report.calibration))
        .collect();
    targets_section(&mut md, report, &summaries, &checks);
    comparison_section(&mut md, &summaries);
    figures_section(&mut md, report);
    md
}

fn setup_section(md: &mut String, report: &Report) {
    let s = &report.setup;
    let c = &report.calibration;
    let bdp = c.bdp_bytes as f64;
    let in_bdp = |bytes: u64| {
        if bdp > 0.0 {
            format!(" ({:.2} BDP)", bytes as f64 / bdp)
        } else {
            String::new()
        }
    };
    // Whole data frames on the wire (payload and headers): at a low R the
    // 5 · BDP buffer holds only a few, which decides what a burst can do.
    let frame = (s.payload_per_packet + s.header_bytes_per_packet).max(1);
    let in_frames = |bytes: u64| {
        let frames = bytes as f64 / frame as f64;
        if bdp > 0.0 {
            format!(" ({:.2} BDP, {frames:.1} full frames)", bytes as f64 / bdp)
        } else {
            format!(" ({frames:.1} full frames)")
        }
    };
    let mut windows: Vec<u64> = report
        .runs
        .iter()
        .map(|r| r.metrics.jain_window_ns)
        .collect();
    windows.sort_unstable();
    windows.dedup();
    let t0 = c.t0.p50_ns as f64;
    let windows = windows
        .iter()
        .map(|&w| {
            if t0 > 0.0 {
                format!("{} µs ({:.0}·T0)", us(w as f64), w as f64 / t0)
            } else {
                format!("{} µs", us(w as f64))
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    let rows = [
        ("bottleneck rate R", mbps(s.bottleneck_bps as f64)),
        (
            "T0 (idle round trip through the bottleneck)",
            format!(
                "p50 {} µs{}, p99 {} µs, mean {} µs ({} samples)",
                us(t0),
                if c.t0_batch_p50_ns.len() > 1 {
                    format!(
                        " (the lowest of the batches' medians: {} µs)",
                        c.t0_batch_p50_ns
                            .iter()
                            .map(|&m| us(m as f64))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                } else {
                    String::new()
                },
                us(c.t0.p99_ns as f64),
                us(c.t0.mean_ns),
                c.t0.count
            ),
        ),
        ("BDP = R·T0", format!("{} B", c.bdp_bytes)),
        (
            "buffer (TBF limit)",
            format!("{} B{}", s.buffer_bytes, in_frames(s.buffer_bytes)),
        ),
        (
            "when the buffer is full",
            if s.trim {
                "trimmed to the headers and forwarded (the receiver NACKs it); the daemons run \
                 --trimming true"
            } else {
                "dropped (drop-tail)"
            }
            .to_string(),
        ),
        (
            "ECN Kmin / Kmax (virtual queue)",
            s.ecn.map_or_else(
                || "off".to_string(),
                |(lo, hi)| format!("{lo} B{} / {hi} B{}", in_bdp(lo), in_bdp(hi)),
            ),
        ),
        (
            "start jitter",
            if s.jitter_ns == 0 {
                "0 (synchronized)".to_string()
            } else {
                format!("U[0, {} µs]", us(s.jitter_ns as f64))
            },
        ),
        (
            "MTU / payload per packet / header bytes per packet",
            format!(
                "{} / {} / {}",
                s.mtu, s.payload_per_packet, s.header_bytes_per_packet
            ),
        ),
        ("bytes per write operation", size_label(s.chunk)),
        ("datapath", s.backend.clone()),
        (
            "daemons' base RTT (windows and credit cover it) / fabric RTT (NSCC's target delay) / RTO_INIT",
            format!(
                "{} µs / {} / {} µs",
                s.base_rtt_us,
                if s.fabric_rtt_us > 0 {
                    format!("{} µs", s.fabric_rtt_us)
                } else {
                    "the base RTT".to_owned()
                },
                s.rto_init_us
            ),
        ),
        (
            "RCCC receiver slows on ECN marks (`uetd --rccc-ecn-rate`)",
            if s.rccc_ecn_rate { "yes" } else { "no" }.to_string(),
        ),
        (
            "CPUs / 1-min load before",
            format!("{} / {:.2}", s.cpus, s.load_before),
        ),
        ("seeds per (mode, N, size)", s.seeds.to_string()),
        (
            "victim ping-pong",
            if s.victim { "yes" } else { "no" }.to_string(),
        ),
        ("windowed-Jain window", windows),
    ];
    let _ = writeln!(md, "## Set-up\n\n| | |\n|---|---|");
    for (k, v) in rows {
        let _ = writeln!(md, "| {k} | {v} |");
    }
    md.push('\n');
}

fn check_table(md: &mut String, checks: &[TargetCheck], with_subject: bool) {
    let _ = writeln!(
        md,
        "| {}metric | value | bound | result | margin |\n|{}---|---|---|---|---|",
        if with_subject { "subject | " } else { "" },
        if with_subject { "---|" } else { "" },
    );
    for c in checks {
        let _ = writeln!(
            md,
            "| {}{} | {} | {} | {} | {} |",
            if with_subject {
                format!("{} | ", c.subject)
            } else {
                String::new()
            },
            c.metric,
            c.show(c.value),
            c.bound.describe(|v| c.show(v)),
            c.verdict(),
            c.margin_text()
        );
    }
    md.push('\n');
}

fn calibration_section(md: &mut String, report: &Report) {
    let c = &report.calibration;
    let r = report.setup.bottleneck_bps as f64;
    let _ = writeln!(md, "## Calibration\n");
    let solo = c
        .solo_bps
        .iter()
        .enumerate()
        .map(|(i, &b)| format!("sender {}: {}", i + 1, mbps(b)))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(md, "- solo rate without the bottleneck: {solo}");
    if c.all_senders_bps > 0.0 {
        let _ = writeln!(
            md,
            "- every sender at once without the bottleneck, wire bytes: {}",
            mbps(c.all_senders_bps)
        );
    }
    for f in &c.fit_steps {
        let late = f.pacer_late.map_or(String::new(), |l| {
            format!(
                "; the receiver's pacer lost {} of its budget to late ticks",
                pct(l)
            )
        });
        let stolen = match f.steal {
            Some(st) if f.stolen() => format!(
                "; the host took {} of the machine's CPU time, over the {} allowed",
                pct(st),
                pct(super::model::STEAL_LIMIT)
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            md,
            "- every sender at once through the bottleneck with {}: {} of R = {} ({}){late}{stolen}",
            f.cc,
            mbps(f.filled_bps),
            mbps(f.bottleneck_bps as f64),
            pct(f.filled_bps / f.bottleneck_bps.max(1) as f64)
        );
    }
    let senders = c.solo_bps.len();
    if let Some(why) = c.lowered(report.setup.bottleneck_bps, senders) {
        let _ = writeln!(md, "- {why}");
    }
    let _ = writeln!(
        md,
        "- one flow through the bottleneck, wire bytes: {} ({} of R = {})",
        mbps(c.single_flow_bps),
        pct(c.single_flow_ratio),
        mbps(r)
    );
    if let Some(v) = &c.victim_isolated {
        let _ = writeln!(
            md,
            "- victim ping-pong without incast: p50 {} µs, p99 {} µs, {:.0} ops/s",
            us(v.p50_ns as f64),
            us(v.p99_ns as f64),
            v.ops_per_s
        );
    }
    md.push('\n');
    check_table(md, &check_calibration(&report.setup, c), true);
}

/// Groups of summaries with the same (senders, size), in order.
fn groups(summaries: &[Summary]) -> Vec<&[Summary]> {
    summaries
        .chunk_by(|a, b| (a.senders, a.size) == (b.senders, b.size))
        .collect()
}

fn results_section(md: &mut String, report: &Report, summaries: &[Summary]) {
    let _ = writeln!(md, "## Results\n");
    if report.runs.is_empty() {
        let _ = writeln!(md, "No runs.\n");
        return;
    }
    let _ = writeln!(
        md,
        "Every cell is median (p90, max) over the seeds, or one value where they coincide. \
         ICT* = ΣW/R + T0; steady = after 10·T0 until the last flow ends; drops are at the TBF.\n"
    );
    for g in groups(summaries) {
        let _ = writeln!(
            md,
            "### N = {}, S = {}\n",
            g[0].senders,
            size_label(g[0].size)
        );
        for (title, columns) in SUMMARY_TABLES {
            let cells: Vec<Vec<String>> = g
                .iter()
                .map(|s| columns.iter().map(|(_, f)| f(s)).collect())
                .collect();
            let shown: Vec<usize> = (0..columns.len())
                .filter(|&c| cells.iter().any(|row| row[c] != "–"))
                .collect();
            let _ = write!(md, "{title}:\n\n| mode | runs |");
            for &c in &shown {
                let _ = write!(md, " {} |", columns[c].0);
            }
            let _ = write!(md, "\n|---|---|");
            for _ in &shown {
                md.push_str("---|");
            }
            md.push('\n');
            for (s, row) in g.iter().zip(&cells) {
                let _ = write!(md, "| {} | {} |", s.cc, s.seeds.len());
                for &c in &shown {
                    let _ = write!(md, " {} |", row[c]);
                }
                md.push('\n');
            }
            md.push('\n');
        }
    }
}

fn targets_section(
    md: &mut String,
    report: &Report,
    summaries: &[Summary],
    checks: &[TargetCheck],
) {
    let _ = writeln!(md, "## Targets\n");
    let _ = writeln!(
        md,
        "Medians over seeds, where N ≤ 16 and S ≥ 256 KiB. RCCC: ICT ≤ 1.05 × ideal, spread ≤ 1.10, \
         Jain ≥ 0.99, no RTO, no drop after the first RTT, victim CIF p99 ≤ 2. NSCC: ICT ≤ 1.10 × \
         ideal, Jain ≥ 0.90, no RTO, steady queueing delay 0.5–2 × target_qdelay (the daemons' fabric RTT; \
         0.75 × it with a trimming bottleneck). none, nscc+rccc and pft are measured only.\n"
    );
    if checks.is_empty() {
        let _ = writeln!(md, "No group falls under the targets.\n");
        return;
    }
    check_table(md, checks, true);
    let missed = checks.iter().filter(|c| !c.pass).count();
    let _ = writeln!(
        md,
        "{} of {} checks pass.\n",
        checks.len() - missed,
        checks.len()
    );
    if missed > 0 {
        misses_context(md, report, summaries);
    }
}

/// Below this many full frames the report says how small the buffer is
/// beside the misses: the 5 · BDP default at a low R (at 200 Mb/s and a T0
/// of 60 µs it is five frames).
const SMALL_BUFFER_FRAMES: f64 = 10.0;

/// Measured facts that bear on missed targets (no guesses).
fn misses_context(md: &mut String, report: &Report, summaries: &[Summary]) {
    let s = &report.setup;
    let c = &report.calibration;
    let _ = writeln!(md, "What was measured beside the misses:\n");
    let _ = writeln!(
        md,
        "- machine: {} CPUs, 1-minute load {:.2} before the runs ({:.0} % of the CPUs busy)",
        s.cpus,
        s.load_before,
        if s.cpus > 0 {
            s.load_before / s.cpus as f64 * 100.0
        } else {
            0.0
        }
    );
    if c.t0.p50_ns > 0 {
        let _ = writeln!(
            md,
            "- idle round trip spread: T0 p99 / p50 = {:.2}, max {} µs (scheduling and timer jitter \
             of an idle path)",
            c.t0.p99_ns as f64 / c.t0.p50_ns as f64,
            us(c.t0.max_ns as f64)
        );
    }
    let frames =
        s.buffer_bytes as f64 / (s.payload_per_packet + s.header_bytes_per_packet).max(1) as f64;
    if s.buffer_bytes > 0 && frames < SMALL_BUFFER_FRAMES {
        let _ = writeln!(
            md,
            "- the buffer holds {frames:.1} full frames: a few packets sent at once fill it, so \
             drops after the first RTT measure its size as much as the control (`--buffer 32KiB` \
             is the floor docs/congestion-evaluation.md §3 compares with)"
        );
    }
    let calib_misses: Vec<TargetCheck> = check_calibration(s, c)
        .into_iter()
        .filter(|c| !c.pass)
        .collect();
    for m in &calib_misses {
        let _ = writeln!(
            md,
            "- calibration: {} {} {}",
            m.subject,
            m.metric,
            m.margin_text()
        );
    }
    for g in summaries
        .iter()
        .filter(|g| matches!(g.cc.as_str(), "rccc" | "nscc"))
    {
        if g.cpu_busy.median > 0.0 {
            // Steal counts as busy: a vCPU that wanted to run.
            let stolen = if g.cpu_steal.median > 0.0 {
                format!(
                    ", {} of the machine taken by the hypervisor",
                    pct(g.cpu_steal.median)
                )
            } else {
                String::new()
            };
            let _ = writeln!(
                md,
                "- {} N={} S={}: the CPUs were {} busy{stolen} while the bottleneck was {} \
                 utilised (medians over seeds)",
                g.cc,
                g.senders,
                size_label(g.size),
                pct(g.cpu_busy.median),
                pct(g.utilisation.median)
            );
        }
        if let Some((late, withheld, slowed)) = pacer_losses(report, g) {
            let _ = writeln!(
                md,
                "- {} N={} S={}: the receiver's pacer lost {} of its budget to ticks later than its \
                 catch-up (its worker waited for a CPU), the outstanding cap withheld {} and the \
                 ECN rate control held back {} (medians over seeds; `late_bytes`, \
                 `withheld_bytes`, `ecn_slowed_bytes` in docs/metrics.md)",
                g.cc,
                g.senders,
                size_label(g.size),
                pct(late),
                pct(withheld),
                pct(slowed)
            );
        }
        if g.failed_flows.max > 0.0 || g.rtos.max > 0.0 {
            let _ = writeln!(
                md,
                "- {} N={} S={}: up to {} RTOs and {} failed flows in a run",
                g.cc,
                g.senders,
                size_label(g.size),
                count(g.rtos.max),
                count(g.failed_flows.max)
            );
        }
    }
    md.push('\n');
}

/// The median shares of the RCCC receiver pacer's budget (granted, late,
/// withheld, unclaimed and slowed by ECN together) that were late,
/// withheld and slowed over the runs of group `g`; `None` where no run
/// counted a budget (no pacer, or results from before the counters).
fn pacer_losses(report: &Report, g: &Summary) -> Option<(f64, f64, f64)> {
    let shares: Vec<(f64, f64, f64)> = report
        .runs
        .iter()
        .filter(|r| r.cc == g.cc && r.senders == g.senders && r.size == g.size)
        .filter_map(|r| {
            let c = &r.receiver;
            (c.pacer_lost() > 0).then(|| {
                let t = c.pacer_budget() as f64;
                (
                    c.late_bytes as f64 / t,
                    c.withheld_bytes as f64 / t,
                    c.ecn_slowed_bytes as f64 / t,
                )
            })
        })
        .collect();
    let late = Stat::of(shares.iter().map(|s| s.0))?;
    let withheld = Stat::of(shares.iter().map(|s| s.1))?;
    let slowed = Stat::of(shares.iter().map(|s| s.2))?;
    Some((late.median, withheld.median, slowed.median))
}

/// "0.24× none" when none is non-zero.
fn versus(v: f64, none: f64) -> String {
    let r = v / none;
    if none <= 0.0 {
        String::new()
    } else if r >= 0.1 || v == 0.0 {
        format!(" ({}× none)", num(r, 2))
    } else {
        format!(" (1/{:.0} of none)", none / v)
    }
}

fn comparison_section(md: &mut String, summaries: &[Summary]) {
    let _ = writeln!(md, "## none vs RCCC vs NSCC\n");
    let mut any = false;
    // Per mode: per-group ratios to none of peak queue, and sums of drops.
    let mut overall: Vec<(String, Vec<f64>, f64, f64)> = Vec::new();
    for g in groups(summaries) {
        let Some(none) = g.iter().find(|s| s.cc == "none") else {
            continue;
        };
        let others: Vec<&Summary> = g.iter().filter(|s| s.cc != "none").collect();
        if others.is_empty() {
            continue;
        }
        any = true;
        let list = |f: &dyn Fn(&Summary) -> String| {
            std::iter::once(format!("none {}", f(none)))
                .chain(others.iter().map(|s| format!("{} {}", s.cc, f(s))))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let peak_none = none.peak_queue_bytes.median;
        let drops_none = none.drops.median;
        let _ = writeln!(
            md,
            "**N = {}, S = {}.** Peak queue: {}. Drops: {}. ICT/ideal: {}. Jain: {}. RTOs: {}.\n",
            none.senders,
            size_label(none.size),
            std::iter::once(format!("none {} KiB", kib(peak_none)))
                .chain(others.iter().map(|s| format!(
                    "{} {} KiB{}",
                    s.cc,
                    kib(s.peak_queue_bytes.median),
                    versus(s.peak_queue_bytes.median, peak_none)
                )))
                .collect::<Vec<_>>()
                .join(", "),
            std::iter::once(format!("none {}", count(drops_none)))
                .chain(others.iter().map(|s| format!(
                    "{} {}{}",
                    s.cc,
                    count(s.drops.median),
                    versus(s.drops.median, drops_none)
                )))
                .collect::<Vec<_>>()
                .join(", "),
            list(&|s| ratio(s.ict_over_ideal.median)),
            list(&|s| ratio(s.jain.median)),
            list(&|s| count(s.rtos.median)),
        );
        for s in &others {
            let entry = match overall.iter_mut().find(|o| o.0 == s.cc) {
                Some(e) => e,
                None => {
                    overall.push((s.cc.clone(), Vec::new(), 0.0, 0.0));
                    overall.last_mut().expect("just pushed")
                }
            };
            if peak_none > 0.0 && s.peak_queue_bytes.median > 0.0 {
                entry.1.push(s.peak_queue_bytes.median / peak_none);
            }
            entry.2 += s.drops.median;
            entry.3 += drops_none;
        }
    }
    if !any {
        let _ = writeln!(
            md,
            "No group has a `none` run beside a congestion-controlled one: the comparison needs \
             `--cc none` in the same invocation.\n"
        );
        return;
    }
    if groups(summaries).len() > 1 {
        let _ = writeln!(md, "Over all groups:\n");
        for (cc, ratios, drops, drops_none) in &overall {
            let geo = if ratios.is_empty() {
                "–".to_string()
            } else {
                let mean_ln = ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64;
                format!("{:.2}×", mean_ln.exp())
            };
            let _ = writeln!(
                md,
                "- {cc}: peak queue {geo} that of none (geometric mean over {} groups); \
                 drops {} against none's {} (sum of the group medians)",
                ratios.len(),
                count(*drops),
                count(*drops_none)
            );
        }
        md.push('\n');
    }
}

fn figures_section(md: &mut String, report: &Report) {
    let planned = plot::planned(report);
    if planned.is_empty() {
        return;
    }
    let _ = writeln!(md, "## Figures\n");
    for p in planned {
        let _ = writeln!(
            md,
            "![{caption}]({stem}.png)\n\n{caption} — [SVG]({stem}.svg)\n",
            caption = p.caption,
            stem = p.stem
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incast::metrics::compute;
    use crate::incast::metrics::tests::{TestDir, synthetic_report};

    fn all_modes() -> Report {
        synthetic_report(&["none", "nscc", "rccc", "nscc+rccc"], &[4], &[1 << 20], 3)
    }

    #[test]
    fn writes_json_csv_and_markdown() {
        let dir = TestDir::new("report-files");
        let report = all_modes();
        let files = write(dir.path(), &report).unwrap();
        let names: Vec<_> = files.iter().map(|p| p.file_name().unwrap()).collect();
        assert_eq!(names, ["results.json", "results.csv", "report.md"]);

        let json = std::fs::read_to_string(dir.path().join("results.json")).unwrap();
        let back: Report = serde_json::from_str(&json).unwrap();
        assert!(back == report, "results.json does not round-trip");

        let csv = std::fs::read_to_string(dir.path().join("results.csv")).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + report.runs.len());
        assert!(lines[0].starts_with("cc,senders,size,seed,ict_ns,ideal_ns,ict_over_ideal,"));
        let columns = lines[0].split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == columns));
        let rccc = lines
            .iter()
            .find(|l| l.starts_with("rccc,4,1048576,0,"))
            .unwrap();
        let m = &report.runs.iter().find(|r| r.cc == "rccc").unwrap().metrics;
        assert!(rccc.contains(&format!(",{},{},", m.ict_ns, m.ideal_ns)));

        let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
        assert!(md.contains(&report.command));
        assert!(md.contains("| bottleneck rate R | 1000 Mb/s |"));
        assert!(md.contains("| buffer (TBF limit) | 31250 B (5.00 BDP, 20.8 full frames) |"));
        assert!(md.contains("### N = 4, S = 1 MiB"));
        assert!(md.contains("| mode | runs | ICT (ms) | ICT/ideal | spread | Jain |"));
        assert!(md.contains("| mode | runs | drops | drops after 1st RTT |"));
        assert!(md.contains("| mode | runs | ACKs/data | CE/data | victim CIF avg |"));
        for cc in ["none", "nscc", "rccc", "nscc+rccc"] {
            assert!(md.contains(&format!("\n| {cc} | 3 |")), "{cc} row");
        }
    }

    #[test]
    fn the_rccc_pacers_lost_budget_is_named_beside_the_misses() {
        let mut report = all_modes();
        for (i, r) in report
            .runs
            .iter_mut()
            .filter(|r| r.cc == "rccc")
            .enumerate()
        {
            // Seeds late 10 %, 20 %, 30 %; withheld 5 % and slowed by ECN
            // 2 % each.
            let late = 10 * (i as u64 + 1);
            r.receiver.granted_bytes = 93 - late;
            r.receiver.late_bytes = late;
            r.receiver.withheld_bytes = 5;
            r.receiver.ecn_slowed_bytes = 2;
            r.metrics.rtos = 1;
        }
        let md = markdown(&report);
        assert!(
            md.contains(
                "the receiver's pacer lost 20.0 % of its budget to ticks later than its catch-up"
            ),
            "{md}"
        );
        assert!(md.contains("the outstanding cap withheld 5.0 %"), "{md}");
        assert!(md.contains("the ECN rate control held back 2.0 %"), "{md}");
        // One line, for the one RCCC group: NSCC has no pacer.
        assert_eq!(md.matches("the receiver's pacer lost").count(), 1, "{md}");
    }

    #[test]
    fn every_metrics_field_has_a_csv_column() {
        let json = serde_json::to_value(Metrics::default()).unwrap();
        let fields: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(fields.len(), METRIC_COLUMNS.len());
        for f in fields {
            assert!(
                METRIC_COLUMNS.iter().any(|(c, _)| c == f),
                "no column for {f}"
            );
        }
    }

    #[test]
    fn markdown_has_checks_with_verdicts_and_margins() {
        let mut report = all_modes();
        // One RCCC run with two RTOs in each seed: the RTO target misses.
        for r in report.runs.iter_mut().filter(|r| r.cc == "rccc") {
            r.metrics.rtos = 2;
        }
        let md = markdown(&report);
        assert!(
            md.contains("| sender 2 | solo rate without the bottleneck | 1200 Mb/s | ≥ 1500 Mb/s | MISS | missed by 300 Mb/s (20.0 %) |"),
            "{md}"
        );
        assert!(md.contains(
            "| sender 1 | solo rate without the bottleneck | 2000 Mb/s | ≥ 1500 Mb/s | PASS |"
        ));
        assert!(
            md.contains("| rccc N=4 S=1 MiB | RTOs | 2 | ≤ 0 | MISS | missed by 2 |"),
            "{md}"
        );
        assert!(md.contains("| rccc N=4 S=1 MiB | ICT/ideal |"));
        assert!(md.contains("| nscc N=4 S=1 MiB | steady queueing delay"));
        assert!(!md.contains("| none N=4"), "none is measured only");
        assert!(md.contains("checks pass."));
        assert!(md.contains("What was measured beside the misses:"));
        assert!(md.contains("- rccc N=4 S=1 MiB: up to 2 RTOs"));
    }

    #[test]
    fn a_buffer_of_few_frames_is_named_beside_the_misses() {
        let mut report = all_modes();
        for r in report.runs.iter_mut().filter(|r| r.cc == "rccc") {
            r.metrics.rtos = 2;
        }
        // 20.8 frames of 1,500 B: not named.
        assert!(!markdown(&report).contains("full frames: a few packets"));
        report.setup.buffer_bytes = 7_500;
        let md = markdown(&report);
        assert!(
            md.contains("- the buffer holds 5.0 full frames: a few packets sent at once fill it"),
            "{md}"
        );
    }

    #[test]
    fn comparison_paragraph_is_written_from_the_numbers() {
        let report = all_modes();
        let md = markdown(&report);
        let s = summarize(&report.runs);
        let none = s.iter().find(|s| s.cc == "none").unwrap();
        let rccc = s.iter().find(|s| s.cc == "rccc").unwrap();
        assert!(md.contains("## none vs RCCC vs NSCC"));
        let expected = format!(
            "rccc {} KiB ({:.2}× none)",
            kib(rccc.peak_queue_bytes.median),
            rccc.peak_queue_bytes.median / none.peak_queue_bytes.median
        );
        assert!(md.contains(&expected), "{expected} not in {md}");
        assert!(md.contains(&format!("Drops: none {}", count(none.drops.median))));
    }

    #[test]
    fn figures_are_linked_relatively() {
        let md = markdown(&all_modes());
        assert!(md.contains("](incast-rccc.png)"));
        assert!(md.contains("[SVG](incast-nscc-rccc.svg)"));
        assert!(md.contains("](compare.png)"));
        assert!(!md.contains("](/"), "links are relative");
    }

    #[test]
    fn a_sweep_gives_one_table_per_group_and_an_overall_comparison() {
        let report = synthetic_report(&["none", "rccc"], &[1, 2, 4], &[256 * 1024, 1 << 20], 1);
        let md = markdown(&report);
        assert_eq!(md.matches("\n### N = ").count(), 6);
        assert!(md.contains("### N = 2, S = 256 KiB"));
        assert!(md.contains("Over all groups:"));
        assert!(md.contains("- rccc: peak queue"));
        assert!(md.contains("ICT / ideal") || md.contains("ICT/ideal against N"));
    }

    #[test]
    fn an_empty_report_still_writes_its_files() {
        let dir = TestDir::new("report-empty");
        let mut report = all_modes();
        report.runs.clear();
        write(dir.path(), &report).unwrap();
        let csv = std::fs::read_to_string(dir.path().join("results.csv")).unwrap();
        assert_eq!(csv.lines().count(), 1);
        let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
        assert!(md.contains("No runs."));
        assert!(!md.contains("## Figures"));
    }

    #[test]
    fn metrics_no_run_has_get_no_column() {
        let mut report = all_modes();
        for r in &mut report.runs {
            r.victim = None;
            r.metrics = compute(r, &report.setup, &report.calibration);
        }
        let md = markdown(&report);
        assert!(
            md.contains("| mode | runs | ACKs/data | CE/data |\n"),
            "{md}"
        );
        assert!(!md.contains(" victim CIF avg |"));
        assert!(!md.contains(" F_C |"));
    }

    #[test]
    fn cells_show_one_value_when_the_seeds_agree() {
        let one = Stat::of([1.0]).unwrap();
        assert_eq!(cell(one, ratio), "1.000");
        let three = Stat::of([1.0, 1.2, 1.1]).unwrap();
        assert_eq!(cell(three, ratio), "1.100 (1.200, 1.200)");
        assert_eq!(opt_cell(None, ratio), "–");
        assert_eq!(field("a,b"), "\"a,b\"");
    }
}
