//! `uetd`'s flags reach its configuration: each bad value is refused with
//! the configuration's own error, before anything starts (a flag parsed
//! and then ignored would leave, say, a calibrated RTO_INIT_TIME without
//! effect). No address is given, so a flag that is ignored fails later, with "give an interface or an
//! address", and the daemon never starts.

use std::process::Command;

fn refused(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_uetd"))
        .args(args)
        .output()
        .expect("running uetd");
    assert!(!out.status.success(), "{args:?} accepted");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn each_flag_reaches_the_configuration() {
    for (args, error) in [
        (&["--rto-init-us", "50"][..], "rto_init_us must be"),
        (&["--rto-silent-us", "50"][..], "rto_silent_us must be"),
        (&["--mp-range", "100"][..], "mp_range must be"),
        (&["--window", "1KiB"][..], "window must be"),
        (&["--workers", "0"][..], "workers must be"),
        (&["--frame-size", "3000"][..], "frame_size must be"),
        (
            &["--base-rtt-us", "5"][..],
            "give an interface or an address",
        ),
    ] {
        let err = refused(args);
        assert!(err.contains(error), "{args:?}: {err}");
    }
}

/// Flags complete a configuration file before it is checked: a file
/// without an address, with the address and a bad `--mp-range` as flags,
/// is refused for the range, not for the missing address.
#[test]
fn flags_complete_the_file_before_the_check() {
    let dir = std::env::temp_dir().join(format!("uetd-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("uetd.toml");
    std::fs::write(&file, "busy_poll_us = 100\nbackend = \"udp\"\n").unwrap();
    let err = refused(&[
        "--config",
        file.to_str().unwrap(),
        "--address",
        "127.0.0.1",
        "--mp-range",
        "100",
    ]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(err.contains("mp_range must be"), "{err}");
    assert!(!err.contains("give an interface or an address"), "{err}");
}
