//! Fixtures for the trace-style tests: one target process (job 7, pid 3)
//! with a region at ri 5, and helpers to push initiator packets through the
//! wire codec into the target.

use std::net::Ipv4Addr;

use uet_wire::pds::NextHeader;
use uet_wire::ses::{ReturnCode, SesRepr, SesResponseDataRepr, SesResponseRepr};
use uet_wire::{JobId, MessageId, PdcId, PidOnFep, ResourceIndex};

use crate::initiator::{Operation, OutgoingMessage, RemoteAddr};
use crate::memory::{Access, RegionSpec, Registration};
use crate::read::ReadResponder;
use crate::responder::{SesTarget, TargetOutcome, TargetResponse};
use crate::types::{LocalBuf, LocalRegion, MemoryKey, RegionAddr, Source};

/// The byte every fresh region is filled with, so untouched bytes show.
pub(crate) const FILL: u8 = 0xee;
/// The key of the fixture region.
pub(crate) const KEY: MemoryKey = MemoryKey(0x5eed);

pub(crate) fn job(v: u32) -> JobId {
    JobId::new(v).unwrap()
}

pub(crate) fn pid(v: u16) -> PidOnFep {
    PidOnFep::new(v).unwrap()
}

pub(crate) fn ri(v: u16) -> ResourceIndex {
    ResourceIndex::new(v).unwrap()
}

pub(crate) fn msg_id(v: u16) -> MessageId {
    MessageId::new(v).unwrap()
}

/// `(7, 3, ri)`.
pub(crate) fn addr(r: u16) -> RegionAddr {
    RegionAddr::new(job(7), pid(3), ri(r))
}

/// Peer 10.0.0.`n` on PDC `n`.
pub(crate) fn src(n: u8) -> Source {
    Source::new(
        Ipv4Addr::new(10, 0, 0, n),
        PdcId::new(u16::from(n)).unwrap(),
    )
}

/// A target with a `len`-byte region at (7, 3, 5), key [`KEY`], filled
/// with [`FILL`].
pub(crate) fn target(access: Access, len: usize) -> (SesTarget<Vec<u8>>, Registration) {
    let mut t = SesTarget::default();
    let reg = t
        .memory_mut()
        .register(RegionSpec::new(addr(5), KEY, access), vec![FILL; len])
        .unwrap();
    (t, reg)
}

/// The region's bytes.
pub(crate) fn region(t: &SesTarget<Vec<u8>>, a: RegionAddr) -> &[u8] {
    t.memory().get(a).unwrap().memory()
}

pub(crate) fn remote(reg: &Registration, offset: u64) -> RemoteAddr {
    RemoteAddr {
        region: reg.addr(),
        generation: reg.generation,
        key: reg.key,
        offset,
    }
}

/// Local source data: byte `i` is `(i * 7 + seed) as u8`.
pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

/// A write of `len` bytes from local offset 0.
pub(crate) fn write_op(
    reg: &Registration,
    offset: u64,
    len: u32,
    header_data: Option<u64>,
) -> Operation {
    Operation::Write {
        dst: remote(reg, offset),
        src: LocalBuf::new(LocalRegion(0), 0),
        len,
        header_data,
    }
}

/// Every packet of `m`, written from `local`.
pub(crate) fn packets(m: &OutgoingMessage, local: &[u8]) -> Vec<Vec<u8>> {
    (0..m.packet_count())
        .map(|i| {
            let mut buf = vec![0u8; m.packet_len(i).unwrap()];
            let (nh, n) = m.write_packet(i, local, &mut buf).unwrap();
            assert_eq!(nh, NextHeader::RequestStd);
            assert_eq!(n, buf.len());
            buf
        })
        .collect()
}

/// Parses a standard request packet and hands it to the target.
pub(crate) fn deliver(t: &mut SesTarget<Vec<u8>>, from: Source, pkt: &[u8]) -> TargetOutcome {
    let repr = SesRepr::parse(NextHeader::RequestStd, pkt)
        .unwrap()
        .unwrap();
    t.handle_request(from, &repr, &pkt[repr.header_len()..])
}

/// The response an outcome carries; panics if none.
pub(crate) fn response(o: &TargetOutcome) -> TargetResponse {
    *o.response()
        .unwrap_or_else(|| panic!("no response in {o:?}"))
}

/// The return code of an outcome's response.
pub(crate) fn rc(o: &TargetOutcome) -> ReturnCode {
    response(o).header.return_code
}

/// The response header, asserting it is guaranteed.
pub(crate) fn guaranteed_rsp(o: &TargetOutcome) -> SesResponseRepr {
    let r = response(o);
    assert!(r.guaranteed, "response not guaranteed: {o:?}");
    r.header
}

/// Every fragment of a read responder, parsed: `(header, data)`.
pub(crate) fn fragments(
    t: &SesTarget<Vec<u8>>,
    rr: &ReadResponder,
) -> Vec<(SesResponseDataRepr, Vec<u8>)> {
    (0..rr.fragment_count())
        .map(|i| {
            let mut buf = vec![0u8; rr.fragment_len(i).unwrap()];
            let n = rr.write_fragment(i, t.memory(), &mut buf).unwrap();
            let Some(SesRepr::ResponseData(h)) =
                SesRepr::parse(NextHeader::ResponseData, &buf[..n]).unwrap()
            else {
                panic!("not response data")
            };
            (h, buf[20..n].to_vec())
        })
        .collect()
}
