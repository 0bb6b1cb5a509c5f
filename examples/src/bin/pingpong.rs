//! Ping-pong latency with small RMA writes: each side exposes a buffer;
//! the pinger writes a sequence number into the ponger's buffer with header
//! data, the ponger answers into the pinger's. Prints p50/p99/p99.9 of the
//! round trip.
//!
//! ```text
//! host B$ pingpong pong                       # prints its address
//! host A$ pingpong ping uet://… [COUNT] [SIZE]
//! ```
//!
//! `--socket PATH` names the daemon's control socket (default
//! `$UET_SOCKET`, else `/run/uet/uetd.sock`).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use uet_api::{Access, Client, Event, Status};
use uet_examples::socket_arg;

const T: Option<Duration> = Some(Duration::from_secs(10));

fn main() -> Result<()> {
    let (socket, args) = socket_arg(std::env::args())?;
    match args.get(1).map(String::as_str) {
        Some("pong") => pong(&socket),
        Some("ping") => {
            let to = args.get(2).context("ping ADDRESS [COUNT] [SIZE]")?;
            let count = args.get(3).map_or(Ok(1000), |s| s.parse())?;
            let size = args.get(4).map_or(Ok(64), |s| s.parse())?;
            ping(&socket, to, count, size)
        }
        _ => bail!(
            "usage: pingpong [--socket PATH] pong | pingpong [--socket PATH] ping ADDRESS [COUNT] [SIZE]"
        ),
    }
}

/// Answers every ping (a write whose header data carries the pinger's
/// address index) by writing back into the address the first ping names.
fn pong(socket: &Path) -> Result<()> {
    let mut c = Client::connect(socket, "pingpong pong")?;
    let inbox = c.create_region(1 << 20)?;
    let reg = c.register(&inbox, Access::REMOTE_WRITE, None)?;
    println!("{}", reg.remote);
    let local = c.register_local(&inbox)?;
    let mut reply_to: Option<uet_api::RemoteRegion> = None;
    loop {
        let Event::WriteArrived(w) = c.wait_event(None)? else {
            continue;
        };
        // The first write carries the pinger's address as text.
        if reply_to.is_none() {
            let mut buf = vec![0u8; w.len as usize];
            inbox.read_at(w.offset, &mut buf)?;
            reply_to = Some(
                String::from_utf8_lossy(&buf)
                    .trim_end_matches('\0')
                    .parse()?,
            );
            continue;
        }
        let Some(to) = reply_to else { continue };
        if w.header_data == u64::MAX {
            return Ok(());
        }
        let t = c.write(local.at(w.offset), to.at(0), w.len, Some(w.header_data))?;
        ok(c.wait_completion(t, T)?)?;
    }
}

fn ping(socket: &Path, to: &str, count: u32, size: u32) -> Result<()> {
    let to: uet_api::RemoteRegion = to.parse()?;
    let mut c = Client::connect(socket, "pingpong ping")?;
    let buf = c.create_region(1 << 20)?;
    let reg = c.register(&buf, Access::REMOTE_WRITE, None)?;
    let local = c.register_local(&buf)?;
    // Introduce ourselves: our address, as text.
    let me = reg.remote.to_string();
    buf.write_at(0, me.as_bytes())?;
    let t = c.write(local.at(0), to.at(0), me.len() as u32, Some(0))?;
    ok(c.wait_completion(t, T)?)?;
    let mut rtts = Vec::with_capacity(count as usize);
    for seq in 1..=u64::from(count) {
        let start = Instant::now();
        let t = c.write(local.at(0), to.at(0), size, Some(seq))?;
        let mut acked = false;
        let mut answered = false;
        while !(acked && answered) {
            match c.wait_event(T)? {
                Event::Completion(cmp) if cmp.tag == t => {
                    if cmp.status != Status::Ok {
                        bail!("ping failed: {cmp:?}");
                    }
                    acked = true;
                }
                Event::WriteArrived(w) if w.header_data == seq => answered = true,
                _ => {}
            }
        }
        rtts.push(start.elapsed());
    }
    let t = c.write(local.at(0), to.at(0), 1, Some(u64::MAX))?;
    ok(c.wait_completion(t, T)?)?;
    rtts.sort();
    let q = |f: f64| rtts[((rtts.len() - 1) as f64 * f) as usize].as_secs_f64() * 1e6;
    println!(
        r#"{{"pings":{count},"size":{size},"rtt_us":{{"p50":{:.1},"p99":{:.1},"p999":{:.1}}}}}"#,
        q(0.5),
        q(0.99),
        q(0.999)
    );
    Ok(())
}

fn ok(ev: Event) -> Result<()> {
    match ev {
        Event::Completion(c) if c.status == Status::Ok => Ok(()),
        other => bail!("write failed: {other:?}"),
    }
}
