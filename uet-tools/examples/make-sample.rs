//! Writes the sample capture `samples/uet-sample.pcap` (see
//! `uet_tools::sample_pcap`): `cargo run -p uet-tools --example make-sample`.
//!
//! `uet-tools/tests/sample_pcap.rs` fails when the committed file differs from
//! what this writes; run this after changing the sample and commit the
//! result.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(uet_tools::sample_pcap::SAMPLE_PATH);
    let bytes = uet_tools::sample_pcap::pcap();
    match std::fs::write(&path, &bytes) {
        Ok(()) => {
            println!(
                "wrote {} ({} frames, {} bytes)",
                path.display(),
                uet_tools::sample_pcap::frames().len(),
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
