//! `uet`: the command-line tool of the uet stack.
//!
//! Today it decodes UET frames (`uet decode`); the daemon-facing commands
//! (`serve`, `write`, `perf`, `lab`, …) join as the daemon grows.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Parser, Subcommand};
use uet_wire::Dscp;
use uet_wire::encap::EncapConfig;
use uetd::decode;

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
    /// Build, sample and remove veth labs; `uet lab demo` shows the stack.
    Lab {
        #[command(subcommand)]
        cmd: uetd::cli::lab::LabCmd,
    },
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
        Command::Lab { cmd } => uetd::cli::lab::run(cmd),
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
        while let Some(pkt) = reader.next_packet() {
            let pkt = pkt.with_context(|| format!("reading {}", path.display()))?;
            emit(&mut out, &pkt.data, &cfg, args.json)?;
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
