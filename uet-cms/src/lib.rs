//! # uet-cms — congestion management, pure
//!
//! The Congestion Management Sublayer as the PDS sees it
//! (`docs/protocol-notes.md` §5.1): a congestion control context ([`Ccc`]) shared
//! by the PDCs to one destination FEP in one traffic class, with the common
//! hooks of the spec pseudo-code — `on_new_data`, `can_send`,
//! `send_params` (GetSendParams), `on_send`, `on_ack`, `on_nack`,
//! `on_inferred_loss`, `on_credit_update` — and the CCC state machine
//! IDLE → ACTIVE → READY → PENDING.
//!
//! Which algorithm decides is an [`Algorithm`]. This crate currently carries
//! the fixed window ("none" in `docs/congestion-evaluation.md`); NSCC and RCCC implement the same
//! hooks. Entropy values come from an [`EvSelector`].
//!
//! No I/O, no clocks, no threads: time comes in as `now`, randomness from a
//! [`uet_wire::rand::Rng`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod ccc;
mod entropy;
pub mod nscc;
pub mod pft;
pub mod rccc;

pub use ccc::{
    AckEvent, Algorithm, Ccc, CccConfig, CccState, CccTrace, CmsEvent, NackEvent, NewSend,
    SendParams,
};
pub use entropy::{Bitmap, EvConfig, EvFeedback, EvMode, EvSelector, Mixed, Reps};
pub use nscc::{Nscc, NsccAck, NsccConfig, NsccDest, NsccEvent, NsccNack};
pub use pft::{Pft, PftConfig, PftEvent, ThrottleState};
pub use rccc::{RcccConfig, RcccReceiver, RcccSource};
