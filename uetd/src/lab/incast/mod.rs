//! `uet lab incast` (issue 7, `cc-eval.md`): N hosts write into one
//! receiver through the lab's rate-limited switch port; calibrate, run the
//! synchronized incast per congestion-control mode and seed, derive the
//! metrics, write `results.json`, `results.csv`, `report.md` and the
//! figures.

pub mod metrics;
pub mod model;
pub mod plot;
pub mod report;
