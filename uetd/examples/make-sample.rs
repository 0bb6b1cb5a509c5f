//! Writes the sample capture `samples/uet-sample.pcap` (see
//! `uetd::sample`): `cargo run -p uetd --example make-sample`.
//!
//! `uetd/tests/sample_pcap.rs` fails when the committed file differs from
//! what this writes; run this after changing the sample and commit the
//! result.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(uetd::sample::SAMPLE_PATH);
    let bytes = uetd::sample::pcap();
    match std::fs::write(&path, &bytes) {
        Ok(()) => {
            println!(
                "wrote {} ({} frames, {} bytes)",
                path.display(),
                uetd::sample::frames().len(),
                bytes.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("make-sample: cannot write {}: {e}", path.display());
            ExitCode::FAILURE
        }
    }
}
