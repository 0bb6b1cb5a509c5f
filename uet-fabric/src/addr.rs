//! Endpoint names: what `fi_getname` returns and `fi_av_insert` takes.
//!
//! A name is 28 bytes (`docs/libfabric.md` "Addresses"):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | version (1) |
//! | 1 | 1 | flags (0) |
//! | 2 | 2 | UDP port, network order |
//! | 4 | 2 | `pid_on_fep`, network order (12 bits) |
//! | 6 | 2 | reserved (0) |
//! | 8 | 4 | `job_id`, network order (24 bits) |
//! | 12 | 16 | FEP IP address; IPv4 as IPv4-mapped IPv6 |
//!
//! The FEP address and `pid_on_fep` are what UET names a process by (§4.1);
//! the job travels in every request; the port is 4793 unless another
//! process already owned it on that address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

/// Length of an encoded [`Name`].
pub const NAME_LEN: usize = 28;
/// The version byte of the layout above.
const VERSION: u8 = 1;

/// A uet endpoint's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Name {
    /// The FEP IP address.
    pub ip: IpAddr,
    /// The UDP port the endpoint receives on.
    pub port: u16,
    /// `pid_on_fep` (12 bits).
    pub pid: u16,
    /// `job_id` (24 bits).
    pub job: u32,
}

/// Why bytes are not a [`Name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameError {
    /// Shorter than [`NAME_LEN`].
    Short,
    /// An unknown version byte.
    Version(u8),
    /// `pid_on_fep` or `job_id` out of range, or port 0.
    Range,
}

impl Name {
    /// Encodes into the 28-byte layout.
    #[must_use]
    pub fn encode(&self) -> [u8; NAME_LEN] {
        let mut b = [0u8; NAME_LEN];
        b[0] = VERSION;
        b[2..4].copy_from_slice(&self.port.to_be_bytes());
        b[4..6].copy_from_slice(&self.pid.to_be_bytes());
        b[8..12].copy_from_slice(&self.job.to_be_bytes());
        let v6 = match self.ip {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        b[12..28].copy_from_slice(&v6.octets());
        b
    }

    /// Decodes the 28-byte layout (longer input: the rest is ignored).
    pub fn decode(b: &[u8]) -> Result<Self, NameError> {
        let b: &[u8; NAME_LEN] = b
            .get(..NAME_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(NameError::Short)?;
        if b[0] != VERSION {
            return Err(NameError::Version(b[0]));
        }
        let port = u16::from_be_bytes([b[2], b[3]]);
        let pid = u16::from_be_bytes([b[4], b[5]]);
        let job = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
        if port == 0 || pid >= 1 << 12 || job >= 1 << 24 {
            return Err(NameError::Range);
        }
        let mut ip6 = [0u8; 16];
        ip6.copy_from_slice(&b[12..28]);
        let v6 = Ipv6Addr::from(ip6);
        let ip = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
        Ok(Self { ip, port, pid, job })
    }

    /// The UDP socket address.
    #[must_use]
    pub const fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip, self.port)
    }
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "uet://{}/{}/{}",
            SocketAddr::new(self.ip, self.port),
            self.job,
            self.pid
        )
    }
}

/// The address the kernel would send from toward `dst` (a connected UDP
/// socket's local address; nothing is sent).
#[must_use]
pub fn source_toward(dst: IpAddr) -> Option<IpAddr> {
    let any: IpAddr = match dst {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let s = UdpSocket::bind((any, 0)).ok()?;
    s.connect((dst, 9)).ok()?;
    s.local_addr().ok().map(|a| a.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_v4_and_v6() {
        let n = Name {
            ip: Ipv4Addr::new(10, 1, 2, 3).into(),
            port: 4793,
            pid: 7,
            job: 0x12_3456,
        };
        let b = n.encode();
        assert_eq!(b[0], 1);
        assert_eq!(&b[2..4], &[0x12, 0xb9]);
        assert_eq!(&b[8..12], &[0, 0x12, 0x34, 0x56]);
        assert_eq!(
            &b[12..28],
            &Ipv4Addr::new(10, 1, 2, 3).to_ipv6_mapped().octets()
        );
        assert_eq!(Name::decode(&b), Ok(n));
        let v6 = Name {
            ip: "fd00::5".parse().unwrap(),
            ..n
        };
        assert_eq!(Name::decode(&v6.encode()), Ok(v6));
        assert_eq!(n.to_string(), "uet://10.1.2.3:4793/1193046/7");
    }

    #[test]
    fn bad_names_are_refused() {
        let n = Name {
            ip: Ipv4Addr::LOCALHOST.into(),
            port: 4793,
            pid: 1,
            job: 1,
        };
        let b = n.encode();
        assert_eq!(Name::decode(&b[..27]), Err(NameError::Short));
        let mut v = b;
        v[0] = 2;
        assert_eq!(Name::decode(&v), Err(NameError::Version(2)));
        let mut p = b;
        p[4] = 0x10;
        assert_eq!(Name::decode(&p), Err(NameError::Range));
        let mut z = b;
        z[2] = 0;
        z[3] = 0;
        assert_eq!(Name::decode(&z), Err(NameError::Range));
        let mut j = b;
        j[8] = 1;
        assert_eq!(Name::decode(&j), Err(NameError::Range));
    }

    #[test]
    fn source_toward_loopback() {
        assert_eq!(
            source_toward(Ipv4Addr::LOCALHOST.into()),
            Some(Ipv4Addr::LOCALHOST.into())
        );
    }
}
