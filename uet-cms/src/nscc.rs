//! NSCC — network-signal-based congestion control (`docs/protocol-notes.md`
//! §5.2, SPEC-TR §3.6.13; cross-checked with HTSIM and ASTERIA).
//!
//! * [`NsccConfig`] — Table 3-76 parameters, derived from the link speeds,
//!   `config_base_rtt`, the MTU and whether the fabric trims.
//! * [`Nscc`] — the sender state of one CCC and the spec's handlers
//!   (`OnACK`, `OnNACK`, `OnInferredLoss`, `OnSend`, `CanSend`,
//!   `AckRequest`), base-RTT probing and an event queue for tracing.
//! * [`NsccDest`] — the destination's per-PDC `rcvd_bytes`, the
//!   `ack_cc_state` it reports, and destination flow control through a
//!   [`ReceiverPressure`].
//!
//! Where the spec and HTSIM differ, this follows the spec (§5.2 "Spec vs
//! HTSIM differences", §9 items 10-11): the DFC penalty is `(pend * newly)
//! >> 7` with 0 = off; `qa_threshold` is disabled with trimming;
//! `trigger_qa` is set only when a NACK adjusts the window; quick adapt
//! fires at `now >= qa_endtime`; `eta` is added only inside
//! `fulfill_adjustment`.
//!
//! Wiring into a CCC: call [`Nscc::on_send`] from `OnSend`, [`Nscc::on_ack`]
//! from `OnACK` with `newly_rcvd_bytes` from a per-PDC
//! [`RcvdBytesTracker`], [`Nscc::on_nack`] from `OnNACK`,
//! [`Nscc::on_inferred_loss`] from `OnInferredLoss`; AND
//! [`Nscc::can_send`] into `CanSend`, and use [`Nscc::ack_request`] for
//! `ack_req` in `GetSendParams`.

mod config;
mod dest;
mod sender;

#[cfg(test)]
mod tests;

pub use config::{NsccConfig, TIME_UNIT_NS};
pub use dest::{
    DfcFields, LinearPressure, NoPressure, NsccDest, RcvdBytesTracker, ReceiverPressure,
    SERVICE_TIME_UNIT, service_time_from_wire, service_time_to_wire,
};
pub use sender::{
    CwndReason, EVENT_CAPACITY, MAX_RCV_CWND_PEND, Nscc, NsccAck, NsccEvent, NsccNack,
};
