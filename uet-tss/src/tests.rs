//! Whole-frame tests: hand-worked sealed frames, round trips, tampering,
//! replay, rotation and the epoch check.

use core::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use uet_wire::encap::{EncapConfig, Transport, emit_frame, frame_len};
use uet_wire::inet::{EtherType, EthernetAddress, EthernetRepr, IpRepr, Ipv4Repr, Ipv6Repr};
use uet_wire::pds::PdsType;
use uet_wire::pds::tss::{ICV_LEN, Sdi};
use uet_wire::time::{Duration, Instant};
use uet_wire::{Dscp, Ecn, EntropyValue, parse_frame_with, parse_uet};

use crate::crypto::tests::{hex, hex_vec};
use crate::crypto::{Aead, KeyMaterial, Prf, Provider, RustCrypto, SecretKey};
use crate::domain::{
    DomainConfig, DomainKey, DropReason, KeyError, Mode, SealError, SecurityDomain, SourceId,
};
use crate::kdf;
use crate::registry::Tss;

/// REF's compiled-in default key for AN 0 (`uet_sec_sd.c` `def_key[0]`).
const REF_KEY0: &str = "07e9724958d9e1f710f594e18e11fd8d4a3582c256ccfecfc5eb1902e556bed4";
/// REF's default key for AN 1.
const REF_KEY1: &str = "d4c3a2cfb3c1067fddcf9fe2e1428a29c8d31bfb2a970264900f16df7c36db6f";

fn key0() -> SecretKey {
    SecretKey::new(hex(REF_KEY0))
}

fn key1() -> SecretKey {
    SecretKey::new(hex(REF_KEY1))
}

/// A UUD_REQ (next header: small request) and a small UET_WRITE request of
/// `n` payload bytes: plaintext that parses once opened.
fn plaintext(n: usize) -> Vec<u8> {
    let mut p = vec![0x30, 0x80, 0, 0];
    p.extend_from_slice(&[
        0x01, 0x03, 0x00, n as u8, 0x00, 0x00, 0x00, 0x07, 0x00, 0x03, 0x00, 0x0c, //
        0, 0, 0, 0, 0, 0, 0, 0x40,
    ]);
    p.extend((0..n).map(|i| i as u8));
    p
}

#[derive(Clone, Copy, Debug)]
enum Net {
    UdpV4,
    NativeV4,
    UdpV6,
    NativeV6,
}

const V4_SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const V4_DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const V6_SRC: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const V6_DST: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

/// A frame whose UET bytes are `hl` bytes of header room, `pt`, and room
/// for the ICV, from `src` (swapped addresses when `reverse`).
fn frame(net: Net, hl: usize, pt: &[u8], reverse: bool) -> Vec<u8> {
    let eth = EthernetRepr {
        dst: EthernetAddress([2, 0, 0, 0, 0, 2]),
        src: EthernetAddress([2, 0, 0, 0, 0, 1]),
        vlan: None,
        ethertype: EtherType::Ipv4,
    };
    let (s4, d4) = if reverse {
        (V4_DST, V4_SRC)
    } else {
        (V4_SRC, V4_DST)
    };
    let (s6, d6) = if reverse {
        (V6_DST, V6_SRC)
    } else {
        (V6_SRC, V6_DST)
    };
    let ip = match net {
        Net::UdpV4 | Net::NativeV4 => IpRepr::V4(Ipv4Repr {
            src: s4,
            dst: d4,
            protocol: 0,
            payload_len: 0,
            ttl: 64,
            dscp: Dscp::from_masked(0),
            ecn: Ecn::Ect0,
            ident: 1,
            dont_frag: true,
        }),
        Net::UdpV6 | Net::NativeV6 => IpRepr::V6(Ipv6Repr {
            src: s6,
            dst: d6,
            next_header: 0,
            payload_len: 0,
            hop_limit: 64,
            dscp: Dscp::from_masked(0),
            ecn: Ecn::Ect0,
            flow_label: Default::default(),
        }),
    };
    let cfg = EncapConfig::default();
    let ev = EntropyValue::from_masked(0xc001);
    let t = match net {
        Net::UdpV4 | Net::UdpV6 => Transport::udp(ev, &cfg),
        Net::NativeV4 | Net::NativeV6 => Transport::Entropy(ev),
    };
    let uet_len = hl + pt.len() + ICV_LEN;
    let mut buf = vec![0u8; frame_len(&eth, &ip, &t, &cfg, uet_len)];
    emit_frame(&eth, &ip, &t, &cfg, uet_len, &mut buf, |u| {
        u[hl..hl + pt.len()].copy_from_slice(pt);
    })
    .unwrap();
    buf
}

fn domain(mode: Mode, ssi: Option<u32>) -> SecurityDomain {
    let mut c = DomainConfig::new(Sdi::new(1).unwrap(), mode);
    c.ssi = ssi;
    let mut d = SecurityDomain::new(c);
    let k = match mode {
        Mode::ServerClient => DomainKey::Material(KeyMaterial::from_bytes(&[0x42; 44])),
        _ => DomainKey::Key(key0()),
    };
    d.install_key(false, k).unwrap();
    d
}

const T0: Instant = Instant::ZERO;

/// Direct mode over native IPv4, worked by hand from REF's rules and the
/// AES-GCM primitive: the IV is the IPv4 source address and the epoch|TSC
/// word; the AAD is the 12 bytes before the header (addresses, entropy
/// header) and the header; everything after the header up to the tag is
/// ciphertext. Then the exact bytes are pinned.
#[test]
fn hand_worked_direct_native_ipv4_frame() {
    let pt = plaintext(5);
    let mut f = frame(Net::NativeV4, 12, &pt, false);
    let mut tx = domain(Mode::Direct, None);
    tx.set_epoch(3);
    let s = tx.seal(&mut f, &EncapConfig::default()).unwrap();
    assert_eq!((s.tsc.get(), s.an), (0, false));
    // Ethernet 14, IPv4 20, entropy 4: the header is at 38.
    assert_eq!(s.layout.header, 38..50);
    assert_eq!(&f[38..50], &[0x08, 0, 0, 1, 0, 3, 0, 0, 0, 0, 0, 0]);
    // By hand.
    let iv: [u8; 12] = [10, 0, 0, 1, 0, 3, 0, 0, 0, 0, 0, 0];
    let aad = &f[26..50];
    assert_eq!(&aad[..12], &[10, 0, 0, 1, 10, 0, 0, 2, 0xc0, 0x01, 0, 0]);
    let mut want = pt.clone();
    let tag = RustCrypto
        .aead(&hex(REF_KEY0))
        .seal(&iv, aad, &mut want)
        .unwrap();
    assert_eq!(&f[50..50 + pt.len()], &want[..]);
    assert_eq!(&f[50 + pt.len()..], &tag);
    // Pinned.
    assert_eq!(f[26..].to_vec(), hex_vec(GOLDEN_DIRECT_NATIVE_V4));
    // Open: the plaintext is back, and it parses.
    let mut rx = domain(Mode::Direct, None);
    rx.set_epoch(3);
    let o = rx.open(T0, &mut f, &EncapConfig::default()).unwrap();
    assert_eq!(o.source, SourceId::V4([10, 0, 0, 1]));
    assert_eq!(&f[o.plaintext], &pt[..]);
    let fr = parse_frame_with(&f, &EncapConfig::default()).unwrap();
    assert_eq!(fr.pds().ty(), PdsType::UudReq);
    assert_eq!(fr.payload(), &[0, 1, 2, 3, 4]);
}

/// The frame of [`hand_worked_direct_native_ipv4_frame`] from the IPv4
/// source address on.
const GOLDEN_DIRECT_NATIVE_V4: &str = "0a0000010a000002c0010000\
     080000010003000000000000\
     679c540d6e3179767c98545f566dd5a910776ea273b2b826039f20d8bb\
     10a7db93a343d5f140344b7b28cb2108";

/// Cluster mode over UDP/IPv4 with an SSI, worked by hand: the sender's key
/// comes from the KDF ("U1", epoch, rekey, SSI), the IV is the SSI and the
/// epoch|TSC word XOR the derived mask, and the AAD is addresses, UDP ports
/// and header.
#[test]
fn hand_worked_cluster_udp_ipv4_frame_with_ssi() {
    let pt = plaintext(3);
    let mut f = frame(Net::UdpV4, 16, &pt, false);
    let mut tx = domain(Mode::Cluster, Some(0x0000_0abc));
    // Skip to TSC 0x1234: rekey value (0x1234 & 0xff00) >> 8 = 0x12.
    for _ in 0..0x1234 {
        let mut g = frame(Net::UdpV4, 16, &pt, false);
        tx.seal(&mut g, &EncapConfig::default()).unwrap();
    }
    let s = tx.seal(&mut f, &EncapConfig::default()).unwrap();
    assert_eq!(s.tsc.get(), 0x1234);
    // Ethernet 14, IPv4 20, UDP 8: header at 42, SP set.
    assert_eq!(&f[42..46], &[0x0c, 0, 0, 1]);
    assert_eq!(&f[46..50], &[0, 0, 0x0a, 0xbc]);
    let prf = RustCrypto.prf(&hex(REF_KEY0));
    let m = kdf::derive(&prf, b"U1", &[0, 0, 0, 0, 0, 0x12, 0, 0, 0x0a, 0xbc]);
    let mut iv = [0, 0, 0x0a, 0xbc, 0, 0, 0, 0, 0x12, 0x34, 0, 0];
    // epoch 0, TSC 0x1234 in the low 48 bits of the word.
    iv[4..].copy_from_slice(&0x1234u64.to_be_bytes());
    for (b, k) in iv.iter_mut().zip(m.iv_mask()) {
        *b ^= k;
    }
    let mut aad = Vec::new();
    aad.extend_from_slice(&f[26..34]); // addresses
    aad.extend_from_slice(&f[34..38]); // UDP ports
    aad.extend_from_slice(&f[42..58]); // header
    assert_eq!(&aad[8..12], &[0xc0, 0x01, 0x12, 0xb9]);
    let mut want = pt.clone();
    let tag = RustCrypto.aead(m.key()).seal(&iv, &aad, &mut want).unwrap();
    assert_eq!(&f[58..58 + pt.len()], &want[..]);
    assert_eq!(&f[58 + pt.len()..], &tag);
    // UDP checksum zero over IPv4: the ICV protects the datagram.
    assert_eq!(&f[40..42], &[0, 0]);
    let mut rx = domain(Mode::Cluster, Some(0x0000_0def));
    let o = rx.open(T0, &mut f, &EncapConfig::default()).unwrap();
    assert_eq!(o.source, SourceId::Ssi(0xabc));
    assert_eq!(&f[o.plaintext], &pt[..]);
}

fn all_modes() -> impl Strategy<Value = (Mode, Net, Option<u32>)> {
    (
        prop::sample::select(vec![Mode::Direct, Mode::Cluster, Mode::ServerClient]),
        prop::sample::select(vec![Net::UdpV4, Net::NativeV4, Net::UdpV6, Net::NativeV6]),
        prop::option::of(any::<u32>()),
    )
        .prop_map(|(m, n, ssi)| {
            // IPv6 outside cluster mode needs an SSI for a unique IV.
            let v6 = matches!(n, Net::UdpV6 | Net::NativeV6);
            let ssi = if v6 && m != Mode::Cluster {
                Some(ssi.unwrap_or(7))
            } else {
                ssi
            };
            (m, n, ssi)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Seal then open gives the plaintext back, for every mode, network
    /// and header shape.
    #[test]
    fn seal_open_round_trip((mode, net, ssi) in all_modes(), n in 0usize..200, skip in 0u64..600) {
        let pt = plaintext(n);
        let mut tx = domain(mode, ssi);
        let mut rx = domain(mode, ssi.map(|s| s ^ 1));
        for _ in 0..skip {
            let mut g = frame(net, tx.config().header_len(), &pt, false);
            tx.seal(&mut g, &EncapConfig::default()).unwrap();
        }
        let mut f = frame(net, tx.config().header_len(), &pt, false);
        let s = tx.seal(&mut f, &EncapConfig::default()).unwrap();
        prop_assert_eq!(s.tsc.get(), skip);
        if n > 8 {
            prop_assert_ne!(&f[s.layout.ciphertext], &pt[..]);
        }
        let o = rx.open(T0, &mut f, &EncapConfig::default()).unwrap();
        prop_assert_eq!(&f[o.plaintext], &pt[..]);
        let u = parse_uet(&f[o.uet_range], false).unwrap();
        prop_assert_eq!(u.payload.len(), n);
        prop_assert_eq!(rx.stats().opened, 1);
    }

    /// Any single bit flipped in the AAD (addresses, flow bytes, header),
    /// the ciphertext or the tag makes the packet a counted drop.
    #[test]
    fn any_bit_flip_is_rejected((mode, net, ssi) in all_modes(), n in 0usize..64, pick in any::<prop::sample::Index>(), bit in 0u8..8) {
        let pt = plaintext(n);
        let mut tx = domain(mode, ssi);
        let mut f = frame(net, tx.config().header_len(), &pt, false);
        let s = tx.seal(&mut f, &EncapConfig::default()).unwrap();
        let l = &s.layout;
        let covered: Vec<usize> = l.addrs.clone()
            .chain(l.flow.clone())
            .chain(l.header.clone())
            .chain(l.ciphertext.clone())
            .chain(l.tag.clone())
            .collect();
        let i = covered[pick.index(covered.len())];
        f[i] ^= 1 << bit;
        // Keep the L2-L4 checks out of the way: fix the IPv4 header
        // checksum and drop the UDP checksum, so only TSS can object.
        let (l3, v4) = (14, matches!(net, Net::UdpV4 | Net::NativeV4));
        if v4 {
            let mut ip = uet_wire::inet::Ipv4Packet::new_checked(&mut f[l3..]).unwrap();
            ip.fill_checksum();
        }
        if matches!(net, Net::UdpV4 | Net::UdpV6) {
            let l4 = l.flow.start;
            f[l4 + 6] = 0;
            f[l4 + 7] = 0;
        }
        let mut rx = domain(mode, ssi);
        let r = rx.open(T0, &mut f, &EncapConfig::default());
        prop_assert!(r.is_err(), "flip at {} accepted", i);
        let reason = r.unwrap_err();
        prop_assert_eq!(rx.stats().drops.get(reason), 1);
        prop_assert_eq!(rx.stats().drops.total(), 1);
    }

    /// A TSC is accepted once per sender and key, whatever the order of
    /// arrival within the window.
    #[test]
    fn replays_are_rejected(order in Just((0u64..40).collect::<Vec<_>>()).prop_shuffle(), dup in 0usize..40) {
        let pt = plaintext(4);
        let mut tx = domain(Mode::Direct, None);
        let frames: Vec<Vec<u8>> = (0..40).map(|_| {
            let mut f = frame(Net::UdpV4, 12, &pt, false);
            tx.seal(&mut f, &EncapConfig::default()).unwrap();
            f
        }).collect();
        let mut rx = domain(Mode::Direct, None);
        for &i in &order {
            let mut f = frames[i as usize].clone();
            prop_assert!(rx.open(T0, &mut f, &EncapConfig::default()).is_ok());
        }
        let mut f = frames[dup].clone();
        prop_assert_eq!(rx.open(T0, &mut f, &EncapConfig::default()), Err(DropReason::Replay));
        prop_assert_eq!(rx.stats().drops.get(DropReason::Replay), 1);
    }
}

#[test]
fn replay_window_edges_and_forged_packets_do_not_move_it() {
    let pt = plaintext(1);
    let mut tx = domain(Mode::Direct, None);
    let frames: Vec<Vec<u8>> = (0..1100)
        .map(|_| {
            let mut f = frame(Net::UdpV4, 12, &pt, false);
            tx.seal(&mut f, &EncapConfig::default()).unwrap();
            f
        })
        .collect();
    let mut rx = domain(Mode::Direct, None);
    let cfg = EncapConfig::default();
    // Far ahead first: TSC 1099, then the left edge of a 1024 window.
    rx.open(T0, &mut frames[1099].clone(), &cfg).unwrap();
    rx.open(T0, &mut frames[1099 - 1023].clone(), &cfg).unwrap();
    assert_eq!(
        rx.open(T0, &mut frames[1099 - 1024].clone(), &cfg),
        Err(DropReason::TooOld)
    );
    // A forged packet with a far-ahead TSC fails its tag and does not slide
    // the window: old-but-inside packets are still accepted afterwards.
    let mut forged = frames[500].clone();
    forged[42 + 4..42 + 12].copy_from_slice(&[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    assert_eq!(rx.open(T0, &mut forged, &cfg), Err(DropReason::BadTag));
    rx.open(T0, &mut frames[600].clone(), &cfg).unwrap();
    assert_eq!(rx.stats().opened, 3);
}

#[test]
fn rotation_accepts_the_old_an_only_inside_the_window() {
    let cfg = EncapConfig::default();
    let pt = plaintext(2);
    let mut a = domain(Mode::Cluster, None);
    let mut b = domain(Mode::Cluster, None);
    let seal = |d: &mut SecurityDomain| {
        let mut f = frame(Net::UdpV4, 12, &pt, false);
        d.seal(&mut f, &cfg).unwrap();
        f
    };
    let old = seal(&mut a);
    let old_late = seal(&mut a);
    // A rotation: the next key goes on AN 1 everywhere first.
    assert_eq!(
        a.install_key(false, DomainKey::Key(key1())),
        Err(KeyError::ActiveAn)
    );
    assert_eq!(
        a.install_key(true, DomainKey::Key(key0())),
        Err(KeyError::SameAsOther)
    );
    a.install_key(true, DomainKey::Key(key1())).unwrap();
    b.install_key(true, DomainKey::Key(key1())).unwrap();
    // The sender switches; its TSC starts again under the new key.
    let t1 = Instant::from_nanos(1_000_000_000);
    a.activate(true, t1).unwrap();
    let new = seal(&mut a);
    assert_eq!(new[42] & 1, 1, "AN bit set");
    assert_eq!(a.next_tsc(), 1);
    // The receiver switches too (its own activation opens its window).
    b.activate(true, t1).unwrap();
    assert_eq!(b.poll_timeout(), Some(t1 + Duration::from_secs(2)));
    let mut new = new;
    b.open(t1, &mut new, &cfg).unwrap();
    // TSC 0 under the new key is not a replay of TSC 0 under the old one.
    let mut old = old;
    b.open(t1, &mut old, &cfg).unwrap();
    // Inside the window the old AN is still accepted...
    let inside = t1 + Duration::from_millis(1999);
    b.open(inside, &mut old_late.clone(), &cfg).unwrap();
    // ...and after it, not: the old key is retired (and zeroized).
    let mut g = old_late;
    let after = t1 + Duration::from_secs(2);
    assert_eq!(b.open(after, &mut g, &cfg), Err(DropReason::NoKey));
    assert_eq!(b.poll_timeout(), None);
    assert_eq!(b.stats().drops.get(DropReason::NoKey), 1);
    b.open(after, &mut seal(&mut a), &cfg).unwrap();
    // A retired AN can take the next key.
    b.install_key(false, DomainKey::Key(SecretKey::new([9; 32])))
        .unwrap();
    assert_eq!(b.retire(true), Err(KeyError::ActiveAn));
}

#[test]
fn stale_epochs_are_dropped_newer_ones_accepted() {
    let cfg = EncapConfig::default();
    let pt = plaintext(2);
    let mut tx = domain(Mode::Direct, None);
    let mut rx = domain(Mode::Direct, None);
    rx.set_epoch(100);
    for (epoch, ok) in [
        (100, true),
        (84, true),
        (83, false),
        (101, true),
        (30000, true),
        (40000, false),
    ] {
        tx.set_epoch(epoch);
        let mut f = frame(Net::UdpV4, 12, &pt, false);
        tx.seal(&mut f, &cfg).unwrap();
        let r = rx.open(T0, &mut f, &cfg);
        if ok {
            assert!(r.is_ok(), "epoch {epoch}: {r:?}");
        } else {
            assert_eq!(r, Err(DropReason::StaleEpoch), "epoch {epoch}");
        }
    }
    // Serial-number arithmetic modulo 2^16, as REF: 100 - 30000 is 35636,
    // at least 2^15, so 30000 counts as newer; 100 - 40000 is 25636, so
    // 40000 counts as older, by far more than the lifetime.
}

#[test]
fn wrong_sdi_missing_ssi_and_unknown_domains_are_counted() {
    let cfg = EncapConfig::default();
    let pt = plaintext(2);
    let mut tx = domain(Mode::Direct, None);
    let mut f = frame(Net::UdpV4, 12, &pt, false);
    tx.seal(&mut f, &cfg).unwrap();
    // The receiver requires SSIs.
    let mut rx = domain(Mode::Direct, Some(5));
    assert_eq!(
        rx.open(T0, &mut f.clone(), &cfg),
        Err(DropReason::MissingSsi)
    );
    // Another SDI.
    let mut c = DomainConfig::new(Sdi::new(2).unwrap(), Mode::Direct);
    c.ssi = None;
    let mut other = SecurityDomain::new(c);
    other.install_key(false, DomainKey::Key(key0())).unwrap();
    assert_eq!(
        other.open(T0, &mut f.clone(), &cfg),
        Err(DropReason::UnknownSdi)
    );
    // The registry finds the domain by SDI, and counts what none takes.
    let mut tss: Tss = Tss::new();
    tss.insert(other);
    assert_eq!(
        tss.open(T0, &mut f.clone(), &cfg),
        Err(DropReason::UnknownSdi)
    );
    tss.insert(domain(Mode::Direct, None));
    tss.open(T0, &mut f.clone(), &cfg).unwrap();
    let mut plain = frame(Net::UdpV4, 0, &pt, false);
    assert_eq!(tss.open(T0, &mut plain, &cfg), Err(DropReason::Malformed));
    assert_eq!(tss.unclaimed().get(DropReason::UnknownSdi), 1);
    assert_eq!(tss.unclaimed().get(DropReason::Malformed), 1);
    assert_eq!(tss.get(1).unwrap().stats().opened, 1);
}

#[test]
fn ipv6_outside_cluster_mode_needs_an_ssi() {
    let cfg = EncapConfig::default();
    let pt = plaintext(2);
    let mut tx = domain(Mode::Direct, None);
    let mut f = frame(Net::UdpV6, 12, &pt, false);
    assert_eq!(tx.seal(&mut f, &cfg), Err(SealError::SsiRequired));
    let mut tx = domain(Mode::Cluster, None);
    tx.seal(&mut f, &cfg).unwrap();
    domain(Mode::Cluster, None).open(T0, &mut f, &cfg).unwrap();
}

#[test]
fn tsc_limit_is_fatal_for_the_sender() {
    let cfg = EncapConfig::default();
    let pt = plaintext(1);
    let mut c = DomainConfig::new(Sdi::new(1).unwrap(), Mode::Direct);
    c.tsc_limit = 3;
    let mut tx = SecurityDomain::new(c);
    tx.install_key(false, DomainKey::Key(key0())).unwrap();
    for _ in 0..3 {
        tx.seal(&mut frame(Net::UdpV4, 12, &pt, false), &cfg)
            .unwrap();
    }
    assert_eq!(
        tx.seal(&mut frame(Net::UdpV4, 12, &pt, false), &cfg),
        Err(SealError::TscExhausted)
    );
    // A new key resets the counter.
    tx.install_key(true, DomainKey::Key(key1())).unwrap();
    tx.activate(true, T0).unwrap();
    tx.seal(&mut frame(Net::UdpV4, 12, &pt, false), &cfg)
        .unwrap();
}

#[test]
fn server_mode_host_and_client_agree() {
    let cfg = EncapConfig::default();
    let pt = plaintext(6);
    let client_ssi = 0x0102_0304;
    // The host derives the client's material: "U2", epoch 0, no rekey,
    // the client's SSI.
    let prf = RustCrypto.prf(&hex(REF_KEY0));
    let m = kdf::derive(
        &prf,
        kdf::LABEL_SERVER,
        &kdf::small_context(0, 0, [1, 2, 3, 4]),
    );
    let mut host = domain(Mode::ServerHost, Some(client_ssi));
    let mut c = DomainConfig::new(Sdi::new(1).unwrap(), Mode::ServerClient);
    c.ssi = Some(client_ssi);
    let mut client = SecurityDomain::new(c);
    client.install_key(false, DomainKey::Material(m)).unwrap();
    // Client to host.
    let mut f = frame(Net::UdpV4, 16, &pt, false);
    client.seal(&mut f, &cfg).unwrap();
    host.open(T0, &mut f, &cfg).unwrap();
    // Host to client: the header carries the client's SSI.
    let mut f = frame(Net::UdpV4, 16, &pt, true);
    host.seal_with_ssi(&mut f, &cfg, Some(client_ssi)).unwrap();
    assert_eq!(&f[46..50], &[1, 2, 3, 4]);
    client.open(T0, &mut f, &cfg).unwrap();
    assert_eq!(&f[58..58 + pt.len()], &pt[..]);
    // Key kinds are checked.
    assert_eq!(
        client.install_key(true, DomainKey::Key(key1())),
        Err(KeyError::WrongKind)
    );
}

#[test]
fn table_bounds_hold() {
    let cfg = EncapConfig::default();
    let pt = plaintext(1);
    let mut c = DomainConfig::new(Sdi::new(1).unwrap(), Mode::Cluster);
    c.max_sources = 2;
    c.key_cache = 2;
    let mut rx = SecurityDomain::new(c);
    rx.install_key(false, DomainKey::Key(key0())).unwrap();
    for ssi in 0..3u32 {
        let mut tx = domain(Mode::Cluster, Some(ssi));
        let mut f = frame(Net::UdpV4, 16, &pt, false);
        tx.seal(&mut f, &cfg).unwrap();
        let r = rx.open(T0, &mut f, &cfg);
        if ssi < 2 {
            r.unwrap();
        } else {
            assert_eq!(r, Err(DropReason::SourceTableFull));
        }
    }
    assert_eq!(rx.source_count(), 2);
    // Forged packets from new sources derive keys but never enter the cache
    // or the sender table.
    let mut tx = domain(Mode::Cluster, Some(0));
    let mut f = frame(Net::UdpV4, 16, &pt, false);
    tx.seal(&mut f, &cfg).unwrap();
    let mut f = frame(Net::UdpV4, 16, &pt, false);
    tx.seal(&mut f, &cfg).unwrap(); // TSC 1: not a replay of TSC 0
    let n = f.len();
    f[n - 1] ^= 1;
    assert_eq!(rx.open(T0, &mut f, &cfg), Err(DropReason::BadTag));
    assert_eq!(rx.source_count(), 2);
}

#[test]
fn keys_are_cached_per_rekey_value() {
    let cfg = EncapConfig::default();
    let pt = plaintext(1);
    let mut tx = domain(Mode::Cluster, None);
    let mut rx = domain(Mode::Cluster, None);
    for _ in 0..600 {
        let mut f = frame(Net::UdpV4, 12, &pt, false);
        tx.seal(&mut f, &cfg).unwrap();
        rx.open(T0, &mut f, &cfg).unwrap();
    }
    // TSC 0..600 spans rekey values 0, 1, 2: three derivations each side.
    assert_eq!(tx.stats().derivations, 3);
    assert_eq!(rx.stats().derivations, 3);
    let prf = RustCrypto.prf(&hex(REF_KEY0));
    let _ = prf.mac(&[]);
}

/// Sealing UET bytes with their flow given apart gives the same bytes as
/// sealing the whole frame (the datapath writes UET bytes before the
/// headers), and each form opens what the other sealed; a flow that differs
/// in any part (address, port) does not open.
#[test]
fn uet_bytes_and_whole_frames_seal_alike() {
    use crate::domain::Flow;
    use core::net::IpAddr;
    for (net, mode, ssi) in [
        (Net::UdpV4, Mode::Direct, None),
        (Net::UdpV4, Mode::Cluster, Some(7)),
        (Net::NativeV4, Mode::Cluster, None),
        (Net::UdpV6, Mode::Cluster, None),
        (Net::NativeV6, Mode::Direct, Some(9)),
    ] {
        let hl = if ssi.is_some() { 16 } else { 12 };
        let pt = plaintext(40);
        let cfg = EncapConfig::default();
        let mut whole = frame(net, hl, &pt, false);
        domain(mode, ssi).seal(&mut whole, &cfg).unwrap();
        let (src, dst): (IpAddr, IpAddr) = match net {
            Net::UdpV4 | Net::NativeV4 => (V4_SRC.into(), V4_DST.into()),
            Net::UdpV6 | Net::NativeV6 => (V6_SRC.into(), V6_DST.into()),
        };
        let flow = match net {
            Net::UdpV4 | Net::UdpV6 => Flow::udp(src, dst, 0xc001, cfg.udp_port).unwrap(),
            Net::NativeV4 | Net::NativeV6 => Flow::new(src, dst, [0xc0, 0x01, 0, 0]).unwrap(),
        };
        let uet_len = hl + pt.len() + ICV_LEN;
        let at = whole.len() - uet_len;
        let mut uet = vec![0u8; uet_len];
        uet[hl..hl + pt.len()].copy_from_slice(&pt);
        domain(mode, ssi).seal_uet(&mut uet, &flow).unwrap();
        assert_eq!(&whole[at..], &uet[..], "{net:?} {mode:?}");
        // The frame form opens what the UET form sealed, and back.
        let mut rx = domain(mode, ssi);
        let o = rx.open_uet(T0, &mut uet.clone(), &flow).unwrap();
        assert_eq!(o.plaintext, hl..hl + pt.len());
        let o = rx.open(T0, &mut whole, &cfg);
        assert_eq!(o, Err(DropReason::Replay), "{net:?}: same TSC twice");
        // Any other flow fails the tag.
        let other = match net {
            Net::UdpV4 | Net::UdpV6 => Flow::udp(src, dst, 0xc002, cfg.udp_port).unwrap(),
            Net::NativeV4 | Net::NativeV6 => Flow::new(dst, dst, [0xc0, 0x01, 0, 0]).unwrap(),
        };
        let mut rx = domain(mode, ssi);
        assert_eq!(rx.open_uet(T0, &mut uet, &other), Err(DropReason::BadTag));
        assert_eq!(rx.stats().drops.get(DropReason::BadTag), 1);
    }
}
