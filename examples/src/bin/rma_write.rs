//! Expose a buffer on one host, write a file into it from another, verify.
//!
//! ```text
//! host B$ rma_write expose 64MiB            # prints uet://… and waits
//! host A$ rma_write send big.iso uet://…    # writes, the last write asks B to check
//! host B: {"received":…,"fnv1a":"…"}        # equals what A printed
//! ```

use std::time::Duration;

use anyhow::{Context, Result, bail};
use uet_api::{Access, Client, Event, Status};
use uet_examples::{fnv1a, socket};

/// Header data of the final write: "done, N bytes".
const DONE: u64 = 0xd0e << 52;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("expose") => expose(parse_size(args.get(2).context("expose SIZE")?)?),
        Some("send") => send(
            args.get(2).context("send FILE ADDRESS")?,
            args.get(3).context("send FILE ADDRESS")?,
        ),
        _ => bail!("usage: rma_write expose SIZE | rma_write send FILE ADDRESS"),
    }
}

fn parse_size(s: &str) -> Result<u64> {
    let (n, m) = match s.strip_suffix("MiB") {
        Some(n) => (n, 1 << 20),
        None => match s.strip_suffix("GiB") {
            Some(n) => (n, 1 << 30),
            None => (s, 1),
        },
    };
    Ok(n.parse::<u64>()? * m)
}

fn expose(size: u64) -> Result<()> {
    let mut c = Client::connect(socket(), "rma_write expose")?;
    let region = c.create_region(size)?;
    let reg = c.register(&region, Access::REMOTE_WRITE, None)?;
    println!("{}", reg.remote);
    loop {
        if let Event::WriteArrived(w) = c.wait_event(None)?
            && w.header_data >> 52 == DONE >> 52
        {
            let n = (w.header_data & ((1 << 52) - 1)).min(size) as usize;
            let mut buf = vec![0u8; n];
            region.read_at(0, &mut buf)?;
            println!(
                r#"{{"received":{n},"from":"{}","fnv1a":"{:016x}"}}"#,
                w.src_fep,
                fnv1a(&buf)
            );
            return Ok(());
        }
    }
}

fn send(file: &str, address: &str) -> Result<()> {
    let to: uet_api::RemoteRegion = address.parse().context("the address from `expose`")?;
    let data = std::fs::read(file)?;
    let len = data.len() as u64;
    let mut c = Client::connect(socket(), "rma_write send")?;
    let region = c.create_region(len.max(1))?;
    region.write_at(0, &data)?;
    let local = c.register_local(&region)?;
    let chunk: u64 = 1 << 20;
    let n = len.div_ceil(chunk).max(1);
    // All chunks but the last, then the last with "done" once they landed.
    let mut tags = Vec::new();
    for i in 0..n - 1 {
        tags.push(c.write(local.at(i * chunk), to.at(i * chunk), chunk as u32, None)?);
    }
    for t in tags {
        expect_ok(c.wait_completion(t, Some(Duration::from_secs(60)))?)?;
    }
    let off = (n - 1) * chunk;
    let last = c.write(
        local.at(off),
        to.at(off),
        (len - off) as u32,
        Some(DONE | len),
    )?;
    expect_ok(c.wait_completion(last, Some(Duration::from_secs(60)))?)?;
    println!(r#"{{"sent":{len},"fnv1a":"{:016x}"}}"#, fnv1a(&data));
    Ok(())
}

fn expect_ok(ev: Event) -> Result<()> {
    match ev {
        Event::Completion(c) if c.status == Status::Ok => Ok(()),
        other => bail!("write failed: {other:?}"),
    }
}
