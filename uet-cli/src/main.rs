//! `uet`: the command-line tool of the uet stack.
//!
//! `uet decode` reads frames; `serve`, `write`, `read`, `perf`, `stats`
//! and `capture` talk to the local `uetd` through its control socket;
//! `lab` builds the veth lab and runs incasts on it.

mod args;
mod incast;
mod lab;
mod perf;

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Parser, Subcommand};
use uet_tools::{client, decode};
use uet_wire::Dscp;
use uet_wire::encap::EncapConfig;

#[derive(Parser, Debug)]
#[command(name = "uet", version, about = "Ultra Ethernet Transport tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Decode UET frames from hex or a pcap file, one line (or JSON object)
    /// per frame.
    Decode(DecodeArgs),
    /// Expose a buffer through the local uetd and print its address.
    Serve(ServeArgs),
    /// Write a file into a remote buffer (RMA write) and have it verified.
    Write(WriteArgs),
    /// Read a remote buffer into a file (RMA read).
    Read(ReadArgs),
    /// Bandwidth, message rate and latency of writes, reads or sends
    /// (perftest's ib_*_bw / ib_*_lat, iperf3-shaped JSON).
    Perf(perf::PerfArgs),
    /// The local daemon's counters (JSON, or Prometheus text).
    Stats(StatsArgs),
    /// Capture the UET frames the local daemon receives and sends into a
    /// pcap file (`uet decode --pcap` and Wireshark read it).
    Capture(CaptureArgs),
    /// Build, sample and remove veth labs; `uet lab demo` shows the stack.
    Lab {
        #[command(subcommand)]
        cmd: lab::LabCmd,
    },
}

#[derive(Args, Debug)]
struct SocketArg {
    /// The daemon's control socket (default $UET_SOCKET or
    /// /run/uet/uetd.sock).
    #[arg(long, global = true)]
    socket: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// Bytes to expose (e.g. 1GiB).
    #[arg(long, default_value = "1GiB")]
    size: uetd::config::Size,
    /// Exit after this many writes with header data.
    #[arg(long)]
    count: Option<u64>,
    #[command(flatten)]
    sock: SocketArg,
}

#[derive(Args, Debug)]
struct WriteArgs {
    /// The file to send.
    file: PathBuf,
    /// Where: uet://FEP/JOB/PID/RI/GEN/0xKEY (from `uet serve`).
    address: uet_api::RemoteRegion,
    /// Offset in the remote buffer.
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// Bytes per RMA write.
    #[arg(long, default_value = "1MiB")]
    chunk: uetd::config::Size,
    /// Writes in flight.
    #[arg(long, default_value_t = 16)]
    depth: usize,
    #[command(flatten)]
    sock: SocketArg,
}

#[derive(Args, Debug)]
struct ReadArgs {
    /// Where from: uet://FEP/JOB/PID/RI/GEN/0xKEY.
    address: uet_api::RemoteRegion,
    /// Bytes to read.
    #[arg(long)]
    len: uetd::config::Size,
    /// The file to write.
    file: PathBuf,
    /// Offset in the remote buffer.
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// Bytes per RMA read.
    #[arg(long, default_value = "1MiB")]
    chunk: uetd::config::Size,
    /// Reads in flight.
    #[arg(long, default_value_t = 16)]
    depth: usize,
    #[command(flatten)]
    sock: SocketArg,
}

#[derive(Args, Debug)]
struct StatsArgs {
    /// Prometheus text instead of JSON: what `uetd --metrics-addr` serves
    /// at /metrics (docs/metrics.md).
    #[arg(long)]
    prometheus: bool,
    #[command(flatten)]
    sock: SocketArg,
}

#[derive(Args, Debug)]
struct CaptureArgs {
    /// The pcap file to write.
    #[arg(long, value_name = "FILE.pcap")]
    out: PathBuf,
    /// Stop after this many frames.
    #[arg(long)]
    count: Option<u64>,
    /// Stop after this many seconds (default: --count, or Ctrl-C).
    #[arg(long)]
    seconds: Option<f64>,
    /// Bytes kept of each frame.
    #[arg(long, default_value_t = uet_api::MAX_SNAPLEN)]
    snaplen: u32,
    /// Which frames: rx, tx or both.
    #[arg(long, default_value = "both")]
    direction: uet_api::CaptureDirection,
    #[command(flatten)]
    sock: SocketArg,
}

#[derive(Args, Debug)]
struct DecodeArgs {
    /// A frame as hex, starting at the Ethernet header (spaces, colons and a
    /// 0x prefix are ignored). May be given several times.
    #[arg(long, value_name = "HEX")]
    hex: Vec<String>,
    /// A pcap file with Ethernet link type.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Print one JSON object per frame.
    #[arg(long)]
    json: bool,
    /// UDP destination port that carries UET.
    #[arg(long, default_value_t = uet_wire::encap::UET_UDP_PORT)]
    port: u16,
    /// IP protocol number of UET directly over IP.
    #[arg(long, default_value_t = uet_wire::encap::UET_IP_PROTOCOL)]
    ip_proto: u8,
    /// Frames end with the 4-byte CRC32C trailer.
    #[arg(long)]
    crc: bool,
    /// DSCP that marks a packet trimmed by a switch (spec DSCP_TRIMMED);
    /// `none` when the fabric does not trim.
    #[arg(long, value_name = "DSCP|none", default_value = "16", value_parser = parse_dscp)]
    trimmed_dscp: TrimDscp,
    /// DSCP of a packet trimmed at the last hop (DSCP_TRIMMED_LASTHOP), or `none`.
    #[arg(long, value_name = "DSCP|none", default_value = "18", value_parser = parse_dscp)]
    trimmed_lasthop_dscp: TrimDscp,
}

/// A DSCP code point, or none.
#[derive(Debug, Clone, Copy)]
struct TrimDscp(Option<Dscp>);

/// Parses a DSCP (0-63) or `none`.
fn parse_dscp(s: &str) -> Result<TrimDscp, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(TrimDscp(None));
    }
    let v: u8 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a DSCP (0-63) or none"))?;
    Dscp::new(v)
        .map(|d| TrimDscp(Some(d)))
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Decode(args) => run_decode(&args),
        Command::Serve(a) => client::serve(&client::socket_path(a.sock.socket), a.size.0, a.count)
            .context("serving a region"),
        Command::Write(a) => (|| {
            let chunk = u32::try_from(a.chunk.0).context("--chunk must be < 4 GiB")?;
            let sock = client::socket_path(a.sock.socket);
            let t = client::write(&sock, &a.file, &a.address, a.offset, chunk, a.depth)
                .with_context(|| format!("writing {} to {}", a.file.display(), a.address))?;
            println!("{}", transfer_json("written", &t));
            Ok(())
        })(),
        Command::Read(a) => (|| {
            let chunk = u32::try_from(a.chunk.0).context("--chunk must be < 4 GiB")?;
            let sock = client::socket_path(a.sock.socket);
            let t = client::read(
                &sock, &a.address, a.offset, a.len.0, &a.file, chunk, a.depth,
            )
            .with_context(|| format!("reading {} into {}", a.address, a.file.display()))?;
            println!("{}", transfer_json("read", &t));
            Ok(())
        })(),
        Command::Perf(a) => perf::run(&a),
        Command::Stats(a) => client::stats(&client::socket_path(a.sock.socket), a.prometheus)
            .map(|s| println!("{}", s.trim_end()))
            .context("reading the daemon's counters"),
        Command::Capture(a) => run_capture(&a),
        Command::Lab { cmd } => lab::run(cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of stdout went away (`uet decode … | head`): nothing
        // is wrong, there is just no one left to print to.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uet: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn transfer_json(event: &str, t: &client::Transfer) -> serde_json::Value {
    serde_json::json!({
        "event": event,
        "bytes": t.bytes,
        "xxh3": format!("{:016x}", t.xxh3),
        "seconds": t.seconds,
        "staging_bytes": t.staging_bytes,
        "gbps": t.bytes as f64 * 8.0 / t.seconds.max(1e-9) / 1e9,
    })
}

fn run_capture(a: &CaptureArgs) -> Result<()> {
    let duration = match a.seconds {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 => Some(std::time::Duration::from_secs_f64(s)),
        Some(s) => bail!("--seconds must be positive, not {s}"),
    };
    if a.count == Some(0) {
        bail!("--count must be positive");
    }
    let cfg = client::CaptureConfig {
        count: a.count,
        duration,
        snaplen: a.snaplen,
        direction: a.direction,
    };
    let sock = client::socket_path(a.sock.socket.clone());
    let file = a.out.display().to_string();
    let r = client::capture(&sock, &a.out, &cfg, |snaplen| {
        println!(
            "{}",
            serde_json::json!({"event": "capturing", "file": file, "snaplen": snaplen})
        );
        let _ = std::io::stdout().flush();
    })
    .with_context(|| format!("capturing into {file}"))?;
    println!(
        "{}",
        serde_json::json!({
            "event": "captured",
            "file": file,
            "frames": r.frames,
            "dropped": r.dropped,
            "bytes": r.bytes,
            "snaplen": r.snaplen,
            "reason": r.reason,
        })
    );
    Ok(())
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

fn run_decode(args: &DecodeArgs) -> Result<()> {
    if args.hex.is_empty() && args.pcap.is_none() {
        bail!("nothing to decode: give --hex HEX or --pcap FILE");
    }
    let cfg = EncapConfig {
        udp_port: args.port,
        ip_protocol: args.ip_proto,
        crc_trailer: args.crc,
        dscp_trimmed: args.trimmed_dscp.0,
        dscp_trimmed_lasthop: args.trimmed_lasthop_dscp.0,
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    for h in &args.hex {
        let bytes = decode::parse_hex(h).map_err(|e| anyhow!("--hex {h:?}: {e}"))?;
        emit(&mut out, &bytes, &cfg, args.json)?;
    }
    if let Some(path) = &args.pcap {
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let mut reader = pcap_file::pcap::PcapReader::new(std::io::BufReader::new(file))
            .with_context(|| format!("{} is not a pcap file", path.display()))?;
        let link = reader.header().datalink;
        if link != pcap_file::DataLink::ETHERNET {
            bail!("{}: link type {link:?} is not Ethernet", path.display());
        }
        // Raw records: a frame cut by the snap length (orig_len > incl_len)
        // is decoded as far as it was captured.
        while let Some(pkt) = reader.next_raw_packet() {
            let pkt = pkt.with_context(|| format!("reading {}", path.display()))?;
            let orig_len = usize::try_from(pkt.orig_len).unwrap_or(usize::MAX);
            if args.json {
                let v = decode::captured_frame_json(&pkt.data, orig_len, &cfg);
                writeln!(out, "{v}")?;
            } else {
                let t = decode::captured_frame_text(&pkt.data, orig_len, &cfg);
                writeln!(out, "{t}")?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

fn emit(out: &mut impl Write, frame: &[u8], cfg: &EncapConfig, json: bool) -> Result<()> {
    if json {
        writeln!(out, "{}", decode::frame_json(frame, cfg))?;
    } else {
        writeln!(out, "{}", decode::frame_text(frame, cfg))?;
    }
    Ok(())
}
