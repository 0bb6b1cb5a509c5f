//! Golden file: the committed `samples/uet-sample.pcap` is exactly what
//! `uet_tools::sample_pcap::pcap()` produces. When the sample changes on purpose,
//! regenerate it with `cargo run -p uet-tools --example make-sample` (or run this
//! test with `UET_BLESS=1`) and commit the new file.

use std::path::PathBuf;

fn committed() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(uet_tools::sample_pcap::SAMPLE_PATH)
}

#[test]
fn committed_sample_matches_the_generator() {
    let want = uet_tools::sample_pcap::pcap();
    let path = committed();
    if std::env::var_os("UET_BLESS").is_some() {
        std::fs::write(&path, &want).expect("write the sample");
        return;
    }
    let have =
        std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    assert!(
        have == want,
        "{} is stale ({} bytes, the generator makes {}): run \
         `cargo run -p uet-tools --example make-sample` and commit the file",
        path.display(),
        have.len(),
        want.len()
    );
}

#[test]
fn sample_is_an_ethernet_pcap_with_every_frame() {
    let bytes = std::fs::read(committed()).expect("the committed sample");
    let mut r = pcap_file::pcap::PcapReader::new(&bytes[..]).expect("a pcap file");
    assert_eq!(r.header().datalink, pcap_file::DataLink::ETHERNET);
    let frames = uet_tools::sample_pcap::frames();
    let mut n = 0;
    while let Some(p) = r.next_packet() {
        let p = p.expect("a whole record");
        assert_eq!(p.data.as_ref(), &frames[n][..], "frame {n}");
        assert_eq!(p.orig_len as usize, frames[n].len());
        n += 1;
    }
    assert_eq!(n, frames.len());
}
