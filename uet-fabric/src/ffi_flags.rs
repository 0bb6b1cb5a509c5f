//! libfabric's flag bits as `u64` (bindgen types each `#define` by its
//! value's width).

use crate::ffi;

pub(crate) const MSG: u64 = ffi::FI_MSG as u64;
pub(crate) const RMA: u64 = ffi::FI_RMA as u64;
pub(crate) const TAGGED: u64 = ffi::FI_TAGGED as u64;
pub(crate) const READ: u64 = ffi::FI_READ as u64;
pub(crate) const WRITE: u64 = ffi::FI_WRITE as u64;
pub(crate) const RECV: u64 = ffi::FI_RECV as u64;
pub(crate) const SEND: u64 = ffi::FI_SEND as u64;
pub(crate) const TRANSMIT: u64 = ffi::FI_TRANSMIT as u64;
pub(crate) const REMOTE_READ: u64 = ffi::FI_REMOTE_READ as u64;
pub(crate) const REMOTE_WRITE: u64 = ffi::FI_REMOTE_WRITE as u64;
pub(crate) const REMOTE_CQ_DATA: u64 = ffi::FI_REMOTE_CQ_DATA as u64;
pub(crate) const PEEK: u64 = ffi::FI_PEEK as u64;
pub(crate) const CLAIM: u64 = ffi::FI_CLAIM;
pub(crate) const DISCARD: u64 = ffi::FI_DISCARD;
pub(crate) const COMPLETION: u64 = ffi::FI_COMPLETION as u64;
pub(crate) const INJECT: u64 = ffi::FI_INJECT as u64;
pub(crate) const INJECT_COMPLETE: u64 = ffi::FI_INJECT_COMPLETE as u64;
pub(crate) const TRANSMIT_COMPLETE: u64 = ffi::FI_TRANSMIT_COMPLETE as u64;
pub(crate) const DELIVERY_COMPLETE: u64 = ffi::FI_DELIVERY_COMPLETE as u64;
pub(crate) const MULTI_RECV: u64 = ffi::FI_MULTI_RECV as u64;
pub(crate) const LOCAL_COMM: u64 = ffi::FI_LOCAL_COMM;
pub(crate) const REMOTE_COMM: u64 = ffi::FI_REMOTE_COMM;
pub(crate) const SOURCE: u64 = ffi::FI_SOURCE;
pub(crate) const DIRECTED_RECV: u64 = ffi::FI_DIRECTED_RECV;
pub(crate) const SELECTIVE_COMPLETION: u64 = ffi::FI_SELECTIVE_COMPLETION;
pub(crate) const ADDR_NOTAVAIL: u64 = u64::MAX;
pub(crate) const ADDR_UNSPEC: u64 = u64::MAX;
/// A remote write with CQ data, as the target's receive CQ reports it.
pub(crate) const REMOTE_WRITE_DATA: u64 = RMA | REMOTE_WRITE | REMOTE_CQ_DATA;
