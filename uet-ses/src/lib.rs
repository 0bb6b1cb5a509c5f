//! # uet-ses — Semantic Sublayer semantics, sans-IO
//!
//! Everything the SES does that does not involve packet delivery
//! (`docs/protocol-notes.md` §4 formats and codes; docs/architecture.md §2, §3):
//!
//! * [`memory`]: registered memory ([`RegisteredMemory`]), access rights,
//!   the [`MemoryTable`] keyed by `(job, pid_on_fep, resource_index)` with
//!   its key, generation, enable state and bounds checks, each failure mapped
//!   to its SES return code in a documented order.
//! * [`target`]: [`SesTarget`], driven per request packet the PDS accepted:
//!   RMA writes placed in registered memory, send/receive matching with an
//!   unexpected list, read responders, responses flagged for guaranteed
//!   delivery, application events.
//! * [`initiator`]: [`Operation`] → [`OutgoingMessage`], whose packets are
//!   written from local memory at transmit time; [`ReadSink`] reassembles
//!   read data.
//!
//! The PDS engine drives it:
//!
//! ```text
//! initiator                                   target
//! OutgoingMessage::new(op, msg_id, max_ses_len)
//! for i in 0..packet_count():
//!     write_packet(i, local_mem, frame)  ──►  SesRepr::parse, then
//!                                             SesTarget::handle_request(src, &ses, payload)
//!                                               Accepted   → plain ACK
//!                                               Respond(r) → r.header in the ACK, guaranteed
//!                                               Read(rr)   → rr.write_fragment(i, memory, frame)
//! OutgoingMessage::complete(&rsp)       ◄──     as return-direction requests
//! ReadSink::on_data(&hdr, data, local)  ◄──
//!                                             SesTarget::poll_event() → application
//! ```
//!
//! Pure: no I/O, no clocks, no threads, no randomness; nothing here panics
//! on input from the wire — bad requests become return codes.
//!
//! Not implemented yet (answered `UNSUPPORTED_OP`): atomics, rendezvous and
//! deferrable sends, `UET_DEFERRABLE_RTR`, `UET_MSG_ERROR`, and reads in
//! the small and medium request forms.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod completion;
pub mod endpoint;
pub mod error;
pub mod initiator;
pub mod memory;
mod ranges;
pub mod read;
pub mod responder;
mod slots;
#[cfg(test)]
mod testutil;
pub mod types;

pub use completion::{Completion, CompletionError, LocalError};
pub use endpoint::{Endpoint, EndpointConfig, OpCompletion, OpError, OpId, SesCounters};
pub use error::{EmitError, SubmitError};
pub use initiator::{Operation, OutgoingMessage, ReadIgnored, ReadProgress, ReadSink, RemoteAddr};
pub use memory::{
    Access, AccessRequest, Addressing, Checked, MemEntry, MemError, MemoryTable, RegionSpec,
    RegisteredMemory, Registration,
};
pub use read::ReadResponder;
pub use responder::{
    PostError, RecvBuffer, RecvEvent, RecvKind, RecvSpec, Sender, SesTarget, SharedRecv,
    TargetConfig, TargetEvent, TargetOutcome, TargetResponse, Unexpected, UnexpectedRef,
    WriteEvent,
};
pub use types::{
    FepAddr, InitiatorId, LocalBuf, LocalRegion, MatchBits, MemoryKey, RecvId, RegionAddr, Source,
};

#[cfg(test)]
mod endpoint_tests;
