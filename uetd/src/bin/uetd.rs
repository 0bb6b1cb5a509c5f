//! `uetd` — the uet daemon.
//!
//! ```text
//! uetd --interface eth1 --backend xdp --cc rccc --expose 1:0x5eed:1GiB
//! uetd --interface eth1 --busy-poll-us 0     # sleep in poll() whenever idle
//! uetd --address 10.0.0.2 --backend udp --write-to 10.0.0.1 --generation 93 --bytes 1GiB --exit
//! ```

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use clap::Parser;
use tracing_subscriber::EnvFilter;
use uetd::config::{Backend, Config, Encap, Expose, Profile, Rate, Size, XdpAttach};
use uetd::daemon::Daemon;
use uetd::worker::WorkerStats;

#[derive(Debug, Parser)]
#[command(
    name = "uetd",
    version,
    about = "The uet daemon: UET over AF_XDP or UDP"
)]
struct Args {
    /// TOML configuration file (flags override it).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Interface to run on.
    #[arg(long, short)]
    interface: Option<String>,
    /// Datapath backend.
    #[arg(long, value_enum)]
    backend: Option<Backend>,
    /// FEP address (default: the interface's first address).
    #[arg(long)]
    address: Option<IpAddr>,
    /// UDP port of UET.
    #[arg(long)]
    port: Option<u16>,
    /// Worker threads (xdp: one per NIC queue).
    #[arg(long)]
    workers: Option<usize>,
    /// Pin worker i to CPU i.
    #[arg(long)]
    pin: bool,
    /// IP MTU (default: the interface's).
    #[arg(long)]
    mtu: Option<usize>,
    /// XDP attach mode.
    #[arg(long, value_enum)]
    xdp_attach: Option<XdpAttach>,
    /// Force AF_XDP copy mode.
    #[arg(long)]
    xdp_copy: bool,
    /// AF_XDP UMEM frame size in bytes: 2048 or 4096 (a power of two from
    /// the kernel's smallest chunk to a page).
    #[arg(long)]
    frame_size: Option<usize>,
    /// Congestion control: none, nscc, rccc, nscc+rccc, pft.
    #[arg(long)]
    cc: Option<String>,
    /// Rate congestion control plans for (e.g. 10G).
    #[arg(long)]
    link_rate: Option<Rate>,
    /// Idle round trip congestion control plans for, µs (windows and
    /// credit cover it).
    #[arg(long)]
    base_rtt_us: Option<u64>,
    /// The fabric's part of the base RTT, µs: NSCC's target delay
    /// (default: the base RTT).
    #[arg(long)]
    fabric_rtt_us: Option<u64>,
    /// The fabric's switches trim packets instead of dropping them (true
    /// or false): NSCC takes the spec's parameters for trimming.
    #[arg(long)]
    trimming: Option<bool>,
    /// RCCC's pacer slows while the data arrives ECN-CE marked (true or
    /// false; default true).
    #[arg(long)]
    rccc_ecn_rate: Option<bool>,
    /// PSN tracking window (MP_RANGE) in packets, a multiple of 128.
    #[arg(long)]
    mp_range: Option<u32>,
    /// Window of cc none, bytes (e.g. 2MiB).
    #[arg(long)]
    window: Option<Size>,
    /// First retransmission timeout, µs.
    #[arg(long)]
    rto_init_us: Option<u64>,
    /// The least RTO of a packet while the destination has answered
    /// nothing sent after it, µs (0: off; else 100..=10000000).
    #[arg(long)]
    rto_silent_us: Option<u64>,
    /// A PDC idle this long closes, ms (10..=3600000).
    #[arg(long)]
    pdc_idle_ms: Option<u64>,
    /// How long an idle worker keeps polling before it sleeps in `poll()`,
    /// µs (0: sleep as soon as the rings are empty; at most 100000).
    #[arg(long)]
    busy_poll_us: Option<u64>,
    /// A worker's time slice in the kernel's fair scheduler, µs (0, the
    /// default: the kernel's; else 100..=100000). Shorter: woken by a
    /// packet or a timer on a busy CPU, it runs sooner.
    #[arg(long)]
    worker_slice_us: Option<u64>,
    /// The udp backend's segmentation offloads (GSO sends, GRO receives):
    /// true or false.
    #[arg(long)]
    udp_offload: Option<bool>,
    /// log2 of the entropy space: EVs sprayed over (xdp) or source ports
    /// sent from (udp); 0 = one.
    #[arg(long)]
    ev_bits: Option<u8>,
    /// Consecutive packets on one EV before the next is picked (default: a
    /// GSO send's worth with the udp backend's offloads, else 1).
    #[arg(long)]
    ev_burst: Option<u32>,
    /// A preset of wire choices: refprov = the UEC reference provider's
    /// (--encap ip, --ip-protocol 253, --crc-trailer on). Explicit flags win.
    #[arg(long, value_enum)]
    profile: Option<Profile>,
    /// Encapsulation: udp (UDP to --port) or ip (IP protocol --ip-protocol,
    /// entropy header). Both ends must agree.
    #[arg(long, value_enum)]
    encap: Option<Encap>,
    /// IP protocol number of native-IP UET (default 253).
    #[arg(long)]
    ip_protocol: Option<u8>,
    /// CRC32C trailer on every packet: added on send, required on receive
    /// (`--crc-trailer` or `--crc-trailer=false`). Both ends must agree.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    crc_trailer: Option<bool>,
    /// Expose a region: RI:KEY:SIZE (KEY may be 0x-prefixed), job 1, pid 0.
    #[arg(long, value_parser = parse_expose)]
    expose: Vec<Expose>,
    /// Secure a job with TSS: JOB=PATH, PATH a key file (32 raw bytes or 64
    /// hex digits, mode 0600). Sets the key file of the job's `[[tss]]`
    /// table, or adds one with SDI = JOB in direct mode. Repeatable.
    #[arg(long, value_name = "JOB=PATH", value_parser = parse_tss_key_file)]
    tss_key_file: Vec<(u32, PathBuf)>,
    /// Control socket path (default /run/uet/uetd.sock).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Seed of the endpoints' randomness.
    #[arg(long)]
    seed: Option<u64>,
    /// Serve the counters at http://ADDR/metrics in the Prometheus text
    /// format (e.g. 127.0.0.1:9464; port 0 picks a free port, printed).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
    /// Run the built-in RMA write test against this peer.
    #[arg(long)]
    write_to: Option<IpAddr>,
    /// Bytes the write test writes.
    #[arg(long, default_value = "1GiB")]
    bytes: Size,
    /// The peer's region (resource index) and key.
    #[arg(long, default_value_t = 1)]
    ri: u16,
    /// The peer region's generation (its daemon's `exposed` line says: each
    /// start draws a new one).
    #[arg(long, default_value_t = 0)]
    generation: u8,
    /// The peer region's key.
    #[arg(long, default_value = "0x5eed", value_parser = parse_u64)]
    key: u64,
    /// Bytes per write operation.
    #[arg(long, default_value = "1MiB")]
    chunk: Size,
    /// Writes in flight.
    #[arg(long, default_value_t = 16)]
    depth: usize,
    /// Seed of the test pattern.
    #[arg(long, default_value_t = 1)]
    pattern_seed: u64,
    /// Exit after the write test instead of serving on.
    #[arg(long)]
    exit: bool,
    /// Print the counters as JSON when exiting.
    #[arg(long)]
    stats: bool,
}

fn parse_u64(s: &str) -> Result<u64, String> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|e| format!("{s:?}: {e}"))
}

fn parse_tss_key_file(s: &str) -> Result<(u32, PathBuf), String> {
    let (job, path) = s.split_once('=').ok_or("expected JOB=PATH")?;
    let job = job.parse().map_err(|e| format!("job {job:?}: {e}"))?;
    Ok((job, PathBuf::from(path)))
}

fn parse_expose(s: &str) -> Result<Expose, String> {
    let mut it = s.split(':');
    let (Some(ri), Some(key), Some(size), None) = (it.next(), it.next(), it.next(), it.next())
    else {
        return Err("expected RI:KEY:SIZE".into());
    };
    Ok(Expose {
        job: 1,
        pid: 0,
        ri: ri.parse().map_err(|e| format!("ri: {e}"))?,
        key: parse_u64(key)?,
        size: size.parse()?,
    })
}

fn config(a: &Args) -> Result<Config> {
    let mut c = match &a.config {
        // Checked below, once the flags are laid over it.
        Some(p) => Config::load_unchecked(p)?,
        None => Config::default(),
    };
    macro_rules! set {
        ($($f:ident),*) => { $( if let Some(v) = a.$f.clone() { c.$f = v.into(); } )* };
    }
    set!(
        backend,
        port,
        workers,
        xdp_attach,
        cc,
        link_rate,
        base_rtt_us,
        fabric_rtt_us,
        trimming,
        rccc_ecn_rate,
        mp_range,
        window,
        rto_init_us,
        rto_silent_us,
        pdc_idle_ms,
        busy_poll_us,
        worker_slice_us,
        udp_offload,
        ev_bits,
        ev_burst,
        frame_size
    );
    if a.interface.is_some() {
        c.interface.clone_from(&a.interface);
    }
    if a.address.is_some() {
        c.address = a.address;
    }
    if a.mtu.is_some() {
        c.mtu = a.mtu;
    }
    if let Some(p) = &a.socket {
        c.socket.clone_from(p);
    }
    if a.seed.is_some() {
        c.seed = a.seed;
    }
    if a.metrics_addr.is_some() {
        c.metrics_addr = a.metrics_addr;
    }
    if a.profile.is_some() {
        c.profile = a.profile;
    }
    if a.encap.is_some() {
        c.encap = a.encap;
    }
    if a.ip_protocol.is_some() {
        c.ip_protocol = a.ip_protocol;
    }
    if a.crc_trailer.is_some() {
        c.crc_trailer = a.crc_trailer;
    }
    c.pin |= a.pin;
    c.xdp_copy |= a.xdp_copy;
    c.expose.extend(a.expose.iter().cloned());
    for (job, path) in &a.tss_key_file {
        match c.tss.iter_mut().find(|t| t.job == *job) {
            Some(t) => t.key_file = Some(path.clone()),
            None => c
                .tss
                .push(uetd::tss::TssJob::with_key_file(*job, path.clone())),
        }
    }
    c.check()?;
    Ok(c)
}

fn stats_json(stats: &[WorkerStats]) -> String {
    uetd::stats::to_json(stats, None).to_string()
}

/// Whether log lines carry ANSI colours: only when stderr is a terminal,
/// and never when `NO_COLOR` is set to something (no-color.org), so a log
/// written to a file or a pipe is plain text.
fn log_colours(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

fn main() -> Result<()> {
    use std::io::IsTerminal as _;
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_env("UET_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(log_colours(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        ))
        .init();
    let args = Args::parse();
    let cfg = config(&args)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let metrics = cfg
        .metrics_addr
        .map(|a| {
            uetd::metrics::MetricsListener::bind(a)
                .with_context(|| format!("binding the metrics endpoint {a}"))
        })
        .transpose()?;
    let mut d = Daemon::start(cfg)?;
    let _metrics = match metrics {
        Some(l) => {
            let src = d.stats_source();
            let m = l
                .serve(Default::default(), move || {
                    uetd::metrics::encode(&src.to_json())
                })
                .context("serving metrics")?;
            println!(r#"{{"event":"metrics","address":"{}"}}"#, m.local_addr());
            Some(m)
        }
        None => None,
    };
    for e in d.exposed() {
        println!(
            r#"{{"event":"exposed","address":"{}","job":{},"pid":{},"ri":{},"key":"{:#x}","generation":{},"bytes":{}}}"#,
            d.local(),
            e.reg.job.get(),
            e.reg.pid.get(),
            e.reg.ri.get(),
            e.reg.key.0,
            e.reg.generation.get(),
            e.mem.len()
        );
    }
    if let Some(peer) = args.write_to {
        let chunk = u32::try_from(args.chunk.0).context("chunk must be < 4 GiB")?;
        let r = d.write_test(
            peer,
            args.ri,
            args.generation,
            args.key,
            args.bytes.0,
            chunk,
            args.depth,
            args.pattern_seed,
        );
        match r {
            Ok(r) => println!(
                r#"{{"event":"written","peer":"{peer}","bytes":{},"xxh3":"{:016x}","seconds":{:.6},"gbps":{:.3}}}"#,
                r.bytes, r.xxh3, r.seconds, r.gbps
            ),
            Err(e) => {
                println!(r#"{{"event":"write_failed","peer":"{peer}","error":"{e:#}"}}"#);
                let stats = d.shutdown();
                if args.stats {
                    println!("{}", stats_json(&stats));
                }
                std::process::exit(2);
            }
        }
    }
    if !args.exit {
        let ctl = uetd::control::ControlConfig::of(d.config());
        let served = uetd::control::serve(&mut d, ctl, &stop, |d, out| {
            if let Some(line) = d.handle_output(out) {
                println!("{line}");
            }
        });
        if let Err(e) = served {
            println!(r#"{{"event":"error","error":"{e:#}"}}"#);
            let _ = d.shutdown();
            std::process::exit(1);
        }
        tracing::info!("shutting down");
    }
    let stats = d.shutdown();
    if args.stats {
        println!("{}", stats_json(&stats));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn colours_only_on_a_terminal_without_no_color() {
        assert!(log_colours(true, None));
        assert!(log_colours(true, Some(OsStr::new(""))));
        assert!(!log_colours(true, Some(OsStr::new("1"))));
        assert!(!log_colours(false, None));
        assert!(!log_colours(false, Some(OsStr::new("1"))));
    }

    #[test]
    fn the_busy_poll_flag_overrides_the_configuration_and_is_checked() {
        let a = Args::parse_from(["uetd", "--address", "127.0.0.1"]);
        assert_eq!(config(&a).unwrap().busy_poll_us, 200);
        let a = Args::parse_from(["uetd", "--address", "127.0.0.1", "--busy-poll-us", "0"]);
        assert_eq!(config(&a).unwrap().busy_poll_us, 0);
        let a = Args::parse_from(["uetd", "--address", "127.0.0.1", "--busy-poll-us", "200000"]);
        let e = format!("{:#}", config(&a).unwrap_err());
        assert!(e.contains("busy_poll_us must be at most 100000"), "{e}");
    }

    #[test]
    fn the_worker_slice_flag_overrides_the_configuration_and_is_checked() {
        let a = Args::parse_from(["uetd", "--address", "127.0.0.1"]);
        assert_eq!(config(&a).unwrap().worker_slice_us, 0);
        for ok in [0, 100, 2_000, 100_000] {
            let a = Args::parse_from([
                "uetd",
                "--address",
                "127.0.0.1",
                "--worker-slice-us",
                &ok.to_string(),
            ]);
            assert_eq!(config(&a).unwrap().worker_slice_us, ok);
        }
        for bad in ["50", "100001"] {
            let a = Args::parse_from(["uetd", "--address", "127.0.0.1", "--worker-slice-us", bad]);
            let e = format!("{:#}", config(&a).unwrap_err());
            assert!(e.contains("worker_slice_us must be 0"), "{e}");
        }
    }

    #[test]
    fn the_frame_size_flag_reaches_the_configuration() {
        let a = Args::parse_from(["uetd", "--address", "127.0.0.1", "--frame-size", "2048"]);
        assert_eq!(config(&a).unwrap().frame_size, 2048);
        for bad in ["3000", "1024", "8192", "0"] {
            let a = Args::parse_from(["uetd", "--address", "127.0.0.1", "--frame-size", bad]);
            let e = format!("{:#}", config(&a).unwrap_err());
            assert!(e.contains("frame_size must be 2048 or 4096"), "{bad}: {e}");
        }
    }
}
