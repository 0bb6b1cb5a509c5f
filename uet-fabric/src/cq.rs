//! Completion queues: `fi_cq_read`, `fi_cq_readfrom`, `fi_cq_readerr`,
//! `fi_cq_sread`, `fi_cq_strerror` in the context, msg, data and tagged
//! formats.
//!
//! The engine pushes entries (under its own lock, then this queue's); a
//! read first drives progress (the application's thread is the progress
//! engine under `FI_PROGRESS_MANUAL`, and is welcome to help under
//! `FI_PROGRESS_AUTO`), then copies entries out. An error entry waits at
//! the head of its own queue: reads return `-FI_EAVAIL` until
//! `fi_cq_readerr` takes it.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::errors::{self, Errno};
use crate::ffi;
use crate::ffi_flags::ADDR_NOTAVAIL;
use crate::fid::{self, Table};

/// A failed operation's details.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ErrInfo {
    pub(crate) err: i32,
    pub(crate) prov_errno: i32,
    pub(crate) olen: usize,
}

/// One completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) context: usize,
    pub(crate) flags: u64,
    pub(crate) len: usize,
    pub(crate) buf: usize,
    pub(crate) data: u64,
    pub(crate) tag: u64,
    pub(crate) src: u64,
    pub(crate) err: Option<ErrInfo>,
}

impl Default for Entry {
    fn default() -> Self {
        Self {
            context: 0,
            flags: 0,
            len: 0,
            buf: 0,
            data: 0,
            tag: 0,
            src: ADDR_NOTAVAIL,
            err: None,
        }
    }
}

/// Entries a CQ holds before remote CQ data is dropped. Local completions
/// are bounded by the operations in flight (`QUEUE_SIZE` each way).
const REMOTE_BOUND: usize = 1 << 20;

#[derive(Debug, Default)]
struct Queues {
    ok: VecDeque<Entry>,
    err: VecDeque<Entry>,
}

/// The queue behind a `fid_cq`.
#[derive(Debug)]
pub(crate) struct Cq {
    q: Mutex<Queues>,
    cv: Condvar,
    format: ffi::fi_cq_format,
    engine: Arc<Engine>,
}

impl Cq {
    /// Adds an entry and wakes a waiting `fi_cq_sread`.
    pub(crate) fn push(&self, e: Entry) {
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        if e.err.is_some() {
            q.err.push_back(e);
        } else {
            q.ok.push_back(e);
        }
        drop(q);
        self.cv.notify_all();
    }

    /// Adds an entry a peer caused (remote CQ data), unless the queue holds
    /// [`REMOTE_BOUND`] entries already: a peer writing with data faster
    /// than the application reads cannot grow the queue without bound. The
    /// caller counts the refusal.
    pub(crate) fn push_remote(&self, e: Entry) -> bool {
        let q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        if q.ok.len() >= REMOTE_BOUND {
            return false;
        }
        drop(q);
        self.push(e);
        true
    }

    fn entry_size(&self) -> usize {
        match self.format {
            ffi::FI_CQ_FORMAT_CONTEXT => size_of::<ffi::fi_cq_entry>(),
            ffi::FI_CQ_FORMAT_MSG => size_of::<ffi::fi_cq_msg_entry>(),
            ffi::FI_CQ_FORMAT_DATA => size_of::<ffi::fi_cq_data_entry>(),
            _ => size_of::<ffi::fi_cq_tagged_entry>(),
        }
    }

    /// Copies up to `count` entries to `buf` (and their sources to `src`).
    ///
    /// # Safety
    /// `buf` holds `count` entries of the CQ's format; `src`, when not
    /// null, `count` addresses.
    unsafe fn read(&self, buf: *mut c_void, count: usize, src: *mut u64) -> isize {
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        if !q.err.is_empty() {
            return errors::EAVAIL.sret();
        }
        if q.ok.is_empty() {
            return errors::EAGAIN.sret();
        }
        let n = count.min(q.ok.len());
        let size = self.entry_size();
        for (i, e) in q.ok.drain(..n).enumerate() {
            // SAFETY: entry i of `count` in the caller's buffer.
            unsafe {
                let at = buf.cast::<u8>().add(i * size);
                write_entry(self.format, at, &e);
                if !src.is_null() {
                    *src.add(i) = e.src;
                }
            }
        }
        n as isize
    }
}

/// # Safety
/// `at` has room for one entry of `format`.
unsafe fn write_entry(format: ffi::fi_cq_format, at: *mut u8, e: &Entry) {
    let ctx = e.context as *mut c_void;
    // SAFETY: the caller's buffer holds an entry of this format (unaligned
    // writes: the application chose the buffer).
    unsafe {
        match format {
            ffi::FI_CQ_FORMAT_CONTEXT => {
                at.cast::<ffi::fi_cq_entry>()
                    .write_unaligned(ffi::fi_cq_entry { op_context: ctx });
            }
            ffi::FI_CQ_FORMAT_MSG => {
                at.cast::<ffi::fi_cq_msg_entry>()
                    .write_unaligned(ffi::fi_cq_msg_entry {
                        op_context: ctx,
                        flags: e.flags,
                        len: e.len,
                    })
            }
            ffi::FI_CQ_FORMAT_DATA => {
                at.cast::<ffi::fi_cq_data_entry>()
                    .write_unaligned(ffi::fi_cq_data_entry {
                        op_context: ctx,
                        flags: e.flags,
                        len: e.len,
                        buf: e.buf as *mut c_void,
                        data: e.data,
                    })
            }
            _ => at
                .cast::<ffi::fi_cq_tagged_entry>()
                .write_unaligned(ffi::fi_cq_tagged_entry {
                    op_context: ctx,
                    flags: e.flags,
                    len: e.len,
                    buf: e.buf as *mut c_void,
                    data: e.data,
                    tag: e.tag,
                }),
        }
    }
}

/// The `fid_cq` an application holds: the libfabric header first.
#[repr(C)]
pub(crate) struct CqFid {
    fid: ffi::fid_cq,
    pub(crate) cq: Arc<Cq>,
}

/// Opens a CQ on `engine` (`fi_cq_open`).
pub(crate) fn open(
    engine: &Arc<Engine>,
    attr: &ffi::fi_cq_attr,
    context: *mut c_void,
) -> Result<*mut ffi::fid_cq, Errno> {
    let format = match attr.format {
        ffi::FI_CQ_FORMAT_UNSPEC => ffi::FI_CQ_FORMAT_CONTEXT,
        f @ (ffi::FI_CQ_FORMAT_CONTEXT
        | ffi::FI_CQ_FORMAT_MSG
        | ffi::FI_CQ_FORMAT_DATA
        | ffi::FI_CQ_FORMAT_TAGGED) => f,
        _ => return Err(errors::ENOSYS),
    };
    match attr.wait_obj {
        ffi::FI_WAIT_NONE | ffi::FI_WAIT_UNSPEC => {}
        _ => return Err(errors::ENOSYS),
    }
    if attr.wait_cond != ffi::FI_CQ_COND_NONE {
        return Err(errors::ENOSYS);
    }
    if attr.flags & ffi::FI_AFFINITY as u64 != 0 {
        return Err(errors::ENOSYS);
    }
    let cq = Arc::new(Cq {
        q: Mutex::new(Queues::default()),
        cv: Condvar::new(),
        format,
        engine: Arc::clone(engine),
    });
    let b = Box::new(CqFid {
        fid: ffi::fid_cq {
            fid: ffi::fid {
                fclass: ffi::FI_CLASS_CQ as usize,
                context,
                ops: CQ_FI_OPS.ptr(),
            },
            ops: CQ_OPS.ptr(),
        },
        cq,
    });
    Ok(Box::into_raw(b).cast())
}

/// The CQ behind a `fid_cq` this provider made.
///
/// # Safety
/// `p` came from [`open`] and is not closed.
pub(crate) unsafe fn from_fid<'a>(p: *mut ffi::fid_cq) -> Option<&'a CqFid> {
    // SAFETY: the caller's promise; the class check refuses other fids.
    unsafe {
        if p.is_null() || (*p).fid.fclass != ffi::FI_CLASS_CQ as usize {
            return None;
        }
        Some(&*p.cast::<CqFid>())
    }
}

static CQ_FI_OPS: Table<ffi::fi_ops> = Table(ffi::fi_ops {
    size: size_of::<ffi::fi_ops>(),
    close: Some(cq_close),
    bind: Some(fid::no_bind),
    control: Some(fid::no_control),
    ops_open: Some(fid::no_ops_open),
    tostr: Some(fid::no_tostr),
    ops_set: Some(fid::no_ops_set),
});

static CQ_OPS: Table<ffi::fi_ops_cq> = Table(ffi::fi_ops_cq {
    size: size_of::<ffi::fi_ops_cq>(),
    read: Some(cq_read),
    readfrom: Some(cq_readfrom),
    readerr: Some(cq_readerr),
    sread: Some(cq_sread),
    sreadfrom: Some(cq_sreadfrom),
    signal: Some(cq_signal),
    strerror: Some(cq_strerror),
});

unsafe extern "C" fn cq_close(f: *mut ffi::fid) -> c_int {
    fid::guard(errors::EINVAL.ret(), || {
        // SAFETY: libfabric passes the fid it got from `open`.
        match unsafe { from_fid(f.cast()) } {
            Some(_) => {
                // SAFETY: made by Box::into_raw in `open`; closed once.
                drop(unsafe { Box::from_raw(f.cast::<CqFid>()) });
                0
            }
            None => errors::EINVAL.ret(),
        }
    })
}

unsafe extern "C" fn cq_read(cq: *mut ffi::fid_cq, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: forwarded.
    unsafe { cq_readfrom(cq, buf, count, std::ptr::null_mut()) }
}

unsafe extern "C" fn cq_readfrom(
    cq: *mut ffi::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut u64,
) -> isize {
    fid::guard(errors::EINVAL.sret(), || {
        // SAFETY: libfabric passes our fid.
        let Some(c) = (unsafe { from_fid(cq) }) else {
            return errors::EINVAL.sret();
        };
        if buf.is_null() && count > 0 {
            return errors::EINVAL.sret();
        }
        c.cq.engine.progress();
        // SAFETY: the application's buffers, as the API defines them.
        unsafe { c.cq.read(buf, count, src) }
    })
}

unsafe extern "C" fn cq_sread(
    cq: *mut ffi::fid_cq,
    buf: *mut c_void,
    count: usize,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: forwarded.
    unsafe { cq_sreadfrom(cq, buf, count, std::ptr::null_mut(), cond, timeout) }
}

unsafe extern "C" fn cq_sreadfrom(
    cq: *mut ffi::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut u64,
    _cond: *const c_void,
    timeout: c_int,
) -> isize {
    fid::guard(errors::EINVAL.sret(), || {
        // SAFETY: libfabric passes our fid.
        let Some(c) = (unsafe { from_fid(cq) }) else {
            return errors::EINVAL.sret();
        };
        if buf.is_null() && count > 0 {
            return errors::EINVAL.sret();
        }
        let deadline =
            (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
        loop {
            c.cq.engine.progress();
            // SAFETY: the application's buffers.
            let n = unsafe { c.cq.read(buf, count, src) };
            if n != errors::EAGAIN.sret() {
                return n;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return errors::EAGAIN.sret();
            }
            // Wait for an entry, in slices short enough to drive progress
            // ourselves when no progress thread runs.
            let slice = Duration::from_micros(200);
            let q = c.cq.q.lock().unwrap_or_else(|e| e.into_inner());
            if q.ok.is_empty() && q.err.is_empty() {
                let _ = c.cq.cv.wait_timeout(q, slice);
            }
        }
    })
}

unsafe extern "C" fn cq_readerr(
    cq: *mut ffi::fid_cq,
    buf: *mut ffi::fi_cq_err_entry,
    _flags: u64,
) -> isize {
    fid::guard(errors::EINVAL.sret(), || {
        // SAFETY: libfabric passes our fid.
        let Some(c) = (unsafe { from_fid(cq) }) else {
            return errors::EINVAL.sret();
        };
        if buf.is_null() {
            return errors::EINVAL.sret();
        }
        let mut q = c.cq.q.lock().unwrap_or_else(|e| e.into_inner());
        let Some(e) = q.err.pop_front() else {
            return errors::EAGAIN.sret();
        };
        let info = e.err.unwrap_or_default();
        // SAFETY: the application's entry; err_data is left alone when the
        // caller offered a buffer (we have no error data), else cleared.
        unsafe {
            let out = &mut *buf;
            out.op_context = e.context as *mut c_void;
            out.flags = e.flags;
            out.len = e.len;
            out.buf = e.buf as *mut c_void;
            out.data = e.data;
            out.tag = e.tag;
            out.olen = info.olen;
            out.err = info.err;
            out.prov_errno = info.prov_errno;
            if out.err_data_size == 0 {
                out.err_data = std::ptr::null_mut();
            }
            out.err_data_size = 0;
        }
        1
    })
}

unsafe extern "C" fn cq_signal(cq: *mut ffi::fid_cq) -> c_int {
    fid::guard(errors::EINVAL.ret(), || {
        // SAFETY: libfabric passes our fid.
        let Some(c) = (unsafe { from_fid(cq) }) else {
            return errors::EINVAL.ret();
        };
        c.cq.cv.notify_all();
        0
    })
}

thread_local! {
    static STRERROR: std::cell::RefCell<std::ffi::CString> =
        std::cell::RefCell::new(std::ffi::CString::default());
}

unsafe extern "C" fn cq_strerror(
    _cq: *mut ffi::fid_cq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    fid::guard(std::ptr::null(), || {
        let text = errors::prov_strerror(prov_errno);
        if !buf.is_null() && len > 0 {
            let n = text.len().min(len - 1);
            // SAFETY: `buf` has `len` bytes, as the API defines.
            unsafe {
                std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
            return buf.cast_const();
        }
        STRERROR.with(|s| {
            *s.borrow_mut() = std::ffi::CString::new(text).unwrap_or_default();
            s.borrow().as_ptr()
        })
    })
}
