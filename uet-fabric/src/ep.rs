//! RDM endpoints: binding, names, and the data operations (`fi_msg`,
//! `fi_tagged`, `fi_rma`).

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::addr::{NAME_LEN, Name};
use crate::cq::{self, Cq};
use crate::domain::{self, AvShared, Domain};
use crate::engine::{Engine, Op, RxOp, SourceLookup, TxOp};
use crate::errors::{self, Errno};
use crate::ffi;
use crate::ffi_flags as f;
use crate::fid::{self, Table};
use crate::info;

#[derive(Default)]
struct Bound {
    tx_cq: Option<Arc<Cq>>,
    rx_cq: Option<Arc<Cq>>,
    tx_selective: bool,
    rx_selective: bool,
    av: Option<Arc<AvShared>>,
    enabled: bool,
}

/// The `fid_ep`.
#[repr(C)]
pub(crate) struct Ep {
    fid: ffi::fid_ep,
    domain: *const Domain,
    engine: Arc<Engine>,
    /// Default op flags from `tx_attr`/`rx_attr` (`FI_COMPLETION` under
    /// selective completion).
    tx_op_flags: u64,
    rx_op_flags: u64,
    /// FI_DIRECTED_RECV: receives honour their source address.
    directed: bool,
    bound: Mutex<Bound>,
}

/// # Safety
/// `p` is null or a fid this provider made.
unsafe fn ep_ref<'a>(p: *mut ffi::fid_ep) -> Result<&'a Ep, Errno> {
    // SAFETY: the caller's promise, checked by class.
    unsafe {
        if p.is_null() || (*p).fid.fclass != ffi::FI_CLASS_EP as usize {
            return Err(errors::EINVAL);
        }
        Ok(&*p.cast::<Ep>())
    }
}

pub(crate) unsafe extern "C" fn open(
    dom: *mut ffi::fid_domain,
    info: *mut ffi::fi_info,
    out: *mut *mut ffi::fid_ep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { open2(dom, info, out, 0, context) }
}

pub(crate) unsafe extern "C" fn open2(
    dom: *mut ffi::fid_domain,
    info: *mut ffi::fi_info,
    out: *mut *mut ffi::fid_ep,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    fid::guard(errors::EOTHER.ret(), || {
        // SAFETY: libfabric passes our domain.
        let d = match unsafe { domain::domain_ref(dom) } {
            Ok(d) => d,
            Err(e) => return e.ret(),
        };
        if out.is_null() || flags != 0 {
            return errors::EINVAL.ret();
        }
        // SAFETY: the application's fi_info.
        // SAFETY: the application's fi_info.
        let directed = unsafe { info.as_ref() }.is_some_and(|i| i.caps & f::DIRECTED_RECV != 0);
        let (tx_op_flags, rx_op_flags) = match unsafe { info.as_ref() } {
            Some(i) => {
                // SAFETY: attribute pointers of a valid fi_info.
                let ep_type = unsafe { i.ep_attr.as_ref() }.map_or(ffi::FI_EP_RDM, |e| e.type_);
                if ep_type != ffi::FI_EP_RDM && ep_type != ffi::FI_EP_UNSPEC {
                    return errors::ENOSYS.ret();
                }
                // SAFETY: same.
                unsafe {
                    (
                        i.tx_attr.as_ref().map_or(0, |t| t.op_flags),
                        i.rx_attr.as_ref().map_or(0, |r| r.op_flags),
                    )
                }
            }
            None => (0, 0),
        };
        if d.ep_open.swap(true, Ordering::AcqRel) {
            // One endpoint per domain (`ep_cnt` is 1): its FEP address is
            // the domain's.
            return errors::ENOSPC.ret();
        }
        let b = Box::new(Ep {
            fid: ffi::fid_ep {
                fid: ffi::fid {
                    fclass: ffi::FI_CLASS_EP as usize,
                    context,
                    ops: EP_FI_OPS.ptr(),
                },
                ops: EP_OPS.ptr(),
                cm: CM_OPS.ptr(),
                msg: MSG_OPS.ptr(),
                rma: RMA_OPS.ptr(),
                tagged: TAGGED_OPS.ptr(),
                atomic: std::ptr::null_mut(),
                collective: std::ptr::null_mut(),
            },
            domain: std::ptr::from_ref(d),
            engine: Arc::clone(&d.engine),
            tx_op_flags,
            rx_op_flags,
            directed,
            bound: Mutex::new(Bound::default()),
        });
        // SAFETY: the caller's result pointer.
        unsafe { *out = Box::into_raw(b).cast() };
        0
    })
}

static EP_FI_OPS: Table<ffi::fi_ops> = Table(ffi::fi_ops {
    size: size_of::<ffi::fi_ops>(),
    close: Some(ep_close),
    bind: Some(ep_bind),
    control: Some(ep_control),
    ops_open: Some(fid::no_ops_open),
    tostr: Some(fid::no_tostr),
    ops_set: Some(fid::no_ops_set),
});

static EP_OPS: Table<ffi::fi_ops_ep> = Table(ffi::fi_ops_ep {
    size: size_of::<ffi::fi_ops_ep>(),
    cancel: Some(ep_cancel),
    getopt: Some(ep_getopt),
    setopt: Some(ep_setopt),
    tx_ctx: Some(no_tx_ctx),
    rx_ctx: Some(no_rx_ctx),
    rx_size_left: Some(size_left),
    tx_size_left: Some(size_left),
});

static CM_OPS: Table<ffi::fi_ops_cm> = Table(ffi::fi_ops_cm {
    size: size_of::<ffi::fi_ops_cm>(),
    setname: Some(no_setname),
    getname: Some(getname),
    getpeer: Some(no_getpeer),
    connect: Some(no_connect),
    listen: Some(no_listen),
    accept: Some(no_accept),
    reject: Some(no_reject),
    shutdown: Some(no_shutdown),
    join: Some(no_join),
});

static MSG_OPS: Table<ffi::fi_ops_msg> = Table(ffi::fi_ops_msg {
    size: size_of::<ffi::fi_ops_msg>(),
    recv: Some(msg_recv),
    recvv: Some(msg_recvv),
    recvmsg: Some(msg_recvmsg),
    send: Some(msg_send),
    sendv: Some(msg_sendv),
    sendmsg: Some(msg_sendmsg),
    inject: Some(msg_inject),
    senddata: Some(msg_senddata),
    injectdata: Some(msg_injectdata),
});

static TAGGED_OPS: Table<ffi::fi_ops_tagged> = Table(ffi::fi_ops_tagged {
    size: size_of::<ffi::fi_ops_tagged>(),
    recv: Some(tag_recv),
    recvv: Some(tag_recvv),
    recvmsg: Some(tag_recvmsg),
    send: Some(tag_send),
    sendv: Some(tag_sendv),
    sendmsg: Some(tag_sendmsg),
    inject: Some(tag_inject),
    senddata: Some(tag_senddata),
    injectdata: Some(tag_injectdata),
});

static RMA_OPS: Table<ffi::fi_ops_rma> = Table(ffi::fi_ops_rma {
    size: size_of::<ffi::fi_ops_rma>(),
    read: Some(rma_read),
    readv: Some(rma_readv),
    readmsg: Some(rma_readmsg),
    write: Some(rma_write),
    writev: Some(rma_writev),
    writemsg: Some(rma_writemsg),
    inject: Some(rma_inject),
    writedata: Some(rma_writedata),
    injectdata: Some(rma_injectdata),
});

unsafe extern "C" fn ep_close(p: *mut ffi::fid) -> c_int {
    fid::guard(errors::EINVAL.ret(), || {
        // SAFETY: libfabric passes our fid; made by Box::into_raw.
        unsafe {
            let Ok(ep) = ep_ref(p.cast()) else {
                return errors::EINVAL.ret();
            };
            (*ep.domain).ep_open.store(false, Ordering::Release);
            drop(Box::from_raw(p.cast::<Ep>()));
        }
        0
    })
}

unsafe extern "C" fn ep_bind(p: *mut ffi::fid, bfid: *mut ffi::fid, flags: u64) -> c_int {
    fid::guard(errors::EINVAL.ret(), || {
        // SAFETY: libfabric passes our fid.
        let Ok(ep) = (unsafe { ep_ref(p.cast()) }) else {
            return errors::EINVAL.ret();
        };
        if bfid.is_null() {
            return errors::EINVAL.ret();
        }
        let mut b = ep.bound.lock().unwrap_or_else(|e| e.into_inner());
        if b.enabled {
            return errors::EOPBADSTATE.ret();
        }
        // SAFETY: a fid the application got from this provider (class
        // checked before any cast).
        let class = unsafe { (*bfid).fclass } as u32;
        match class {
            ffi::FI_CLASS_CQ => {
                // SAFETY: class checked.
                let Some(c) = (unsafe { cq::from_fid(bfid.cast()) }) else {
                    return errors::EINVAL.ret();
                };
                if flags & !(f::TRANSMIT | f::RECV | f::SELECTIVE_COMPLETION) != 0
                    || flags & (f::TRANSMIT | f::RECV) == 0
                {
                    return errors::EINVAL.ret();
                }
                let selective = flags & f::SELECTIVE_COMPLETION != 0;
                if flags & f::TRANSMIT != 0 {
                    b.tx_cq = Some(Arc::clone(&c.cq));
                    b.tx_selective = selective;
                }
                if flags & f::RECV != 0 {
                    b.rx_cq = Some(Arc::clone(&c.cq));
                    b.rx_selective = selective;
                }
                0
            }
            ffi::FI_CLASS_AV => {
                // SAFETY: class checked.
                let Ok(av) = (unsafe { domain::av_ref(bfid) }) else {
                    return errors::EINVAL.ret();
                };
                b.av = Some(Arc::clone(&av.shared));
                0
            }
            // RDM endpoints report nothing on an EQ; binding one is allowed.
            ffi::FI_CLASS_EQ => 0,
            ffi::FI_CLASS_CNTR => errors::ENOSYS.ret(),
            _ => errors::EINVAL.ret(),
        }
    })
}

unsafe extern "C" fn ep_control(p: *mut ffi::fid, command: c_int, _arg: *mut c_void) -> c_int {
    fid::guard(errors::EINVAL.ret(), || {
        // SAFETY: libfabric passes our fid.
        let Ok(ep) = (unsafe { ep_ref(p.cast()) }) else {
            return errors::EINVAL.ret();
        };
        if command as u32 != ffi::FI_ENABLE {
            return errors::ENOSYS.ret();
        }
        let mut b = ep.bound.lock().unwrap_or_else(|e| e.into_inner());
        if b.av.is_none() || b.tx_cq.is_none() && b.rx_cq.is_none() {
            // RDM endpoints need an AV and at least one CQ.
            return errors::EOPBADSTATE.ret();
        }
        b.enabled = true;
        let av: Option<Arc<dyn SourceLookup>> = b.av.clone().map(|a| a as Arc<dyn SourceLookup>);
        ep.engine.bind_rx(b.rx_cq.clone(), av);
        0
    })
}

unsafe extern "C" fn ep_cancel(p: ffi::fid_t, context: *mut c_void) -> isize {
    fid::guard(errors::EINVAL.sret(), || {
        // SAFETY: libfabric passes our fid.
        let Ok(ep) = (unsafe { ep_ref(p.cast()) }) else {
            return errors::EINVAL.sret();
        };
        if ep.engine.cancel(context as usize) {
            0
        } else {
            -(ffi::FI_ENOENT as isize)
        }
    })
}

unsafe extern "C" fn ep_getopt(
    _: ffi::fid_t,
    _: c_int,
    _: c_int,
    _: *mut c_void,
    _: *mut usize,
) -> c_int {
    -(ffi::FI_ENOPROTOOPT as c_int)
}

unsafe extern "C" fn ep_setopt(
    _: ffi::fid_t,
    _: c_int,
    _: c_int,
    _: *const c_void,
    _: usize,
) -> c_int {
    -(ffi::FI_ENOPROTOOPT as c_int)
}

unsafe extern "C" fn no_tx_ctx(
    _: *mut ffi::fid_ep,
    _: c_int,
    _: *mut ffi::fi_tx_attr,
    _: *mut *mut ffi::fid_ep,
    _: *mut c_void,
) -> c_int {
    errors::ENOSYS.ret()
}

unsafe extern "C" fn no_rx_ctx(
    _: *mut ffi::fid_ep,
    _: c_int,
    _: *mut ffi::fi_rx_attr,
    _: *mut *mut ffi::fid_ep,
    _: *mut c_void,
) -> c_int {
    errors::ENOSYS.ret()
}

unsafe extern "C" fn size_left(_: *mut ffi::fid_ep) -> isize {
    info::QUEUE_SIZE as isize
}

unsafe extern "C" fn getname(p: ffi::fid_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    fid::guard(errors::EINVAL.ret(), || {
        // SAFETY: libfabric passes our fid.
        let Ok(ep) = (unsafe { ep_ref(p.cast()) }) else {
            return errors::EINVAL.ret();
        };
        if addrlen.is_null() {
            return errors::EINVAL.ret();
        }
        // SAFETY: the application's buffer of `*addrlen` bytes.
        unsafe {
            let room = *addrlen;
            *addrlen = NAME_LEN;
            if room < NAME_LEN || addr.is_null() {
                return -(ffi::FI_ETOOSMALL as c_int);
            }
            let b = ep.engine.name().encode();
            std::ptr::copy_nonoverlapping(b.as_ptr(), addr.cast::<u8>(), NAME_LEN);
        }
        0
    })
}

unsafe extern "C" fn no_setname(_: ffi::fid_t, _: *mut c_void, _: usize) -> c_int {
    errors::ENOSYS.ret()
}
unsafe extern "C" fn no_getpeer(_: *mut ffi::fid_ep, _: *mut c_void, _: *mut usize) -> c_int {
    errors::ENOSYS.ret()
}
unsafe extern "C" fn no_connect(
    _: *mut ffi::fid_ep,
    _: *const c_void,
    _: *const c_void,
    _: usize,
) -> c_int {
    errors::ENOSYS.ret()
}
unsafe extern "C" fn no_listen(_: *mut ffi::fid_pep) -> c_int {
    errors::ENOSYS.ret()
}
unsafe extern "C" fn no_accept(_: *mut ffi::fid_ep, _: *const c_void, _: usize) -> c_int {
    errors::ENOSYS.ret()
}
unsafe extern "C" fn no_reject(
    _: *mut ffi::fid_pep,
    _: ffi::fid_t,
    _: *const c_void,
    _: usize,
) -> c_int {
    errors::ENOSYS.ret()
}
unsafe extern "C" fn no_shutdown(_: *mut ffi::fid_ep, _: u64) -> c_int {
    errors::ENOSYS.ret()
}
unsafe extern "C" fn no_join(
    _: *mut ffi::fid_ep,
    _: *const c_void,
    _: u64,
    _: *mut *mut ffi::fid_mc,
    _: *mut c_void,
) -> c_int {
    errors::ENOSYS.ret()
}

// ---- data operations ----

/// Where a transmit goes and who hears about it.
struct TxTarget {
    dest: Name,
    cq: Option<Arc<Cq>>,
    /// Whether a successful completion is reported.
    success: bool,
}

impl Ep {
    fn tx(&self, dest: u64, flags: Option<u64>, inject: bool) -> Result<TxTarget, Errno> {
        let b = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        if !b.enabled {
            return Err(errors::EOPBADSTATE);
        }
        let av = b.av.as_ref().ok_or(errors::EOPBADSTATE)?;
        let dest = av.get(dest).ok_or(errors::EINVAL)?;
        let flags = flags.unwrap_or(self.tx_op_flags);
        let wants = !inject && (!b.tx_selective || flags & f::COMPLETION != 0);
        let cq = if wants {
            Some(b.tx_cq.clone().ok_or(errors::EOPBADSTATE)?)
        } else if inject {
            None
        } else {
            // Under selective completion an operation that asked for no
            // completion still reports its failure (fi_endpoint(3),
            // FI_SELECTIVE_COMPLETION).
            b.tx_cq.clone()
        };
        Ok(TxTarget {
            dest,
            cq,
            success: wants,
        })
    }

    pub(crate) const fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The sender a receive from `src` is limited to: only under
    /// FI_DIRECTED_RECV (without it libfabric says to ignore the source).
    pub(crate) fn directed_source(&self, src: u64) -> Result<Option<Name>, Errno> {
        if !self.directed || src == f::ADDR_UNSPEC {
            return Ok(None);
        }
        let b = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        let av = b.av.as_ref().ok_or(errors::EOPBADSTATE)?;
        Ok(Some(av.get(src).ok_or(errors::EINVAL)?))
    }

    pub(crate) fn rx_cq(&self) -> Result<Arc<Cq>, Errno> {
        let b = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        if !b.enabled {
            return Err(errors::EOPBADSTATE);
        }
        b.rx_cq.clone().ok_or(errors::EOPBADSTATE)
    }

    #[allow(clippy::too_many_arguments)]
    fn transmit(
        &self,
        dest: u64,
        op: Op,
        len: usize,
        buf: *const c_void,
        context: *mut c_void,
        flags: Option<u64>,
        inject: bool,
        cq_flags: u64,
    ) -> Result<(), Errno> {
        if len > info::MAX_MSG_SIZE || inject && len > info::INJECT_SIZE {
            return Err(errors::EMSGSIZE);
        }
        if buf.is_null() && len > 0 {
            return Err(errors::EINVAL);
        }
        let t = self.tx(dest, flags, inject)?;
        let copy = if inject || flags.is_some_and(|x| x & f::INJECT != 0) {
            if len > info::INJECT_SIZE {
                return Err(errors::EMSGSIZE);
            }
            if len == 0 {
                Some(Box::default())
            } else {
                // SAFETY: `len` bytes at `buf` (not null: checked above), as
                // the API defines; copied so the application may reuse the
                // buffer at once.
                Some(unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }.into())
            }
        } else {
            None
        };
        self.engine.submit(
            &t.dest,
            op,
            TxOp {
                cq: t.cq,
                success: t.success,
                context: context as usize,
                flags: cq_flags,
                inject: copy,
            },
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn receive(
        &self,
        buf: *mut c_void,
        len: usize,
        src: u64,
        tag: Option<(u64, u64)>,
        context: *mut c_void,
        cq_flags: u64,
        op_flags: Option<u64>,
    ) -> Result<(), Errno> {
        if buf.is_null() && len > 0 {
            return Err(errors::EINVAL);
        }
        let cq = self.rx_cq()?;
        // Under selective completion only receives with FI_COMPLETION
        // report success; failures always report (fi_endpoint(3),
        // FI_SELECTIVE_COMPLETION).
        let selective = self
            .bound
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .rx_selective;
        let success = !selective || op_flags.unwrap_or(self.rx_op_flags) & f::COMPLETION != 0;
        let from = self.directed_source(src)?;
        self.engine.post_recv(
            buf as usize,
            len as u64,
            tag,
            from.as_ref(),
            RxOp {
                cq,
                success,
                context: context as usize,
                flags: cq_flags,
                buf: buf as usize,
            },
        )
    }
}

fn ret(r: Result<(), Errno>) -> isize {
    match r {
        Ok(()) => 0,
        Err(e) => e.sret(),
    }
}

fn len32(len: usize) -> Result<u32, Errno> {
    u32::try_from(len).map_err(|_| errors::EMSGSIZE)
}

/// Runs a data operation on the endpoint `p`.
fn with_ep(p: *mut ffi::fid_ep, f: impl FnOnce(&Ep) -> Result<(), Errno>) -> isize {
    fid::guard(errors::EOTHER.sret(), || {
        // SAFETY: libfabric passes our fid.
        match unsafe { ep_ref(p) } {
            Ok(ep) => ret(f(ep)),
            Err(e) => e.sret(),
        }
    })
}

/// The one buffer of an iovec array (`iov_limit` is 1).
///
/// # Safety
/// `iov` holds `count` entries.
unsafe fn one_iov(iov: *const ffi::iovec, count: usize) -> Result<(*mut c_void, usize), Errno> {
    match count {
        0 => Ok((std::ptr::null_mut(), 0)),
        // SAFETY: the caller's promise.
        1 if !iov.is_null() => Ok(unsafe { ((*iov).iov_base, (*iov).iov_len) }),
        _ => Err(errors::EINVAL),
    }
}

const SEND_MSG: u64 = f::SEND | f::MSG;
const SEND_TAGGED: u64 = f::SEND | f::TAGGED;
const RECV_MSG: u64 = f::RECV | f::MSG;
const RECV_TAGGED: u64 = f::RECV | f::TAGGED;
const RMA_WRITE: u64 = f::RMA | f::WRITE;
const RMA_READ: u64 = f::RMA | f::READ;

fn send_op(
    buf: *const c_void,
    len: usize,
    data: Option<u64>,
    tag: Option<u64>,
) -> Result<Op, Errno> {
    Ok(Op::Send {
        buf: buf as usize,
        len: len32(len)?,
        data,
        tag,
    })
}

unsafe extern "C" fn msg_recv(
    ep: *mut ffi::fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        e.receive(buf, len, src, None, context, RECV_MSG, None)
    })
}

unsafe extern "C" fn msg_recvv(
    ep: *mut ffi::fid_ep,
    iov: *const ffi::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        // SAFETY: `count` iovecs.
        let (b, l) = unsafe { one_iov(iov, count)? };
        e.receive(b, l, src, None, context, RECV_MSG, None)
    })
}

unsafe extern "C" fn msg_recvmsg(
    ep: *mut ffi::fid_ep,
    msg: *const ffi::fi_msg,
    flags: u64,
) -> isize {
    with_ep(ep, |e| {
        // SAFETY: the application's message.
        let m = unsafe { msg.as_ref() }.ok_or(errors::EINVAL)?;
        if flags & f::MULTI_RECV != 0 {
            return Err(errors::ENOSYS);
        }
        // SAFETY: `iov_count` iovecs.
        let (b, l) = unsafe { one_iov(m.msg_iov, m.iov_count)? };
        e.receive(b, l, m.addr, None, m.context, RECV_MSG, Some(flags))
    })
}

unsafe extern "C" fn msg_send(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        e.transmit(
            dest,
            send_op(buf, len, None, None)?,
            len,
            buf,
            context,
            None,
            false,
            SEND_MSG,
        )
    })
}

unsafe extern "C" fn msg_sendv(
    ep: *mut ffi::fid_ep,
    iov: *const ffi::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        // SAFETY: `count` iovecs.
        let (b, l) = unsafe { one_iov(iov, count)? };
        e.transmit(
            dest,
            send_op(b, l, None, None)?,
            l,
            b,
            context,
            None,
            false,
            SEND_MSG,
        )
    })
}

unsafe extern "C" fn msg_sendmsg(
    ep: *mut ffi::fid_ep,
    msg: *const ffi::fi_msg,
    flags: u64,
) -> isize {
    with_ep(ep, |e| {
        // SAFETY: the application's message.
        let m = unsafe { msg.as_ref() }.ok_or(errors::EINVAL)?;
        // SAFETY: `iov_count` iovecs.
        let (b, l) = unsafe { one_iov(m.msg_iov, m.iov_count)? };
        let data = (flags & f::REMOTE_CQ_DATA != 0).then_some(m.data);
        e.transmit(
            m.addr,
            send_op(b, l, data, None)?,
            l,
            b,
            m.context,
            Some(flags),
            false,
            SEND_MSG,
        )
    })
}

unsafe extern "C" fn msg_inject(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    dest: u64,
) -> isize {
    with_ep(ep, |e| {
        e.transmit(
            dest,
            send_op(buf, len, None, None)?,
            len,
            buf,
            std::ptr::null_mut(),
            None,
            true,
            SEND_MSG,
        )
    })
}

unsafe extern "C" fn msg_senddata(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        e.transmit(
            dest,
            send_op(buf, len, Some(data), None)?,
            len,
            buf,
            context,
            None,
            false,
            SEND_MSG,
        )
    })
}

unsafe extern "C" fn msg_injectdata(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: u64,
) -> isize {
    with_ep(ep, |e| {
        e.transmit(
            dest,
            send_op(buf, len, Some(data), None)?,
            len,
            buf,
            std::ptr::null_mut(),
            None,
            true,
            SEND_MSG,
        )
    })
}

unsafe extern "C" fn tag_recv(
    ep: *mut ffi::fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: u64,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        e.receive(
            buf,
            len,
            src,
            Some((tag, ignore)),
            context,
            RECV_TAGGED,
            None,
        )
    })
}

unsafe extern "C" fn tag_recvv(
    ep: *mut ffi::fid_ep,
    iov: *const ffi::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: u64,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        // SAFETY: `count` iovecs.
        let (b, l) = unsafe { one_iov(iov, count)? };
        e.receive(b, l, src, Some((tag, ignore)), context, RECV_TAGGED, None)
    })
}

unsafe extern "C" fn tag_recvmsg(
    ep: *mut ffi::fid_ep,
    msg: *const ffi::fi_msg_tagged,
    flags: u64,
) -> isize {
    with_ep(ep, |e| {
        // SAFETY: the application's message.
        let m = unsafe { msg.as_ref() }.ok_or(errors::EINVAL)?;
        if flags & f::MULTI_RECV != 0 {
            return Err(errors::ENOSYS);
        }
        if flags & (f::PEEK | f::CLAIM | f::DISCARD) != 0 {
            return crate::probe::tagged(e, m, flags);
        }
        // SAFETY: `iov_count` iovecs.
        let (b, l) = unsafe { one_iov(m.msg_iov, m.iov_count)? };
        e.receive(
            b,
            l,
            m.addr,
            Some((m.tag, m.ignore)),
            m.context,
            RECV_TAGGED,
            Some(flags),
        )
    })
}

unsafe extern "C" fn tag_send(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: u64,
    tag: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        e.transmit(
            dest,
            send_op(buf, len, None, Some(tag))?,
            len,
            buf,
            context,
            None,
            false,
            SEND_TAGGED,
        )
    })
}

unsafe extern "C" fn tag_sendv(
    ep: *mut ffi::fid_ep,
    iov: *const ffi::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: u64,
    tag: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        // SAFETY: `count` iovecs.
        let (b, l) = unsafe { one_iov(iov, count)? };
        e.transmit(
            dest,
            send_op(b, l, None, Some(tag))?,
            l,
            b,
            context,
            None,
            false,
            SEND_TAGGED,
        )
    })
}

unsafe extern "C" fn tag_sendmsg(
    ep: *mut ffi::fid_ep,
    msg: *const ffi::fi_msg_tagged,
    flags: u64,
) -> isize {
    with_ep(ep, |e| {
        // SAFETY: the application's message.
        let m = unsafe { msg.as_ref() }.ok_or(errors::EINVAL)?;
        // SAFETY: `iov_count` iovecs.
        let (b, l) = unsafe { one_iov(m.msg_iov, m.iov_count)? };
        let data = (flags & f::REMOTE_CQ_DATA != 0).then_some(m.data);
        e.transmit(
            m.addr,
            send_op(b, l, data, Some(m.tag))?,
            l,
            b,
            m.context,
            Some(flags),
            false,
            SEND_TAGGED,
        )
    })
}

unsafe extern "C" fn tag_inject(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    dest: u64,
    tag: u64,
) -> isize {
    with_ep(ep, |e| {
        e.transmit(
            dest,
            send_op(buf, len, None, Some(tag))?,
            len,
            buf,
            std::ptr::null_mut(),
            None,
            true,
            SEND_TAGGED,
        )
    })
}

unsafe extern "C" fn tag_senddata(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: u64,
    tag: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        e.transmit(
            dest,
            send_op(buf, len, Some(data), Some(tag))?,
            len,
            buf,
            context,
            None,
            false,
            SEND_TAGGED,
        )
    })
}

unsafe extern "C" fn tag_injectdata(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: u64,
    tag: u64,
) -> isize {
    with_ep(ep, |e| {
        e.transmit(
            dest,
            send_op(buf, len, Some(data), Some(tag))?,
            len,
            buf,
            std::ptr::null_mut(),
            None,
            true,
            SEND_TAGGED,
        )
    })
}

fn write_op(
    buf: *const c_void,
    len: usize,
    data: Option<u64>,
    addr: u64,
    key: u64,
) -> Result<Op, Errno> {
    Ok(Op::Write {
        buf: buf as usize,
        len: len32(len)?,
        data,
        offset: addr,
        key,
    })
}

fn read_op(buf: *mut c_void, len: usize, addr: u64, key: u64) -> Result<Op, Errno> {
    if buf.is_null() && len > 0 {
        return Err(errors::EINVAL);
    }
    Ok(Op::Read {
        buf: buf as usize,
        len: len32(len)?,
        offset: addr,
        key,
    })
}

unsafe extern "C" fn rma_read(
    ep: *mut ffi::fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: u64,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        e.transmit(
            src,
            read_op(buf, len, addr, key)?,
            len,
            buf,
            context,
            None,
            false,
            RMA_READ,
        )
    })
}

unsafe extern "C" fn rma_readv(
    ep: *mut ffi::fid_ep,
    iov: *const ffi::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    src: u64,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        // SAFETY: `count` iovecs.
        let (b, l) = unsafe { one_iov(iov, count)? };
        e.transmit(
            src,
            read_op(b, l, addr, key)?,
            l,
            b,
            context,
            None,
            false,
            RMA_READ,
        )
    })
}

/// The single remote buffer of an RMA message (`rma_iov_limit` is 1).
fn one_rma(m: &ffi::fi_msg_rma) -> Result<(u64, u64), Errno> {
    if m.rma_iov_count != 1 || m.rma_iov.is_null() {
        return Err(errors::EINVAL);
    }
    // SAFETY: one fi_rma_iov, as the count says.
    let r = unsafe { *m.rma_iov };
    Ok((r.addr, r.key))
}

unsafe extern "C" fn rma_readmsg(
    ep: *mut ffi::fid_ep,
    msg: *const ffi::fi_msg_rma,
    flags: u64,
) -> isize {
    with_ep(ep, |e| {
        // SAFETY: the application's message.
        let m = unsafe { msg.as_ref() }.ok_or(errors::EINVAL)?;
        // SAFETY: `iov_count` iovecs.
        let (b, l) = unsafe { one_iov(m.msg_iov, m.iov_count)? };
        let (addr, key) = one_rma(m)?;
        e.transmit(
            m.addr,
            read_op(b, l, addr, key)?,
            l,
            b,
            m.context,
            Some(flags),
            false,
            RMA_READ,
        )
    })
}

unsafe extern "C" fn rma_write(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: u64,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        e.transmit(
            dest,
            write_op(buf, len, None, addr, key)?,
            len,
            buf,
            context,
            None,
            false,
            RMA_WRITE,
        )
    })
}

unsafe extern "C" fn rma_writev(
    ep: *mut ffi::fid_ep,
    iov: *const ffi::iovec,
    _desc: *mut *mut c_void,
    count: usize,
    dest: u64,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        // SAFETY: `count` iovecs.
        let (b, l) = unsafe { one_iov(iov, count)? };
        e.transmit(
            dest,
            write_op(b, l, None, addr, key)?,
            l,
            b,
            context,
            None,
            false,
            RMA_WRITE,
        )
    })
}

unsafe extern "C" fn rma_writemsg(
    ep: *mut ffi::fid_ep,
    msg: *const ffi::fi_msg_rma,
    flags: u64,
) -> isize {
    with_ep(ep, |e| {
        // SAFETY: the application's message.
        let m = unsafe { msg.as_ref() }.ok_or(errors::EINVAL)?;
        // SAFETY: `iov_count` iovecs.
        let (b, l) = unsafe { one_iov(m.msg_iov, m.iov_count)? };
        let (addr, key) = one_rma(m)?;
        let data = (flags & f::REMOTE_CQ_DATA != 0).then_some(m.data);
        e.transmit(
            m.addr,
            write_op(b, l, data, addr, key)?,
            l,
            b,
            m.context,
            Some(flags),
            false,
            RMA_WRITE,
        )
    })
}

unsafe extern "C" fn rma_inject(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    dest: u64,
    addr: u64,
    key: u64,
) -> isize {
    with_ep(ep, |e| {
        e.transmit(
            dest,
            write_op(buf, len, None, addr, key)?,
            len,
            buf,
            std::ptr::null_mut(),
            None,
            true,
            RMA_WRITE,
        )
    })
}

unsafe extern "C" fn rma_writedata(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: u64,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    with_ep(ep, |e| {
        e.transmit(
            dest,
            write_op(buf, len, Some(data), addr, key)?,
            len,
            buf,
            context,
            None,
            false,
            RMA_WRITE,
        )
    })
}

unsafe extern "C" fn rma_injectdata(
    ep: *mut ffi::fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: u64,
    addr: u64,
    key: u64,
) -> isize {
    with_ep(ep, |e| {
        e.transmit(
            dest,
            write_op(buf, len, Some(data), addr, key)?,
            len,
            buf,
            std::ptr::null_mut(),
            None,
            true,
            RMA_WRITE,
        )
    })
}
