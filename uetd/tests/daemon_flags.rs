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
