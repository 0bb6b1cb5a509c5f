//! The NSCC destination (SPEC-TR §3.6.13.8-§3.6.13.9), destination flow
//! control (§3.6.13.2) and the NSCC `ack_cc_state` units
//! (`docs/protocol-notes.md` §2.7, §5.2).
//!
//! Units: `rcvd_bytes` travels in 256-B units, rounded up and wrapping at
//! 2^24 ([`Units256`]). `service_time` is 16 bits whose unit is not confirmed
//! by any source read: PMR says 128 ns (0xFFFF = ≥ 8.388 ms), which matches
//! the 128 ns precision the spec asks for `tx_timestamp` and `base_rtt`
//! (§2.7 \[I]). This module assumes 128 ns; change [`SERVICE_TIME_UNIT`] if
//! the spec says otherwise.

use uet_wire::Units256;
use uet_wire::pds::{CwndPenalty, NsccState};
use uet_wire::time::{Duration, Instant};

use super::config::{TIME_UNIT_NS, duration_ns};
use super::sender::MAX_RCV_CWND_PEND;

/// One unit of the wire `service_time` (assumed 128 ns, §2.7).
pub const SERVICE_TIME_UNIT: Duration = Duration::from_nanos(TIME_UNIT_NS);

/// Encodes the service time of a packet that arrived at `arrival` and whose
/// ACK leaves at `ack_send` (the destination side of §3.6.13.1): the
/// difference in 128 ns units, rounded **down** (an under-reported service
/// time makes the source's RTT longer, never shorter, so it cannot pull
/// `base_rtt` below the truth), saturating at 0xFFFF (≥ 8.388 ms). An ACK
/// sent "before" the arrival encodes 0. PMR calls 0 "invalid"; the source
/// subtracts nothing either way.
#[must_use]
pub fn service_time_to_wire(arrival: Instant, ack_send: Instant) -> u16 {
    let units = duration_ns(ack_send.saturating_since(arrival)) / TIME_UNIT_NS;
    u16::try_from(units).unwrap_or(u16::MAX)
}

/// Decodes a wire `service_time` (128 ns units assumed, §2.7).
#[must_use]
pub fn service_time_from_wire(v: u16) -> Duration {
    Duration::from_nanos(u64::from(v) * TIME_UNIT_NS)
}

/// Source side: turns the cumulative `rcvd_bytes` of one PDC's ACKs into
/// `newly_rcvd_bytes` (§5.2 \[I]: `((new - old) mod 2^24) * 256`).
///
/// An ACK that arrives after a later one (its value is *behind* the last
/// seen, i.e. the modular difference is 2^23 units or more) reports 0 newly
/// received bytes and leaves the tracker alone, so reordered ACKs never
/// count bytes twice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RcvdBytesTracker {
    last: Units256,
}

impl RcvdBytesTracker {
    /// A tracker for a new PDC (the destination starts at 0).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The last value accepted.
    #[must_use]
    pub fn last(&self) -> Units256 {
        self.last
    }

    /// Accepts the `rcvd_bytes` of an ACK and returns the newly received
    /// bytes it reports.
    pub fn advance(&mut self, rcvd: Units256) -> u64 {
        let newly = rcvd.bytes_since(self.last);
        if newly >= (1u64 << (Units256::BITS - 1)) * 256 {
            return 0; // behind: a stale, reordered ACK
        }
        self.last = rcvd;
        newly
    }
}

/// How the destination decides the DFC penalty `rcv_cwnd_pend` (§3.6.13.2:
/// implementation defined; 0 when unsupported). One instance usually
/// describes the whole receiver (a placement backlog, a memory controller)
/// and is shared by every [`NsccDest`].
pub trait ReceiverPressure {
    /// The penalty to put in the next ACK: 0 (none) to 127 (maximum
    /// slow-down, about one packet per RTT). Values above 127 count as 127.
    fn rcv_cwnd_pend(&self) -> u8;
}

/// No destination flow control: always 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoPressure;

impl ReceiverPressure for NoPressure {
    fn rcv_cwnd_pend(&self) -> u8 {
        0
    }
}

/// Pressure linear in a backlog (e.g. bytes received but not yet placed in
/// memory): 0 at or below `low`, 127 at or above `high`, and
/// `ceil(127 * (backlog - low) / (high - low))` between, so any backlog
/// above `low` penalises. Penalty 64 on every ACK for one RTT halves the
/// senders' windows (§5.2 DFC), which a backlog half way between the
/// thresholds asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinearPressure {
    low: u64,
    high: u64,
    backlog: u64,
}

impl LinearPressure {
    /// Thresholds in the backlog's unit (bytes). `high` below `low + 1` is
    /// raised to `low + 1`.
    #[must_use]
    pub fn new(low: u64, high: u64) -> Self {
        Self {
            low,
            high: high.max(low.saturating_add(1)),
            backlog: 0,
        }
    }

    /// Records the current backlog.
    pub fn set_backlog(&mut self, backlog: u64) {
        self.backlog = backlog;
    }

    /// The current backlog.
    #[must_use]
    pub fn backlog(&self) -> u64 {
        self.backlog
    }

    /// The thresholds `(low, high)`.
    #[must_use]
    pub fn thresholds(&self) -> (u64, u64) {
        (self.low, self.high)
    }
}

impl ReceiverPressure for LinearPressure {
    fn rcv_cwnd_pend(&self) -> u8 {
        if self.backlog <= self.low {
            return 0;
        }
        if self.backlog >= self.high {
            return MAX_RCV_CWND_PEND;
        }
        let over = u128::from(self.backlog - self.low);
        let span = u128::from(self.high - self.low);
        let max = u128::from(MAX_RCV_CWND_PEND);
        // Both bounds checked above, so 1 <= pend <= 127.
        u8::try_from((max * over).div_ceil(span)).unwrap_or(MAX_RCV_CWND_PEND)
    }
}

/// NSCC destination state of **one PDC** (Table 3-78: `pdc.rcvd_bytes` is
/// per PDC, and the source computes `newly_rcvd_bytes` per PDC), plus the
/// per-PDC edge of destination flow control: `rc` goes out once, on the
/// first ACK after the pressure that penalised this PDC ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NsccDest {
    /// `pdc.rcvd_bytes`.
    rcvd_bytes: u64,
    /// The last ACK of this PDC carried `rcv_cwnd_pend > 0`.
    penalizing: bool,
}

/// The DFC fields of one ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DfcFields {
    /// `rcv_cwnd_pend`, 0-127.
    pub rcv_cwnd_pend: u8,
    /// `rc`: restore the saved window.
    pub restore_cwnd: bool,
}

impl NsccDest {
    /// A new PDC: nothing received.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// `NSCC.OnRX(pkt)` for a data packet: `pdc.rcvd_bytes +=
    /// nominal_pktsize` unless it is trimmed or a duplicate (SPEC-TR
    /// §3.6.13.9). Control packets carry no data: do not call for them.
    pub fn on_rx(&mut self, nominal_pktsize: u64, trimmed: bool, duplicate: bool) {
        if !trimmed && !duplicate {
            self.rcvd_bytes = self.rcvd_bytes.wrapping_add(nominal_pktsize);
        }
    }

    /// `pdc.rcvd_bytes` in bytes.
    #[must_use]
    pub fn rcvd_bytes(&self) -> u64 {
        self.rcvd_bytes
    }

    /// `Rcvd_Bytes = (pdc.rcvd_bytes + 255) >> 8`, modulo 2^24, for
    /// `ack_cc_state` (§3.6.13.9).
    #[must_use]
    pub fn rcvd_units(&self) -> Units256 {
        Units256::from_bytes_round_up(self.rcvd_bytes)
    }

    /// The DFC fields for the next ACK of this PDC under `pressure`:
    /// the current penalty, and `rc` once when a penalty ends.
    pub fn dfc(&mut self, pressure: &(impl ReceiverPressure + ?Sized)) -> DfcFields {
        let pend = pressure.rcv_cwnd_pend().min(MAX_RCV_CWND_PEND);
        if pend > 0 {
            self.penalizing = true;
            DfcFields {
                rcv_cwnd_pend: pend,
                restore_cwnd: false,
            }
        } else {
            let restore_cwnd = core::mem::take(&mut self.penalizing);
            DfcFields {
                rcv_cwnd_pend: 0,
                restore_cwnd,
            }
        }
    }

    /// The NSCC `ack_cc_state` of an ACK leaving at `ack_send` for the packet
    /// (the one named by `ACK_PSN`) that arrived at `arrival`. `ooo_count` is
    /// the PDS's to fill.
    pub fn ack_cc_state(
        &mut self,
        pressure: &(impl ReceiverPressure + ?Sized),
        arrival: Instant,
        ack_send: Instant,
        ooo_count: u16,
    ) -> NsccState {
        let dfc = self.dfc(pressure);
        NsccState {
            service_time: service_time_to_wire(arrival, ack_send),
            rc: dfc.restore_cwnd,
            rcv_cwnd_pend: CwndPenalty::from_masked(dfc.rcv_cwnd_pend),
            rcvd_bytes: self.rcvd_units(),
            ooo_count,
        }
    }
}
