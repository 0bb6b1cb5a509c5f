//! Interface facts from getifaddrs(3): index, MAC and addresses. (rustix
//! has no getifaddrs, hence libc.)

use std::ffi::CStr;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{Error, Result};

/// What the datapath needs to know about an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IfInfo {
    pub(crate) index: u32,
    pub(crate) mac: [u8; 6],
    pub(crate) addrs: Vec<IpAddr>,
}

/// Looks `name` up in the calling thread's network namespace.
pub(crate) fn interface(name: &str) -> Result<IfInfo> {
    let mut info = IfInfo {
        index: 0,
        mac: [0; 6],
        addrs: Vec::new(),
    };
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list and stores its head in `head`.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(Error::last("getifaddrs"));
    }
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, valid until
        // freeifaddrs below; ifa_name is a NUL-terminated string.
        let ifa = unsafe { &*p };
        let n = unsafe { CStr::from_ptr(ifa.ifa_name) };
        if n.to_bytes() == name.as_bytes() && !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr is non-null; its family says which sockaddr
            // the kernel stored.
            unsafe {
                match i32::from((*ifa.ifa_addr).sa_family) {
                    libc::AF_INET => {
                        let sin = ifa.ifa_addr.cast::<libc::sockaddr_in>();
                        info.addrs.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                            (*sin).sin_addr.s_addr,
                        ))));
                    }
                    libc::AF_INET6 => {
                        let sin6 = ifa.ifa_addr.cast::<libc::sockaddr_in6>();
                        info.addrs
                            .push(IpAddr::V6(Ipv6Addr::from((*sin6).sin6_addr.s6_addr)));
                    }
                    libc::AF_PACKET => {
                        let sll = ifa.ifa_addr.cast::<libc::sockaddr_ll>();
                        info.index = (*sll).sll_ifindex as u32;
                        if (*sll).sll_halen == 6 {
                            let a = (*sll).sll_addr;
                            info.mac.copy_from_slice(&a[..6]);
                        }
                    }
                    _ => {}
                }
            }
        }
        p = ifa.ifa_next;
    }
    // SAFETY: frees the list getifaddrs allocated; not used afterwards.
    unsafe { libc::freeifaddrs(head) };
    if info.index == 0 {
        let c = std::ffi::CString::new(name)
            .map_err(|_| Error::invalid("if_nametoindex", "interface name with NUL"))?;
        // SAFETY: `c` is a valid NUL-terminated string.
        info.index = unsafe { libc::if_nametoindex(c.as_ptr()) };
        if info.index == 0 {
            return Err(Error::new(
                "if_nametoindex",
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no interface named {name}"),
                ),
            ));
        }
    }
    Ok(info)
}
