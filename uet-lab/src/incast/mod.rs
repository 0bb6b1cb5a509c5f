//! `uet lab incast` (`docs/congestion-evaluation.md`): N hosts write into one receiver
//! through the lab's rate-limited switch port; calibrate, run the
//! synchronized incast per congestion-control mode and seed, derive the
//! metrics, write `results.json`, `results.csv`, `report.md` and the
//! figures.
//!
//! [`runner`] builds and calibrates the lab and runs the incasts,
//! [`model`] is what they record, [`metrics`] what is derived from it,
//! [`report`] and [`plot`] the files written.

pub mod metrics;
pub mod model;
pub mod plot;
pub mod report;
pub mod runner;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

pub use runner::{CC_MODES, IncastLab, IncastOpts};

/// Builds the lab, calibrates, runs every (cc, N, size, seed) of `opts`,
/// derives the metrics and writes the results, the report and the figures
/// into `out`; returns the report and the files written. `progress` sees
/// every run as it finishes.
pub fn run(
    opts: IncastOpts,
    out: &Path,
    command: &str,
    mut progress: impl FnMut(&model::Run),
) -> Result<(model::Report, Vec<PathBuf>)> {
    std::fs::create_dir_all(out).map_err(Error::io(format!("creating {}", out.display())))?;
    let ccs = opts.ccs.clone();
    let mut lab = IncastLab::up(opts)?;
    // The daemons' counters and logs go with the lab: keep them.
    let kept = |lab: &mut IncastLab, e: Error| {
        let saved = out.join("failed");
        match lab.lab().save_state(&saved) {
            Ok(()) => Error::Kept {
                error: Box::new(e),
                saved,
            },
            Err(_) => e,
        }
    };
    if let Err(e) = lab.calibrate_all() {
        return Err(kept(&mut lab, e));
    }
    let mut runs = Vec::new();
    for cc in &ccs {
        let done = match lab.runs(cc, &mut progress) {
            Ok(done) => done,
            Err(e) => return Err(kept(&mut lab, e)),
        };
        for mut r in done {
            r.metrics = metrics::compute(&r, &lab.setup, &lab.calibration);
            runs.push(r);
        }
    }
    let setup = lab.setup.clone();
    let calibration = lab.calibration.clone();
    drop(lab);
    for r in &mut runs {
        r.metrics = metrics::compute(r, &setup, &calibration);
    }
    metrics::fill_f_c(&mut runs, &calibration);
    let report = model::Report {
        command: command.to_owned(),
        setup,
        calibration,
        runs,
    };
    let mut files = report::write(out, &report)?;
    files.extend(plot::figures(out, &report)?);
    Ok((report, files))
}
