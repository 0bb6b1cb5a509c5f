//! The `uet` provider driven through its C ABI, the way libfabric and an
//! application drive it: the provider structure from `fi_prov_ini`, and
//! from there only the function tables of the objects it hands out
//! (`fi_getinfo`, `fi_fabric`, `fi_domain`, `fi_cq_open`, `fi_av_open`,
//! `fi_endpoint`, `fi_ep_bind`, `fi_enable`, the data operations, the CQ
//! reads and `fi_close`). No libfabric library is involved.
//!
//! Every endpoint lives on its own random loopback address (127.x.y.z,
//! port 4793), so tests running in parallel, and parallel runs of this
//! file, never share a socket.
#![allow(unsafe_code)]

use std::collections::hash_map::RandomState;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::hash::BuildHasher;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use uet_fabric::ffi;

// ---- constants as the API uses them ----

const API_VERSION: u32 = (1 << 16) | 17;
const MSG: u64 = ffi::FI_MSG as u64;
const TAGGED: u64 = ffi::FI_TAGGED as u64;
const RMA: u64 = ffi::FI_RMA as u64;
const ATOMIC: u64 = ffi::FI_ATOMIC as u64;
const SEND: u64 = ffi::FI_SEND as u64;
const RECV: u64 = ffi::FI_RECV as u64;
const READ: u64 = ffi::FI_READ as u64;
const WRITE: u64 = ffi::FI_WRITE as u64;
const TRANSMIT: u64 = ffi::FI_TRANSMIT as u64;
const REMOTE_READ: u64 = ffi::FI_REMOTE_READ as u64;
const REMOTE_WRITE: u64 = ffi::FI_REMOTE_WRITE as u64;
const REMOTE_CQ_DATA: u64 = ffi::FI_REMOTE_CQ_DATA as u64;
const COMPLETION: u64 = ffi::FI_COMPLETION as u64;
const DELIVERY_COMPLETE: u64 = ffi::FI_DELIVERY_COMPLETE as u64;
const PEEK: u64 = ffi::FI_PEEK as u64;
const CLAIM: u64 = ffi::FI_CLAIM;
const DISCARD: u64 = ffi::FI_DISCARD;
const SOURCE: u64 = ffi::FI_SOURCE;
const DIRECTED_RECV: u64 = ffi::FI_DIRECTED_RECV;
const SELECTIVE_COMPLETION: u64 = ffi::FI_SELECTIVE_COMPLETION;
const ADDR_UNSPEC: u64 = u64::MAX;
const PROV_KEY: c_int = ffi::FI_MR_PROV_KEY as c_int;

const EAGAIN: isize = ffi::FI_EAGAIN as isize;
const EAVAIL: isize = ffi::FI_EAVAIL as isize;
const EINVAL: i32 = ffi::FI_EINVAL as i32;
const ENODATA: i32 = ffi::FI_ENODATA as i32;
const ENOSPC: i32 = ffi::FI_ENOSPC as i32;
const ENOSYS: i32 = ffi::FI_ENOSYS as i32;
const EMSGSIZE: i32 = ffi::FI_EMSGSIZE as i32;
const EOPBADSTATE: i32 = ffi::FI_EOPBADSTATE as i32;
const ETRUNC: i32 = ffi::FI_ETRUNC as i32;
const ENOMSG: i32 = ffi::FI_ENOMSG as i32;
const ECANCELED: i32 = ffi::FI_ECANCELED as i32;
const EKEYREJECTED: i32 = ffi::FI_EKEYREJECTED as i32;

/// How long any completion may take on loopback before a test fails.
const DEADLINE: Duration = Duration::from_secs(20);

// ---- the helper layer: owned objects, closed on drop ----

fn prov() -> &'static ffi::fi_provider {
    // SAFETY: `fi_prov_ini` returns the provider structure, which lives as
    // long as the process.
    unsafe { &*uet_fabric::fi_prov_ini() }
}

/// A zeroed libfabric structure, as `fi_allocinfo`/`calloc` make them.
///
/// # Safety
/// `T` is plain C data for which all-zero bytes are a valid value (null
/// pointers, `None` function pointers, zero numbers and enums).
unsafe fn zeroed<T>() -> Box<T> {
    // SAFETY: the caller's promise.
    Box::new(unsafe { std::mem::zeroed() })
}

/// Hints an application fills in, shaped like `fi_allocinfo`'s: every
/// attribute structure present and zeroed.
struct Hints {
    info: Box<ffi::fi_info>,
    tx: Box<ffi::fi_tx_attr>,
    rx: Box<ffi::fi_rx_attr>,
    ep: Box<ffi::fi_ep_attr>,
    dom: Box<ffi::fi_domain_attr>,
    fab: Box<ffi::fi_fabric_attr>,
}

impl Hints {
    fn new() -> Self {
        // SAFETY: C structures of numbers, enums and pointers.
        unsafe {
            Self {
                info: zeroed(),
                tx: zeroed(),
                rx: zeroed(),
                ep: zeroed(),
                dom: zeroed(),
                fab: zeroed(),
            }
        }
    }

    /// The `fi_info` with its attribute pointers wired.
    fn as_ptr(&mut self) -> *const ffi::fi_info {
        self.info.tx_attr = &raw mut *self.tx;
        self.info.rx_attr = &raw mut *self.rx;
        self.info.ep_attr = &raw mut *self.ep;
        self.info.domain_attr = &raw mut *self.dom;
        self.info.fabric_attr = &raw mut *self.fab;
        &raw const *self.info
    }
}

/// An `fi_info` the provider returned; freed as `fi_freeinfo` does.
struct Info(*mut ffi::fi_info);

impl Info {
    fn get(&self) -> &ffi::fi_info {
        // SAFETY: a valid fi_info from the provider, owned by `self`.
        unsafe { &*self.0 }
    }
    fn tx(&self) -> &ffi::fi_tx_attr {
        // SAFETY: the provider fills every attribute pointer.
        unsafe { &*self.get().tx_attr }
    }
    fn rx(&self) -> &ffi::fi_rx_attr {
        // SAFETY: as above.
        unsafe { &*self.get().rx_attr }
    }
    fn ep(&self) -> &ffi::fi_ep_attr {
        // SAFETY: as above.
        unsafe { &*self.get().ep_attr }
    }
    fn dom(&self) -> &ffi::fi_domain_attr {
        // SAFETY: as above.
        unsafe { &*self.get().domain_attr }
    }
}

impl Drop for Info {
    fn drop(&mut self) {
        // SAFETY: every part was allocated with the C allocator (the
        // contract that lets `fi_freeinfo` free a provider's fi_info).
        unsafe {
            let mut p = self.0;
            while !p.is_null() {
                let i = &*p;
                libc::free(i.src_addr);
                libc::free(i.dest_addr);
                libc::free(i.tx_attr.cast());
                libc::free(i.rx_attr.cast());
                libc::free(i.ep_attr.cast());
                if let Some(d) = i.domain_attr.as_ref() {
                    libc::free(d.name.cast());
                }
                libc::free(i.domain_attr.cast());
                if let Some(fa) = i.fabric_attr.as_ref() {
                    libc::free(fa.name.cast());
                    libc::free(fa.prov_name.cast());
                }
                libc::free(i.fabric_attr.cast());
                let next = i.next;
                libc::free(p.cast());
                p = next;
            }
        }
    }
}

/// `fi_getinfo` through the provider: `Err` holds the positive errno.
fn getinfo(node: Option<&str>, flags: u64, hints: Option<&mut Hints>) -> Result<Info, i32> {
    let node = node.map(|n| CString::new(n).unwrap());
    let hints = hints.map_or(null(), Hints::as_ptr);
    let mut out: *mut ffi::fi_info = null_mut();
    // SAFETY: arguments as fi_getinfo passes them; `out` receives the list.
    let rc = unsafe {
        (prov().getinfo.unwrap())(
            API_VERSION,
            node.as_ref().map_or(null(), |n| n.as_ptr()),
            null(),
            flags,
            hints,
            &raw mut out,
        )
    };
    if rc == 0 {
        assert!(!out.is_null());
        Ok(Info(out))
    } else {
        assert!(rc < 0, "getinfo returned {rc}");
        Err(-rc)
    }
}

/// A loopback address no other endpoint of this run uses, and that a
/// parallel run picks only by a 1 in 2^24 chance.
fn fresh_ip() -> String {
    static BASE: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = *BASE.get_or_init(|| (RandomState::new().hash_one(std::process::id()) as u32) >> 8);
    loop {
        let v = base.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) & 0x00ff_ffff;
        let [_, a, b, c] = v.to_be_bytes();
        // Skip 127.0.x.x (127.0.0.1 is everybody's) and the .0/.255 hosts.
        if a != 0 && c != 0 && c != 255 {
            return format!("127.{a}.{b}.{c}");
        }
    }
}

/// `fi_close`.
///
/// # Safety
/// `fid` is an open object of this provider, not used afterwards.
unsafe fn close(fid: *mut ffi::fid) -> c_int {
    // SAFETY: the caller's promise.
    unsafe { ((*(*fid).ops).close.unwrap())(fid) }
}

/// How a test node is set up.
#[derive(Clone, Copy)]
struct Opts {
    /// Capabilities asked for (0: whatever the provider offers).
    caps: u64,
    manual: bool,
    format: ffi::fi_cq_format,
    /// Bind the CQs with `FI_SELECTIVE_COMPLETION`.
    selective: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Self {
            caps: 0,
            manual: false,
            format: ffi::FI_CQ_FORMAT_TAGGED,
            selective: false,
        }
    }
}

/// One application's view: fabric, domain, AV, a transmit and a receive
/// CQ and one endpoint bound to them.
struct Node {
    info: Info,
    fabric: *mut ffi::fid_fabric,
    domain: *mut ffi::fid_domain,
    av: *mut ffi::fid_av,
    tx_cq: *mut ffi::fid_cq,
    rx_cq: *mut ffi::fid_cq,
    ep: *mut ffi::fid_ep,
    name: [u8; 28],
}

impl Node {
    /// A node with its endpoint enabled.
    fn new(opts: Opts) -> Self {
        let n = Self::bound(opts);
        assert_eq!(n.enable(), 0);
        n
    }

    /// A node whose endpoint is bound to its CQs and AV, not yet enabled.
    fn bound(opts: Opts) -> Self {
        let ip = fresh_ip();
        let mut h = Hints::new();
        h.info.caps = opts.caps;
        h.dom.mr_mode = PROV_KEY;
        if opts.manual {
            h.dom.control_progress = ffi::FI_PROGRESS_MANUAL;
            h.dom.data_progress = ffi::FI_PROGRESS_MANUAL;
        }
        let info = getinfo(Some(&ip), SOURCE, Some(&mut h)).expect("getinfo");
        let mut n = Self {
            info,
            fabric: null_mut(),
            domain: null_mut(),
            av: null_mut(),
            tx_cq: null_mut(),
            rx_cq: null_mut(),
            ep: null_mut(),
            name: [0; 28],
        };
        // SAFETY: the calls an application makes, with the objects the
        // provider returned; each result pointer is a field of `n`, which
        // closes what it opened on drop.
        unsafe {
            let i = n.info.0;
            let rc = (prov().fabric.unwrap())((*i).fabric_attr, &raw mut n.fabric, null_mut());
            assert_eq!(rc, 0, "fi_fabric");
            let rc =
                ((*(*n.fabric).ops).domain.unwrap())(n.fabric, i, &raw mut n.domain, null_mut());
            assert_eq!(rc, 0, "fi_domain on {ip}");
            n.tx_cq = n.cq_open(opts.format).expect("fi_cq_open");
            n.rx_cq = n.cq_open(opts.format).expect("fi_cq_open");
            let mut av_attr: ffi::fi_av_attr = std::mem::zeroed();
            av_attr.type_ = ffi::FI_AV_TABLE;
            let rc = ((*(*n.domain).ops).av_open.unwrap())(
                n.domain,
                &raw mut av_attr,
                &raw mut n.av,
                null_mut(),
            );
            assert_eq!(rc, 0, "fi_av_open");
            n.ep = n.open_ep().expect("fi_endpoint");
            let sel = if opts.selective {
                SELECTIVE_COMPLETION
            } else {
                0
            };
            assert_eq!(n.bind(n.tx_cq.cast(), TRANSMIT | sel), 0);
            assert_eq!(n.bind(n.rx_cq.cast(), RECV | sel), 0);
            assert_eq!(n.bind(n.av.cast(), 0), 0);
            let mut len = n.name.len();
            let rc = ((*(*n.ep).cm).getname.unwrap())(
                n.ep.cast(),
                n.name.as_mut_ptr().cast(),
                &raw mut len,
            );
            assert_eq!((rc, len), (0, 28), "fi_getname");
        }
        assert_eq!(n.name[0], 1, "name version");
        assert_eq!(&n.name[2..4], &4793u16.to_be_bytes(), "port");
        let v4: std::net::Ipv4Addr = ip.parse().unwrap();
        assert_eq!(
            &n.name[12..28],
            &v4.to_ipv6_mapped().octets(),
            "FEP address"
        );
        n
    }

    /// `fi_cq_open` with the given format and `FI_WAIT_NONE`.
    fn cq_open(&self, format: ffi::fi_cq_format) -> Result<*mut ffi::fid_cq, i32> {
        // SAFETY: plain C data.
        let mut attr: ffi::fi_cq_attr = unsafe { std::mem::zeroed() };
        attr.format = format;
        attr.wait_obj = ffi::FI_WAIT_NONE;
        self.cq_open_attr(&mut attr)
    }

    fn cq_open_attr(&self, attr: &mut ffi::fi_cq_attr) -> Result<*mut ffi::fid_cq, i32> {
        let mut cq = null_mut();
        // SAFETY: our open domain; the attributes and result pointer are ours.
        let rc = unsafe {
            ((*(*self.domain).ops).cq_open.unwrap())(self.domain, attr, &raw mut cq, null_mut())
        };
        if rc == 0 { Ok(cq) } else { Err(-rc) }
    }

    /// `fi_endpoint` on this node's domain with its info.
    fn open_ep(&self) -> Result<*mut ffi::fid_ep, i32> {
        let mut ep = null_mut();
        // SAFETY: our open domain and the info it was opened with.
        let rc = unsafe {
            ((*(*self.domain).ops).endpoint.unwrap())(
                self.domain,
                self.info.0,
                &raw mut ep,
                null_mut(),
            )
        };
        if rc == 0 { Ok(ep) } else { Err(-rc) }
    }

    /// `fi_ep_bind`.
    fn bind(&self, fid: *mut ffi::fid, flags: u64) -> c_int {
        // SAFETY: our open endpoint and one of this node's objects.
        unsafe { ((*(*self.ep).fid.ops).bind.unwrap())(self.ep.cast(), fid, flags) }
    }

    /// `fi_enable`.
    fn enable(&self) -> c_int {
        // SAFETY: our open endpoint.
        unsafe {
            ((*(*self.ep).fid.ops).control.unwrap())(
                self.ep.cast(),
                ffi::FI_ENABLE as c_int,
                null_mut(),
            )
        }
    }

    /// `fi_av_insert` of one name; returns its `fi_addr_t`.
    fn insert(&self, name: &[u8; 28]) -> u64 {
        let mut addr = 0u64;
        // SAFETY: our open AV; one name of 28 bytes; one result slot.
        let n = unsafe {
            ((*(*self.av).ops).insert.unwrap())(
                self.av,
                name.as_ptr().cast(),
                1,
                &raw mut addr,
                0,
                null_mut(),
            )
        };
        assert_eq!(n, 1, "fi_av_insert");
        addr
    }

    fn msg(&self) -> &ffi::fi_ops_msg {
        // SAFETY: the endpoint's operation tables are static.
        unsafe { &*(*self.ep).msg }
    }
    fn tagged(&self) -> &ffi::fi_ops_tagged {
        // SAFETY: as above.
        unsafe { &*(*self.ep).tagged }
    }
    fn rma(&self) -> &ffi::fi_ops_rma {
        // SAFETY: as above.
        unsafe { &*(*self.ep).rma }
    }

    // The data operations below hand the provider raw buffers: each test
    // keeps its buffers alive and untouched until the operation's
    // completion, as libfabric requires.

    /// `fi_send`.
    fn send(&self, buf: &[u8], dest: u64, ctx: usize) -> isize {
        // SAFETY: our endpoint; the buffer outlives the operation (above).
        unsafe {
            (self.msg().send.unwrap())(
                self.ep,
                buf.as_ptr().cast(),
                buf.len(),
                null_mut(),
                dest,
                ctx as *mut c_void,
            )
        }
    }

    /// `fi_senddata`.
    fn senddata(&self, buf: &[u8], data: u64, dest: u64, ctx: usize) -> isize {
        // SAFETY: as `send`.
        unsafe {
            (self.msg().senddata.unwrap())(
                self.ep,
                buf.as_ptr().cast(),
                buf.len(),
                null_mut(),
                data,
                dest,
                ctx as *mut c_void,
            )
        }
    }

    /// `fi_inject`.
    fn inject(&self, buf: &[u8], dest: u64) -> isize {
        // SAFETY: as `send` (inject copies at once).
        unsafe { (self.msg().inject.unwrap())(self.ep, buf.as_ptr().cast(), buf.len(), dest) }
    }

    /// `fi_recv`.
    fn recv(&self, buf: &mut [u8], src: u64, ctx: usize) -> isize {
        // SAFETY: as `send`.
        unsafe {
            (self.msg().recv.unwrap())(
                self.ep,
                buf.as_mut_ptr().cast(),
                buf.len(),
                null_mut(),
                src,
                ctx as *mut c_void,
            )
        }
    }

    /// `fi_tsend`.
    fn tsend(&self, buf: &[u8], dest: u64, tag: u64, ctx: usize) -> isize {
        // SAFETY: as `send`.
        unsafe {
            (self.tagged().send.unwrap())(
                self.ep,
                buf.as_ptr().cast(),
                buf.len(),
                null_mut(),
                dest,
                tag,
                ctx as *mut c_void,
            )
        }
    }

    /// `fi_trecv`.
    fn trecv(&self, buf: &mut [u8], src: u64, tag: u64, ignore: u64, ctx: usize) -> isize {
        // SAFETY: as `send`.
        unsafe {
            (self.tagged().recv.unwrap())(
                self.ep,
                buf.as_mut_ptr().cast(),
                buf.len(),
                null_mut(),
                src,
                tag,
                ignore,
                ctx as *mut c_void,
            )
        }
    }

    /// `fi_trecvmsg` with `flags` (a null buffer when `buf` is empty).
    fn trecvmsg(&self, buf: &mut [u8], tag: u64, ignore: u64, ctx: usize, flags: u64) -> isize {
        let iov = ffi::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let msg = ffi::fi_msg_tagged {
            msg_iov: &raw const iov,
            desc: null_mut(),
            iov_count: usize::from(!buf.is_empty()),
            addr: ADDR_UNSPEC,
            tag,
            ignore,
            context: ctx as *mut c_void,
            data: 0,
        };
        // SAFETY: as `send`; the message is read during the call.
        unsafe { (self.tagged().recvmsg.unwrap())(self.ep, &raw const msg, flags) }
    }

    /// `fi_write`.
    fn write(&self, buf: &[u8], dest: u64, addr: u64, key: u64, ctx: usize) -> isize {
        // SAFETY: as `send`.
        unsafe {
            (self.rma().write.unwrap())(
                self.ep,
                buf.as_ptr().cast(),
                buf.len(),
                null_mut(),
                dest,
                addr,
                key,
                ctx as *mut c_void,
            )
        }
    }

    /// `fi_read`.
    fn read(&self, buf: &mut [u8], src: u64, addr: u64, key: u64, ctx: usize) -> isize {
        // SAFETY: as `send`.
        unsafe {
            (self.rma().read.unwrap())(
                self.ep,
                buf.as_mut_ptr().cast(),
                buf.len(),
                null_mut(),
                src,
                addr,
                key,
                ctx as *mut c_void,
            )
        }
    }

    /// `fi_cancel`.
    fn cancel(&self, ctx: usize) -> isize {
        // SAFETY: our endpoint.
        unsafe { ((*(*self.ep).ops).cancel.unwrap())(self.ep.cast(), ctx as *mut c_void) }
    }

    /// `fi_mr_reg` of `len` bytes at `ptr`; returns the MR and its key.
    ///
    /// The memory must stay valid until the MR is closed.
    fn mr_reg(&self, ptr: *mut u8, len: usize, access: u64) -> Mr {
        let mut mr: *mut ffi::fid_mr = null_mut();
        // SAFETY: our domain; the caller keeps the memory registered
        // until `Mr` closes it.
        let rc = unsafe {
            ((*(*self.domain).mr).reg.unwrap())(
                self.domain.cast(),
                ptr.cast(),
                len,
                access,
                0,
                0,
                0,
                &raw mut mr,
                null_mut(),
            )
        };
        assert_eq!(rc, 0, "fi_mr_reg");
        // SAFETY: the MR the provider just made.
        let key = unsafe { (*mr).key };
        Mr { mr, key }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let objs: [*mut ffi::fid; 6] = [
            self.ep.cast(),
            self.av.cast(),
            self.tx_cq.cast(),
            self.rx_cq.cast(),
            self.domain.cast(),
            self.fabric.cast(),
        ];
        for o in objs {
            if o.is_null() {
                continue;
            }
            // SAFETY: objects this node opened, closed once, in the order
            // libfabric requires (endpoint before what it is bound to).
            let rc = unsafe { close(o) };
            if !std::thread::panicking() {
                assert_eq!(rc, 0, "fi_close");
            }
        }
    }
}

/// A registration; closed on drop unless closed already.
struct Mr {
    mr: *mut ffi::fid_mr,
    key: u64,
}

impl Mr {
    fn close(&mut self) {
        if !self.mr.is_null() {
            // SAFETY: the open MR, closed once.
            assert_eq!(unsafe { close(self.mr.cast()) }, 0);
            self.mr = null_mut();
        }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        if !self.mr.is_null() {
            // SAFETY: the open MR, closed once.
            unsafe { close(self.mr.cast()) };
        }
    }
}

fn cq_ops(cq: *mut ffi::fid_cq) -> &'static ffi::fi_ops_cq {
    // SAFETY: an open CQ's operation table is static.
    unsafe { &*(*cq).ops }
}

/// `fi_cq_read` of one tagged-format entry.
fn cq_read(cq: *mut ffi::fid_cq) -> Result<ffi::fi_cq_tagged_entry, isize> {
    // SAFETY: plain C data.
    let mut e: ffi::fi_cq_tagged_entry = unsafe { std::mem::zeroed() };
    // SAFETY: an open CQ of the tagged format; room for one entry.
    let n = unsafe { (cq_ops(cq).read.unwrap())(cq, (&raw mut e).cast(), 1) };
    match n {
        1 => Ok(e),
        n => {
            assert!(n < 0, "fi_cq_read returned {n}");
            Err(-n)
        }
    }
}

/// `fi_cq_readerr`.
fn cq_readerr(cq: *mut ffi::fid_cq) -> Result<ffi::fi_cq_err_entry, isize> {
    // SAFETY: plain C data.
    let mut e: ffi::fi_cq_err_entry = unsafe { std::mem::zeroed() };
    // SAFETY: an open CQ; one error entry.
    let n = unsafe { (cq_ops(cq).readerr.unwrap())(cq, &raw mut e, 0) };
    if n == 1 { Ok(e) } else { Err(-n) }
}

/// `fi_cq_strerror` of an error entry.
fn cq_strerror(cq: *mut ffi::fid_cq, e: &ffi::fi_cq_err_entry) -> String {
    let mut buf = [0 as c_char; 256];
    // SAFETY: an open CQ; a buffer of the length given.
    let p = unsafe {
        (cq_ops(cq).strerror.unwrap())(cq, e.prov_errno, e.err_data, buf.as_mut_ptr(), buf.len())
    };
    assert!(!p.is_null());
    // SAFETY: the provider wrote a C string into `buf` (or returned its own).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// A completion: a success entry or an error entry.
#[derive(Debug)]
enum Done {
    Ok(ffi::fi_cq_tagged_entry),
    Err(ffi::fi_cq_err_entry),
}

/// Polls `cq` (driving progress with each read) until an entry arrives.
fn wait(cq: *mut ffi::fid_cq) -> Done {
    let end = Instant::now() + DEADLINE;
    loop {
        match cq_read(cq) {
            Ok(e) => return Done::Ok(e),
            Err(EAVAIL) => return Done::Err(cq_readerr(cq).expect("fi_cq_readerr after EAVAIL")),
            Err(EAGAIN) => {}
            Err(e) => panic!("fi_cq_read: -{e}"),
        }
        assert!(Instant::now() < end, "no completion within {DEADLINE:?}");
        std::thread::yield_now();
    }
}

fn wait_ok(cq: *mut ffi::fid_cq) -> ffi::fi_cq_tagged_entry {
    match wait(cq) {
        Done::Ok(e) => e,
        Done::Err(e) => panic!("error completion {e:?}: {}", cq_strerror(cq, &e)),
    }
}

fn wait_err(cq: *mut ffi::fid_cq) -> ffi::fi_cq_err_entry {
    match wait(cq) {
        Done::Err(e) => e,
        Done::Ok(e) => panic!("expected an error completion, got {e:?}"),
    }
}

/// Two enabled nodes, each in the other's AV.
struct Pair {
    a: Node,
    b: Node,
    /// b's `fi_addr_t` in a's AV.
    to_b: u64,
}

fn pair(opts: Opts) -> Pair {
    let a = Node::new(opts);
    let b = Node::new(opts);
    let to_b = a.insert(&b.name);
    b.insert(&a.name);
    Pair { a, b, to_b }
}

/// Deterministic bytes that differ per length and seed.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

// ---- fi_getinfo ----

fn rdm_hints() -> Hints {
    let mut h = Hints::new();
    h.ep.type_ = ffi::FI_EP_RDM;
    h.dom.mr_mode = PROV_KEY;
    h
}

#[test]
fn getinfo_offers_one_rdm_info_with_msg_tagged_rma() {
    for hints in [None, Some(rdm_hints())] {
        let mut hints = hints;
        let i = getinfo(Some(&fresh_ip()), SOURCE, hints.as_mut()).unwrap();
        assert!(i.get().next.is_null(), "one fi_info");
        let caps = i.get().caps;
        assert_eq!(
            caps & (MSG | TAGGED | RMA),
            MSG | TAGGED | RMA,
            "caps {caps:#x}"
        );
        assert_eq!(caps & ATOMIC, 0);
        assert_eq!(i.ep().type_, ffi::FI_EP_RDM);
        assert_eq!(i.dom().mr_mode, PROV_KEY);
        assert_eq!(i.get().src_addrlen, 28);
        assert_eq!(i.tx().msg_order, u64::from(ffi::FI_ORDER_SAS));
        assert!(i.tx().inject_size > 0);
    }
}

/// A change to hints.
type Tweak = fn(&mut Hints);

#[test]
fn getinfo_refuses_what_it_cannot_honour() {
    let cases: [(&str, Tweak); 8] = [
        ("FI_ATOMIC", |h| h.info.caps = MSG | ATOMIC),
        ("FI_EP_MSG", |h| h.ep.type_ = ffi::FI_EP_MSG),
        ("FI_EP_DGRAM", |h| h.ep.type_ = ffi::FI_EP_DGRAM),
        ("tx msg_order RAR", |h| {
            h.tx.msg_order = u64::from(ffi::FI_ORDER_SAS | ffi::FI_ORDER_RAR)
        }),
        ("rx msg_order RAR", |h| {
            h.rx.msg_order = u64::from(ffi::FI_ORDER_SAS | ffi::FI_ORDER_RAR)
        }),
        ("inject_size", |h| h.tx.inject_size = 1 << 20),
        ("FI_RMA without FI_MR_PROV_KEY", |h| {
            h.info.caps = MSG | RMA;
            h.dom.mr_mode = (ffi::FI_MR_LOCAL | ffi::FI_MR_VIRT_ADDR) as c_int;
        }),
        ("FI_RMA with mr_mode 0", |h| {
            h.info.caps = RMA;
            h.dom.mr_mode = 0;
        }),
    ];
    for (what, set) in cases {
        let mut h = rdm_hints();
        set(&mut h);
        assert_eq!(
            getinfo(Some(&fresh_ip()), SOURCE, Some(&mut h)).err(),
            Some(ENODATA),
            "{what}"
        );
    }
    // The baseline those cases change is accepted.
    let mut h = rdm_hints();
    h.tx.msg_order = u64::from(ffi::FI_ORDER_SAS);
    h.tx.inject_size = 64;
    assert!(getinfo(Some(&fresh_ip()), SOURCE, Some(&mut h)).is_ok());
}

#[test]
fn getinfo_without_rma_and_mr_mode_zero_offers_msg_and_tagged() {
    let mut h = Hints::new();
    h.dom.mr_mode = 0;
    let i = getinfo(Some(&fresh_ip()), SOURCE, Some(&mut h)).unwrap();
    let caps = i.get().caps;
    assert_eq!(caps & (MSG | TAGGED), MSG | TAGGED, "caps {caps:#x}");
    assert_eq!(
        caps & (RMA | READ | WRITE | REMOTE_READ | REMOTE_WRITE),
        0,
        "caps {caps:#x}"
    );
    assert_eq!(i.dom().mr_mode, 0);
}

#[test]
fn getinfo_echoes_op_flags_and_honours_manual_progress() {
    let mut h = rdm_hints();
    h.tx.op_flags = COMPLETION | DELIVERY_COMPLETE;
    h.rx.op_flags = COMPLETION;
    h.dom.data_progress = ffi::FI_PROGRESS_MANUAL;
    let i = getinfo(Some(&fresh_ip()), SOURCE, Some(&mut h)).unwrap();
    assert_eq!(i.tx().op_flags, COMPLETION | DELIVERY_COMPLETE);
    assert_eq!(i.rx().op_flags, COMPLETION);
    assert_eq!(i.dom().data_progress, ffi::FI_PROGRESS_MANUAL);
    assert_eq!(i.dom().control_progress, ffi::FI_PROGRESS_MANUAL);
    // Without the hint: automatic progress, no op flags.
    let i = getinfo(Some(&fresh_ip()), SOURCE, Some(&mut rdm_hints())).unwrap();
    assert_eq!(i.dom().data_progress, ffi::FI_PROGRESS_AUTO);
    assert_eq!((i.tx().op_flags, i.rx().op_flags), (0, 0));
}

#[test]
fn getinfo_takes_the_source_node() {
    let ip = fresh_ip();
    let i = getinfo(Some(&ip), SOURCE, Some(&mut rdm_hints())).unwrap();
    // SAFETY: the provider's 28-byte source name.
    let name = unsafe { std::slice::from_raw_parts(i.get().src_addr.cast::<u8>(), 28) };
    let v4: std::net::Ipv4Addr = ip.parse().unwrap();
    assert_eq!(&name[12..28], &v4.to_ipv6_mapped().octets());
    assert_eq!(&name[2..4], &4793u16.to_be_bytes());
}

// ---- messages ----

#[test]
fn send_recv_of_several_sizes_delivers_the_bytes() {
    let p = pair(Opts::default());
    for (i, len) in [0usize, 1, 4096, 1 << 20].into_iter().enumerate() {
        let data = pattern(len, i as u8);
        let mut rbuf = vec![0xeeu8; len + 16];
        assert_eq!(p.b.recv(&mut rbuf, ADDR_UNSPEC, 100 + i), 0);
        assert_eq!(p.a.send(&data, p.to_b, 200 + i), 0);
        let r = wait_ok(p.b.rx_cq);
        assert_eq!(r.op_context as usize, 100 + i);
        assert_eq!(r.len, len, "received length");
        assert_eq!(r.flags & (RECV | MSG), RECV | MSG);
        assert_eq!(r.buf.cast::<u8>(), rbuf.as_mut_ptr());
        assert!(rbuf[..len] == data[..], "payload of {len} bytes");
        assert!(
            rbuf[len..].iter().all(|b| *b == 0xee),
            "bytes past the message"
        );
        let s = wait_ok(p.a.tx_cq);
        assert_eq!(s.op_context as usize, 200 + i);
        assert_eq!(s.flags & (SEND | MSG), SEND | MSG);
    }
}

#[test]
fn senddata_reports_remote_cq_data_in_data_format_entries() {
    let p = pair(Opts {
        format: ffi::FI_CQ_FORMAT_DATA,
        ..Opts::default()
    });
    let mut r1 = [0u8; 8];
    let mut r2 = [0u8; 8];
    assert_eq!(p.b.recv(&mut r1, ADDR_UNSPEC, 1), 0);
    assert_eq!(p.b.recv(&mut r2, ADDR_UNSPEC, 2), 0);
    assert_eq!(p.a.senddata(b"hello", 0x1122_3344_5566_7788, p.to_b, 3), 0);
    assert_eq!(p.a.send(b"plain", p.to_b, 4), 0);
    // Both entries in one read: the provider must lay them out as
    // fi_cq_data_entry, not a larger format.
    // SAFETY: plain C data.
    let mut e: [ffi::fi_cq_data_entry; 2] = unsafe { std::mem::zeroed() };
    let mut got = 0usize;
    let end = Instant::now() + DEADLINE;
    while got < 2 {
        // SAFETY: an open data-format CQ; room for 2 - got entries.
        let n = unsafe {
            (cq_ops(p.b.rx_cq).read.unwrap())(p.b.rx_cq, e.as_mut_ptr().add(got).cast(), 2 - got)
        };
        if n > 0 {
            got += n as usize;
        } else {
            assert_eq!(n, -EAGAIN);
            assert!(Instant::now() < end, "receives did not complete");
        }
    }
    assert_eq!(e[0].op_context as usize, 1);
    assert_eq!(e[0].flags & REMOTE_CQ_DATA, REMOTE_CQ_DATA);
    assert_eq!(e[0].data, 0x1122_3344_5566_7788);
    assert_eq!(e[0].len, 5);
    assert_eq!(&r1[..5], b"hello");
    assert_eq!(e[1].op_context as usize, 2);
    assert_eq!(e[1].flags & REMOTE_CQ_DATA, 0, "a send without data");
    assert_eq!(&r2[..5], b"plain");
    for _ in 0..2 {
        // SAFETY: plain C data.
        let mut d: ffi::fi_cq_data_entry = unsafe { std::mem::zeroed() };
        let end = Instant::now() + DEADLINE;
        loop {
            // SAFETY: one data-format entry.
            let n = unsafe { (cq_ops(p.a.tx_cq).read.unwrap())(p.a.tx_cq, (&raw mut d).cast(), 1) };
            if n == 1 {
                break;
            }
            assert_eq!(n, -EAGAIN);
            assert!(Instant::now() < end, "sends did not complete");
        }
    }
}

#[test]
fn tagged_receives_match_with_ignore_bits() {
    let p = pair(Opts::default());
    let mut r = [0u8; 16];
    // Only tags 0x12_00..=0x12_ff match.
    assert_eq!(p.b.trecv(&mut r, ADDR_UNSPEC, 0x1200, 0xff, 7), 0);
    assert_eq!(p.a.tsend(b"other", p.to_b, 0x1300, 1), 0);
    wait_ok(p.a.tx_cq);
    assert_eq!(
        cq_read(p.b.rx_cq).err(),
        Some(EAGAIN),
        "0x1300 must not match"
    );
    assert_eq!(p.a.tsend(b"match", p.to_b, 0x12ab, 2), 0);
    let e = wait_ok(p.b.rx_cq);
    assert_eq!(e.op_context as usize, 7);
    assert_eq!(e.tag, 0x12ab);
    assert_eq!(e.flags & (RECV | TAGGED), RECV | TAGGED);
    assert_eq!(&r[..e.len], b"match");
    wait_ok(p.a.tx_cq);
    // The unmatched one waits for its own receive.
    let mut r2 = [0u8; 16];
    assert_eq!(p.b.trecv(&mut r2, ADDR_UNSPEC, 0x1300, 0, 8), 0);
    let e = wait_ok(p.b.rx_cq);
    assert_eq!((e.op_context as usize, e.tag), (8, 0x1300));
    assert_eq!(&r2[..e.len], b"other");
}

#[test]
fn unexpected_messages_wait_for_their_receive() {
    let p = pair(Opts::default());
    let big = pattern(100_000, 9);
    assert_eq!(p.a.send(b"first", p.to_b, 1), 0);
    assert_eq!(p.a.send(&big, p.to_b, 2), 0);
    // Both sends complete with nothing posted: the target buffered them.
    wait_ok(p.a.tx_cq);
    wait_ok(p.a.tx_cq);
    assert_eq!(cq_read(p.b.rx_cq).err(), Some(EAGAIN));
    let mut r1 = [0u8; 32];
    let mut r2 = vec![0u8; 200_000];
    assert_eq!(p.b.recv(&mut r1, ADDR_UNSPEC, 11), 0);
    assert_eq!(p.b.recv(&mut r2, ADDR_UNSPEC, 12), 0);
    let e = wait_ok(p.b.rx_cq);
    assert_eq!((e.op_context as usize, e.len), (11, 5));
    assert_eq!(&r1[..5], b"first");
    let e = wait_ok(p.b.rx_cq);
    assert_eq!((e.op_context as usize, e.len), (12, big.len()));
    assert!(r2[..big.len()] == big[..]);
}

#[test]
fn truncated_receive_reports_etrunc_with_olen() {
    let p = pair(Opts::default());
    let data = pattern(100, 3);
    let mut r = [0u8; 40];
    assert_eq!(p.b.recv(&mut r, ADDR_UNSPEC, 5), 0);
    assert_eq!(p.a.send(&data, p.to_b, 6), 0);
    let e = wait_err(p.b.rx_cq);
    assert_eq!(e.err, ETRUNC);
    assert_eq!(e.op_context as usize, 5);
    assert_eq!(e.len, 40);
    assert_eq!(e.olen, 60, "bytes that did not fit");
    assert_eq!(r[..], data[..40]);
    // The sender's message was delivered: success for it.
    assert_eq!(wait_ok(p.a.tx_cq).op_context as usize, 6);
}

#[test]
fn readfrom_names_the_sender() {
    let caps = MSG | TAGGED | SOURCE;
    let a = Node::new(Opts {
        caps,
        ..Opts::default()
    });
    let b = Node::new(Opts {
        caps,
        ..Opts::default()
    });
    let c = Node::new(Opts {
        caps,
        ..Opts::default()
    });
    // b's AV holds c first, so a's address is not the first index.
    let c_in_b = b.insert(&c.name);
    let a_in_b = b.insert(&a.name);
    assert_ne!(a_in_b, c_in_b);
    let to_b = a.insert(&b.name);
    let mut r = [0u8; 8];
    assert_eq!(b.recv(&mut r, ADDR_UNSPEC, 1), 0);
    assert_eq!(a.send(b"src", to_b, 2), 0);
    let end = Instant::now() + DEADLINE;
    // SAFETY: plain C data.
    let mut e: ffi::fi_cq_tagged_entry = unsafe { std::mem::zeroed() };
    let mut src = u64::MAX - 1;
    loop {
        // SAFETY: an open tagged CQ; one entry and one address.
        let n = unsafe {
            (cq_ops(b.rx_cq).readfrom.unwrap())(b.rx_cq, (&raw mut e).cast(), 1, &raw mut src)
        };
        if n == 1 {
            break;
        }
        assert_eq!(n, -EAGAIN);
        assert!(Instant::now() < end);
    }
    assert_eq!(src, a_in_b, "fi_cq_readfrom's source");
    assert_eq!(&r[..3], b"src");
}

#[test]
fn directed_receives_take_only_their_senders_messages() {
    let caps = MSG | TAGGED | DIRECTED_RECV;
    let opts = Opts {
        caps,
        ..Opts::default()
    };
    let a = Node::new(opts);
    let b = Node::new(opts);
    let c = Node::new(opts);
    let a_in_c = c.insert(&a.name);
    let b_in_c = c.insert(&b.name);
    let c_in_a = a.insert(&c.name);
    let c_in_b = b.insert(&c.name);
    let mut rb = [0u8; 16];
    let mut rt = [0u8; 16];
    // Receives from b only, untagged and tagged.
    assert_eq!(c.recv(&mut rb, b_in_c, 1), 0);
    assert_eq!(c.trecv(&mut rt, b_in_c, 5, 0, 2), 0);
    assert_eq!(a.send(b"from a", c_in_a, 10), 0);
    assert_eq!(a.tsend(b"tagged a", c_in_a, 5, 11), 0);
    wait_ok(a.tx_cq);
    wait_ok(a.tx_cq);
    // Both of a's messages reached c (delivery complete) and matched
    // neither receive.
    assert_eq!(
        cq_read(c.rx_cq).err(),
        Some(EAGAIN),
        "a's message taken by b's receive"
    );
    assert_eq!(b.send(b"from b", c_in_b, 20), 0);
    assert_eq!(b.tsend(b"tagged b", c_in_b, 5, 21), 0);
    let mut seen = [false; 2];
    for _ in 0..2 {
        let e = wait_ok(c.rx_cq);
        match e.op_context as usize {
            1 => assert_eq!(&rb[..e.len], b"from b"),
            2 => assert_eq!(&rt[..e.len], b"tagged b"),
            x => panic!("context {x}"),
        }
        seen[e.op_context as usize - 1] = true;
    }
    assert_eq!(seen, [true, true]);
    // A receive from anyone (FI_ADDR_UNSPEC) and one from a take a's.
    let mut ru = [0u8; 16];
    let mut rt2 = [0u8; 16];
    assert_eq!(c.recv(&mut ru, ADDR_UNSPEC, 3), 0);
    assert_eq!(c.trecv(&mut rt2, a_in_c, 5, 0, 4), 0);
    let e = wait_ok(c.rx_cq);
    assert_eq!(e.op_context as usize, 3);
    assert_eq!(&ru[..e.len], b"from a");
    let e = wait_ok(c.rx_cq);
    assert_eq!(e.op_context as usize, 4);
    assert_eq!(&rt2[..e.len], b"tagged a");
}

// ---- FI_PEEK, FI_CLAIM, FI_DISCARD ----

#[test]
fn peek_claim_and_discard() {
    let p = pair(Opts::default());
    let mut none: [u8; 0] = [];
    // Nothing there: an FI_ENOMSG error entry.
    assert_eq!(p.b.trecvmsg(&mut none, 0x40, 0, 1, PEEK), 0);
    let e = wait_err(p.b.rx_cq);
    assert_eq!((e.err, e.op_context as usize), (ENOMSG, 1));

    let data = pattern(3000, 4);
    // SAFETY: as Node::send: `data` outlives the operation.
    let rc = unsafe {
        (p.a.tagged().senddata.unwrap())(
            p.a.ep,
            data.as_ptr().cast(),
            data.len(),
            null_mut(),
            0xdada,
            p.to_b,
            0x41,
            null_mut(),
        )
    };
    assert_eq!(rc, 0);
    wait_ok(p.a.tx_cq);
    // A peek finds it and leaves it there.
    for ctx in [2, 3] {
        assert_eq!(p.b.trecvmsg(&mut none, 0x40, 0x0f, ctx, PEEK), 0);
        let e = wait_ok(p.b.rx_cq);
        assert_eq!(e.op_context as usize, ctx);
        assert_eq!((e.len, e.tag, e.data), (3000, 0x41, 0xdada));
        assert_eq!(e.flags & REMOTE_CQ_DATA, REMOTE_CQ_DATA);
    }
    // Peek and claim: then nobody else can match it...
    assert_eq!(p.b.trecvmsg(&mut none, 0x41, 0, 4, PEEK | CLAIM), 0);
    assert_eq!(wait_ok(p.b.rx_cq).op_context as usize, 4);
    assert_eq!(p.b.trecvmsg(&mut none, 0x41, 0, 5, PEEK), 0);
    assert_eq!(
        wait_err(p.b.rx_cq).err,
        ENOMSG,
        "a claimed message is hidden"
    );
    // ... until the claim receives it with the same context.
    let mut r = vec![0u8; 4000];
    assert_eq!(p.b.trecvmsg(&mut r, 0x41, 0, 4, CLAIM), 0);
    let e = wait_ok(p.b.rx_cq);
    assert_eq!((e.op_context as usize, e.len, e.tag), (4, 3000, 0x41));
    assert!(r[..3000] == data[..]);

    // FI_PEEK | FI_DISCARD drops a message.
    assert_eq!(p.a.tsend(b"drop me", p.to_b, 0x42, 6), 0);
    wait_ok(p.a.tx_cq);
    assert_eq!(p.b.trecvmsg(&mut none, 0x42, 0, 7, PEEK | DISCARD), 0);
    let e = wait_ok(p.b.rx_cq);
    assert_eq!((e.op_context as usize, e.len), (7, 7));
    assert_eq!(p.b.trecvmsg(&mut none, 0x42, 0, 8, PEEK), 0);
    assert_eq!(wait_err(p.b.rx_cq).err, ENOMSG, "discarded");

    // A claimed message dropped by FI_CLAIM | FI_DISCARD.
    assert_eq!(p.a.tsend(b"claimed", p.to_b, 0x43, 9), 0);
    wait_ok(p.a.tx_cq);
    assert_eq!(p.b.trecvmsg(&mut none, 0x43, 0, 10, PEEK | CLAIM), 0);
    wait_ok(p.b.rx_cq);
    assert_eq!(p.b.trecvmsg(&mut none, 0x43, 0, 10, CLAIM | DISCARD), 0);
    assert_eq!(wait_ok(p.b.rx_cq).op_context as usize, 10);
    let mut r = [0u8; 16];
    assert_eq!(p.b.trecv(&mut r, ADDR_UNSPEC, 0x43, 0, 11), 0);
    assert_eq!(
        cq_read(p.b.rx_cq).err(),
        Some(EAGAIN),
        "discarded, not received"
    );
    assert_eq!(p.b.cancel(11), 0);
}

// ---- RMA ----

/// An anonymous private mapping, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Self {
        // SAFETY: a fresh anonymous mapping; checked for failure.
        let p = unsafe {
            libc::mmap(
                null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        Self { ptr: p.cast(), len }
    }

    /// The bytes, read volatile (the provider writes them from its own
    /// thread).
    fn bytes(&self, at: usize, n: usize) -> Vec<u8> {
        assert!(at + n <= self.len);
        // SAFETY: inside the mapping.
        (0..n)
            .map(|i| unsafe { self.ptr.add(at + i).read_volatile() })
            .collect()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer registered.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

const REMOTE_RW: u64 = REMOTE_READ | REMOTE_WRITE;

#[test]
fn rma_write_and_read_of_vec_stack_and_mmap_regions() {
    let p = pair(Opts::default());
    let mut heap = vec![0u8; 1 << 20];
    let mut stack = [0u8; 4096];
    let map = Mapping::new(256 << 10);
    let mr_heap = p.b.mr_reg(heap.as_mut_ptr(), heap.len(), REMOTE_RW);
    let mr_stack = p.b.mr_reg(stack.as_mut_ptr(), stack.len(), REMOTE_RW);
    let mr_map = p.b.mr_reg(map.ptr, map.len, REMOTE_RW);
    let keys = [mr_heap.key, mr_stack.key, mr_map.key];
    assert!(
        keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2],
        "{keys:x?}"
    );
    for k in keys {
        // The resource index travels in the key's top bits (never the
        // receive RI 0).
        assert_ne!(k >> 52, 0, "key {k:#x}");
    }

    let w_heap = pattern(600_000, 1);
    let w_stack = pattern(1000, 2);
    let w_map = pattern(100_000, 3);
    assert_eq!(p.a.write(&w_heap, p.to_b, 4096, mr_heap.key, 1), 0);
    assert_eq!(p.a.write(&w_stack, p.to_b, 17, mr_stack.key, 2), 0);
    assert_eq!(p.a.write(&w_map, p.to_b, 150_000, mr_map.key, 3), 0);
    let mut done = [false; 3];
    for _ in 0..3 {
        let e = wait_ok(p.a.tx_cq);
        assert_eq!(e.flags & (RMA | WRITE), RMA | WRITE);
        done[e.op_context as usize - 1] = true;
    }
    assert_eq!(done, [true; 3]);
    assert!(heap[4096..4096 + w_heap.len()] == w_heap[..]);
    assert!(heap[..4096].iter().all(|b| *b == 0), "before the offset");
    assert!(stack[17..1017] == w_stack[..]);
    assert!(map.bytes(150_000, w_map.len()) == w_map);

    // Read them back.
    let mut r_heap = vec![0u8; w_heap.len()];
    let mut r_stack = vec![0u8; 1000];
    let mut r_map = vec![0u8; w_map.len()];
    assert_eq!(p.a.read(&mut r_heap, p.to_b, 4096, mr_heap.key, 4), 0);
    assert_eq!(p.a.read(&mut r_stack, p.to_b, 17, mr_stack.key, 5), 0);
    assert_eq!(p.a.read(&mut r_map, p.to_b, 150_000, mr_map.key, 6), 0);
    for _ in 0..3 {
        let e = wait_ok(p.a.tx_cq);
        assert_eq!(e.flags & (RMA | READ), RMA | READ);
    }
    assert!(r_heap == w_heap);
    assert!(r_stack == w_stack);
    assert!(r_map == w_map);
    drop((mr_heap, mr_stack, mr_map));
}

#[test]
fn writedata_writemsg_readmsg_and_inject_write() {
    let p = pair(Opts::default());
    let map = Mapping::new(64 << 10);
    let mr = p.b.mr_reg(map.ptr, map.len, REMOTE_RW);

    // fi_writedata: the target's receive CQ hears of it.
    let w = pattern(5000, 7);
    // SAFETY: as Node::send: `w` outlives the operation.
    let rc = unsafe {
        (p.a.rma().writedata.unwrap())(
            p.a.ep,
            w.as_ptr().cast(),
            w.len(),
            null_mut(),
            0xfeed_beef,
            p.to_b,
            100,
            mr.key,
            std::ptr::without_provenance_mut(1),
        )
    };
    assert_eq!(rc, 0);
    assert_eq!(wait_ok(p.a.tx_cq).op_context as usize, 1);
    let e = wait_ok(p.b.rx_cq);
    assert_eq!(
        e.flags & (RMA | REMOTE_WRITE | REMOTE_CQ_DATA),
        RMA | REMOTE_WRITE | REMOTE_CQ_DATA,
        "flags {:#x}",
        e.flags
    );
    assert_eq!(e.data, 0xfeed_beef);
    assert!(map.bytes(100, w.len()) == w);
    // A plain write does not reach the target's CQ.
    assert_eq!(p.a.write(b"quiet", p.to_b, 0, mr.key, 2), 0);
    wait_ok(p.a.tx_cq);
    assert_eq!(cq_read(p.b.rx_cq).err(), Some(EAGAIN));

    // fi_writemsg with FI_REMOTE_CQ_DATA, then fi_readmsg.
    let w2 = pattern(3000, 8);
    let iov = ffi::iovec {
        iov_base: w2.as_ptr().cast_mut().cast(),
        iov_len: w2.len(),
    };
    let rma_iov = ffi::fi_rma_iov {
        addr: 20_000,
        len: w2.len(),
        key: mr.key,
    };
    let msg = ffi::fi_msg_rma {
        msg_iov: &raw const iov,
        desc: null_mut(),
        iov_count: 1,
        addr: p.to_b,
        rma_iov: &raw const rma_iov,
        rma_iov_count: 1,
        context: std::ptr::without_provenance_mut(3),
        data: 77,
    };
    // SAFETY: our endpoint; `w2` outlives the operation.
    let rc = unsafe {
        (p.a.rma().writemsg.unwrap())(p.a.ep, &raw const msg, REMOTE_CQ_DATA | COMPLETION)
    };
    assert_eq!(rc, 0);
    assert_eq!(wait_ok(p.a.tx_cq).op_context as usize, 3);
    assert_eq!(wait_ok(p.b.rx_cq).data, 77);
    assert!(map.bytes(20_000, w2.len()) == w2);
    let mut back = vec![0u8; w2.len()];
    let iov = ffi::iovec {
        iov_base: back.as_mut_ptr().cast(),
        iov_len: back.len(),
    };
    let msg = ffi::fi_msg_rma {
        msg_iov: &raw const iov,
        context: std::ptr::without_provenance_mut(4),
        data: 0,
        ..msg
    };
    // SAFETY: our endpoint; `back` outlives the operation.
    let rc = unsafe { (p.a.rma().readmsg.unwrap())(p.a.ep, &raw const msg, COMPLETION) };
    assert_eq!(rc, 0);
    let e = wait_ok(p.a.tx_cq);
    assert_eq!(e.op_context as usize, 4);
    assert_eq!(e.flags & (RMA | READ), RMA | READ);
    assert!(back == w2);

    // fi_inject_write: the buffer is reusable at once, and no completion.
    let mut w3 = pattern(256, 9);
    // SAFETY: our endpoint; inject copies the buffer during the call.
    let rc = unsafe {
        (p.a.rma().inject.unwrap())(p.a.ep, w3.as_ptr().cast(), w3.len(), p.to_b, 40_000, mr.key)
    };
    assert_eq!(rc, 0);
    let want = w3.clone();
    w3.fill(0);
    let end = Instant::now() + DEADLINE;
    while map.bytes(40_000, want.len()) != want {
        // Drive the initiator (the target has its progress thread).
        assert_eq!(cq_read(p.a.tx_cq).err(), Some(EAGAIN), "inject completed");
        assert!(Instant::now() < end, "inject write did not land");
        std::thread::yield_now();
    }
}

#[test]
fn rma_with_a_wrong_or_closed_key_completes_in_error() {
    let p = pair(Opts::default());
    let mut region = vec![0u8; 8192];
    let mut mr = p.b.mr_reg(region.as_mut_ptr(), region.len(), REMOTE_RW);
    // The random part of the key is wrong.
    assert_eq!(p.a.write(b"nope", p.to_b, 0, mr.key ^ 1, 1), 0);
    let e = wait_err(p.a.tx_cq);
    assert_eq!((e.err, e.op_context as usize), (EKEYREJECTED, 1));
    let text = cq_strerror(p.a.tx_cq, &e);
    assert!(
        text.contains("UET return code") && text.contains("BAD_MKEY"),
        "{text}"
    );
    let mut rbuf = [0u8; 4];
    assert_eq!(p.a.read(&mut rbuf, p.to_b, 0, mr.key ^ 1, 2), 0);
    assert_eq!(wait_err(p.a.tx_cq).err, EKEYREJECTED);
    assert!(region.iter().all(|b| *b == 0));
    // The right key works...
    assert_eq!(p.a.write(b"yes", p.to_b, 0, mr.key, 3), 0);
    wait_ok(p.a.tx_cq);
    assert_eq!(&region[..3], b"yes");
    // ... until the MR is closed.
    let key = mr.key;
    mr.close();
    assert_eq!(p.a.write(b"gone", p.to_b, 0, key, 4), 0);
    let e = wait_err(p.a.tx_cq);
    assert_eq!((e.err, e.op_context as usize), (EKEYREJECTED, 4));
    let text = cq_strerror(p.a.tx_cq, &e);
    assert!(text.contains("UET return code"), "{text}");
    assert_eq!(&region[..4], b"yes\0");
}

// ---- misuse ----

#[test]
fn operations_before_enable_are_refused() {
    let a = Node::bound(Opts::default());
    let b = Node::new(Opts::default());
    let to_b = a.insert(&b.name);
    let mut r = [0u8; 8];
    assert_eq!(a.send(b"x", to_b, 1), -(EOPBADSTATE as isize));
    assert_eq!(a.recv(&mut r, ADDR_UNSPEC, 2), -(EOPBADSTATE as isize));
    assert_eq!(a.tsend(b"x", to_b, 1, 3), -(EOPBADSTATE as isize));
    assert_eq!(a.write(b"x", to_b, 0, 1 << 52, 4), -(EOPBADSTATE as isize));
    assert_eq!(a.enable(), 0);
    // Binding after enable is refused too.
    assert_eq!(a.bind(a.av.cast(), 0), -EOPBADSTATE);
    assert_eq!(b.recv(&mut r, ADDR_UNSPEC, 5), 0);
    assert_eq!(a.send(b"x", to_b, 6), 0);
    wait_ok(b.rx_cq);
    wait_ok(a.tx_cq);
}

#[test]
fn bad_arguments_are_refused() {
    let p = pair(Opts::default());
    // An fi_addr_t the AV never handed out.
    assert_eq!(p.a.send(b"x", 57, 1), -(EINVAL as isize));
    assert_eq!(p.a.write(b"x", 57, 0, 1 << 52, 2), -(EINVAL as isize));
    // fi_inject beyond inject_size; at inject_size it works.
    let max = p.a.info.tx().inject_size;
    let big = pattern(max + 1, 5);
    assert_eq!(p.a.inject(&big, p.to_b), -(EMSGSIZE as isize));
    let mut r = vec![0u8; max + 1];
    assert_eq!(p.b.recv(&mut r, ADDR_UNSPEC, 3), 0);
    assert_eq!(p.a.inject(&big[..max], p.to_b), 0);
    let e = wait_ok(p.b.rx_cq);
    assert_eq!(e.len, max);
    assert!(r[..max] == big[..max]);
    // A domain has one endpoint.
    assert_eq!(p.a.open_ep().err(), Some(ENOSPC));
    // CQs without wait objects only.
    // SAFETY: plain C data.
    let mut attr: ffi::fi_cq_attr = unsafe { std::mem::zeroed() };
    attr.format = ffi::FI_CQ_FORMAT_TAGGED;
    attr.wait_obj = ffi::FI_WAIT_FD;
    assert_eq!(p.a.cq_open_attr(&mut attr).err(), Some(ENOSYS));
    // Nothing happened on a's transmit CQ for the injects.
    assert_eq!(cq_read(p.a.tx_cq).err(), Some(EAGAIN));
}

#[test]
fn cancel_of_a_posted_receive_completes_it_with_ecanceled() {
    let p = pair(Opts::default());
    let mut r = [0u8; 8];
    assert_eq!(p.b.recv(&mut r, ADDR_UNSPEC, 42), 0);
    assert_eq!(p.b.cancel(42), 0);
    let e = wait_err(p.b.rx_cq);
    assert_eq!((e.err, e.op_context as usize), (ECANCELED, 42));
    assert_eq!(p.b.cancel(42), -(ffi::FI_ENOENT as isize), "cancelled once");
    // The next message goes to a new receive, not the cancelled one.
    assert_eq!(p.a.send(b"after", p.to_b, 1), 0);
    wait_ok(p.a.tx_cq);
    assert_eq!(cq_read(p.b.rx_cq).err(), Some(EAGAIN));
    let mut r2 = [0u8; 8];
    assert_eq!(p.b.recv(&mut r2, ADDR_UNSPEC, 43), 0);
    assert_eq!(wait_ok(p.b.rx_cq).op_context as usize, 43);
    assert_eq!(&r2[..5], b"after");
    assert_eq!(r, [0; 8]);
}

#[test]
fn empty_cq_reads_eagain_and_sread_waits_its_timeout() {
    let n = Node::new(Opts::default());
    assert_eq!(cq_read(n.rx_cq).err(), Some(EAGAIN));
    assert_eq!(cq_readerr(n.rx_cq).err(), Some(EAGAIN));
    // SAFETY: plain C data.
    let mut e: ffi::fi_cq_tagged_entry = unsafe { std::mem::zeroed() };
    let t0 = Instant::now();
    // SAFETY: an open CQ; one entry.
    let rc =
        unsafe { (cq_ops(n.rx_cq).sread.unwrap())(n.rx_cq, (&raw mut e).cast(), 1, null(), 300) };
    let took = t0.elapsed();
    assert_eq!(rc, -EAGAIN);
    assert!(
        took >= Duration::from_millis(300),
        "returned after {took:?}"
    );
    assert!(
        took < Duration::from_millis(300 + 2000),
        "returned after {took:?}"
    );
}

#[test]
fn sread_returns_when_a_completion_arrives() {
    let p = pair(Opts::default());
    let mut r = [0u8; 8];
    assert_eq!(p.b.recv(&mut r, ADDR_UNSPEC, 1), 0);
    assert_eq!(p.a.send(b"wake", p.to_b, 2), 0);
    // SAFETY: plain C data.
    let mut e: ffi::fi_cq_tagged_entry = unsafe { std::mem::zeroed() };
    // SAFETY: an open CQ; one entry; timeout in ms.
    let rc = unsafe {
        (cq_ops(p.b.rx_cq).sread.unwrap())(p.b.rx_cq, (&raw mut e).cast(), 1, null(), 20_000)
    };
    assert_eq!(rc, 1);
    assert_eq!(e.op_context as usize, 1);
    assert_eq!(&r[..4], b"wake");
}

// ---- progress ----

#[test]
fn manual_progress_completes_while_the_two_cqs_are_polled() {
    let p = pair(Opts {
        manual: true,
        ..Opts::default()
    });
    assert_eq!(p.a.info.dom().data_progress, ffi::FI_PROGRESS_MANUAL);
    let mut r = [0u8; 64];
    let data = pattern(64, 1);
    assert_eq!(p.b.recv(&mut r, ADDR_UNSPEC, 1), 0);
    assert_eq!(p.a.send(&data, p.to_b, 2), 0);
    // Nobody drives b: a's send cannot complete (no progress thread acks
    // for b). A bounded look, not a wait for something to happen.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(150) {
        assert_eq!(
            cq_read(p.a.tx_cq).err(),
            Some(EAGAIN),
            "completed without b's progress"
        );
        std::thread::yield_now();
    }
    // Polling both CQs drives both sides.
    let (mut sent, mut got) = (false, false);
    let end = Instant::now() + DEADLINE;
    while !(sent && got) {
        match cq_read(p.a.tx_cq) {
            Ok(e) => {
                assert_eq!(e.op_context as usize, 2);
                sent = true;
            }
            Err(e) => assert_eq!(e, EAGAIN),
        }
        match cq_read(p.b.rx_cq) {
            Ok(e) => {
                assert_eq!(e.op_context as usize, 1);
                got = true;
            }
            Err(e) => assert_eq!(e, EAGAIN),
        }
        assert!(Instant::now() < end, "sent {sent} received {got}");
    }
    assert_eq!(r, data[..]);
}

// ---- probes ----

#[test]
fn tagged_and_untagged_messages_do_not_mix() {
    let p = pair(Opts::default());
    let mut ru = [0u8; 16];
    let mut rt = [0u8; 16];
    assert_eq!(p.b.recv(&mut ru, ADDR_UNSPEC, 1), 0);
    assert_eq!(p.a.tsend(b"tagged", p.to_b, 0, 10), 0);
    wait_ok(p.a.tx_cq);
    assert_eq!(
        cq_read(p.b.rx_cq).err(),
        Some(EAGAIN),
        "a tagged send matched fi_recv"
    );
    assert_eq!(p.b.trecv(&mut rt, ADDR_UNSPEC, 0, u64::MAX, 2), 0);
    let e = wait_ok(p.b.rx_cq);
    assert_eq!(e.op_context as usize, 2);
    assert_eq!(&rt[..e.len], b"tagged");
    let mut rt2 = [0u8; 16];
    assert_eq!(p.b.trecv(&mut rt2, ADDR_UNSPEC, 0, u64::MAX, 3), 0);
    assert_eq!(p.a.send(b"untagged", p.to_b, 11), 0);
    let e = wait_ok(p.b.rx_cq);
    assert_eq!(
        e.op_context as usize, 1,
        "an untagged send matched fi_trecv"
    );
    assert_eq!(&ru[..e.len], b"untagged");
}

#[test]
fn truncation_of_an_unexpected_message() {
    let p = pair(Opts::default());
    let data = pattern(20_000, 5);
    assert_eq!(p.a.tsend(&data, p.to_b, 9, 1), 0);
    wait_ok(p.a.tx_cq);
    let mut r = vec![0u8; 5000];
    assert_eq!(p.b.trecv(&mut r, ADDR_UNSPEC, 9, 0, 2), 0);
    let e = wait_err(p.b.rx_cq);
    assert_eq!((e.err, e.len, e.olen, e.tag), (ETRUNC, 5000, 15_000, 9));
    assert!(r[..] == data[..5000]);
}

#[test]
fn mr_access_and_bounds_are_enforced() {
    let p = pair(Opts::default());
    let mut ro = vec![7u8; 4096];
    let mut wo = vec![0u8; 4096];
    let mr_ro = p.b.mr_reg(ro.as_mut_ptr(), ro.len(), REMOTE_READ);
    let mr_wo = p.b.mr_reg(wo.as_mut_ptr(), wo.len(), REMOTE_WRITE);
    assert_eq!(p.a.write(b"no", p.to_b, 0, mr_ro.key, 1), 0);
    let e = wait_err(p.a.tx_cq);
    assert_eq!(
        e.err,
        ffi::FI_EACCES as i32,
        "{}",
        cq_strerror(p.a.tx_cq, &e)
    );
    let mut r = [0u8; 4];
    assert_eq!(p.a.read(&mut r, p.to_b, 0, mr_wo.key, 2), 0);
    let e = wait_err(p.a.tx_cq);
    assert_eq!(
        e.err,
        ffi::FI_EACCES as i32,
        "{}",
        cq_strerror(p.a.tx_cq, &e)
    );
    assert_eq!(r, [0; 4]);
    // Past the end of the region.
    assert_eq!(p.a.write(b"1234", p.to_b, 4094, mr_wo.key, 3), 0);
    let e = wait_err(p.a.tx_cq);
    assert_ne!(e.err, 0, "{}", cq_strerror(p.a.tx_cq, &e));
    assert!(wo.iter().all(|b| *b == 0));
    assert!(ro.iter().all(|b| *b == 7));
    // The allowed directions work.
    assert_eq!(p.a.read(&mut r, p.to_b, 4092, mr_ro.key, 4), 0);
    wait_ok(p.a.tx_cq);
    assert_eq!(r, [7; 4]);
    drop((mr_ro, mr_wo));
}

#[test]
fn a_reused_resource_index_rejects_the_old_key() {
    let p = pair(Opts::default());
    let mut one = vec![0u8; 64];
    let mut two = vec![0u8; 64];
    let mut m1 = p.b.mr_reg(one.as_mut_ptr(), one.len(), REMOTE_RW);
    let old = m1.key;
    m1.close();
    let m2 = p.b.mr_reg(two.as_mut_ptr(), two.len(), REMOTE_RW);
    assert_ne!(m2.key, old);
    assert_eq!(p.a.write(b"stale", p.to_b, 0, old, 1), 0);
    assert_eq!(wait_err(p.a.tx_cq).err, EKEYREJECTED);
    assert_eq!(p.a.write(b"fresh", p.to_b, 0, m2.key, 2), 0);
    wait_ok(p.a.tx_cq);
    assert_eq!(&two[..5], b"fresh");
    assert!(one.iter().all(|b| *b == 0));
    drop(m2);
}

#[test]
fn injectdata_and_null_zero_length_sends() {
    let p = pair(Opts::default());
    let mut r1 = [0u8; 8];
    let mut r2 = [0u8; 8];
    assert_eq!(p.b.recv(&mut r1, ADDR_UNSPEC, 1), 0);
    assert_eq!(p.b.recv(&mut r2, ADDR_UNSPEC, 2), 0);
    // SAFETY: our endpoint; inject copies during the call.
    let rc =
        unsafe { (p.a.msg().injectdata.unwrap())(p.a.ep, b"inj".as_ptr().cast(), 3, 99, p.to_b) };
    assert_eq!(rc, 0);
    // SAFETY: a zero-length send with a null buffer, as C programs make.
    let rc =
        unsafe { (p.a.msg().send.unwrap())(p.a.ep, null(), 0, null_mut(), p.to_b, null_mut()) };
    assert_eq!(rc, 0);
    let e = wait_ok(p.b.rx_cq);
    assert_eq!((e.op_context as usize, e.len, e.data), (1, 3, 99));
    assert_eq!(e.flags & REMOTE_CQ_DATA, REMOTE_CQ_DATA);
    let e = wait_ok(p.b.rx_cq);
    assert_eq!((e.op_context as usize, e.len), (2, 0));
    // Only the null send completes at the sender.
    assert!(wait_ok(p.a.tx_cq).op_context.is_null());
    assert_eq!(cq_read(p.a.tx_cq).err(), Some(EAGAIN));
}

#[test]
fn msg_and_context_format_cqs_write_their_own_entry_size() {
    for format in [ffi::FI_CQ_FORMAT_CONTEXT, ffi::FI_CQ_FORMAT_MSG] {
        let p = pair(Opts {
            format,
            ..Opts::default()
        });
        let mut r1 = [0u8; 8];
        let mut r2 = [0u8; 8];
        assert_eq!(p.b.recv(&mut r1, ADDR_UNSPEC, 1), 0);
        assert_eq!(p.b.recv(&mut r2, ADDR_UNSPEC, 2), 0);
        assert_eq!(p.a.send(b"one", p.to_b, 3), 0);
        assert_eq!(p.a.send(b"two!", p.to_b, 4), 0);
        // Room for four message entries; the fifth word catches overruns.
        let mut words = [u64::MAX; 13];
        let mut got = 0usize;
        let size = if format == ffi::FI_CQ_FORMAT_MSG {
            3
        } else {
            1
        };
        let end = Instant::now() + DEADLINE;
        while got < 2 {
            // SAFETY: room for 2 - got entries of `format` after `got`.
            let n = unsafe {
                (cq_ops(p.b.rx_cq).read.unwrap())(
                    p.b.rx_cq,
                    words.as_mut_ptr().add(got * size).cast(),
                    2 - got,
                )
            };
            if n > 0 {
                got += n as usize;
            } else {
                assert_eq!(n, -EAGAIN);
                assert!(Instant::now() < end);
            }
        }
        assert_eq!(words[0], 1);
        assert_eq!(words[size], 2);
        if size == 3 {
            assert_eq!(words[1] & (RECV | MSG), RECV | MSG);
            assert_eq!((words[2], words[5]), (3, 4), "lengths");
        }
        assert_eq!(words[2 * size], u64::MAX, "wrote past two entries");
    }
}

#[test]
fn messages_match_receives_in_the_order_they_were_sent() {
    let p = pair(Opts::default());
    const N: usize = 60;
    let len = |i: usize| [1usize, 3000, 9000, 70_000][i % 4];
    let msgs: Vec<Vec<u8>> = (0..N).map(|i| pattern(len(i), i as u8)).collect();
    let mut bufs: Vec<Vec<u8>> = (0..N).map(|_| vec![0u8; 70_000]).collect();
    // The first half arrives unexpected, the second half meets posted
    // receives; each receive must get the message sent in its place.
    for (i, m) in msgs.iter().enumerate().take(N / 2) {
        assert_eq!(p.a.send(m, p.to_b, i), 0);
    }
    for _ in 0..N / 2 {
        wait_ok(p.a.tx_cq);
    }
    for (i, b) in bufs.iter_mut().enumerate() {
        assert_eq!(p.b.recv(b, ADDR_UNSPEC, i), 0);
    }
    for (i, m) in msgs.iter().enumerate().skip(N / 2) {
        assert_eq!(p.a.send(m, p.to_b, i), 0);
    }
    for i in 0..N {
        let e = wait_ok(p.b.rx_cq);
        let at = e.op_context as usize;
        assert_eq!(e.len, len(at), "receive {at} (completion {i})");
        assert!(
            bufs[at][..e.len] == msgs[at][..],
            "receive {at} got another message"
        );
    }
    for _ in N / 2..N {
        wait_ok(p.a.tx_cq);
    }
}

#[test]
fn selective_completion_reports_only_what_is_asked_and_every_failure() {
    let p = pair(Opts {
        selective: true,
        ..Opts::default()
    });
    let mut region = vec![0u8; 64];
    let mr = p.b.mr_reg(region.as_mut_ptr(), region.len(), REMOTE_RW);
    let write = |buf: &[u8], key: u64, ctx: usize, flags: u64| {
        let iov = ffi::iovec {
            iov_base: buf.as_ptr().cast_mut().cast(),
            iov_len: buf.len(),
        };
        let rma_iov = ffi::fi_rma_iov {
            addr: 0,
            len: buf.len(),
            key,
        };
        let msg = ffi::fi_msg_rma {
            msg_iov: &raw const iov,
            desc: null_mut(),
            iov_count: 1,
            addr: p.to_b,
            rma_iov: &raw const rma_iov,
            rma_iov_count: 1,
            context: std::ptr::without_provenance_mut(ctx),
            data: 0,
        };
        // SAFETY: our endpoint; the buffers outlive the operation.
        unsafe { (p.a.rma().writemsg.unwrap())(p.a.ep, &raw const msg, flags) }
    };
    // Without FI_COMPLETION a successful write reports nothing; with it,
    // it does.
    assert_eq!(write(b"quiet", mr.key, 1, 0), 0);
    assert_eq!(write(b"loud", mr.key, 2, COMPLETION), 0);
    assert_eq!(wait_ok(p.a.tx_cq).op_context as usize, 2);
    // A failed operation completes in error even without FI_COMPLETION
    // (fi_endpoint(3), FI_SELECTIVE_COMPLETION).
    assert_eq!(write(b"bad", mr.key ^ 1, 3, 0), 0);
    let e = wait_err(p.a.tx_cq);
    assert_eq!((e.err, e.op_context as usize), (EKEYREJECTED, 3));
    assert_eq!(
        cq_read(p.a.tx_cq).err(),
        Some(EAGAIN),
        "the quiet write reported"
    );
    drop(mr);
}

#[test]
fn selective_completion_applies_to_receives() {
    let p = pair(Opts {
        selective: true,
        ..Opts::default()
    });
    let recvmsg = |buf: &mut [u8], ctx: usize, flags: u64| {
        let iov = ffi::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let msg = ffi::fi_msg {
            msg_iov: &raw const iov,
            desc: null_mut(),
            iov_count: 1,
            addr: ADDR_UNSPEC,
            context: std::ptr::without_provenance_mut(ctx),
            data: 0,
        };
        // SAFETY: our endpoint; the buffer outlives the operation.
        unsafe { (p.b.msg().recvmsg.unwrap())(p.b.ep, &raw const msg, flags) }
    };
    let mut quiet = [0u8; 8];
    let mut loud = [0u8; 8];
    let mut short = [0u8; 2];
    // fi_recv takes the default op flags (none asked for: no completion).
    assert_eq!(p.b.recv(&mut quiet, ADDR_UNSPEC, 1), 0);
    assert_eq!(recvmsg(&mut loud, 2, COMPLETION), 0);
    assert_eq!(recvmsg(&mut short, 3, 0), 0);
    assert_eq!(p.a.send(b"quiet", p.to_b, 11), 0);
    assert_eq!(p.a.send(b"loud", p.to_b, 12), 0);
    assert_eq!(p.a.send(b"too long", p.to_b, 13), 0);
    // The FI_COMPLETION receive reports success; the short one, without
    // FI_COMPLETION, reports its failure (in either order: an error entry
    // is read apart from the others).
    let (mut ok, mut err) = (None, None);
    while ok.is_none() || err.is_none() {
        match wait(p.b.rx_cq) {
            Done::Ok(e) => {
                assert!(ok.is_none(), "a second success entry: {e:?}");
                ok = Some(e.op_context as usize);
            }
            Done::Err(e) => {
                assert!(err.is_none(), "a second error entry: {e:?}");
                err = Some((e.err, e.op_context as usize));
            }
        }
    }
    assert_eq!(ok, Some(2), "the receive without FI_COMPLETION reported");
    assert_eq!(err, Some((ETRUNC, 3)));
    assert_eq!(&quiet[..5], b"quiet");
    assert_eq!(&loud[..4], b"loud");
    // The sends asked for no completion either.
    assert_eq!(cq_read(p.a.tx_cq).err(), Some(EAGAIN));
    assert_eq!(cq_read(p.b.rx_cq).err(), Some(EAGAIN));
}

#[test]
fn an_endpoint_sends_to_itself() {
    let n = Node::new(Opts::default());
    let me = n.insert(&n.name);
    let mut r = [0u8; 16];
    assert_eq!(n.recv(&mut r, ADDR_UNSPEC, 1), 0);
    assert_eq!(n.send(b"to myself", me, 2), 0);
    let e = wait_ok(n.rx_cq);
    assert_eq!(&r[..e.len], b"to myself");
    assert_eq!(wait_ok(n.tx_cq).op_context as usize, 2);
}

#[test]
fn getinfo_with_a_destination_node() {
    let dst = fresh_ip();
    let i = getinfo(Some(&dst), 0, Some(&mut rdm_hints())).unwrap();
    assert_eq!(i.get().dest_addrlen, 28);
    // SAFETY: the provider's 28-byte names.
    let (d, s) = unsafe {
        (
            std::slice::from_raw_parts(i.get().dest_addr.cast::<u8>(), 28),
            std::slice::from_raw_parts(i.get().src_addr.cast::<u8>(), 28),
        )
    };
    let v4: std::net::Ipv4Addr = dst.parse().unwrap();
    assert_eq!(&d[12..28], &v4.to_ipv6_mapped().octets());
    assert_eq!(&d[2..4], &4793u16.to_be_bytes());
    // The source is where the kernel sends from toward it: loopback
    // (unless FI_UET_ADDR names the source).
    if std::env::var_os("FI_UET_ADDR").is_none() {
        assert_eq!(&s[12..24], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(s[24], 127);
    }
}
