//! The client commands of the `uet` CLI: `serve`, `write`, `read`,
//! `perf`, `stats` and `capture`, each a client of the local daemon
//! through `uet_api` — the same path an application takes.
//!
//! Addresses are `uet://FEP/JOB/PID/RI/GEN/0xKEY` (`uet_api::RemoteRegion`),
//! which `uet serve` prints.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use uet_api::{
    Access, CaptureDirection, CaptureEvent, CaptureSpec, Client, ClientError, Event, MAX_SNAPLEN,
    Region, RemoteRegion, Status, Tag,
};

use uetd::daemon::VERIFY_TAG;

use crate::error::{Error, Result};

/// Default control socket.
pub const DEFAULT_SOCKET: &str = "/run/uet/uetd.sock";

pub(crate) fn connect(socket: &Path, name: &str) -> Result<Client> {
    Client::connect(socket, name).map_err(|source| Error::Connect {
        socket: socket.to_owned(),
        source,
    })
}

fn status_ok(ev: &Event) -> Result<u64> {
    match ev {
        Event::Completion(c) => match &c.status {
            Status::Ok => Ok(c.bytes),
            s => Err(Error::Operation {
                tag: c.tag.0,
                status: format!("{s:?}"),
            }),
        },
        other => Err(Error::Reply {
            what: format!("unexpected event {other:?}"),
        }),
    }
}

fn xxh3(region: &Region, len: u64) -> Result<u64> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0;
    while off < len {
        let n = (len - off).min(buf.len() as u64) as usize;
        region
            .read_at(off, &mut buf[..n])
            .map_err(Error::io("reading the shared region"))?;
        h.update(&buf[..n]);
        off += n as u64;
    }
    Ok(h.digest())
}

/// `uet serve`: exposes a buffer of `size` bytes and prints its address,
/// then one line per write that carries header data — and, for a write
/// that asks for verification (`uet write` sends one last), the XXH3 of the
/// bytes it covers. Stops on SIGINT/SIGTERM, or after `count` such writes.
pub fn serve(socket: &Path, size: u64, count: Option<u64>) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(Error::io("installing the SIGINT/SIGTERM handlers"))?;
    }
    let mut c = connect(socket, "uet serve")?;
    let region = c
        .create_allocated_region(size)
        .map_err(Error::io("creating the region to serve"))?;
    let reg = c
        .register(&region, Access::REMOTE_WRITE | Access::REMOTE_READ, None)
        .map_err(Error::daemon("registering the region to serve"))?;
    println!(
        "{}",
        json!({"event": "serving", "address": reg.remote.to_string(), "bytes": size})
    );
    let mut seen = 0;
    while !stop.load(Ordering::Relaxed) && count.is_none_or(|n| seen < n) {
        let ev = match c.wait_event(Some(Duration::from_millis(200))) {
            Ok(ev) => ev,
            Err(ClientError::Timeout) => continue,
            Err(e) => return Err(Error::daemon("waiting for writes")(e)),
        };
        if let Event::WriteArrived(w) = ev {
            seen += 1;
            let mut line = json!({
                "event": "write_arrived",
                "from": w.src_fep.to_string(),
                "offset": w.offset,
                "len": w.len,
                "header_data": w.header_data,
            });
            if w.header_data >> 48 == VERIFY_TAG >> 48 {
                let n = (w.header_data & ((1 << 48) - 1)).min(size);
                line["verified_bytes"] = json!(n);
                line["xxh3"] = json!(format!("{:016x}", xxh3(&region, n)?));
            }
            println!("{line}");
        }
    }
    Ok(())
}

/// What [`write`] and [`read`] report.
#[derive(Debug, Clone, PartialEq)]
pub struct Transfer {
    /// Bytes moved.
    pub bytes: u64,
    /// XXH3-64 of them.
    pub xxh3: u64,
    /// The wall time the caller waited, all of it: for [`write`] from
    /// opening the file to the completion of the last write (the file is
    /// read, hashed and sent in one pass, so the reading is inside); for
    /// [`read`] from connecting to the last byte written to the file.
    pub seconds: f64,
    /// Bytes of memory shared with the daemon that carried the data:
    /// `depth` chunks (fewer for a short transfer), whatever the length.
    pub staging_bytes: u64,
}

/// How long `uet perf` polls for a completion on the ring before it sleeps
/// on the ring's futex, by default: not at all. On a two-vCPU machine a
/// spinning client takes the slice its daemon's worker needs (64 B write
/// p50 at depth 1 over one veth: 15.7 µs sleeping at once, 70 µs polling
/// 50 µs first); with a core to spare `--spin-us` can do better.
pub const DEFAULT_RING_SPIN: Duration = Duration::ZERO;

/// How many chunks of `chunk` bytes a transfer of `len` bytes needs, and
/// how many staging slots (`depth`, no more than there are chunks) carry
/// them.
fn plan(len: u64, chunk: u32, depth: usize) -> (u64, u64, u64) {
    let chunk = u64::from(chunk.max(1));
    let chunks = len.div_ceil(chunk);
    let slots = (depth.max(1) as u64).min(chunks);
    (chunk, chunks, slots)
}

/// `uet write`: writes `file` into the remote region at `offset` in
/// `chunk`-byte RMA writes, `depth` in flight; the last write asks the
/// target to verify (hash) what it received.
///
/// The file is streamed: each chunk is read into one of `depth` staging
/// slots of a region shared with the daemon, hashed on the way, written
/// from there, and its slot refilled once the write completed. Memory
/// stays at `depth` × `chunk` (16 MiB by default) whatever the file's
/// length.
pub fn write(
    socket: &Path,
    file: &Path,
    to: &RemoteRegion,
    offset: u64,
    chunk: u32,
    depth: usize,
) -> Result<Transfer> {
    use std::io::Read as _;

    let start = Instant::now();
    let mut src = std::fs::File::open(file).map_err(Error::file("reading", file))?;
    let len = src.metadata().map_err(Error::file("reading", file))?.len();
    if len == 0 {
        return Err(Error::Invalid(format!("{} is empty", file.display())));
    }
    let (chunk, chunks, slots) = plan(len, chunk, depth);
    let mut c = connect(socket, "uet write")?;
    let staging = c
        .create_region(slots * chunk)
        .map_err(Error::io("creating the staging region"))?;
    let local = c
        .register_local(&staging)
        .map_err(Error::daemon("registering the staging region"))?;
    let mut buf = vec![0u8; chunk as usize];
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut busy = vec![false; slots as usize];
    // Tag → (slot, bytes) of each write in flight.
    let mut in_flight = std::collections::HashMap::<Tag, (usize, u64)>::new();
    let progress = crate::progress::bytes(len, "write");
    let (mut next, mut done) = (0u64, 0u64);
    while done < chunks {
        // Chunks in file order as their slots free up; the last once all
        // others completed, carrying the verification request, so the
        // target hashes only after every byte has landed.
        while next < chunks && !(next == chunks - 1 && done < chunks - 1) {
            let slot = (next % slots) as usize;
            if busy[slot] {
                break;
            }
            let off = next * chunk;
            let n = (len - off).min(chunk);
            let bytes = &mut buf[..n as usize];
            src.read_exact(bytes)
                .map_err(Error::file("reading", file))?;
            hasher.update(bytes);
            let at = slot as u64 * chunk;
            staging
                .write_at(at, bytes)
                .map_err(Error::io("filling the staging region"))?;
            let verify = (next == chunks - 1).then_some(VERIFY_TAG | (offset + len));
            let tag = c
                .write(local.at(at), to.at(offset + off), n as u32, verify)
                .map_err(Error::daemon("submitting a write"))?;
            busy[slot] = true;
            in_flight.insert(tag, (slot, n));
            next += 1;
        }
        let ev = c
            .wait_event(Some(Duration::from_secs(60)))
            .map_err(Error::daemon("waiting for completions"))?;
        if let Event::Completion(cmp) = &ev
            && let Some((slot, n)) = in_flight.remove(&cmp.tag)
        {
            status_ok(&ev)?;
            busy[slot] = false;
            done += 1;
            progress.inc(n);
        }
    }
    progress.finish_and_clear();
    Ok(Transfer {
        bytes: len,
        xxh3: hasher.digest(),
        seconds: start.elapsed().as_secs_f64(),
        staging_bytes: staging.len(),
    })
}

/// `uet read`: reads `len` bytes of the remote region at `offset` into
/// `file`, in `chunk`-byte RMA reads, `depth` in flight.
///
/// Streamed like [`write`]: each read lands in one of `depth` staging
/// slots, and the chunks are hashed and appended to the file in order as
/// they arrive, a slot reused once its chunk is in the file. Memory stays
/// at `depth` × `chunk` whatever `len` is.
pub fn read(
    socket: &Path,
    from: &RemoteRegion,
    offset: u64,
    len: u64,
    file: &Path,
    chunk: u32,
    depth: usize,
) -> Result<Transfer> {
    use std::io::Write as _;

    if len == 0 {
        return Err(Error::Invalid("nothing to read".into()));
    }
    let start = Instant::now();
    let (chunk, chunks, slots) = plan(len, chunk, depth);
    let mut c = connect(socket, "uet read")?;
    let staging = c
        .create_allocated_region(slots * chunk)
        .map_err(Error::io("creating the staging region"))?;
    let local = c
        .register_local(&staging)
        .map_err(Error::daemon("registering the staging region"))?;
    let mut out = std::fs::File::create(file).map_err(Error::file("creating", file))?;
    let mut buf = vec![0u8; chunk as usize];
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    let mut landed = vec![false; slots as usize];
    // Tag → slot of each read in flight.
    let mut in_flight = std::collections::HashMap::<Tag, u64>::new();
    let progress = crate::progress::bytes(len, "read");
    // Chunks below `drained` are in the file; those from `drained` to
    // `next` are in flight or landed in their slots (chunk i in slot
    // i % slots).
    let (mut next, mut drained) = (0u64, 0u64);
    while drained < chunks {
        while next < chunks && next - drained < slots {
            let slot = next % slots;
            let off = next * chunk;
            let n = (len - off).min(chunk) as u32;
            let tag = c
                .read(local.at(slot * chunk), from.at(offset + off), n)
                .map_err(Error::daemon("submitting a read"))?;
            in_flight.insert(tag, slot);
            next += 1;
        }
        let ev = c
            .wait_event(Some(Duration::from_secs(60)))
            .map_err(Error::daemon("waiting for completions"))?;
        let Event::Completion(cmp) = &ev else {
            continue;
        };
        let Some(slot) = in_flight.remove(&cmp.tag) else {
            continue;
        };
        status_ok(&ev)?;
        landed[slot as usize] = true;
        while drained < next && landed[(drained % slots) as usize] {
            let slot = drained % slots;
            let n = (len - drained * chunk).min(chunk);
            let bytes = &mut buf[..n as usize];
            staging
                .read_at(slot * chunk, bytes)
                .map_err(Error::io("reading the staging region"))?;
            hasher.update(bytes);
            out.write_all(bytes).map_err(Error::file("writing", file))?;
            landed[slot as usize] = false;
            drained += 1;
            progress.inc(n);
        }
    }
    out.flush().map_err(Error::file("writing", file))?;
    progress.finish_and_clear();
    Ok(Transfer {
        bytes: len,
        xxh3: hasher.digest(),
        seconds: start.elapsed().as_secs_f64(),
        staging_bytes: staging.len(),
    })
}

/// `uet stats`: the daemon's counters as JSON, or as the Prometheus text
/// its metrics endpoint serves (the same encoder over the same document,
/// `uetd::metrics::encode`).
pub fn stats(socket: &Path, prometheus: bool) -> Result<String> {
    let mut c = connect(socket, "uet stats")?;
    let json = c.stats().map_err(Error::daemon("reading the counters"))?;
    if !prometheus {
        return Ok(json);
    }
    let v: serde_json::Value = serde_json::from_str(&json).map_err(|e| Error::Reply {
        what: format!("the counters are not JSON: {e}"),
    })?;
    Ok(uetd::metrics::encode(&v))
}

/// What `uet capture` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureConfig {
    /// End after this many frames.
    pub count: Option<u64>,
    /// End after this long.
    pub duration: Option<Duration>,
    /// Bytes kept of each frame (clamped to [`MAX_SNAPLEN`]).
    pub snaplen: u32,
    /// Which frames.
    pub direction: CaptureDirection,
}

/// What [`capture`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureReport {
    /// Frames written to the file.
    pub frames: u64,
    /// Frames the daemon saw but could not queue for the capture.
    pub dropped: u64,
    /// Captured bytes written (frames cut at the snap length).
    pub bytes: u64,
    /// The snap length in force.
    pub snaplen: u32,
    /// Why the capture ended.
    pub reason: String,
}

/// How long a capture may take to end once asked to (SIGINT/SIGTERM).
const CAPTURE_END_WAIT: Duration = Duration::from_secs(5);

/// `uet capture`: the frames the local daemon's datapath receives and
/// sends, into `out` as a pcap file (Ethernet link type, nanosecond
/// timestamps) that `uet decode --pcap` and Wireshark read. Calls
/// `started` with the snap length once the daemon captures; ends on the
/// count or duration of `cfg`, or SIGINT/SIGTERM.
pub fn capture(
    socket: &Path,
    out: &Path,
    cfg: &CaptureConfig,
    started: impl FnOnce(u32),
) -> Result<CaptureReport> {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    use pcap_file::{DataLink, TsResolution};

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(Error::io("installing the SIGINT/SIGTERM handlers"))?;
    }
    if cfg.snaplen == 0 {
        return Err(Error::Invalid("--snaplen must be at least 1".into()));
    }
    let file = std::fs::File::create(out).map_err(Error::file("creating", out))?;
    let mut c = connect(socket, "uet capture")?;
    let spec = CaptureSpec {
        max_frames: cfg.count,
        max_duration_ms: cfg
            .duration
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)),
        snaplen: cfg.snaplen.min(MAX_SNAPLEN),
        direction: cfg.direction,
    };
    let snaplen = c
        .capture_start(spec)
        .map_err(Error::daemon("starting the capture"))?;
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        ts_resolution: TsResolution::NanoSecond,
        snaplen,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(std::io::BufWriter::new(file), header)
        .map_err(|e| Error::file("writing", out)(pcap_io(e)))?;
    started(snaplen);
    let (mut frames, mut bytes) = (0u64, 0u64);
    let mut stopping: Option<Instant> = None;
    let end = loop {
        if stopping.is_none() && stop.load(Ordering::Relaxed) {
            c.capture_stop()
                .map_err(Error::daemon("stopping the capture"))?;
            stopping = Some(Instant::now());
        }
        if stopping.is_some_and(|t| t.elapsed() > CAPTURE_END_WAIT) {
            return Err(Error::Timeout {
                awaiting: format!("the daemon to end the capture ({CAPTURE_END_WAIT:?})"),
            });
        }
        match c.capture_next(Some(Duration::from_millis(200))) {
            Ok(CaptureEvent::Frame(f)) => {
                let ts = Duration::from_nanos(f.timestamp_ns);
                w.write_packet(&PcapPacket::new(ts, f.orig_len, &f.data))
                    .map_err(|e| Error::file("writing", out)(pcap_io(e)))?;
                frames += 1;
                bytes += f.data.len() as u64;
            }
            Ok(CaptureEvent::End(e)) => break e,
            Err(ClientError::Timeout) => {}
            Err(e) => return Err(Error::daemon("capturing")(e)),
        }
    };
    let mut file = w.into_writer();
    std::io::Write::flush(&mut file).map_err(Error::file("writing", out))?;
    let _ = c.close();
    Ok(CaptureReport {
        frames,
        dropped: end.dropped,
        bytes,
        snaplen,
        reason: end.reason.to_string(),
    })
}

/// A pcap writer's error as the I/O error it is (or wraps).
fn pcap_io(e: pcap_file::PcapError) -> std::io::Error {
    match e {
        pcap_file::PcapError::IoError(e) => e,
        other => std::io::Error::other(other),
    }
}

/// The socket path: the flag, else `UET_SOCKET`, else the default.
pub fn socket_path(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("UET_SOCKET").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SOCKET))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region() -> RemoteRegion {
        "uet://10.0.0.1/1/2/1/0/0x5eed".parse().unwrap()
    }

    /// A path in a directory of its own that no daemon listens on.
    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("uet-tools-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn no_daemon_is_a_connect_error_naming_the_socket() {
        let sock = scratch("connect").join("uetd.sock");
        let e = stats(&sock, false).unwrap_err();
        let Error::Connect { socket, .. } = &e else {
            panic!("{e:?}");
        };
        assert_eq!(socket, &sock);
        assert!(
            e.to_string()
                .starts_with(&format!("connecting to uetd at {}", sock.display())),
            "{e}"
        );
        std::fs::remove_dir_all(sock.parent().unwrap()).unwrap();
    }

    #[test]
    fn the_file_to_send_is_read_before_the_daemon_is_asked() {
        let dir = scratch("write");
        let sock = dir.join("uetd.sock");
        let missing = dir.join("missing.bin");
        let e = write(&sock, &missing, &region(), 0, 4096, 1).unwrap_err();
        let Error::File { what, path, source } = &e else {
            panic!("{e:?}");
        };
        assert_eq!((*what, path), ("reading", &missing));
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);

        let empty = dir.join("empty.bin");
        std::fs::write(&empty, b"").unwrap();
        let e = write(&sock, &empty, &region(), 0, 4096, 1).unwrap_err();
        assert!(
            matches!(&e, Error::Invalid(m) if m.ends_with("is empty")),
            "{e:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sizes_that_cannot_work_are_refused_before_connecting() {
        let sock = Path::new("/nonexistent/uetd.sock");
        let out = Path::new("/nonexistent/out.bin");
        let e = read(sock, &region(), 0, 0, out, 4096, 1).unwrap_err();
        assert!(matches!(e, Error::Invalid(_)), "{e:?}");
    }
}
