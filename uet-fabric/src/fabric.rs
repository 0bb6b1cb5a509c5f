//! The provider structure, the fabric object and event queues.
//!
//! Event queues carry no provider events: address vectors insert
//! synchronously and RDM endpoints have no connections. They hold what the
//! application writes (`fi_eq_write`), so code that opens one works.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::errors::{self, Errno};
use crate::ffi;
use crate::fid::{self, Table};
use crate::info;

/// The `fi_provider` handed to libfabric by `fi_prov_ini`. libfabric
/// writes into its `context`, so it lives in writable memory: a leaked
/// heap copy made once (see [`provider`]).
const PROVIDER: ffi::fi_provider = ffi::fi_provider {
    version: info::PROV_VERSION,
    fi_version: info::API_VERSION,
    context: ffi::fi_context {
        internal: [std::ptr::null_mut(); 4],
    },
    name: info::PROV_NAME.as_ptr(),
    getinfo: Some(prov_getinfo),
    fabric: Some(prov_fabric),
    cleanup: Some(prov_cleanup),
};

/// The provider structure, allocated on first use and never freed (the
/// library stays loaded while libfabric holds it).
pub(crate) fn provider() -> *mut ffi::fi_provider {
    struct Ptr(*mut ffi::fi_provider);
    // SAFETY: the pointer is only handed to libfabric.
    unsafe impl Send for Ptr {}
    // SAFETY: as above.
    unsafe impl Sync for Ptr {}
    static P: std::sync::OnceLock<Ptr> = std::sync::OnceLock::new();
    P.get_or_init(|| Ptr(Box::into_raw(Box::new(PROVIDER)))).0
}

unsafe extern "C" fn prov_getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const ffi::fi_info,
    out: *mut *mut ffi::fi_info,
) -> c_int {
    fid::guard(errors::EOTHER.ret(), || {
        if out.is_null() {
            return errors::EINVAL.ret();
        }
        // SAFETY: arguments as fi_getinfo passes them.
        match unsafe { info::getinfo(version, node, service, flags, hints) } {
            Ok(i) => {
                // SAFETY: `out` is the caller's result pointer.
                unsafe { *out = i };
                0
            }
            Err(e) => e.ret(),
        }
    })
}

unsafe extern "C" fn prov_cleanup() {}

/// The `fid_fabric`.
#[repr(C)]
struct Fabric {
    fid: ffi::fid_fabric,
}

unsafe extern "C" fn prov_fabric(
    attr: *mut ffi::fi_fabric_attr,
    out: *mut *mut ffi::fid_fabric,
    context: *mut c_void,
) -> c_int {
    fid::guard(errors::EOTHER.ret(), || {
        if out.is_null() {
            return errors::EINVAL.ret();
        }
        // SAFETY: the attributes from fi_info, as fi_fabric passes them.
        if let Some(a) = unsafe { attr.as_ref() }
            && !a.name.is_null()
            && unsafe { std::ffi::CStr::from_ptr(a.name) } != info::FABRIC_NAME
        {
            return errors::EINVAL.ret();
        }
        let b = Box::new(Fabric {
            fid: ffi::fid_fabric {
                fid: ffi::fid {
                    fclass: ffi::FI_CLASS_FABRIC as usize,
                    context,
                    ops: FABRIC_FI_OPS.ptr(),
                },
                ops: FABRIC_OPS.ptr(),
                api_version: info::API_VERSION,
            },
        });
        // SAFETY: the caller's result pointer.
        unsafe { *out = Box::into_raw(b).cast() };
        0
    })
}

static FABRIC_FI_OPS: Table<ffi::fi_ops> = Table(ffi::fi_ops {
    size: size_of::<ffi::fi_ops>(),
    close: Some(fabric_close),
    bind: Some(fid::no_bind),
    control: Some(fid::no_control),
    ops_open: Some(fid::no_ops_open),
    tostr: Some(fid::no_tostr),
    ops_set: Some(fid::no_ops_set),
});

static FABRIC_OPS: Table<ffi::fi_ops_fabric> = Table(ffi::fi_ops_fabric {
    size: size_of::<ffi::fi_ops_fabric>(),
    domain: Some(crate::domain::open),
    passive_ep: Some(no_passive_ep),
    eq_open: Some(eq_open),
    wait_open: Some(no_wait_open),
    trywait: Some(trywait),
    domain2: Some(crate::domain::open2),
});

unsafe extern "C" fn fabric_close(f: *mut ffi::fid) -> c_int {
    fid::guard(errors::EINVAL.ret(), || {
        // SAFETY: libfabric passes the fid made in `prov_fabric`.
        unsafe {
            if f.is_null() || (*f).fclass != ffi::FI_CLASS_FABRIC as usize {
                return errors::EINVAL.ret();
            }
            drop(Box::from_raw(f.cast::<Fabric>()));
        }
        0
    })
}

unsafe extern "C" fn no_passive_ep(
    _: *mut ffi::fid_fabric,
    _: *mut ffi::fi_info,
    _: *mut *mut ffi::fid_pep,
    _: *mut c_void,
) -> c_int {
    errors::ENOSYS.ret()
}

unsafe extern "C" fn no_wait_open(
    _: *mut ffi::fid_fabric,
    _: *mut ffi::fi_wait_attr,
    _: *mut *mut ffi::fid_wait,
) -> c_int {
    errors::ENOSYS.ret()
}

unsafe extern "C" fn trywait(_: *mut ffi::fid_fabric, _: *mut *mut ffi::fid, _: c_int) -> c_int {
    // No wait objects are handed out, so there is never anything to block
    // on: tell the caller to poll.
    errors::EAGAIN.ret()
}

/// An event the application wrote.
struct Event {
    event: u32,
    data: Vec<u8>,
}

#[repr(C)]
struct Eq {
    fid: ffi::fid_eq,
    q: Mutex<VecDeque<Event>>,
    cv: Condvar,
}

unsafe extern "C" fn eq_open(
    _fabric: *mut ffi::fid_fabric,
    attr: *mut ffi::fi_eq_attr,
    out: *mut *mut ffi::fid_eq,
    context: *mut c_void,
) -> c_int {
    fid::guard(errors::EOTHER.ret(), || {
        if out.is_null() {
            return errors::EINVAL.ret();
        }
        // SAFETY: the application's attributes.
        if let Some(a) = unsafe { attr.as_ref() }
            && !matches!(a.wait_obj, ffi::FI_WAIT_NONE | ffi::FI_WAIT_UNSPEC)
        {
            return errors::ENOSYS.ret();
        }
        let b = Box::new(Eq {
            fid: ffi::fid_eq {
                fid: ffi::fid {
                    fclass: ffi::FI_CLASS_EQ as usize,
                    context,
                    ops: EQ_FI_OPS.ptr(),
                },
                ops: EQ_OPS.ptr(),
            },
            q: Mutex::new(VecDeque::new()),
            cv: Condvar::new(),
        });
        // SAFETY: the caller's result pointer.
        unsafe { *out = Box::into_raw(b).cast() };
        0
    })
}

/// # Safety
/// `p` is null or an EQ made by `eq_open`.
unsafe fn eq_ref<'a>(p: *mut ffi::fid_eq) -> Result<&'a Eq, Errno> {
    // SAFETY: the caller's promise, checked by class.
    unsafe {
        if p.is_null() || (*p).fid.fclass != ffi::FI_CLASS_EQ as usize {
            return Err(errors::EINVAL);
        }
        Ok(&*p.cast::<Eq>())
    }
}

static EQ_FI_OPS: Table<ffi::fi_ops> = Table(ffi::fi_ops {
    size: size_of::<ffi::fi_ops>(),
    close: Some(eq_close),
    bind: Some(fid::no_bind),
    control: Some(fid::no_control),
    ops_open: Some(fid::no_ops_open),
    tostr: Some(fid::no_tostr),
    ops_set: Some(fid::no_ops_set),
});

static EQ_OPS: Table<ffi::fi_ops_eq> = Table(ffi::fi_ops_eq {
    size: size_of::<ffi::fi_ops_eq>(),
    read: Some(eq_read),
    readerr: Some(eq_readerr),
    write: Some(eq_write),
    sread: Some(eq_sread),
    strerror: Some(eq_strerror),
});

unsafe extern "C" fn eq_close(f: *mut ffi::fid) -> c_int {
    fid::guard(errors::EINVAL.ret(), || {
        // SAFETY: libfabric passes our fid.
        match unsafe { eq_ref(f.cast()) } {
            // SAFETY: made by Box::into_raw in `eq_open`.
            Ok(_) => {
                drop(unsafe { Box::from_raw(f.cast::<Eq>()) });
                0
            }
            Err(e) => e.ret(),
        }
    })
}

/// # Safety
/// Arguments as `fi_eq_read`.
unsafe fn eq_take(eq: &Eq, event: *mut u32, buf: *mut c_void, len: usize, flags: u64) -> isize {
    let mut q = eq.q.lock().unwrap_or_else(|e| e.into_inner());
    let Some(ev) = q.front() else {
        return errors::EAGAIN.sret();
    };
    if ev.data.len() > len {
        return ETOOSMALL_SRET;
    }
    // SAFETY: the application's output buffers.
    unsafe {
        if !event.is_null() {
            *event = ev.event;
        }
        if !buf.is_null() {
            std::ptr::copy_nonoverlapping(ev.data.as_ptr(), buf.cast::<u8>(), ev.data.len());
        }
    }
    let n = ev.data.len() as isize;
    if flags & ffi::FI_PEEK as u64 == 0 {
        q.pop_front();
    }
    n
}

const ETOOSMALL_SRET: isize = -(ffi::FI_ETOOSMALL as isize);

unsafe extern "C" fn eq_read(
    eq: *mut ffi::fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> isize {
    fid::guard(errors::EINVAL.sret(), || {
        // SAFETY: libfabric passes our fid; buffers are the caller's.
        unsafe {
            match eq_ref(eq) {
                Ok(e) => eq_take(e, event, buf, len, flags),
                Err(e) => e.sret(),
            }
        }
    })
}

unsafe extern "C" fn eq_sread(
    eq: *mut ffi::fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: c_int,
    flags: u64,
) -> isize {
    fid::guard(errors::EINVAL.sret(), || {
        // SAFETY: libfabric passes our fid.
        let e = match unsafe { eq_ref(eq) } {
            Ok(e) => e,
            Err(e) => return e.sret(),
        };
        let deadline =
            (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
        loop {
            // SAFETY: the caller's buffers.
            let n = unsafe { eq_take(e, event, buf, len, flags) };
            if n != errors::EAGAIN.sret() {
                return n;
            }
            let now = Instant::now();
            let wait = match deadline {
                Some(d) if now >= d => return errors::EAGAIN.sret(),
                Some(d) => d - now,
                None => Duration::from_secs(1),
            };
            let q = e.q.lock().unwrap_or_else(|e| e.into_inner());
            if q.is_empty() {
                let _ = e.cv.wait_timeout(q, wait);
            }
        }
    })
}

unsafe extern "C" fn eq_readerr(
    eq: *mut ffi::fid_eq,
    _buf: *mut ffi::fi_eq_err_entry,
    _flags: u64,
) -> isize {
    fid::guard(errors::EINVAL.sret(), || {
        // SAFETY: libfabric passes our fid.
        match unsafe { eq_ref(eq) } {
            // No error events are ever generated.
            Ok(_) => errors::EAGAIN.sret(),
            Err(e) => e.sret(),
        }
    })
}

unsafe extern "C" fn eq_write(
    eq: *mut ffi::fid_eq,
    event: u32,
    buf: *const c_void,
    len: usize,
    _flags: u64,
) -> isize {
    fid::guard(errors::EINVAL.sret(), || {
        // SAFETY: libfabric passes our fid.
        let e = match unsafe { eq_ref(eq) } {
            Ok(e) => e,
            Err(e) => return e.sret(),
        };
        if buf.is_null() && len > 0 || len > 1 << 20 {
            return errors::EINVAL.sret();
        }
        let data = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: `len` bytes at `buf`, as the API defines.
            unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }.to_vec()
        };
        e.q.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(Event { event, data });
        e.cv.notify_all();
        len as isize
    })
}

unsafe extern "C" fn eq_strerror(
    _eq: *mut ffi::fid_eq,
    _prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    const TEXT: &std::ffi::CStr = c"no provider error";
    if !buf.is_null() && len > 0 {
        let n = TEXT.to_bytes().len().min(len - 1);
        // SAFETY: `buf` has `len` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(TEXT.as_ptr(), buf, n);
            *buf.add(n) = 0;
        }
        return buf;
    }
    TEXT.as_ptr()
}
