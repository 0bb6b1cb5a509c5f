//! [`FrameOps`] over `uet-wire`: how the simulated switches see UET frames.

use core::net::IpAddr;

use uet_wire::encap::EncapConfig;
use uet_wire::inet::{EtherType, EthernetPacket, Ipv4Packet, Ipv6Packet, UdpPacket};
use uet_wire::{Dscp, Ecn};

use crate::fabric::FrameOps;

/// Switch-side frame access for UET over UDP or directly over IP.
#[derive(Debug, Clone, Copy)]
pub struct UetFrameOps {
    /// The encapsulation in use.
    pub encap: EncapConfig,
    /// DSCP of trimmable data packets (`DSCP_TRIMMABLE`, §7).
    pub dscp_trimmable: Dscp,
    /// DSCP of trimmable retransmissions (`DSCP_TRIMMABLE_RTX`, §6/§7), if
    /// the senders mark them (`PdsConfig::dscp_data_rtx`).
    pub dscp_trimmable_rtx: Option<Dscp>,
}

impl Default for UetFrameOps {
    fn default() -> Self {
        Self {
            encap: EncapConfig::default(),
            dscp_trimmable: Dscp::from_masked(0),
            dscp_trimmable_rtx: Some(DSCP_TRIMMABLE_RTX),
        }
    }
}

/// The `DSCP_TRIMMABLE_RTX` value the simulated deployments use (the spec
/// names the code point but gives no value; 10 is unused by the others).
pub const DSCP_TRIMMABLE_RTX: Dscp = Dscp::from_masked(10);

fn dscp_of(frame: &[u8]) -> Option<(Dscp, usize)> {
    match ip(frame)? {
        (_, Ip::V4(p)) => Some((p.dscp(), p.payload().len())),
        (_, Ip::V6(p)) => Some((p.dscp(), p.payload().len())),
    }
}

enum Ip<'a> {
    V4(Ipv4Packet<&'a [u8]>),
    V6(Ipv6Packet<&'a [u8]>),
}

fn ip(frame: &[u8]) -> Option<(usize, Ip<'_>)> {
    let eth = EthernetPacket::new_checked(frame).ok()?;
    let l3 = eth.header_len();
    let rest = frame.get(l3..)?;
    match eth.ethertype() {
        EtherType::Ipv4 => Some((l3, Ip::V4(Ipv4Packet::new_checked(rest).ok()?))),
        EtherType::Ipv6 => Some((l3, Ip::V6(Ipv6Packet::new_checked(rest).ok()?))),
        _ => None,
    }
}

impl FrameOps for UetFrameOps {
    fn dst(&self, frame: &[u8]) -> Option<IpAddr> {
        match ip(frame)?.1 {
            Ip::V4(p) => Some(IpAddr::V4(p.dst_addr())),
            Ip::V6(p) => Some(IpAddr::V6(p.dst_addr())),
        }
    }

    fn entropy(&self, frame: &[u8]) -> u16 {
        let Some((_, ip)) = ip(frame) else { return 0 };
        let (proto, l4) = match &ip {
            Ip::V4(p) => (p.protocol(), p.payload()),
            Ip::V6(p) => (p.next_header(), p.payload()),
        };
        // UDP: the source port; native IP: the entropy header's first 16
        // bits (§1). Both sit in the first two bytes of the L4 header.
        if proto == 17 || proto == self.encap.ip_protocol {
            l4.get(..2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
        } else {
            0
        }
    }

    fn ect(&self, frame: &[u8]) -> bool {
        match ip(frame) {
            Some((_, Ip::V4(p))) => p.ecn() != Ecn::NotEct,
            Some((_, Ip::V6(p))) => p.ecn() != Ecn::NotEct,
            None => false,
        }
    }

    fn mark_ce(&self, frame: &mut [u8]) {
        let Some((l3, v)) = ip(frame).map(|(l3, ip)| (l3, matches!(ip, Ip::V4(_)))) else {
            return;
        };
        let rest = &mut frame[l3..];
        if v {
            if let Ok(mut p) = Ipv4Packet::new_checked(rest) {
                p.set_ecn(Ecn::Ce);
            }
        } else if let Ok(mut p) = Ipv6Packet::new_checked(rest) {
            p.set_ecn(Ecn::Ce);
        }
    }

    fn trimmable(&self, frame: &[u8]) -> bool {
        dscp_of(frame).is_some_and(|(d, len)| {
            (d == self.dscp_trimmable || Some(d) == self.dscp_trimmable_rtx) && len > 24
        })
    }

    fn trimmable_rtx(&self, frame: &[u8]) -> bool {
        dscp_of(frame).is_some_and(|(d, _)| Some(d) == self.dscp_trimmable_rtx)
    }

    fn trim(&self, frame: &mut [u8], ip_payload: usize, dscp: u8) -> usize {
        let Some((l3, v4)) = ip(frame).map(|(l3, ip)| (l3, matches!(ip, Ip::V4(_)))) else {
            return frame.len();
        };
        let dscp = Dscp::from_masked(dscp);
        let rest = &mut frame[l3..];
        // The IP length shrinks; UDP length and checksum stay as they were
        // (a trimming switch does not rewrite L4, §7 / ASTERIA).
        if v4 {
            let Ok(mut p) = Ipv4Packet::new_checked(rest) else {
                return frame.len();
            };
            let hl = p.header_len();
            let keep = ip_payload.min(p.payload().len());
            p.set_total_len((hl + keep) as u16);
            p.set_dscp(dscp);
            p.fill_checksum();
            l3 + hl + keep
        } else {
            let Ok(mut p) = Ipv6Packet::new_checked(rest) else {
                return frame.len();
            };
            let keep = ip_payload.min(p.payload().len());
            p.set_payload_len(keep as u16);
            p.set_dscp(dscp);
            l3 + 40 + keep
        }
    }
}

/// Reads the UDP source port of a frame (test helper).
pub fn udp_src_port(frame: &[u8]) -> Option<u16> {
    let (_, ip) = ip(frame)?;
    let l4 = match ip {
        Ip::V4(p) => p.payload().to_vec(),
        Ip::V6(p) => p.payload().to_vec(),
    };
    UdpPacket::new_checked(&l4[..]).ok().map(|u| u.src_port())
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;
    use uet_wire::EntropyValue;
    use uet_wire::encap::{Transport, Trim, emit_frame, frame_len, parse_l2_l4};
    use uet_wire::inet::{EthernetAddress, EthernetRepr, IpRepr, Ipv4Repr};

    fn frame(uet_len: usize, dscp: u8) -> Vec<u8> {
        let eth = EthernetRepr {
            dst: EthernetAddress([2, 0, 0, 0, 0, 2]),
            src: EthernetAddress([2, 0, 0, 0, 0, 1]),
            vlan: None,
            ethertype: EtherType::Ipv4,
        };
        let ip = IpRepr::V4(Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            protocol: 17,
            payload_len: 0,
            ttl: 64,
            dscp: Dscp::from_masked(dscp),
            ecn: Ecn::Ect0,
            ident: 0,
            dont_frag: true,
        });
        let cfg = EncapConfig::default();
        let t = Transport::udp(EntropyValue::from_masked(0xc123), &cfg);
        let mut buf = vec![0u8; frame_len(&eth, &ip, &t, &cfg, uet_len)];
        emit_frame(&eth, &ip, &t, &cfg, uet_len, &mut buf, |u| u.fill(0x5a)).unwrap();
        buf
    }

    #[test]
    fn routing_entropy_and_ecn() {
        let ops = UetFrameOps::default();
        let mut f = frame(100, 0);
        assert_eq!(ops.dst(&f), Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))));
        assert_eq!(ops.entropy(&f), 0xc123);
        assert!(ops.ect(&f));
        ops.mark_ce(&mut f);
        let (h, _) = parse_l2_l4(&f, &ops.encap).unwrap();
        assert_eq!(h.ip.ecn(), Ecn::Ce, "CE set and IPv4 checksum still valid");
    }

    #[test]
    fn trimmed_frames_parse_as_trimmed() {
        let ops = UetFrameOps::default();
        let mut f = frame(4000, 0);
        assert!(ops.trimmable(&f));
        assert!(
            !ops.trimmable(&frame(4000, 46)),
            "control traffic is not trimmed"
        );
        let n = ops.trim(&mut f, 24, 16);
        f.truncate(n);
        assert_eq!(n, 14 + 20 + 24);
        let (h, uet) = parse_l2_l4(&f, &ops.encap).unwrap();
        assert_eq!(h.trimmed, Some(Trim::Trimmed));
        assert_eq!(uet.len(), 16, "the PDS request header survives");
        assert_eq!(h.entropy.get(), 0xc123);
    }
}
