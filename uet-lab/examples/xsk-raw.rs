//! The raw AF_XDP ceiling: a blaster and a sink with no protocol in between
//! (`uet_tools::blast::xsk`), to report uetd's throughput beside.
//!
//! ```text
//! # self-contained: two namespaces, a veth pair, copy mode, 1500 B frames
//! cargo run --release -p uet-lab --example xsk-raw -- veth --size 1500 --secs 5
//! # or each half on an interface of your own (root, in its namespace)
//! cargo run --release -p uet-lab --example xsk-raw -- sink --iface v1 --secs 10
//! cargo run --release -p uet-lab --example xsk-raw -- blast --iface v0 \
//!     --src-ip 10.0.0.1 --dst-ip 10.0.0.2 --dst-mac 02:00:00:00:00:02 --secs 5
//! ```

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Result, anyhow};
use clap::{Args, Parser, Subcommand};
use uet_lab::netns::{NetNs, veth_pair};
use uet_tools::blast::xsk::{self as raw, BlastConfig, RawReport};
use uet_wire::inet::EthernetAddress;
use uetd::xsk::{XskConfig, XskMode};

#[derive(Parser, Debug)]
#[command(about = "Raw AF_XDP packets/s and Gb/s ceiling")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Build two namespaces joined by a veth pair and blast from one into
    /// the other (XDP steering program + AF_XDP sink on the receiving end).
    Veth(VethArgs),
    /// Send on an interface.
    Blast(BlastArgs),
    /// Attach the steering program to an interface and count what arrives.
    Sink(SinkArgs),
}

#[derive(Args, Debug, Clone)]
struct Common {
    /// Ethernet frame length in bytes (headers included, FCS excluded).
    #[arg(long, default_value_t = 1500)]
    size: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 5)]
    secs: u64,
    /// UDP destination port (the one the XDP program steers).
    #[arg(long, default_value_t = 4793)]
    port: u16,
    /// UMEM frame size (2048 or 4096).
    #[arg(long, default_value_t = 4096)]
    frame_size: u32,
    /// Bind mode: auto, copy or zc.
    #[arg(long, default_value = "auto", value_parser = parse_mode)]
    mode: XskMode,
}

#[derive(Args, Debug)]
struct VethArgs {
    #[command(flatten)]
    common: Common,
    /// veth MTU (default: enough for --size, at least 1500).
    #[arg(long)]
    mtu: Option<u32>,
}

#[derive(Args, Debug)]
struct BlastArgs {
    #[command(flatten)]
    common: Common,
    #[arg(long)]
    iface: String,
    #[arg(long, default_value_t = 0)]
    queue: u32,
    #[arg(long)]
    src_ip: IpAddr,
    #[arg(long)]
    dst_ip: IpAddr,
    #[arg(long, value_parser = parse_mac)]
    dst_mac: EthernetAddress,
}

#[derive(Args, Debug)]
struct SinkArgs {
    #[command(flatten)]
    common: Common,
    #[arg(long)]
    iface: String,
    /// Queues to listen on (comma separated).
    #[arg(long, default_value = "0", value_delimiter = ',')]
    queues: Vec<u32>,
}

fn parse_mode(s: &str) -> Result<XskMode, String> {
    match s {
        "auto" => Ok(XskMode::Auto),
        "copy" => Ok(XskMode::Copy),
        "zc" | "zerocopy" => Ok(XskMode::ZeroCopy),
        _ => Err(format!("unknown mode {s}")),
    }
}

fn parse_mac(s: &str) -> Result<EthernetAddress, String> {
    let mut b = [0u8; 6];
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("bad MAC {s}"));
    }
    for (d, p) in b.iter_mut().zip(parts) {
        *d = u8::from_str_radix(p, 16).map_err(|e| e.to_string())?;
    }
    Ok(EthernetAddress(b))
}

fn xsk_config(c: &Common, ifname: &str, queues: Vec<u32>) -> XskConfig {
    XskConfig {
        ifname: ifname.into(),
        queues,
        mode: c.mode,
        frame_size: c.frame_size,
        frame_count: 8192,
        ring_size: 2048,
        fill_size: 4096,
        // The ceiling: every chunk on its own, as a raw AF_XDP program runs.
        contiguous_chains: false,
        ..XskConfig::default()
    }
}

fn print(what: &str, size: usize, r: &RawReport) {
    println!(
        "{what:5} {size} B: {:>10} pkts in {:.3} s = {:.3} Mpps, {:.3} Gb/s ({}, kernel {:?})",
        r.packets,
        r.elapsed.as_secs_f64(),
        r.pps() / 1e6,
        r.gbps(),
        if r.zero_copy { "zero-copy" } else { "copy" },
        r.kernel,
    );
}

fn veth(args: &VethArgs) -> Result<()> {
    let c = args.common.clone();
    let mtu = args.mtu.unwrap_or_else(|| (c.size as u32 - 14).max(1500));
    let a = NetNs::create("uet-raw")?;
    let b = NetNs::create("uet-raw")?;
    veth_pair(&a, "r0", "10.78.0.1/24", &b, "r1", "10.78.0.2/24", mtu)?;
    let (tx, rx) = uet_lab::ceiling::veth_ceiling(
        &a,
        xsk_config(&c, "r0", vec![0]),
        "10.78.0.1".parse()?,
        &b,
        xsk_config(&c, "r1", vec![0]),
        "10.78.0.2".parse()?,
        c.size,
        Duration::from_secs(c.secs),
    )?;
    println!("veth pair, MTU {mtu}, frame size {}", c.frame_size);
    print("blast", c.size, &tx);
    print("sink", c.size, &rx);
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Veth(a) => veth(&a),
        Cmd::Blast(a) => {
            let stop = AtomicBool::new(false);
            let cfg = BlastConfig {
                xsk: xsk_config(&a.common, &a.iface, vec![a.queue]),
                dst_mac: a.dst_mac,
                src_ip: a.src_ip,
                dst_ip: a.dst_ip,
                udp_port: a.common.port,
                frame_len: a.common.size,
                batch: 64,
                count: None,
            };
            let r = std::thread::scope(|s| {
                let h = s.spawn(|| raw::blast(&cfg, &stop));
                std::thread::sleep(Duration::from_secs(a.common.secs));
                stop.store(true, Ordering::Relaxed);
                h.join()
            })
            .map_err(|_| anyhow!("blaster panicked"))??;
            print("blast", a.common.size, &r);
            Ok(())
        }
        Cmd::Sink(a) => {
            let stop = AtomicBool::new(false);
            let r = std::thread::scope(|s| {
                let h = s.spawn(|| {
                    raw::sink_on(
                        &xsk_config(&a.common, &a.iface, a.queues.clone()),
                        a.common.port,
                        &stop,
                        |_| {},
                    )
                });
                std::thread::sleep(Duration::from_secs(a.common.secs));
                stop.store(true, Ordering::Relaxed);
                h.join()
            })
            .map_err(|_| anyhow!("sink panicked"))??;
            print("sink", a.common.size, &r);
            Ok(())
        }
    }
}
