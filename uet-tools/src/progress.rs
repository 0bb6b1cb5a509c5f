//! Progress bars (indicatif) for long transfers and lab runs, drawn on
//! stderr only when it is a terminal: piped or redirected, stderr gets
//! nothing from them, so logs and scripts see the same lines as before.

use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often a bar redraws by itself (its elapsed time and rate move even
/// while no step completes).
const TICK: Duration = Duration::from_millis(200);

const BYTES: &str =
    "{prefix:>6} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} {eta} left";
const STEPS: &str = "{prefix:>6} [{bar:30}] {pos}/{len} {elapsed_precise} {wide_msg}";
const SPINNER: &str = "{prefix:>6} {spinner} {elapsed_precise} {wide_msg}";

/// Whether bars are drawn: stderr is a terminal.
#[must_use]
pub fn enabled() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar over `total` bytes, `what` before it ("write", "read"): bytes
/// done, rate and time left.
#[must_use]
pub fn bytes(total: u64, what: &str) -> ProgressBar {
    bar(total, what, BYTES)
}

/// A bar over `total` steps of a lab run ("calibrate", "incast"), each
/// step named by the message set with [`ProgressBar::set_message`].
#[must_use]
pub fn steps(total: u64, what: &str) -> ProgressBar {
    bar(total, what, STEPS)
}

/// A spinner for a step of unknown length (a timed run), its message what
/// is being done.
#[must_use]
pub fn spinner(what: &str) -> ProgressBar {
    if !enabled() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    pb.set_style(ProgressStyle::with_template(SPINNER).expect("the template is valid"));
    pb.set_prefix(what.to_owned());
    pb.enable_steady_tick(TICK);
    pb
}

fn bar(total: u64, what: &str, template: &str) -> ProgressBar {
    if !enabled() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template(template)
            .expect("the template is valid")
            .progress_chars("=> "),
    );
    pb.set_prefix(what.to_owned());
    pb.enable_steady_tick(TICK);
    pb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_templates_parse_and_bars_are_hidden_off_a_terminal() {
        // Under `cargo test` stderr is captured, not a terminal.
        for pb in [bytes(10, "write"), steps(3, "incast"), spinner("perf")] {
            assert_eq!(pb.is_hidden(), !enabled());
            pb.inc(1);
            pb.finish_and_clear();
        }
        for t in [BYTES, STEPS, SPINNER] {
            ProgressStyle::with_template(t).unwrap();
        }
    }
}
