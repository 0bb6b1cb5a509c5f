//! `fi_getinfo`: what the provider offers, filtered honestly by the hints
//! (`docs/libfabric.md` "What it offers").
//!
//! A hint the provider cannot honour makes it answer `-FI_ENODATA` instead
//! of an `fi_info` it would not live up to. The `fi_info` it returns is
//! allocated with the C allocator, field by field, because the application
//! frees it with `fi_freeinfo`.

use std::ffi::{CStr, CString, c_char};
use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};

use crate::addr::{NAME_LEN, Name, source_toward};
use crate::engine::UET_PORT;
use crate::errors::{self, Errno};
use crate::ffi;
use crate::ffi_flags as f;

/// The provider's name, as `FI_PROVIDER=uet` selects it.
pub(crate) const PROV_NAME: &CStr = c"uet";
/// The fabric's name.
pub(crate) const FABRIC_NAME: &CStr = c"uet";
/// The provider's version (`FI_VERSION(0, 1)`).
pub(crate) const PROV_VERSION: u32 = 1;
/// The libfabric API version it implements.
pub(crate) const API_VERSION: u32 = (1 << 16) | 17;

/// Primary capabilities.
pub(crate) const PRIMARY: u64 = f::MSG | f::TAGGED | f::RMA;
/// Secondary capabilities.
pub(crate) const SECONDARY: u64 = f::SEND
    | f::RECV
    | f::READ
    | f::WRITE
    | f::REMOTE_READ
    | f::REMOTE_WRITE
    | f::SOURCE
    | f::DIRECTED_RECV
    | f::LOCAL_COMM
    | f::REMOTE_COMM;
/// Bytes `fi_inject` copies (one packet's worth).
pub(crate) const INJECT_SIZE: usize = 4096;
/// Operations in flight per endpoint, each direction.
pub(crate) const QUEUE_SIZE: usize = 16384;
/// Largest message (`request_length` is 32 bits).
pub(crate) const MAX_MSG_SIZE: usize = u32::MAX as usize;
/// Bytes of unexpected messages buffered (the SES target's bound).
pub(crate) const BUFFERED_RECV: usize = 64 << 20;
/// Default operation flags an `fi_info` may carry: completion
/// semantics the provider always meets (every completion is delivery
/// complete: the target placed the data) and `FI_COMPLETION`.
const OP_FLAGS: u64 =
    f::COMPLETION | f::INJECT_COMPLETE | f::TRANSMIT_COMPLETE | f::DELIVERY_COMPLETE;
/// Tag bits: all 64 are matched.
const TAG_FORMAT: u64 = 0xaaaa_aaaa_aaaa_aaaa;

/// What an engine is built from: taken from the `fi_info` the application
/// hands to `fi_domain`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub(crate) local: Name,
    pub(crate) auto_progress: bool,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|s| !s.is_empty())
}

/// The job and `pid_on_fep` of this process (`FI_UET_JOB`, `FI_UET_PID`).
fn job_and_pid() -> Result<(u32, u16), Errno> {
    let job = match env("FI_UET_JOB") {
        Some(s) => s.parse::<u32>().ok().filter(|j| *j < 1 << 24),
        None => Some(1),
    };
    let pid = match env("FI_UET_PID") {
        Some(s) => s.parse::<u16>().ok().filter(|p| *p < 1 << 12),
        None => Some(0),
    };
    match (job, pid) {
        (Some(j), Some(p)) => Ok((j, p)),
        _ => Err(errors::EINVAL),
    }
}

/// The first address of an interface that is up and not loopback (IPv4
/// first), or loopback.
pub(crate) fn default_ip() -> IpAddr {
    let mut v6 = None;
    for (_, ip, up, lo) in interfaces() {
        if !up || lo {
            continue;
        }
        match ip {
            IpAddr::V4(_) => return ip,
            IpAddr::V6(a) if v6.is_none() && (a.segments()[0] & 0xffc0) != 0xfe80 => {
                v6 = Some(ip);
            }
            IpAddr::V6(_) => {}
        }
    }
    v6.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// `(name, address, up, loopback)` of every interface address.
fn interfaces() -> Vec<(String, IpAddr, bool, bool)> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list freed below.
    if unsafe { libc::getifaddrs(&raw mut head) } != 0 {
        return out;
    }
    let mut p = head;
    while !p.is_null() {
        // SAFETY: a node of the list getifaddrs returned.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points at a sockaddr of the family it names.
        let ip = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sa = &*ifa.ifa_addr.cast::<libc::sockaddr_in>();
                    IpAddr::V4(Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)))
                }
                libc::AF_INET6 => {
                    let sa = &*ifa.ifa_addr.cast::<libc::sockaddr_in6>();
                    IpAddr::V6(sa.sin6_addr.s6_addr.into())
                }
                _ => continue,
            }
        };
        // SAFETY: ifa_name is a C string owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let flags = ifa.ifa_flags;
        out.push((
            name,
            ip,
            flags & libc::IFF_UP as u32 != 0,
            flags & libc::IFF_LOOPBACK as u32 != 0,
        ));
    }
    // SAFETY: the list from getifaddrs above.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// The IP MTU toward the network `ip` is on (`FI_UET_MTU` overrides).
pub(crate) fn mtu_of(ip: IpAddr) -> usize {
    if let Some(m) = env("FI_UET_MTU").and_then(|s| s.parse::<usize>().ok()) {
        return m.clamp(576, 9216);
    }
    let name = interfaces()
        .into_iter()
        .find(|(_, a, _, _)| *a == ip)
        .map(|(n, ..)| n);
    name.and_then(|n| std::fs::read_to_string(format!("/sys/class/net/{n}/mtu")).ok())
        .and_then(|s| s.trim().parse::<usize>().ok())
        .map_or(1500, |m| m.clamp(576, 9216))
}

/// Resolves `node`/`service` to a name (port defaults to 4793).
fn resolve(node: Option<&str>, service: Option<&str>, job: u32, pid: u16) -> Result<Name, Errno> {
    let port = match service {
        Some(s) => s.parse::<u16>().map_err(|_| errors::ENODATA)?,
        None => UET_PORT,
    };
    let ip = match node {
        Some(n) => match n.parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => (n, port)
                .to_socket_addrs()
                .map_err(|_| errors::ENODATA)?
                .next()
                .ok_or(errors::ENODATA)?
                .ip(),
        },
        None => default_ip(),
    };
    Ok(Name {
        ip,
        port: if port == 0 { UET_PORT } else { port },
        pid,
        job,
    })
}

/// Refuses hints, saying why when `FI_UET_DEBUG` is set (libfabric's own
/// logging is not reachable from an external provider without linking
/// against libfabric).
fn refuse(why: &str) -> Errno {
    if std::env::var_os("FI_UET_DEBUG").is_some() {
        eprintln!("uet: fi_getinfo: hints refused: {why}");
    }
    errors::ENODATA
}

/// What the hints ask, checked against what the provider does. On success:
/// the capabilities, progress, threading, AV type and MR mode to report.
struct Answer {
    caps: u64,
    /// Default operation flags the application asked for (echoed: they
    /// decide, under selective completion, which operations complete).
    tx_op_flags: u64,
    rx_op_flags: u64,
    progress: ffi::fi_progress,
    threading: ffi::fi_threading,
    av_type: ffi::fi_av_type,
    mr_mode: i32,
}

/// # Safety
/// `hints` is null or a valid `fi_info` (with valid or null attributes).
unsafe fn check_hints(version: u32, hints: *const ffi::fi_info) -> Result<Answer, Errno> {
    let mut a = Answer {
        caps: PRIMARY | SECONDARY,
        tx_op_flags: 0,
        rx_op_flags: 0,
        progress: ffi::FI_PROGRESS_AUTO,
        threading: ffi::FI_THREAD_SAFE,
        av_type: ffi::FI_AV_TABLE,
        mr_mode: ffi::FI_MR_PROV_KEY as i32,
    };
    if hints.is_null() {
        return Ok(a);
    }
    // SAFETY: the caller's promise.
    let h = unsafe { &*hints };
    if h.caps != 0 {
        if h.caps & !(PRIMARY | SECONDARY) != 0 {
            return Err(refuse(&format!(
                "capabilities {:#x} not offered",
                h.caps & !(PRIMARY | SECONDARY)
            )));
        }
        // Primary capabilities not asked for are not offered; secondary
        // ones that come with them are.
        let primary = if h.caps & PRIMARY == 0 {
            PRIMARY
        } else {
            h.caps & PRIMARY
        };
        // Secondary capabilities that change behaviour are offered only
        // when asked for.
        let opt_in = f::SOURCE | f::DIRECTED_RECV;
        a.caps = primary | (h.caps & SECONDARY) | (SECONDARY & !opt_in);
        if primary & f::RMA == 0 {
            // READ/WRITE and their remote forms qualify RMA (and atomics).
            a.caps &= !(f::READ | f::WRITE | f::REMOTE_READ | f::REMOTE_WRITE);
        }
    }
    if h.addr_format != ffi::FI_FORMAT_UNSPEC {
        return Err(refuse("an address format other than FI_FORMAT_UNSPEC"));
    }
    // SAFETY: attribute pointers of a valid fi_info are null or valid.
    unsafe {
        if let Some(ep) = h.ep_attr.as_ref() {
            if ep.type_ != ffi::FI_EP_UNSPEC && ep.type_ != ffi::FI_EP_RDM {
                return Err(refuse("an endpoint type other than FI_EP_RDM"));
            }
            if ep.protocol != ffi::FI_PROTO_UNSPEC
                || ep.max_msg_size > MAX_MSG_SIZE
                || ep.msg_prefix_size > 0
                || ep.tx_ctx_cnt > 1 && ep.tx_ctx_cnt != ffi::FI_SHARED_CONTEXT as usize
                || ep.rx_ctx_cnt > 1
                || ep.auth_key_size > 0
            {
                return Err(refuse(
                    "endpoint attributes (protocol, message size, prefix, contexts or auth key)",
                ));
            }
        }
        if let Some(tx) = h.tx_attr.as_ref() {
            a.tx_op_flags = tx.op_flags & OP_FLAGS;
            if tx.caps & !(PRIMARY | SECONDARY) != 0
                || tx.msg_order & !(ffi::FI_ORDER_SAS as u64) != 0
                || tx.comp_order & !(ffi::FI_ORDER_NONE as u64) != 0
                || tx.inject_size > INJECT_SIZE
                || tx.size > QUEUE_SIZE
                || tx.iov_limit > 1
                || tx.rma_iov_limit > 1
            {
                return Err(refuse(
                    "transmit attributes (caps, ordering, inject size, queue size or iov limits)",
                ));
            }
        }
        if let Some(rx) = h.rx_attr.as_ref() {
            a.rx_op_flags = rx.op_flags & OP_FLAGS;
            if rx.caps & !(PRIMARY | SECONDARY) != 0
                || rx.msg_order & !(ffi::FI_ORDER_SAS as u64) != 0
                || rx.comp_order & !(ffi::FI_ORDER_NONE as u64) != 0
                || rx.total_buffered_recv > BUFFERED_RECV
                || rx.size > QUEUE_SIZE
                || rx.iov_limit > 1
            {
                return Err(refuse(
                    "receive attributes (caps, ordering, buffered bytes, queue size or iov limit)",
                ));
            }
        }
        if let Some(fa) = h.fabric_attr.as_ref()
            && !fa.name.is_null()
            && CStr::from_ptr(fa.name) != FABRIC_NAME
        {
            return Err(refuse("another fabric name"));
        }
        if let Some(d) = h.domain_attr.as_ref() {
            a.progress = match (d.control_progress, d.data_progress) {
                (ffi::FI_PROGRESS_MANUAL, _) | (_, ffi::FI_PROGRESS_MANUAL) => {
                    ffi::FI_PROGRESS_MANUAL
                }
                _ => ffi::FI_PROGRESS_AUTO,
            };
            if d.threading != ffi::FI_THREAD_UNSPEC {
                a.threading = d.threading;
            }
            a.av_type = match d.av_type {
                ffi::FI_AV_UNSPEC => ffi::FI_AV_TABLE,
                t @ (ffi::FI_AV_MAP | ffi::FI_AV_TABLE) => t,
                _ => return Err(refuse("av_type")),
            };
            if d.cq_data_size > 8
                || d.ep_cnt > 1
                || d.cntr_cnt > 0
                || d.max_ep_stx_ctx > 0
                || d.max_ep_srx_ctx > 0
                || d.mr_iov_limit > 1
                || d.auth_key_size > 0
                || d.caps & !(f::LOCAL_COMM | f::REMOTE_COMM) != 0
            {
                return Err(refuse(
                    "domain attributes (CQ data size, endpoints, counters, shared contexts, MR iov limit, auth key or caps)",
                ));
            }
            if !d.name.is_null() {
                let want = CStr::from_ptr(d.name).to_string_lossy();
                if !want.starts_with("uet") {
                    return Err(refuse("another domain name"));
                }
            }
            // Keys are provider keys carrying the resource index
            // (FI_MR_PROV_KEY); remote addresses are offsets. An
            // application that cannot take provider keys gets no RMA.
            let m = d.mr_mode;
            let legacy = version < ((1 << 16) | 5);
            let prov_key =
                if legacy || m == ffi::FI_MR_BASIC as i32 || m == ffi::FI_MR_SCALABLE as i32 {
                    // FI_MR_BASIC implies virtual addresses, FI_MR_SCALABLE
                    // application keys: neither is what this provider does.
                    m == ffi::FI_MR_UNSPEC as i32
                } else {
                    m & ffi::FI_MR_PROV_KEY as i32 != 0
                };
            if !prov_key {
                if h.caps & f::RMA != 0 {
                    return Err(refuse("FI_RMA without FI_MR_PROV_KEY"));
                }
                a.caps &= !(f::RMA | f::READ | f::WRITE | f::REMOTE_READ | f::REMOTE_WRITE);
                a.mr_mode = 0;
            }
        }
    }
    Ok(a)
}

/// `fi_getinfo` for this provider.
///
/// # Safety
/// Arguments as `fi_getinfo` defines them.
pub(crate) unsafe fn getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const ffi::fi_info,
) -> Result<*mut ffi::fi_info, Errno> {
    // SAFETY: the caller's promise.
    let answer = unsafe { check_hints(version, hints)? };
    let (job, pid) = job_and_pid()?;
    // SAFETY: C strings from the caller.
    let (node, service) = unsafe {
        (
            (!node.is_null()).then(|| CStr::from_ptr(node).to_string_lossy().into_owned()),
            (!service.is_null()).then(|| CStr::from_ptr(service).to_string_lossy().into_owned()),
        )
    };
    // Where we will be, and where the application said it wants to go.
    let mut src: Option<Name> = None;
    let mut dest: Option<Name> = None;
    if node.is_some() || service.is_some() {
        let n = resolve(node.as_deref(), service.as_deref(), job, pid)?;
        if flags & f::SOURCE != 0 {
            src = Some(n);
        } else {
            dest = Some(n);
        }
    }
    if !hints.is_null() {
        // SAFETY: a valid fi_info's address fields.
        unsafe {
            let h = &*hints;
            if src.is_none() && !h.src_addr.is_null() {
                let b = std::slice::from_raw_parts(h.src_addr.cast::<u8>(), h.src_addrlen);
                src = Some(Name::decode(b).map_err(|_| errors::ENODATA)?);
            }
            if dest.is_none() && !h.dest_addr.is_null() {
                let b = std::slice::from_raw_parts(h.dest_addr.cast::<u8>(), h.dest_addrlen);
                dest = Some(Name::decode(b).map_err(|_| errors::ENODATA)?);
            }
        }
    }
    let local = match src {
        Some(s) => s,
        None => {
            let ip = env("FI_UET_ADDR")
                .map(|s| s.parse::<IpAddr>().map_err(|_| errors::EINVAL))
                .transpose()?
                .or_else(|| dest.and_then(|d| source_toward(d.ip)))
                .unwrap_or_else(default_ip);
            Name {
                ip,
                port: UET_PORT,
                pid,
                job,
            }
        }
    };
    // SAFETY: allocation of a fresh fi_info.
    unsafe { build(&answer, &local, dest.as_ref()) }
}

/// Allocates one zeroed `T` with the C allocator.
fn calloc<T>() -> Result<*mut T, Errno> {
    // SAFETY: calloc of one T; null is checked.
    let p = unsafe { libc::calloc(1, size_of::<T>()) }.cast::<T>();
    if p.is_null() {
        Err(errors::ENOMEM)
    } else {
        Ok(p)
    }
}

fn cstrdup(s: &CStr) -> Result<*mut c_char, Errno> {
    // SAFETY: strdup of a valid C string; null is checked.
    let p = unsafe { libc::strdup(s.as_ptr()) };
    if p.is_null() {
        Err(errors::ENOMEM)
    } else {
        Ok(p)
    }
}

fn name_alloc(n: &Name) -> Result<*mut std::ffi::c_void, Errno> {
    // SAFETY: malloc of NAME_LEN bytes, filled before use; null checked.
    unsafe {
        let p = libc::malloc(NAME_LEN).cast::<u8>();
        if p.is_null() {
            return Err(errors::ENOMEM);
        }
        std::ptr::copy_nonoverlapping(n.encode().as_ptr(), p, NAME_LEN);
        Ok(p.cast())
    }
}

/// # Safety
/// Allocates; on error frees what it allocated.
unsafe fn build(a: &Answer, local: &Name, dest: Option<&Name>) -> Result<*mut ffi::fi_info, Errno> {
    let info = calloc::<ffi::fi_info>()?;
    // SAFETY: fills the fresh allocation; on failure fi_info's own
    // free routine below releases the parts made so far.
    let r = unsafe { fill(info, a, local, dest) };
    if let Err(e) = r {
        // SAFETY: `info` and whatever `fill` attached were allocated here.
        unsafe { free_info(info) };
        return Err(e);
    }
    Ok(info)
}

/// # Safety
/// `info` is a zeroed `fi_info` from [`calloc`].
unsafe fn fill(
    info: *mut ffi::fi_info,
    a: &Answer,
    local: &Name,
    dest: Option<&Name>,
) -> Result<(), Errno> {
    // SAFETY: the caller's allocation, filled field by field.
    let i = unsafe { &mut *info };
    let tx_caps = a.caps & (PRIMARY | f::SEND | f::READ | f::WRITE);
    let rx_caps = a.caps
        & (PRIMARY | f::RECV | f::REMOTE_READ | f::REMOTE_WRITE | f::SOURCE | f::DIRECTED_RECV);
    i.caps = a.caps;
    i.mode = 0;
    i.addr_format = ffi::FI_FORMAT_UNSPEC;
    i.src_addr = name_alloc(local)?;
    i.src_addrlen = NAME_LEN;
    if let Some(d) = dest {
        i.dest_addr = name_alloc(d)?;
        i.dest_addrlen = NAME_LEN;
    }
    i.tx_attr = calloc::<ffi::fi_tx_attr>()?;
    i.rx_attr = calloc::<ffi::fi_rx_attr>()?;
    i.ep_attr = calloc::<ffi::fi_ep_attr>()?;
    i.domain_attr = calloc::<ffi::fi_domain_attr>()?;
    i.fabric_attr = calloc::<ffi::fi_fabric_attr>()?;
    // SAFETY: the attribute structures just allocated.
    unsafe {
        let tx = &mut *i.tx_attr;
        tx.caps = tx_caps;
        tx.op_flags = a.tx_op_flags;
        tx.msg_order = ffi::FI_ORDER_SAS as u64;
        tx.comp_order = ffi::FI_ORDER_NONE as u64;
        tx.inject_size = INJECT_SIZE;
        tx.size = QUEUE_SIZE;
        tx.iov_limit = 1;
        tx.rma_iov_limit = 1;
        let rx = &mut *i.rx_attr;
        rx.caps = rx_caps;
        rx.op_flags = a.rx_op_flags;
        rx.msg_order = ffi::FI_ORDER_SAS as u64;
        rx.comp_order = ffi::FI_ORDER_NONE as u64;
        rx.total_buffered_recv = BUFFERED_RECV;
        rx.size = QUEUE_SIZE;
        rx.iov_limit = 1;
        let ep = &mut *i.ep_attr;
        ep.type_ = ffi::FI_EP_RDM;
        ep.protocol = ffi::FI_PROTO_UNSPEC;
        ep.protocol_version = 1;
        ep.max_msg_size = MAX_MSG_SIZE;
        ep.mem_tag_format = TAG_FORMAT;
        ep.tx_ctx_cnt = 1;
        ep.rx_ctx_cnt = 1;
        let d = &mut *i.domain_attr;
        let dname = CString::new(format!("uet:{}", local.ip)).map_err(|_| errors::EINVAL)?;
        d.name = cstrdup(&dname)?;
        d.threading = a.threading;
        d.control_progress = a.progress;
        d.data_progress = a.progress;
        d.resource_mgmt = ffi::FI_RM_ENABLED;
        d.av_type = a.av_type;
        d.mr_mode = a.mr_mode;
        d.mr_key_size = 8;
        d.cq_data_size = 8;
        d.cq_cnt = 256;
        d.ep_cnt = 1;
        d.tx_ctx_cnt = 1;
        d.rx_ctx_cnt = 1;
        d.max_ep_tx_ctx = 1;
        d.max_ep_rx_ctx = 1;
        d.mr_iov_limit = 1;
        d.caps = a.caps & (f::LOCAL_COMM | f::REMOTE_COMM);
        d.mr_cnt = 4095;
        let fa = &mut *i.fabric_attr;
        fa.name = cstrdup(FABRIC_NAME)?;
        // prov_name is left to libfabric: it fills it in (and would
        // append its own to ours, as for a layered provider).
        fa.prov_version = PROV_VERSION;
        fa.api_version = API_VERSION;
    }
    Ok(())
}

/// Frees an `fi_info` made by [`build`] (as `fi_freeinfo` would).
///
/// # Safety
/// `info` came from [`build`]/[`calloc`] and is not used afterwards.
pub(crate) unsafe fn free_info(info: *mut ffi::fi_info) {
    // SAFETY: every pointer was made by the C allocator here, or is null.
    unsafe {
        let i = &mut *info;
        libc::free(i.src_addr);
        libc::free(i.dest_addr);
        libc::free(i.tx_attr.cast());
        libc::free(i.rx_attr.cast());
        libc::free(i.ep_attr.cast());
        if let Some(d) = i.domain_attr.as_mut() {
            libc::free(d.name.cast());
        }
        libc::free(i.domain_attr.cast());
        if let Some(fa) = i.fabric_attr.as_mut() {
            libc::free(fa.name.cast());
            libc::free(fa.prov_name.cast());
        }
        libc::free(i.fabric_attr.cast());
        libc::free(info.cast());
    }
}

/// Reads the engine plan from the `fi_info` given to `fi_domain` /
/// `fi_endpoint`.
///
/// # Safety
/// `info` is a valid `fi_info`.
pub(crate) unsafe fn plan(info: *const ffi::fi_info) -> Result<Plan, Errno> {
    // SAFETY: the caller's promise.
    let i = unsafe { info.as_ref() }.ok_or(errors::EINVAL)?;
    let local = if i.src_addr.is_null() {
        let (job, pid) = job_and_pid()?;
        Name {
            ip: default_ip(),
            port: UET_PORT,
            pid,
            job,
        }
    } else {
        // SAFETY: the address and length the info carries.
        let b = unsafe { std::slice::from_raw_parts(i.src_addr.cast::<u8>(), i.src_addrlen) };
        Name::decode(b).map_err(|_| errors::EINVAL)?
    };
    // SAFETY: attribute pointer of a valid fi_info.
    let auto_progress = unsafe { i.domain_attr.as_ref() }.is_none_or(|d| {
        d.data_progress != ffi::FI_PROGRESS_MANUAL && d.control_progress != ffi::FI_PROGRESS_MANUAL
    }) && env("FI_UET_PROGRESS").as_deref() != Some("manual");
    Ok(Plan {
        local,
        auto_progress,
    })
}
