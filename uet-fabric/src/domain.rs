//! Domains (one engine each), memory registration and address vectors.

use std::ffi::{c_char, c_int, c_void};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap as HashMap;
use uet_ses::Access;

use crate::addr::{NAME_LEN, Name};
use crate::engine::{Engine, EngineConfig, SourceLookup};
use crate::errors::{self, Errno};
use crate::ffi;
use crate::ffi_flags as f;
use crate::fid::{self, Table};
use crate::info;

/// The `fid_domain`: the libfabric header, then the engine.
#[repr(C)]
pub(crate) struct Domain {
    fid: ffi::fid_domain,
    pub(crate) engine: Arc<Engine>,
    pub(crate) av_type: ffi::fi_av_type,
    /// The one endpoint a domain has (`ep_cnt` is 1).
    pub(crate) ep_open: AtomicBool,
}

/// # Safety
/// `p` is null or a fid this provider made.
pub(crate) unsafe fn domain_ref<'a>(p: *mut ffi::fid_domain) -> Result<&'a Domain, Errno> {
    // SAFETY: the caller's promise, checked by class.
    unsafe {
        if p.is_null() || (*p).fid.fclass != ffi::FI_CLASS_DOMAIN as usize {
            return Err(errors::EINVAL);
        }
        Ok(&*p.cast::<Domain>())
    }
}

pub(crate) unsafe extern "C" fn open(
    fabric: *mut ffi::fid_fabric,
    info: *mut ffi::fi_info,
    out: *mut *mut ffi::fid_domain,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { open2(fabric, info, out, 0, context) }
}

pub(crate) unsafe extern "C" fn open2(
    _fabric: *mut ffi::fid_fabric,
    info: *mut ffi::fi_info,
    out: *mut *mut ffi::fid_domain,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    fid::guard(errors::EOTHER.ret(), || {
        if out.is_null() || flags != 0 {
            return errors::EINVAL.ret();
        }
        // SAFETY: the fi_info the application got from fi_getinfo.
        let plan = match unsafe { info::plan(info) } {
            Ok(p) => p,
            Err(e) => return e.ret(),
        };
        // SAFETY: same.
        let av_type = unsafe { info.as_ref().and_then(|i| i.domain_attr.as_ref()) }
            .map_or(ffi::FI_AV_TABLE, |d| d.av_type);
        let window = std::env::var("FI_UET_WINDOW")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(1 << 20)
            .clamp(16 << 10, 64 << 20);
        let cfg = EngineConfig {
            local: plan.local.ip,
            job: plan.local.job,
            pid: plan.local.pid,
            mtu: info::mtu_of(plan.local.ip),
            window,
            auto_progress: plan.auto_progress,
        };
        let engine = match Engine::open(cfg) {
            Ok(e) => e,
            Err(e) => {
                return match e.kind() {
                    std::io::ErrorKind::AddrInUse => errors::EBUSY.ret(),
                    std::io::ErrorKind::AddrNotAvailable => errors::EADDRNOTAVAIL.ret(),
                    std::io::ErrorKind::PermissionDenied => errors::EACCES.ret(),
                    _ => errors::EINVAL.ret(),
                };
            }
        };
        let b = Box::new(Domain {
            fid: ffi::fid_domain {
                fid: ffi::fid {
                    fclass: ffi::FI_CLASS_DOMAIN as usize,
                    context,
                    ops: DOMAIN_FI_OPS.ptr(),
                },
                ops: DOMAIN_OPS.ptr(),
                mr: MR_OPS.ptr(),
            },
            engine,
            av_type: if av_type == ffi::FI_AV_UNSPEC {
                ffi::FI_AV_TABLE
            } else {
                av_type
            },
            ep_open: AtomicBool::new(false),
        });
        // SAFETY: the caller's result pointer.
        unsafe { *out = Box::into_raw(b).cast() };
        0
    })
}

static DOMAIN_FI_OPS: Table<ffi::fi_ops> = Table(ffi::fi_ops {
    size: size_of::<ffi::fi_ops>(),
    close: Some(domain_close),
    bind: Some(fid::no_bind),
    control: Some(fid::no_control),
    ops_open: Some(fid::no_ops_open),
    tostr: Some(fid::no_tostr),
    ops_set: Some(fid::no_ops_set),
});

static DOMAIN_OPS: Table<ffi::fi_ops_domain> = Table(ffi::fi_ops_domain {
    size: size_of::<ffi::fi_ops_domain>(),
    av_open: Some(av_open),
    cq_open: Some(cq_open),
    endpoint: Some(crate::ep::open),
    scalable_ep: Some(no_scalable_ep),
    cntr_open: Some(no_cntr_open),
    poll_open: Some(no_poll_open),
    stx_ctx: Some(no_stx_ctx),
    srx_ctx: Some(no_srx_ctx),
    query_atomic: Some(no_query_atomic),
    query_collective: Some(no_query_collective),
    endpoint2: Some(crate::ep::open2),
});

unsafe extern "C" fn domain_close(p: *mut ffi::fid) -> c_int {
    fid::guard(errors::EINVAL.ret(), || {
        // SAFETY: libfabric passes our fid.
        let d = match unsafe { domain_ref(p.cast()) } {
            Ok(d) => d,
            Err(e) => return e.ret(),
        };
        if d.ep_open.load(Ordering::Acquire) {
            return errors::EBUSY.ret();
        }
        d.engine.shutdown();
        // SAFETY: made by Box::into_raw in `open2`.
        drop(unsafe { Box::from_raw(p.cast::<Domain>()) });
        0
    })
}

unsafe extern "C" fn cq_open(
    dom: *mut ffi::fid_domain,
    attr: *mut ffi::fi_cq_attr,
    out: *mut *mut ffi::fid_cq,
    context: *mut c_void,
) -> c_int {
    fid::guard(errors::EOTHER.ret(), || {
        // SAFETY: libfabric passes our fid; `attr` is the application's.
        let (d, a) = match unsafe { (domain_ref(dom), attr.as_ref()) } {
            (Ok(d), Some(a)) if !out.is_null() => (d, a),
            _ => return errors::EINVAL.ret(),
        };
        match crate::cq::open(&d.engine, a, context) {
            Ok(p) => {
                // SAFETY: the caller's result pointer.
                unsafe { *out = p };
                0
            }
            Err(e) => e.ret(),
        }
    })
}

unsafe extern "C" fn no_scalable_ep(
    _: *mut ffi::fid_domain,
    _: *mut ffi::fi_info,
    _: *mut *mut ffi::fid_ep,
    _: *mut c_void,
) -> c_int {
    errors::ENOSYS.ret()
}

unsafe extern "C" fn no_cntr_open(
    _: *mut ffi::fid_domain,
    _: *mut ffi::fi_cntr_attr,
    _: *mut *mut ffi::fid_cntr,
    _: *mut c_void,
) -> c_int {
    errors::ENOSYS.ret()
}

unsafe extern "C" fn no_poll_open(
    _: *mut ffi::fid_domain,
    _: *mut ffi::fi_poll_attr,
    _: *mut *mut ffi::fid_poll,
) -> c_int {
    errors::ENOSYS.ret()
}

unsafe extern "C" fn no_stx_ctx(
    _: *mut ffi::fid_domain,
    _: *mut ffi::fi_tx_attr,
    _: *mut *mut ffi::fid_stx,
    _: *mut c_void,
) -> c_int {
    errors::ENOSYS.ret()
}

unsafe extern "C" fn no_srx_ctx(
    _: *mut ffi::fid_domain,
    _: *mut ffi::fi_rx_attr,
    _: *mut *mut ffi::fid_ep,
    _: *mut c_void,
) -> c_int {
    errors::ENOSYS.ret()
}

unsafe extern "C" fn no_query_atomic(
    _: *mut ffi::fid_domain,
    _: ffi::fi_datatype,
    _: ffi::fi_op,
    _: *mut ffi::fi_atomic_attr,
    _: u64,
) -> c_int {
    errors::ENOSYS.ret()
}

unsafe extern "C" fn no_query_collective(
    _: *mut ffi::fid_domain,
    _: ffi::fi_collective_op,
    _: *mut ffi::fi_collective_attr,
    _: u64,
) -> c_int {
    errors::ENOSYS.ret()
}

// ---- memory registration ----

/// The `fid_mr`.
#[repr(C)]
struct Mr {
    fid: ffi::fid_mr,
    engine: Arc<Engine>,
    /// Whether the key names a registration in the engine.
    remote: bool,
}

static MR_OPS: Table<ffi::fi_ops_mr> = Table(ffi::fi_ops_mr {
    size: size_of::<ffi::fi_ops_mr>(),
    reg: Some(mr_reg),
    regv: Some(mr_regv),
    regattr: Some(mr_regattr),
});

static MR_FI_OPS: Table<ffi::fi_ops> = Table(ffi::fi_ops {
    size: size_of::<ffi::fi_ops>(),
    close: Some(mr_close),
    bind: Some(fid::no_bind),
    control: Some(fid::no_control),
    ops_open: Some(fid::no_ops_open),
    tostr: Some(fid::no_tostr),
    ops_set: Some(fid::no_ops_set),
});

/// Registers `len` bytes at `buf`.
///
/// # Safety
/// `dom_fid` is our domain; the memory stays valid until the MR closes.
#[allow(clippy::too_many_arguments)]
unsafe fn register(
    dom_fid: *mut ffi::fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    offset: u64,
    flags: u64,
    out: *mut *mut ffi::fid_mr,
    context: *mut c_void,
) -> Result<(), Errno> {
    // SAFETY: the caller's promise.
    let d = unsafe { domain_ref(dom_fid.cast())? };
    if out.is_null() || flags != 0 || offset != 0 || buf.is_null() && len > 0 {
        return Err(errors::EINVAL);
    }
    let known = f::SEND | f::RECV | f::READ | f::WRITE | f::REMOTE_READ | f::REMOTE_WRITE;
    if access & !known != 0 {
        return Err(errors::ENOSYS);
    }
    let mut a = Access::NONE;
    if access & f::REMOTE_WRITE != 0 {
        a |= Access::REMOTE_WRITE;
    }
    if access & f::REMOTE_READ != 0 {
        a |= Access::REMOTE_READ;
    }
    let remote = a != Access::NONE;
    let key = if remote {
        // SAFETY: the application keeps the memory until it closes the MR.
        unsafe { d.engine.register(buf as usize, len as u64, a)? }
    } else {
        // Local access needs no registration: the engine reads and writes
        // local buffers in place.
        0
    };
    let mr = Box::new(Mr {
        fid: ffi::fid_mr {
            fid: ffi::fid {
                fclass: ffi::FI_CLASS_MR as usize,
                context,
                ops: MR_FI_OPS.ptr(),
            },
            mem_desc: std::ptr::null_mut(),
            key,
        },
        engine: Arc::clone(&d.engine),
        remote,
    });
    // SAFETY: the caller's result pointer.
    unsafe { *out = Box::into_raw(mr).cast() };
    Ok(())
}

unsafe extern "C" fn mr_reg(
    dom: *mut ffi::fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    offset: u64,
    _requested_key: u64,
    flags: u64,
    out: *mut *mut ffi::fid_mr,
    context: *mut c_void,
) -> c_int {
    fid::guard(errors::EOTHER.ret(), || {
        // SAFETY: forwarded from the application.
        match unsafe { register(dom, buf, len, access, offset, flags, out, context) } {
            Ok(()) => 0,
            Err(e) => e.ret(),
        }
    })
}

unsafe extern "C" fn mr_regv(
    dom: *mut ffi::fid,
    iov: *const ffi::iovec,
    count: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    out: *mut *mut ffi::fid_mr,
    context: *mut c_void,
) -> c_int {
    if count != 1 || iov.is_null() {
        return if count > 1 {
            errors::ENOSYS.ret()
        } else {
            errors::EINVAL.ret()
        };
    }
    // SAFETY: one iovec, as `count` says.
    let v = unsafe { *iov };
    // SAFETY: forwarded.
    unsafe {
        mr_reg(
            dom,
            v.iov_base,
            v.iov_len,
            access,
            offset,
            requested_key,
            flags,
            out,
            context,
        )
    }
}

unsafe extern "C" fn mr_regattr(
    dom: *mut ffi::fid,
    attr: *const ffi::fi_mr_attr,
    flags: u64,
    out: *mut *mut ffi::fid_mr,
) -> c_int {
    // SAFETY: the application's attributes.
    let Some(a) = (unsafe { attr.as_ref() }) else {
        return errors::EINVAL.ret();
    };
    if a.iface != ffi::FI_HMEM_SYSTEM {
        return errors::ENOSYS.ret();
    }
    // SAFETY: forwarded.
    unsafe {
        mr_regv(
            dom,
            a.mr_iov.cast(),
            a.iov_count,
            a.access,
            a.offset,
            a.requested_key,
            flags,
            out,
            a.context,
        )
    }
}

unsafe extern "C" fn mr_close(p: *mut ffi::fid) -> c_int {
    fid::guard(errors::EINVAL.ret(), || {
        // SAFETY: libfabric passes our fid.
        unsafe {
            if p.is_null() || (*p).fclass != ffi::FI_CLASS_MR as usize {
                return errors::EINVAL.ret();
            }
            let mr = Box::from_raw(p.cast::<Mr>());
            if mr.remote {
                mr.engine.deregister(mr.fid.key);
            }
        }
        0
    })
}

// ---- address vectors ----

#[derive(Debug, Default)]
struct AvTable {
    names: Vec<Option<Name>>,
    by_sock: HashMap<(SocketAddr, u16), u64>,
}

/// The shared part of an AV: endpoints resolve destinations through it,
/// the engine sources.
#[derive(Debug, Default)]
pub(crate) struct AvShared {
    t: RwLock<AvTable>,
}

impl AvShared {
    /// The name at `fi_addr`.
    pub(crate) fn get(&self, fi_addr: u64) -> Option<Name> {
        let t = self.t.read().unwrap_or_else(|e| e.into_inner());
        t.names
            .get(usize::try_from(fi_addr).ok()?)
            .copied()
            .flatten()
    }
}

impl SourceLookup for AvShared {
    fn lookup(&self, sa: SocketAddr, pid: u16) -> u64 {
        let t = self.t.read().unwrap_or_else(|e| e.into_inner());
        t.by_sock
            .get(&(sa, pid))
            .copied()
            .unwrap_or(f::ADDR_NOTAVAIL)
    }
}

/// The `fid_av`.
#[repr(C)]
pub(crate) struct Av {
    fid: ffi::fid_av,
    pub(crate) shared: Arc<AvShared>,
}

/// # Safety
/// `p` is null or a fid this provider made.
pub(crate) unsafe fn av_ref<'a>(p: *mut ffi::fid) -> Result<&'a Av, Errno> {
    // SAFETY: the caller's promise, checked by class.
    unsafe {
        if p.is_null() || (*p).fclass != ffi::FI_CLASS_AV as usize {
            return Err(errors::EINVAL);
        }
        Ok(&*p.cast::<Av>())
    }
}

/// Most addresses one AV holds.
const AV_MAX: usize = 1 << 20;

unsafe extern "C" fn av_open(
    dom: *mut ffi::fid_domain,
    attr: *mut ffi::fi_av_attr,
    out: *mut *mut ffi::fid_av,
    context: *mut c_void,
) -> c_int {
    fid::guard(errors::EOTHER.ret(), || {
        // SAFETY: libfabric passes our fid and the application's attributes.
        let (_d, a) = match unsafe { (domain_ref(dom), attr.as_ref()) } {
            (Ok(d), Some(a)) if !out.is_null() => (d, a),
            _ => return errors::EINVAL.ret(),
        };
        if !matches!(
            a.type_,
            ffi::FI_AV_UNSPEC | ffi::FI_AV_MAP | ffi::FI_AV_TABLE
        ) || a.rx_ctx_bits != 0
            || !a.name.is_null()
            || a.flags != 0
        {
            return errors::ENOSYS.ret();
        }
        let b = Box::new(Av {
            fid: ffi::fid_av {
                fid: ffi::fid {
                    fclass: ffi::FI_CLASS_AV as usize,
                    context,
                    ops: AV_FI_OPS.ptr(),
                },
                ops: AV_OPS.ptr(),
            },
            shared: Arc::new(AvShared::default()),
        });
        // SAFETY: the caller's result pointer.
        unsafe { *out = Box::into_raw(b).cast() };
        0
    })
}

static AV_FI_OPS: Table<ffi::fi_ops> = Table(ffi::fi_ops {
    size: size_of::<ffi::fi_ops>(),
    close: Some(av_close),
    bind: Some(fid::no_bind),
    control: Some(fid::no_control),
    ops_open: Some(fid::no_ops_open),
    tostr: Some(fid::no_tostr),
    ops_set: Some(fid::no_ops_set),
});

static AV_OPS: Table<ffi::fi_ops_av> = Table(ffi::fi_ops_av {
    size: size_of::<ffi::fi_ops_av>(),
    insert: Some(av_insert),
    insertsvc: Some(av_insertsvc),
    insertsym: Some(no_insertsym),
    remove: Some(av_remove),
    lookup: Some(av_lookup),
    straddr: Some(av_straddr),
    av_set: Some(no_av_set),
});

unsafe extern "C" fn av_close(p: *mut ffi::fid) -> c_int {
    fid::guard(errors::EINVAL.ret(), || {
        // SAFETY: libfabric passes our fid; made by Box::into_raw.
        unsafe {
            if av_ref(p).is_err() {
                return errors::EINVAL.ret();
            }
            drop(Box::from_raw(p.cast::<Av>()));
        }
        0
    })
}

fn insert_names(av: &AvShared, names: &[Result<Name, Errno>], out: *mut u64) -> c_int {
    let mut t = av.t.write().unwrap_or_else(|e| e.into_inner());
    let mut ok = 0;
    for (i, n) in names.iter().enumerate() {
        let addr = match n {
            Ok(n) if t.names.len() < AV_MAX => {
                let a = t.names.len() as u64;
                t.names.push(Some(*n));
                t.by_sock.entry((n.socket_addr(), n.pid)).or_insert(a);
                ok += 1;
                a
            }
            _ => f::ADDR_NOTAVAIL,
        };
        if !out.is_null() {
            // SAFETY: the application's array of `names.len()` addresses.
            unsafe { *out.add(i) = addr };
        }
    }
    ok
}

unsafe extern "C" fn av_insert(
    av: *mut ffi::fid_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut u64,
    flags: u64,
    _context: *mut c_void,
) -> c_int {
    fid::guard(errors::EOTHER.ret(), || {
        // SAFETY: libfabric passes our fid.
        let a = match unsafe { av_ref(av.cast()) } {
            Ok(a) => a,
            Err(e) => return e.ret(),
        };
        if flags != 0 || addr.is_null() && count > 0 || count > AV_MAX {
            return errors::EINVAL.ret();
        }
        let names: Vec<_> = (0..count)
            .map(|i| {
                // SAFETY: `count` names of NAME_LEN bytes each.
                let b = unsafe {
                    std::slice::from_raw_parts(addr.cast::<u8>().add(i * NAME_LEN), NAME_LEN)
                };
                Name::decode(b).map_err(|_| errors::EINVAL)
            })
            .collect();
        insert_names(&a.shared, &names, fi_addr)
    })
}

unsafe extern "C" fn av_insertsvc(
    av: *mut ffi::fid_av,
    node: *const c_char,
    service: *const c_char,
    fi_addr: *mut u64,
    flags: u64,
    _context: *mut c_void,
) -> c_int {
    fid::guard(errors::EOTHER.ret(), || {
        // SAFETY: libfabric passes our fid.
        let a = match unsafe { av_ref(av.cast()) } {
            Ok(a) => a,
            Err(e) => return e.ret(),
        };
        if flags != 0 || node.is_null() {
            return errors::EINVAL.ret();
        }
        // SAFETY: C strings from the application.
        let (node, service) = unsafe {
            (
                std::ffi::CStr::from_ptr(node)
                    .to_string_lossy()
                    .into_owned(),
                (!service.is_null()).then(|| {
                    std::ffi::CStr::from_ptr(service)
                        .to_string_lossy()
                        .into_owned()
                }),
            )
        };
        let port = match service.as_deref().map(str::parse::<u16>) {
            None => crate::engine::UET_PORT,
            Some(Ok(p)) if p != 0 => p,
            Some(_) => return errors::EINVAL.ret(),
        };
        let Ok(ip) = node.parse() else {
            return errors::EINVAL.ret();
        };
        let name = Name {
            ip,
            port,
            pid: 0,
            job: 1,
        };
        insert_names(&a.shared, &[Ok(name)], fi_addr)
    })
}

unsafe extern "C" fn no_insertsym(
    _: *mut ffi::fid_av,
    _: *const c_char,
    _: usize,
    _: *const c_char,
    _: usize,
    _: *mut u64,
    _: u64,
    _: *mut c_void,
) -> c_int {
    errors::ENOSYS.ret()
}

unsafe extern "C" fn av_remove(
    av: *mut ffi::fid_av,
    fi_addr: *mut u64,
    count: usize,
    _flags: u64,
) -> c_int {
    fid::guard(errors::EOTHER.ret(), || {
        // SAFETY: libfabric passes our fid.
        let a = match unsafe { av_ref(av.cast()) } {
            Ok(a) => a,
            Err(e) => return e.ret(),
        };
        if fi_addr.is_null() && count > 0 {
            return errors::EINVAL.ret();
        }
        let mut t = a.shared.t.write().unwrap_or_else(|e| e.into_inner());
        for i in 0..count {
            // SAFETY: the application's `count` addresses.
            let addr = unsafe { *fi_addr.add(i) };
            let Some(slot) = usize::try_from(addr).ok().and_then(|x| t.names.get_mut(x)) else {
                return errors::EINVAL.ret();
            };
            if let Some(n) = slot.take() {
                let key = (n.socket_addr(), n.pid);
                if t.by_sock.get(&key) == Some(&addr) {
                    t.by_sock.remove(&key);
                }
            }
        }
        0
    })
}

unsafe extern "C" fn av_lookup(
    av: *mut ffi::fid_av,
    fi_addr: u64,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    fid::guard(errors::EOTHER.ret(), || {
        // SAFETY: libfabric passes our fid.
        let a = match unsafe { av_ref(av.cast()) } {
            Ok(a) => a,
            Err(e) => return e.ret(),
        };
        if addrlen.is_null() {
            return errors::EINVAL.ret();
        }
        let Some(n) = a.shared.get(fi_addr) else {
            return errors::ENODATA.ret();
        };
        // SAFETY: the application's buffer of `*addrlen` bytes.
        unsafe {
            let room = *addrlen;
            *addrlen = NAME_LEN;
            if !addr.is_null() {
                let b = n.encode();
                std::ptr::copy_nonoverlapping(b.as_ptr(), addr.cast::<u8>(), room.min(NAME_LEN));
            }
        }
        0
    })
}

unsafe extern "C" fn av_straddr(
    _av: *mut ffi::fid_av,
    addr: *const c_void,
    buf: *mut c_char,
    len: *mut usize,
) -> *const c_char {
    fid::guard(std::ptr::null(), || {
        if addr.is_null() || len.is_null() {
            return std::ptr::null();
        }
        // SAFETY: an address of NAME_LEN bytes; the caller's buffer.
        unsafe {
            let b = std::slice::from_raw_parts(addr.cast::<u8>(), NAME_LEN);
            let text = match Name::decode(b) {
                Ok(n) => n.to_string(),
                Err(_) => "uet://invalid".to_owned(),
            };
            let room = *len;
            *len = text.len() + 1;
            if !buf.is_null() && room > 0 {
                let n = text.len().min(room - 1);
                std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
        }
        buf.cast_const()
    })
}

unsafe extern "C" fn no_av_set(
    _: *mut ffi::fid_av,
    _: *mut ffi::fi_av_set_attr,
    _: *mut *mut ffi::fid_av_set,
    _: *mut c_void,
) -> c_int {
    errors::ENOSYS.ret()
}
