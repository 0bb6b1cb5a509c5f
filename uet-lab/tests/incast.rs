//! `uet lab incast`, reduced to what CI can run: a real veth lab, four
//! senders × 1 MiB into one receiver through a TBF of at most 500 Mb/s
//! with a 5 × BDP buffer, every congestion-control mode, three seeds (the
//! bounds hold for the medians). The calibration lowers the bottleneck
//! below what the four senders feed together when a loaded two-core
//! machine cannot feed 500 Mb/s (there is no incast to control unless the
//! senders are faster than the bottleneck), and further while the four
//! with congestion control fill less than 95 % of it or the receiver's
//! RCCC pacer runs late; the daemons sleep when
//! idle instead of polling (five daemons share two CPUs). Bounds are the
//! looser ones a loaded two-core CI machine allows (its scheduler stalls
//! fire RTOs with nothing lost, so RTO counts are reported, not asserted);
//! the full sweep and its targets live in BENCHMARKS.md (`uet lab incast
//! --sweep`).

use std::sync::Mutex;

use uet_lab::incast::model::{FIT_RETRIES, Run};
use uet_lab::incast::{self, CC_MODES, IncastOpts};

/// One lab at a time: the tests of this file measure the machine's CPUs
/// and would measure each other.
static LAB: Mutex<()> = Mutex::new(());

/// What CI can run: four senders × 1 MiB through a bottleneck of at most
/// 500 Mb/s, in each of `ccs`, three seeds. The bounds hold for the
/// medians (as the targets are stated): one run on a loaded two-core
/// machine can stall a source long enough for its banked credit to
/// overflow the buffer, so a single run is no verdict.
fn reduced(ccs: Vec<String>) -> IncastOpts {
    IncastOpts {
        senders: vec![4],
        sizes: vec![1 << 20],
        ccs,
        seeds: 3,
        bottleneck: 500_000_000,
        ..IncastOpts::default()
    }
}

/// An empty temporary directory of this process for a report.
fn fresh_dir(name: &str) -> std::path::PathBuf {
    let out = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    out
}

/// The median over `cc`'s runs of one metric.
fn median(runs: &[Run], cc: &str, metric: impl Fn(&Run) -> f64) -> f64 {
    let mut v: Vec<f64> = runs.iter().filter(|r| r.cc == cc).map(metric).collect();
    assert!(!v.is_empty(), "no {cc} run");
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn a_reduced_incast_shows_rccc_and_nscc_controlling_the_bottleneck_and_writes_its_report() {
    let _lab = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let out = fresh_dir("uet-incast");
    let opts = reduced(CC_MODES.iter().map(|s| (*s).to_owned()).collect());
    let (report, files) = incast::run(opts, &out, "tests/incast.rs", |_| {}).unwrap();
    // What a failed bound prints: the setup and T0 the lab sized itself
    // from, then every run's metrics.
    let summary = serde_json::to_string_pretty(&(
        &report.setup,
        &report.calibration.t0,
        &report.calibration.t0_batch_p50_ns,
        report
            .runs
            .iter()
            .map(|r| (&r.cc, r.seed, &r.metrics))
            .collect::<Vec<_>>(),
    ))
    .unwrap();

    // The calibration found an incast: all four senders at once feed more
    // than the bottleneck (R was lowered below what they fed if need be),
    // and a sender alone is faster than it. The median of the four: each
    // is one 16 MiB write, which a host stall can slow below R on its own.
    let r = report.setup.bottleneck_bps as f64;
    assert!(r <= 500e6, "R = {r}");
    // And fitted with congestion control: every sender at once through
    // the bottleneck, R lowered while they filled less than 95 % of it
    // or the pacer ran late.
    let fit = &report.calibration.fit_steps;
    assert!(!fit.is_empty(), "no fit with congestion control");
    // R is no higher than any step's, but a last step that filled a
    // smaller share of a lower R sent it back to the one before.
    let sent_back = matches!(fit.as_slice(), [.., before, last] if last.worse_than(before));
    let kept = &fit[..fit.len() - usize::from(sent_back)];
    assert!(kept.iter().all(|f| f.bottleneck_bps as f64 >= r), "{fit:?}");
    // With RCCC each step read the receiver's pacer, and each step's
    // verdict (a short fill or a late pacer lowers R; a pass measures R
    // once more) set the next one's R, except that a step the host took
    // more than 5 % of the CPUs from is measured again at its R, once per
    // R and FIT_RETRIES times at most.
    assert!(fit.iter().all(|f| f.pacer_late.is_some()), "{fit:?}");
    let (mut retried_at, mut retries) = (None, 0);
    for w in fit.windows(2) {
        let next = if retries < FIT_RETRIES && w[0].measure_again(retried_at) {
            retried_at = Some(w[0].bottleneck_bps);
            retries += 1;
            w[0].bottleneck_bps
        } else {
            w[0].next_bottleneck().unwrap_or(w[0].bottleneck_bps)
        };
        assert_eq!(w[1].bottleneck_bps, next, "{fit:?}");
    }
    if sent_back {
        assert_eq!(r, fit[fit.len() - 2].bottleneck_bps as f64, "{fit:?}");
    }
    assert!(
        report.calibration.all_senders_bps > r,
        "all senders at once: {} b/s, R = {r}",
        report.calibration.all_senders_bps
    );
    let mut solo = report.calibration.solo_bps.clone();
    solo.sort_by(f64::total_cmp);
    assert!(
        solo[solo.len() / 2] > r,
        "senders alone: {solo:?} b/s, R = {r}"
    );
    assert_eq!(report.runs.len(), 3 * CC_MODES.len());
    for run in &report.runs {
        assert_eq!(run.flows.len(), 4);
        assert_eq!(run.metrics.failed_flows, 0, "{}: {summary}", run.cc);
        for f in &run.flows {
            assert_eq!(f.progress.last().map(|p| p.1), Some(1 << 20), "{}", run.cc);
        }
        assert!(run.metrics.ict_over_ideal >= 0.9, "{}: {summary}", run.cc);
    }

    let runs = &report.runs;
    // The samplers keep up (2 kHz; at least 0.5 kHz in the median run of
    // each mode): the median, because a host stall can starve the sampler
    // of one run along with its writers. A sampler that stopped gives ~0.
    for cc in CC_MODES {
        let rate = median(runs, cc, |r| {
            r.queue.len() as f64 / (r.metrics.ict_ns.max(1) as f64 / 1e6)
        });
        assert!(rate >= 0.5, "{cc}: {rate:.2} queue samples per ms");
    }
    let drops = |cc| median(runs, cc, |r| r.metrics.drops as f64);
    let rtx = |cc| median(runs, cc, |r| r.metrics.retransmits_per_packet);
    let jain = |cc| median(runs, cc, |r| r.metrics.jain);
    // Not "no RTO": on a two-vCPU CI machine the fixed RTO_INIT fires on
    // host stalls with nothing lost. What RCCC must not do is resend much.
    // cc-eval's bound is 0.05 retransmissions per packet; here 0.10, twice
    // it, and still about a twentieth of no control's. The buffer is
    // 5 × R·T0 while RCCC may keep 1.5 × R × (3 × T0) outstanding, so at a
    // small T0 (tens of µs: a few packets) any packet beyond the credit
    // overflows it, and when the machine is slow the TBF drains below R and
    // the queue sits at that bound; and seed 0's speculative first windows
    // (1.5 × R × 3·T0 each, four of them into 5 × R·T0), which cc-eval
    // allows, resend some on their own.
    assert!(rtx("rccc") <= 0.10, "RCCC resends little: {summary}");
    assert!(
        drops("rccc") <= drops("none"),
        "RCCC drops no more than no control: {summary}"
    );
    assert!(jain("rccc") >= 0.95, "RCCC is fair: {summary}");
    assert!(
        drops("nscc") <= drops("none"),
        "NSCC drops no more than no control: {summary}"
    );
    // NSCC resends a tenth of what no control resends at most. Its target
    // delay, window and the buffer all follow T0, and in invocations whose
    // T0 came out of a slow spell of the machine (every T0 batch's median
    // at 0.58–0.70 ms against 0.20–0.33 ms usually; 0.57–0.88 ms measured
    // in one batch of 400) NSCC resent 0.06–0.20 per packet against
    // 0.01–0.04 in the others, while no control resent 1.5–8.3 (2.7–3.4
    // beside NSCC's 0.18–0.19 in one CI run): a bound in absolute terms,
    // cc-eval's 0.05 or twice it, fails on such a run.
    assert!(
        rtx("nscc") <= rtx("none") / 10.0,
        "NSCC resends little: {summary}"
    );
    // NSCC on two shared vCPUs sits near or below its 0.90 Jain target at
    // N = 4 (its RTT samples carry milliseconds of scheduler jitter;
    // BENCHMARKS.md); this bound still fails when a flow starves (three
    // flows alone give 0.75, two of four at a tenth 0.60).
    assert!(jain("nscc") > 0.75, "NSCC starves no flow: {summary}");

    for name in [
        "results.json",
        "results.csv",
        "report.md",
        "compare.png",
        "compare.svg",
    ] {
        let p = out.join(name);
        assert!(files.contains(&p), "{name} not reported: {files:?}");
        assert!(
            std::fs::metadata(&p).unwrap().len() > 100,
            "{name} is empty"
        );
    }
    for cc in CC_MODES {
        let stem = format!("incast-{}", cc.replace('+', "-"));
        for ext in ["png", "svg"] {
            let p = out.join(format!("{stem}.{ext}"));
            assert!(p.exists(), "no {}", p.display());
        }
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for cc in CC_MODES {
        assert!(md.contains(cc), "report.md does not mention {cc}");
    }
    std::fs::remove_dir_all(&out).unwrap();
}

/// A victim's 64 B writes cross an RCCC incast into the same receiver, one
/// at a time. Its writes need credit from the receiver's pacer like the
/// senders' do, and the pacer grants the victim's share among theirs; a
/// grant that does not reach the victim leaves it waiting out its credit
/// timeouts, which double. That is what the bound catches: a daemon that
/// dropped grants riding in ACKs which acknowledged nothing new gave the
/// victim a p99 of 25-112 ms per run on this kind of machine, against about
/// 1 ms with the grants taken (BENCHMARKS.md, "Lab: incast", the victim).
/// The bound is the median over three seeds, far above the healthy runs:
/// a host stall delays one of a run's few hundred writes, not its p99.
#[test]
fn a_victim_crossing_an_rccc_incast_gets_its_credit() {
    let _lab = LAB.lock().unwrap_or_else(|e| e.into_inner());
    let out = fresh_dir("uet-incast-victim");
    let opts = IncastOpts {
        victim: true,
        ..reduced(vec!["rccc".to_owned()])
    };
    let (report, _) = incast::run(opts, &out, "tests/incast.rs", |_| {}).unwrap();
    let isolated = report
        .calibration
        .victim_isolated
        .as_ref()
        .expect("the victim alone was measured");
    assert!(isolated.count > 0, "{isolated:?}");
    let mut p99_ms = Vec::new();
    for run in &report.runs {
        assert_eq!(run.metrics.failed_flows, 0, "seed {}", run.seed);
        let victim = run.victim.as_ref().expect("a victim ran");
        // The run's CIFs divide by the victim alone just before it.
        let alone = victim.isolated.as_ref().expect("the victim alone, per run");
        assert_eq!(alone.count, 1000, "seed {}", run.seed);
        assert!(run.metrics.victim_cif_p99.is_some(), "seed {}", run.seed);
        let v = &victim.congested;
        // One write at a time while 4 MiB cross R: hundreds of them.
        assert!(v.count >= 10, "seed {}: {v:?}", run.seed);
        p99_ms.push(v.p99_ns as f64 / 1e6);
    }
    p99_ms.sort_by(f64::total_cmp);
    let median = p99_ms[p99_ms.len() / 2];
    assert!(
        median <= 20.0,
        "the victim's p99 under the incast, per seed: {p99_ms:?} ms"
    );
    std::fs::remove_dir_all(&out).unwrap();
}
