//! The adversary of the attack run and the soak: an off-path host on the
//! lab's L2 segment that sends raw Ethernet frames (`uet_lab::PacketSocket`)
//! built from `uet-wire`'s `Repr`s and then mutated — malformed frames of
//! every kind and spoofed PDS packets — plus the measurements the checks
//! need (daemon memory, counters).
//!
//! Shared by `uetd/tests/attack.rs` and `uetd/examples/soak.rs`.
#![allow(dead_code, unreachable_pub)]

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use uet_lab::Lab;
use uet_wire::encap::{EncapConfig, Transport, emit_frame, frame_len};
use uet_wire::inet::{EtherType, EthernetAddress, EthernetRepr, IpRepr, Ipv4Repr, UdpPacket};
use uet_wire::pds::cp::{self, CpPayload};
use uet_wire::pds::nack::{self, NackTarget};
use uet_wire::pds::prologue::NextHeader;
use uet_wire::pds::req::{self, DpdcidField, ReliableMode, ReqCcState, SynPsnOffset};
use uet_wire::pds::{NackCode, PdsRepr};
use uet_wire::rand::{Rng, Xoshiro256};
use uet_wire::ses::{RequestFlags, SesStandardRepr, SomFields, StandardRequest};
use uet_wire::{
    CccId, Credit24, Dscp, Ecn, EntropyValue, JobId, Len14, MessageId, PdcId, PidOnFep, Psn,
    ResourceIndex, RiGeneration,
};
use uetd::packet::PacketSocket;

/// Ethernet + IPv4 addressing of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addr {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
}

impl Addr {
    /// The same, from another source (IP and MAC).
    pub const fn from(self, src: Ipv4Addr, src_mac: [u8; 6]) -> Self {
        Self {
            src,
            src_mac,
            ..self
        }
    }
}

/// A UET-over-UDP frame (port 4793, valid IPv4 and UDP checksums) around
/// `uet`, the entropy value `ev` in the UDP source port.
pub fn frame(a: &Addr, ev: u16, uet: &[u8]) -> Vec<u8> {
    let eth = EthernetRepr {
        dst: EthernetAddress(a.dst_mac),
        src: EthernetAddress(a.src_mac),
        vlan: None,
        ethertype: EtherType::Ipv4,
    };
    let ip = IpRepr::V4(Ipv4Repr {
        src: a.src,
        dst: a.dst,
        protocol: 17,
        payload_len: 0,
        ttl: 64,
        dscp: Dscp::from_masked(0),
        ecn: Ecn::Ect0,
        ident: 0,
        dont_frag: true,
    });
    let cfg = EncapConfig::default();
    let t = Transport::udp(EntropyValue::from_masked(ev), &cfg);
    let mut buf = vec![0u8; frame_len(&eth, &ip, &t, &cfg, uet.len())];
    emit_frame(&eth, &ip, &t, &cfg, uet.len(), &mut buf, |u| {
        u.copy_from_slice(uet);
    })
    .expect("a frame within the MTU");
    buf
}

/// Offset of the UDP header in frames [`frame`] builds.
pub const UDP_AT: usize = 14 + 20;
/// Offset of the UET bytes in frames [`frame`] builds.
pub const UET_AT: usize = UDP_AT + 8;

/// Recomputes the UDP checksum of a frame [`frame`] built (after the UET
/// bytes were changed), so the frame passes L4 checks.
pub fn fix_udp_checksum(a: &Addr, f: &mut [u8]) {
    let mut u = UdpPacket::new_unchecked(&mut f[UDP_AT..]);
    u.set_checksum(0);
    u.fill_checksum(IpAddr::V4(a.src), IpAddr::V4(a.dst));
}

/// A PDS header's bytes.
pub fn pds(r: impl Into<PdsRepr>) -> Vec<u8> {
    let r = r.into();
    let mut b = vec![0u8; r.buffer_len()];
    r.emit(&mut b);
    b
}

/// Where a write lands at the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dest {
    pub job: u32,
    pub pid: u16,
    pub ri: u16,
    pub generation: u8,
    pub key: u64,
}

impl Dest {
    pub fn of(r: &uet_api::RemoteRegion) -> Self {
        Self {
            job: r.job,
            pid: r.pid,
            ri: r.ri,
            generation: r.generation,
            key: r.key,
        }
    }
}

/// A standard UET_WRITE SES header (SOM when `som`, else a continuation
/// at `message_offset` carrying `payload_len` bytes).
pub fn write_ses(
    d: &Dest,
    buffer_offset: u64,
    request_length: u32,
    som: bool,
    message_offset: u32,
    payload_len: u16,
    message_id: u16,
) -> SesStandardRepr {
    SesStandardRepr {
        opcode: uet_wire::ses::Opcode::Write,
        flags: RequestFlags {
            dc: false,
            ie: false,
            rel: true,
            eom: true,
        },
        hd: false,
        som: if som {
            SomFields::Start { header_data: 0 }
        } else {
            SomFields::Continuation {
                payload_length: Len14::from_masked(payload_len),
                message_offset,
            }
        },
        message_id: MessageId::from_masked(message_id),
        ri_generation: RiGeneration::from_masked(d.generation),
        job_id: JobId::from_masked(d.job),
        pid_on_fep: PidOnFep::from_masked(d.pid),
        resource_index: ResourceIndex::from_masked(d.ri),
        buffer_offset,
        initiator: 0,
        memory_key: d.key,
        request_length,
    }
}

/// A RUD request (RUD_CC_REQ with `cc`) carrying `ses` and `payload`.
pub fn request(
    psn: u32,
    spdcid: u16,
    dpdcid: DpdcidField,
    cc: Option<(u8, u32)>,
    ses: &SesStandardRepr,
    payload: &[u8],
) -> Vec<u8> {
    let r = req::Repr {
        mode: ReliableMode::Rud,
        next_hdr: NextHeader::RequestStd,
        retx: false,
        ar: true,
        clear_psn_offset: 0,
        psn: Psn(psn),
        spdcid: PdcId::new(spdcid),
        dpdcid,
        cc: cc.map(|(ccc, target)| ReqCcState {
            ccc_id: CccId::from_masked(ccc),
            credit_target: Credit24::from_masked(target),
        }),
    };
    let mut b = pds(r);
    let s = StandardRequest::new(*ses, None).expect("a write has no extension");
    let at = b.len();
    b.resize(at + s.buffer_len(), 0);
    s.emit(&mut b[at..]);
    b.extend_from_slice(payload);
    b
}

/// The SYN form of the DPDCID slot, `psn_offset` after the start PSN.
pub fn syn(psn_offset: u16) -> DpdcidField {
    DpdcidField::syn(SynPsnOffset::from_masked(psn_offset))
}

/// A NACK for `psn` on the receiver's PDC `dpdcid`.
pub fn nack(code: NackCode, psn: u32, spdcid: u16, dpdcid: u16) -> Vec<u8> {
    pds(nack::Repr {
        next_hdr: NextHeader::None,
        m: false,
        retx: false,
        target: NackTarget::Psn(Psn(psn)),
        code,
        vendor_code: 0,
        spdcid: PdcId::new(spdcid),
        dpdcid: PdcId::new(dpdcid),
        payload: 0,
        ccx: None,
    })
}

/// A control packet.
pub fn cp(payload: CpPayload, psn: u32, spdcid: u16, dpdcid: u16) -> Vec<u8> {
    pds(cp::Repr {
        mode: ReliableMode::Rud,
        retx: false,
        ar: false,
        psn: Psn(psn),
        spdcid: PdcId::new(spdcid),
        dpdcid: DpdcidField::Dpdcid(PdcId::new(dpdcid)),
        payload,
    })
}

/// The close-class NACK codes: an initiator that believes one closes the
/// PDC and fails what it carries (`docs/protocol-notes.md` §3, NACK codes).
pub const CLOSE_CLASS: [NackCode; 6] = [
    NackCode::InvDpdcid,
    NackCode::PdcHdrMismatch,
    NackCode::Closing,
    NackCode::ClosingInErr,
    NackCode::InvalidSyn,
    NackCode::PdcModeMismatch,
];

/// Random numbers for the attacker (seeded: a failing run can be replayed).
pub struct Dice(Xoshiro256);

impl Dice {
    pub fn new(seed: u64) -> Self {
        Self(Xoshiro256::seed_from_u64(seed))
    }
    pub fn u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    pub fn u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.0.below(n)
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.0.next_u64() as u8).collect()
    }
    /// An address in 10.0.0.0/8 outside the lab's 10.77.0.0/16.
    pub fn foreign_ip(&mut self) -> Ipv4Addr {
        let [_, a, b, c, ..] = self.u64().to_be_bytes();
        Ipv4Addr::new(10, if a == 77 { 78 } else { a }, b, c.max(1))
    }
    /// A locally administered unicast MAC.
    pub fn mac(&mut self) -> [u8; 6] {
        let [a, b, c, d, e, f, ..] = self.u64().to_be_bytes();
        [(a & 0xfc) | 0x02, b, c, d, e, f]
    }
}

/// The malformed-frame storm from `a` (the attacker's own addresses):
/// every frame the daemon must drop and count, none it may act on in a
/// way that touches the legitimate transfer. `d` is the target's real
/// region (its key included: the bounds checks must hold even for a
/// sender that knows it); `region_len` its size.
pub fn storm(a: &Addr, d: &Dest, region_len: u64, dice: &mut Dice) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    // A valid SYN write from the attacker's own PDC, wrong key, 64 bytes.
    let wrong = Dest {
        key: d.key ^ 0xdead_beef,
        ..*d
    };
    let valid_uet = request(
        1000,
        7,
        syn(0),
        None,
        &write_ses(&wrong, 0, 64, true, 0, 0, 1),
        &[0xa5; 64],
    );
    let valid = frame(a, 0xc001, &valid_uet);
    // Random bytes behind valid Ethernet/IP/UDP headers, and raw random
    // frames (most not even IP: the XDP program passes them on).
    for _ in 0..1500 {
        let n = dice.below(1400) as usize;
        out.push(frame(a, dice.u32() as u16, &dice.bytes(n)));
    }
    for _ in 0..300 {
        let n = 14 + dice.below(1500) as usize;
        let mut f = dice.bytes(n);
        f[..6].copy_from_slice(&a.dst_mac);
        f[6..12].copy_from_slice(&a.src_mac);
        out.push(f);
    }
    // Truncations at every length: the IP/UDP lengths still claim the
    // whole frame, and (from UET_AT on) with lengths and checksum fixed so
    // that only the UET part is cut.
    for n in 14..valid.len() {
        out.push(valid[..n].to_vec());
    }
    for n in 0..valid_uet.len() {
        out.push(frame(a, 0xc002, &valid_uet[..n]));
    }
    // Every bit flipped, once with the checksums as they fall and once
    // (in the UET part) with a valid UDP checksum.
    for bit in 0..valid.len() * 8 {
        let mut f = valid.clone();
        f[bit / 8] ^= 1 << (bit % 8);
        out.push(f);
    }
    for bit in UET_AT * 8..valid.len() * 8 {
        let mut f = valid.clone();
        f[bit / 8] ^= 1 << (bit % 8);
        fix_udp_checksum(a, &mut f);
        out.push(f);
    }
    // Every PDS type (0-31: 1-14 and the reserved ones) with random
    // next_hdr, flags and fields, with and without a standard SES header
    // after it, valid checksums.
    let ses = request(
        0,
        1,
        syn(0),
        None,
        &write_ses(&wrong, 0, 64, true, 0, 0, 1),
        &[],
    );
    for ty in 0u8..32 {
        for i in 0..100 {
            let n = 4 + dice.below(60) as usize;
            let mut u = dice.bytes(n);
            u[0] = (ty << 3) | (u[0] & 0x07);
            if i % 2 == 0 {
                u.truncate(16.min(u.len()));
                u.extend_from_slice(&ses[12..]);
            }
            out.push(frame(a, 0xc003, &u));
        }
    }
    // Extreme lengths and offsets in SES headers, on a PDC of the
    // attacker's own (SYN from SPDCID 9): right and wrong keys, offsets
    // at and past the end of the region and at 2^64 - 1, lengths of 0 and
    // 2^32 - 1, continuations that lie about their place and size, other
    // jobs, PIDs, resource indices and generations.
    let offsets = [
        region_len,
        region_len - 1,
        region_len - 32,
        u64::MAX,
        u64::MAX - 63,
        1 << 63,
        u64::MAX - region_len,
    ];
    let lengths = [
        0u32,
        1,
        64,
        u32::MAX,
        u32::MAX - 63,
        (region_len as u32).wrapping_add(1),
    ];
    // (where, buffer_offset, request_length, SOM, message_offset,
    // payload_length)
    let mut writes: Vec<(Dest, u64, u32, bool, u32, u16)> = Vec::new();
    for key in [d.key, wrong.key] {
        let k = Dest { key, ..*d };
        for &off in &offsets {
            for &len in &lengths {
                // With the real key, only writes that reach past the end:
                // one inside the region is allowed and would be placed.
                let past_end = off
                    .checked_add(u64::from(len))
                    .is_none_or(|end| end > region_len);
                if key == d.key && !past_end {
                    continue;
                }
                writes.push((k, off, len, true, 0, 0));
                writes.push((k, off, len, false, u32::MAX - 10, 64));
                writes.push((k, off, len, false, 1 << 31, 16383));
            }
        }
    }
    for (job, pid, ri, generation) in [
        (d.job ^ 1, d.pid, d.ri, d.generation),
        (d.job, d.pid ^ 1, d.ri, d.generation),
        (d.job, d.pid, d.ri ^ 1, d.generation),
        (d.job, d.pid, d.ri, d.generation.wrapping_add(1)),
        (0xff_ffff, 0xfff, 0xfff, 0xff),
    ] {
        let k = Dest {
            job,
            pid,
            ri,
            generation,
            key: d.key,
        };
        writes.push((k, region_len + 4096, 64, true, 0, 0));
    }
    for (i, (k, off, len, som, moff, plen)) in writes.into_iter().enumerate() {
        let i = i as u16;
        let ses = write_ses(&k, off, len, som, moff, plen, 100 + i);
        let psn = 5000 + u32::from(i);
        out.push(frame(
            a,
            0xc004,
            &request(psn, 9, syn(i), None, &ses, &[0x5a; 64]),
        ));
    }
    out
}

/// Polls `f` until it holds or `deadline` passes; whether it held.
pub fn poll_until(deadline: Instant, mut f: impl FnMut() -> bool) -> bool {
    let mut pause = Duration::from_millis(1);
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::park_timeout(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Sends `frames` at most `pps` per second (0: as fast as the link
/// takes them); pacing is a rate limit, not a synchronisation.
pub fn send_all(link: &PacketSocket, frames: &[Vec<u8>], pps: u64) {
    let start = Instant::now();
    for (i, f) in frames.iter().enumerate() {
        if pps > 0 && i % 64 == 0 {
            let due = start + Duration::from_secs_f64(i as f64 / pps as f64);
            let now = Instant::now();
            if due > now {
                std::thread::park_timeout(due - now);
            }
        }
        // A full queue or a frame the kernel refuses (e.g. one longer
        // than the MTU) is the attacker's loss, not the test's.
        let _ = link.send(f);
    }
}

/// One line of `/proc/PID/status` in KiB (e.g. `RssAnon`).
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Host `i`'s daemon pid.
pub fn daemon_pid(lab: &Lab, i: usize) -> u32 {
    lab.state().hosts[i]
        .daemon_pid
        .expect("the host runs a daemon")
}

/// Host `i`'s daemon's anonymous memory (heap, stacks: what a peer can
/// grow; the registered regions are shared memory and not in it), KiB.
pub fn rss_anon_kib(lab: &Lab, i: usize) -> u64 {
    status_kib(daemon_pid(lab, i), "RssAnon").expect("the daemon's /proc status")
}

/// The MAC of `eth0` in host `i`.
pub fn mac(lab: &Lab, i: usize) -> [u8; 6] {
    let out = lab
        .host(i)
        .ip(&["-j", "link", "show", "dev", "eth0"])
        .expect("ip link");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ip -j");
    let s = v[0]["address"].as_str().expect("an address");
    let mut m = [0u8; 6];
    for (b, h) in m.iter_mut().zip(s.split(':')) {
        *b = u8::from_str_radix(h, 16).expect("a MAC");
    }
    m
}

/// `uet stats` of host `i`'s daemon, parsed.
pub fn stats(lab: &Lab, i: usize) -> serde_json::Value {
    let mut c = lab.client(i, "attack run").expect("the daemon answers");
    let s = c.stats().expect("uet stats answers");
    let _ = c.close();
    serde_json::from_str(&s).expect("stats are JSON")
}

/// What a daemon counted of unwanted input: every PDS drop reason but
/// `duplicate` (a legitimate transfer's retransmissions make those), the
/// backend's dropped frames, and the NACKs it received.
pub fn seen(stats: &serde_json::Value) -> u64 {
    let sum_obj = |v: &serde_json::Value| {
        v.as_object().map_or(0, |m| {
            m.values()
                .filter_map(serde_json::Value::as_u64)
                .sum::<u64>()
        })
    };
    stats["workers"].as_array().map_or(0, |ws| {
        ws.iter()
            .map(|w| {
                sum_obj(&w["pds"]["drops"]) - w["pds"]["drops"]["duplicate"].as_u64().unwrap_or(0)
                    + sum_obj(&w["pds"]["rx_nacks"])
                    + w["pds"]["pdcs_pending_evicted"].as_u64().unwrap_or(0)
                    + w["io"]["rx_dropped"].as_u64().unwrap_or(0)
            })
            .sum()
    })
}

/// One PDS drop counter summed over workers.
pub fn drops(stats: &serde_json::Value, reason: &str) -> u64 {
    stats["workers"].as_array().map_or(0, |ws| {
        ws.iter()
            .filter_map(|w| w["pds"]["drops"][reason].as_u64())
            .sum()
    })
}

/// What the target answered the attacker: SES responses seen, and those
/// that say bytes were placed (`RC_OK` with a non-zero modified length).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Answers {
    pub responses: u64,
    pub placed: u64,
    /// The first placed one: (message_id, modified_length).
    pub first_placed: Option<(u16, u32)>,
}

/// Reads the frames `link` sees until `stop` is set, and tallies the SES
/// responses from `from` to `to`.
pub fn listen(
    link: &PacketSocket,
    from: Ipv4Addr,
    to: Ipv4Addr,
    stop: &std::sync::atomic::AtomicBool,
) -> Answers {
    use uet_wire::ses::{ReturnCode, SesRepr};
    let mut a = Answers::default();
    let mut buf = vec![0u8; 1 << 16];
    while !stop.load(std::sync::atomic::Ordering::Acquire) {
        let Ok(Some(n)) = link.recv(&mut buf, Duration::from_millis(20)) else {
            continue;
        };
        let Ok(f) = uet_wire::parse_frame(&buf[..n]) else {
            continue;
        };
        if f.headers.ip.src_addr() != IpAddr::V4(from) || f.headers.ip.dst_addr() != IpAddr::V4(to)
        {
            continue;
        }
        if let Some(SesRepr::Response(r)) = f.ses() {
            a.responses += 1;
            if r.return_code == ReturnCode::Ok && r.modified_length > 0 {
                a.placed += 1;
                a.first_placed
                    .get_or_insert_with(|| (r.message_id.get(), r.modified_length));
            }
        }
    }
    a
}
