//! # uet-wire — Ultra Ethernet Transport 1.0 on the wire
//!
//! Bytes ⇄ headers for every layer a UET frame carries: Ethernet II (+ one
//! 802.1Q tag), IPv4/IPv6, UDP or the native-IP entropy header, the TSS
//! header (recognised and skipped), every PDS header type 1–14, every SES
//! request, extension and response header, and the optional CRC32C trailer.
//! Layouts, codes and the sources they come from are in
//! `docs/protocol-notes.md`; comments cite its sections (§n).
//!
//! ## Two levels, smoltcp style
//!
//! * **Packet views** — `Packet<T: AsRef<[u8]>>` wraps a buffer. `new_checked`
//!   performs the one length check; after it succeeds, no accessor can panic.
//!   Setters exist when `T: AsMut<[u8]>`. `new_unchecked` is for emitting
//!   into a buffer the caller sized with `buffer_len`.
//! * **Reprs** — small validated values with `parse(&Packet)`, `emit(&mut
//!   Packet)` and `buffer_len()`. A `Repr` that can be built can be emitted;
//!   `emit` into a buffer of exactly `buffer_len()` bytes never panics.
//!
//! [`frame::parse_frame`] walks a whole frame (Ethernet → IP → UDP/entropy →
//! TSS → PDS → SES) and returns typed headers plus the payload.
//!
//! Parsing never panics and never allocates, whatever the input: every parser
//! is exercised by property tests over random bytes and by the libFuzzer
//! target in `uet-wire/fuzz` (`scripts/fuzz.sh`, stable Rust).
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs, clippy::std_instead_of_core)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod access;
pub mod encap;
pub mod error;
pub mod field;
pub mod frame;
pub mod inet;
pub mod pds;
pub mod rand;
pub mod ses;
pub mod time;
pub mod types;

pub use access::Access;
pub use error::{Error, ErrorKind, Layer, Result};
pub use frame::{
    Frame, RequestView, SealedFrame, UetPacket, is_tss, parse_ack_view, parse_frame,
    parse_frame_with, parse_request_view, parse_sealed_frame, parse_uet,
};
pub use types::{
    CccId, Credit24, DeliveryMode, Dscp, Ecn, EntropyValue, JobId, Len14, MessageId, OutOfRange,
    PdcId, PidOnFep, Psn, ResourceIndex, RiGeneration, TrafficClass, Units256,
};
