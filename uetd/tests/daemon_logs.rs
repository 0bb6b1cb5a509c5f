//! `uetd`'s log lines written to a pipe or a file are plain text: no ANSI
//! colour codes, which only a terminal can show.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use uet_lab::netns::NetNs;

#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let ns = NetNs::create("uet-log").unwrap();
    let socket = format!("/run/uet/test/{}.sock", ns.name());
    let mut child = ns
        .command(env!("CARGO_BIN_EXE_uetd"))
        .args(["--backend", "udp", "--address", "127.0.0.1"])
        .args(["--socket", &socket])
        .env("UET_LOG", "info")
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    let ready = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(l) if l.contains("control socket ready") => break l,
            Ok(l) => seen.push(l),
            Err(_) => {
                let _ = child.kill();
                panic!("no \"control socket ready\" log line within 30 s; saw {seen:?}");
            }
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    seen.push(ready);
    assert!(seen.iter().any(|l| l.contains("INFO")), "{seen:?}");
    for l in &seen {
        assert!(!l.contains('\x1b'), "a colour code in {l:?}");
    }
}
