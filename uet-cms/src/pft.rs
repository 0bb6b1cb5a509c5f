//! Proactive flow throttling (PFT) at the source.
//!
//! After "Proactive Flow Throttling" (IFIP Networking 2021, cited below as
//! [PFT §…]). The idea: the credit a sender has in use, `c`, reflects how
//! full the buffers ahead of it are, and rises when the network congests
//! [PFT §III.A]. PFT throttles on that local signal alone, with no feedback
//! from switches:
//!
//! * **When** [PFT §III.B]: two states, Normal and Congested
//!   ([`ThrottleState`]). *Fixed Threshold* (FT, Algorithm 1): enter
//!   Congested when `c > t_e`, leave it when `c < t_s`, `t_e ≥ t_s`.
//!   *Average Threshold* (AT, Algorithm 2): count, over a window of `T_e`
//!   cycles, the cycles in which `c` is above the entry threshold; enter
//!   Congested once `T_e'` of them are (`T_e > T_e'`), and leave it once, in
//!   a window of `T_s` cycles, `T_s'` cycles had `c` below the exit
//!   threshold. The count restarts with each window, so the decision is on
//!   the window's average of "c above the threshold" (`count/T_e ≥
//!   T_e'/T_e`) — history, not the instantaneous value.
//! * **How** [PFT §III.C]: Normal sends at full speed. Congested spaces
//!   departures by `f(c) = 2^m / 2^n · c + k = 2^(m−n)·c + k` (eq. 1), a
//!   shift-and-add. *Fixed Interval* (FI): the interval between two
//!   departures is `f(c)` cycles. *Random Interval* (RI): every cycle draw a
//!   random `r`; a departure is allowed in that cycle only if `r ≥ f(c)`, so
//!   the interval is geometric with success probability
//!   `P(r ≥ f(c))`.
//! * **How well** [PFT §IV.A, eq. 2]: the control factor
//!   `F_C = (B_C/D_C)/(B_0/D_0) = (B_C·D_0)/(B_0·D_C)` ([`control_factor`]).
//!
//! ## Units in this software version
//!
//! The paper is a NIC ASIC that moves one flit per clock cycle (700 MHz,
//! 100 Gb/s port, [PFT §IV.B]) and counts link-level credits. Here:
//!
//! * `c` ([`Pft::credit`]) is the bytes sent and neither acknowledged nor
//!   declared lost (the CCC's in-flight bytes), in units of
//!   [`PftConfig::credit_bytes`] (rounded up). Default 256 B \[I\]: the unit of
//!   UET's `rcvd_bytes`; it puts the paper's thresholds 0x250/0x2a0 at
//!   148/168 KiB, about one BDP of the 100 Gb/s × 12 µs reference network.
//! * A cycle is a [`PftConfig::tick`], and what the paper does per flit is
//!   done per packet: full speed is one packet per tick. Default 333 ns \[I\]:
//!   one 4 160-B packet (the CCC's default nominal MTU) at the paper's
//!   100 Gb/s. AT samples `c` once per tick on a grid that starts at the
//!   first event; FI spaces departures by `f(c)` ticks; RI draws one `r` per
//!   tick.
//! * `f(c)` is evaluated with the current `c`: an ACK that lowers `c`
//!   shortens the wait at once (FI), or redraws the remaining RI wait (which
//!   is memoryless, so the per-tick draw with a changing `c` is preserved).
//! * Intervals are capped at [`PftConfig::max_interval`] ticks \[I\]: the
//!   paper's `c` is bounded by the downstream buffer, ours is not, and RI
//!   with `f(c) ≥ 2^r_bits` would otherwise never send — not even the
//!   retransmission that would bring `c` down.
//!
//! Pure: time comes in as `now`, randomness from a generator seeded by the
//! caller's [`Rng`]. Call [`Pft::handle_timeout`] at [`Pft::poll_timeout`]
//! (AT decides between events); [`Pft::earliest_departure`] and
//! [`Pft::can_send`] answer from the state as of the last call.

use std::collections::VecDeque;

use uet_wire::rand::{Rng, Xoshiro256};
use uet_wire::time::{Duration, Instant};

/// The recommended FI range of `n` with `m` = 0 and `k` = 0 [PFT §III.D,
/// Fig. 1(a): "set n between 8-12, k = 0"].
pub const FI_RECOMMENDED_N: core::ops::RangeInclusive<u8> = 8..=12;

/// The RI range of `m` with `n` = 0 and `k` = 0 over which the injection
/// rate responds to `c` [PFT §III.D, Fig. 1(b): "m between 15-22"].
pub const RI_RECOMMENDED_M: core::ops::RangeInclusive<u8> = 15..=22;

/// The control factor of a congestion-control scheme [PFT §IV.A, eq. 2]:
/// `F_C = (B_C·D_0)/(B_0·D_C)`, with `B_0`, `D_0` the bandwidth and delay
/// without it and `B_C`, `D_C` with it. Above 1 the scheme helps.
#[must_use]
pub fn control_factor(b_c: f64, d_0: f64, b_0: f64, d_c: f64) -> f64 {
    (b_c * d_0) / (b_0 * d_c)
}

/// Whether the source is throttling [PFT §III.B].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrottleState {
    /// Send at full speed.
    Normal,
    /// Pace departures by `f(c)`.
    Congested,
}

/// When to enter and leave the Congested state [PFT §III.B]. Thresholds are
/// in credits ([`PftConfig::credit_bytes`]), windows and counts in ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateMachine {
    /// FT, Algorithm 1: Congested when `c > enter`, Normal when `c < exit`.
    /// The paper requires `t_e ≥ t_s`; an `exit` above `enter` is lowered to
    /// it (otherwise the state would flip on every check).
    FixedThreshold {
        /// `t_e`.
        enter: u64,
        /// `t_s`.
        exit: u64,
    },
    /// AT, Algorithm 2: Congested once `enter_count` of the ticks of an
    /// `enter_window`-tick window had `c > enter`; Normal once
    /// `exit_count` of the ticks of an `exit_window`-tick window had
    /// `c < exit`. Counts are clamped to their windows. Algorithm 2 in the
    /// paper is garbled (it compares `c` with the window lengths and shares
    /// one counter pair between the states); this follows its text: counters
    /// restart at every window boundary and at every state change.
    AverageThreshold {
        /// The entry threshold `t_e`.
        enter: u64,
        /// The exit threshold `t_s`.
        exit: u64,
        /// `T_e`.
        enter_window: u32,
        /// `T_e'`.
        enter_count: u32,
        /// `T_s`.
        exit_window: u32,
        /// `T_s'`.
        exit_count: u32,
    },
}

/// How to pace in the Congested state [PFT §III.C].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// FI: departures `f(c)` ticks apart.
    FixedInterval,
    /// RI: each tick, a departure is allowed if a uniform `r` in
    /// `[0, 2^r_bits)` is ≥ `f(c)`.
    RandomInterval {
        /// Width of `r` (1–64). The paper does not give it; 32 \[I\] makes
        /// its RI range `m` = 15–22 move the send probability from near 1
        /// to 0 as `c` grows through 2^10 – 2^17 credits.
        r_bits: u8,
    },
}

/// PFT parameters. `Default` is the paper's best configuration [PFT §IV.C,
/// Fig. 5: AT-RI with m = 18, n = 0, k = 0, threshold enter = 0x250,
/// threshold escape = 0x2a0, F_C = 2.58].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PftConfig {
    /// When to throttle.
    pub state_machine: StateMachine,
    /// How to pace.
    pub pacing: Pacing,
    /// `m` of `f(c)` (clamped to 64).
    pub m: u8,
    /// `n` of `f(c)` (clamped to 127).
    pub n: u8,
    /// `k` of `f(c)`, in ticks (FI) or units of `r` (RI).
    pub k: u64,
    /// Bytes per credit (default 256 \[I\], see the module notes).
    pub credit_bytes: u64,
    /// The cycle (default 333 ns \[I\], see the module notes).
    pub tick: Duration,
    /// Longest interval between departures, in ticks (default 1024 \[I\]).
    pub max_interval: u64,
}

impl Default for PftConfig {
    fn default() -> Self {
        Self {
            state_machine: StateMachine::AverageThreshold {
                enter: 0x250,
                exit: 0x2a0,
                // Not given in the paper [I]: ~2 base RTTs (12 µs) of
                // ticks, three quarters of it above the threshold.
                enter_window: 64,
                enter_count: 48,
                exit_window: 64,
                exit_count: 48,
            },
            pacing: Pacing::RandomInterval { r_bits: 32 },
            m: 18,
            n: 0,
            k: 0,
            credit_bytes: 256,
            tick: Duration::from_nanos(333),
            max_interval: 1024,
        }
    }
}

impl PftConfig {
    /// FT-FI as §III.D suggests it: `m` = 0, `k` = 0 and the given `n`
    /// (see [`FI_RECOMMENDED_N`]), with the given thresholds in credits.
    #[must_use]
    pub fn fixed(enter: u64, exit: u64, n: u8) -> Self {
        Self {
            state_machine: StateMachine::FixedThreshold { enter, exit },
            pacing: Pacing::FixedInterval,
            m: 0,
            n,
            k: 0,
            ..Self::default()
        }
    }

    /// `f(c) = 2^(m−n)·c + k` [PFT eq. 1], computed as the hardware does:
    /// `c` shifted left by `m`, right by `n`, plus `k` (saturating).
    #[must_use]
    pub fn f(&self, c: u64) -> u64 {
        let shifted = (u128::from(c) << self.m.min(64)) >> self.n.min(127);
        u64::try_from(shifted)
            .unwrap_or(u64::MAX)
            .saturating_add(self.k)
    }

    /// The configuration with its values brought into range.
    fn normalized(mut self) -> Self {
        self.credit_bytes = self.credit_bytes.max(1);
        if self.tick.is_zero() {
            self.tick = Duration::from_nanos(1);
        }
        self.max_interval = self.max_interval.max(1);
        match &mut self.state_machine {
            StateMachine::FixedThreshold { enter, exit } => *exit = (*exit).min(*enter),
            StateMachine::AverageThreshold {
                enter_window,
                enter_count,
                exit_window,
                exit_count,
                ..
            } => {
                *enter_window = (*enter_window).max(1);
                *enter_count = (*enter_count).clamp(1, *enter_window);
                *exit_window = (*exit_window).max(1);
                *exit_count = (*exit_count).clamp(1, *exit_window);
            }
        }
        if let Pacing::RandomInterval { r_bits } = &mut self.pacing {
            *r_bits = (*r_bits).clamp(1, 64);
        }
        self
    }
}

/// A PFT state change, for tracing and plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PftEvent {
    /// The throttle changed state.
    State {
        /// When (for AT, the tick that decided).
        now: Instant,
        /// The new state.
        state: ThrottleState,
        /// `c` at that moment, in credits.
        credit: u64,
    },
}

/// The PFT throttle of one source.
#[derive(Debug, Clone)]
pub struct Pft {
    config: PftConfig,
    tick_ns: u64,
    rng: Xoshiro256,
    /// Bytes sent, not yet acknowledged nor declared lost.
    used: u64,
    state: ThrottleState,
    /// AT: tick 0 of the sampling grid (the first event).
    origin: Option<Instant>,
    /// AT: samples taken (sample `s` is at `origin + s·tick`).
    sampled: u64,
    /// AT: ticks into the current window.
    cycle: u32,
    /// AT: ticks of the current window that met the condition.
    count: u32,
    last_departure: Option<Instant>,
    /// RI: the drawn departure tick.
    ri_next: Option<Instant>,
    events: VecDeque<PftEvent>,
}

impl Pft {
    /// A throttle in the Normal state, its RI generator seeded from `rng`.
    pub fn new(config: PftConfig, rng: &mut impl Rng) -> Self {
        let config = config.normalized();
        Self {
            tick_ns: u64::try_from(config.tick.as_nanos()).unwrap_or(u64::MAX),
            config,
            rng: Xoshiro256::seed_from_u64(rng.next_u64()),
            used: 0,
            state: ThrottleState::Normal,
            origin: None,
            sampled: 0,
            cycle: 0,
            count: 0,
            last_departure: None,
            ri_next: None,
            events: VecDeque::new(),
        }
    }

    /// The (normalized) configuration.
    pub fn config(&self) -> &PftConfig {
        &self.config
    }

    /// Normal or Congested.
    pub fn state(&self) -> ThrottleState {
        self.state
    }

    /// Bytes sent and neither acknowledged nor declared lost.
    pub fn used_bytes(&self) -> u64 {
        self.used
    }

    /// `c`: the used bytes in credits, rounded up.
    pub fn credit(&self) -> u64 {
        self.used.div_ceil(self.config.credit_bytes)
    }

    /// A packet of `bytes` left at `now`.
    pub fn on_send(&mut self, now: Instant, bytes: u64) {
        self.advance(now);
        self.used = self.used.saturating_add(bytes);
        self.last_departure = Some(now);
        self.ri_next = None;
        self.check_fixed(now);
        self.schedule_ri(now);
    }

    /// `bytes` were acknowledged at `now`.
    pub fn on_ack(&mut self, now: Instant, bytes: u64) {
        self.release(now, bytes);
    }

    /// `bytes` were declared lost (NACK, RTO) at `now`: they leave `c`, and
    /// come back when retransmitted.
    pub fn on_loss(&mut self, now: Instant, bytes: u64) {
        self.release(now, bytes);
    }

    /// Takes the AT samples up to `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    /// When [`Pft::handle_timeout`] should next run: the tick at which AT
    /// will change state if `c` stays as it is. `None` for FT, which only
    /// changes state on events.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let origin = self.origin?;
        let d = self.samples_to_transition()?;
        Some(self.tick_at(origin, self.sampled + d))
    }

    /// The earliest departure the throttle allows, if later than `now`;
    /// `None` if a packet may leave at `now`.
    pub fn earliest_departure(&self, now: Instant) -> Option<Instant> {
        if self.state == ThrottleState::Normal {
            return None;
        }
        let last = self.last_departure?;
        let next = match self.config.pacing {
            Pacing::FixedInterval => self.tick_at(last, self.fixed_interval()),
            Pacing::RandomInterval { .. } => self.ri_next?,
        };
        (next > now).then_some(next)
    }

    /// Whether a packet may leave at `now`.
    pub fn can_send(&self, now: Instant) -> bool {
        self.earliest_departure(now).is_none()
    }

    /// FI: the current interval between departures, `min(f(c),
    /// max_interval)` ticks.
    pub fn fixed_interval(&self) -> u64 {
        self.config.f(self.credit()).min(self.config.max_interval)
    }

    /// The next state change, for tracing.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<PftEvent> {
        self.events.pop_front()
    }

    fn release(&mut self, now: Instant, bytes: u64) {
        self.advance(now);
        let f_before = self.config.f(self.credit());
        self.used = self.used.saturating_sub(bytes);
        self.check_fixed(now);
        let f_changed = self.config.f(self.credit()) != f_before;
        let waiting = self.ri_next.is_some_and(|t| t > now);
        if f_changed && waiting {
            self.schedule_ri(now);
        }
    }

    /// `base + ticks·tick`.
    fn tick_at(&self, base: Instant, ticks: u64) -> Instant {
        base + Duration::from_nanos(ticks.saturating_mul(self.tick_ns))
    }

    fn set_state(&mut self, now: Instant, state: ThrottleState) {
        if state == self.state {
            return;
        }
        self.state = state;
        if state == ThrottleState::Normal {
            self.ri_next = None;
        }
        // Bounded: a consumer that never polls loses old events, not memory.
        if self.events.len() >= 1024 {
            self.events.pop_front();
        }
        self.events.push_back(PftEvent::State {
            now,
            state,
            credit: self.credit(),
        });
    }

    /// FT, Algorithm 1, on a change of `c` (it is constant in between).
    fn check_fixed(&mut self, now: Instant) {
        let StateMachine::FixedThreshold { enter, exit } = self.config.state_machine else {
            return;
        };
        let c = self.credit();
        match self.state {
            // Entering happens only on a send, which draws the RI interval.
            ThrottleState::Normal if c > enter => self.set_state(now, ThrottleState::Congested),
            ThrottleState::Congested if c < exit => self.set_state(now, ThrottleState::Normal),
            _ => {}
        }
    }

    /// AT in the current state: window length, count needed, and whether the
    /// current `c` counts.
    fn at_params(&self) -> Option<(u32, u32, bool)> {
        let StateMachine::AverageThreshold {
            enter,
            exit,
            enter_window,
            enter_count,
            exit_window,
            exit_count,
        } = self.config.state_machine
        else {
            return None;
        };
        let c = self.credit();
        Some(match self.state {
            ThrottleState::Normal => (enter_window, enter_count, c > enter),
            ThrottleState::Congested => (exit_window, exit_count, c < exit),
        })
    }

    /// AT: samples from now until the state changes, if `c` stays put.
    fn samples_to_transition(&self) -> Option<u64> {
        let (window, need, counts) = self.at_params()?;
        if !counts {
            return None;
        }
        let rest = window - self.cycle;
        let to_go = need - self.count;
        Some(if to_go <= rest {
            u64::from(to_go)
        } else {
            // Not in this window: the next one starts the count afresh.
            u64::from(rest) + u64::from(need)
        })
    }

    /// AT: takes `s` samples that change no state.
    fn idle_samples(&mut self, s: u64) {
        let Some((window, _, counts)) = self.at_params() else {
            return;
        };
        let rest = u64::from(window - self.cycle);
        if s < rest {
            self.cycle += s as u32;
            if counts {
                self.count += s as u32;
            }
        } else {
            // The window ends; the rest falls into fresh ones. (Counting
            // samples cannot span a whole window without a transition.)
            let after = (s - rest) % u64::from(window);
            self.cycle = after as u32;
            self.count = if counts { after as u32 } else { 0 };
        }
    }

    /// AT: takes every sample up to `now` with the `c` that held until now.
    fn advance(&mut self, now: Instant) {
        let Some(origin) = self.origin else {
            self.origin = Some(now);
            return;
        };
        if self.at_params().is_none() {
            return;
        }
        let target = (now - origin).as_nanos() as u64 / self.tick_ns;
        while self.sampled < target {
            let remaining = target - self.sampled;
            match self.samples_to_transition() {
                Some(d) if d <= remaining => {
                    self.sampled += d;
                    self.cycle = 0;
                    self.count = 0;
                    let at = self.tick_at(origin, self.sampled);
                    match self.state {
                        ThrottleState::Normal => {
                            self.set_state(at, ThrottleState::Congested);
                            self.schedule_ri(at);
                        }
                        ThrottleState::Congested => self.set_state(at, ThrottleState::Normal),
                    }
                }
                _ => {
                    self.idle_samples(remaining);
                    self.sampled = target;
                }
            }
        }
    }

    /// RI: draws the departure tick after the last departure, from the first
    /// tick after `at`, with the current `c`.
    fn schedule_ri(&mut self, at: Instant) {
        self.ri_next = None;
        let Pacing::RandomInterval { r_bits } = self.config.pacing else {
            return;
        };
        if self.state != ThrottleState::Congested {
            return;
        }
        let Some(last) = self.last_departure else {
            return;
        };
        let cap = self.config.max_interval;
        let elapsed = (at - last).as_nanos() as u64 / self.tick_ns;
        let t = if elapsed >= cap {
            cap
        } else {
            self.draw_ri(elapsed + 1, cap, r_bits)
        };
        self.ri_next = Some(self.tick_at(last, t));
    }

    /// The first tick in `first..=cap` whose `r` is ≥ `f(c)` [PFT §III.C],
    /// or `cap`.
    fn draw_ri(&mut self, first: u64, cap: u64, r_bits: u8) -> u64 {
        let f = self.config.f(self.credit());
        if f == 0 {
            return first;
        }
        if r_bits < 64 && f >= 1u64 << r_bits {
            return cap;
        }
        for t in first..=cap {
            let r = self.rng.next_u64() >> (64 - u32::from(r_bits));
            if r >= f {
                return t;
            }
        }
        cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: Duration = Duration::from_micros(1);

    fn us(n: u64) -> Instant {
        Instant::from_nanos(n * 1000)
    }

    fn pft(config: PftConfig) -> Pft {
        Pft::new(config, &mut Xoshiro256::seed_from_u64(9))
    }

    /// FT-FI with 1-byte credits and 1 µs ticks.
    fn ft_fi(enter: u64, exit: u64, m: u8, n: u8, k: u64) -> PftConfig {
        PftConfig {
            m,
            k,
            credit_bytes: 1,
            tick: TICK,
            ..PftConfig::fixed(enter, exit, n)
        }
    }

    /// AT with a window of 8 ticks, 6 to decide, 1-byte credits.
    fn at(enter: u64, exit: u64) -> PftConfig {
        PftConfig {
            state_machine: StateMachine::AverageThreshold {
                enter,
                exit,
                enter_window: 8,
                enter_count: 6,
                exit_window: 8,
                exit_count: 6,
            },
            pacing: Pacing::FixedInterval,
            m: 0,
            n: 0,
            k: 3,
            credit_bytes: 1,
            tick: TICK,
            max_interval: 1024,
        }
    }

    fn states(p: &mut Pft) -> Vec<(Instant, ThrottleState)> {
        core::iter::from_fn(|| p.poll_event())
            .map(|PftEvent::State { now, state, .. }| (now, state))
            .collect()
    }

    #[test]
    fn defaults_are_the_papers_best_configuration() {
        let c = PftConfig::default();
        assert_eq!((c.m, c.n, c.k), (18, 0, 0));
        assert_eq!(c.pacing, Pacing::RandomInterval { r_bits: 32 });
        let StateMachine::AverageThreshold { enter, exit, .. } = c.state_machine else {
            unreachable!("default is AT");
        };
        assert_eq!((enter, exit), (0x250, 0x2a0));
        assert_eq!(c.credit_bytes, 256);
        // 0x250 credits of 256 B is about one 100 Gb/s × 12 µs BDP.
        assert!((140_000..160_000).contains(&(enter * c.credit_bytes)));
        let f = PftConfig::fixed(100, 50, 10);
        assert_eq!((f.m, f.n, f.k, f.pacing), (0, 10, 0, Pacing::FixedInterval));
        assert!(FI_RECOMMENDED_N.contains(&f.n));
        assert!(RI_RECOMMENDED_M.contains(&c.m));
    }

    #[test]
    fn f_is_shift_left_m_right_n_plus_k() {
        let c = ft_fi(0, 0, 0, 8, 0);
        assert_eq!(c.f(600), 2); // 600 >> 8
        assert_eq!(c.f(255), 0);
        let c = ft_fi(0, 0, 3, 1, 7);
        assert_eq!(c.f(5), 5 * 4 + 7); // 2^(3-1)·5 + 7
        let c = ft_fi(0, 0, 18, 0, 0);
        assert_eq!(c.f(1), 1 << 18);
        assert_eq!(c.f(u64::MAX), u64::MAX, "saturates");
        // Left first, then right: the low bits survive a net left shift.
        let c = ft_fi(0, 0, 2, 1, 0);
        assert_eq!(c.f(3), 6);
    }

    #[test]
    fn fixed_threshold_enters_above_te_and_leaves_below_ts() {
        let mut p = pft(PftConfig {
            credit_bytes: 100,
            ..ft_fi(10, 5, 0, 0, 0)
        });
        p.on_send(us(0), 1000); // c = 10: not above t_e
        assert_eq!(p.state(), ThrottleState::Normal);
        p.on_send(us(1), 1); // c = 11 (rounded up)
        assert_eq!(p.credit(), 11);
        assert_eq!(p.state(), ThrottleState::Congested);
        p.on_ack(us(2), 501); // c = 5: not below t_s
        assert_eq!(p.state(), ThrottleState::Congested);
        p.on_loss(us(3), 100); // c = 4
        assert_eq!(p.state(), ThrottleState::Normal);
        assert_eq!(
            states(&mut p),
            [
                (us(1), ThrottleState::Congested),
                (us(3), ThrottleState::Normal)
            ]
        );
        // FT never changes state between events.
        assert_eq!(p.poll_timeout(), None);
    }

    #[test]
    fn fixed_threshold_exit_above_enter_is_lowered() {
        let p = pft(ft_fi(10, 20, 0, 0, 0));
        assert_eq!(
            p.config().state_machine,
            StateMachine::FixedThreshold {
                enter: 10,
                exit: 10
            }
        );
    }

    #[test]
    fn normal_state_does_not_pace() {
        let mut p = pft(ft_fi(1_000_000, 0, 0, 0, 100));
        for i in 0..10 {
            p.on_send(us(0), 1000);
            assert!(p.can_send(us(0)), "paced at send {i}");
        }
        assert_eq!(p.earliest_departure(us(0)), None);
    }

    #[test]
    fn fixed_interval_spaces_departures_by_f_of_c() {
        // Throttled as soon as anything is in flight; f(c) = c/16 + 1 ticks.
        let mut p = pft(ft_fi(0, 0, 0, 4, 1));
        assert!(p.can_send(us(0)), "first packet waits for nothing");
        p.on_send(us(10), 640);
        assert_eq!(p.state(), ThrottleState::Congested);
        assert_eq!(p.fixed_interval(), 41);
        assert_eq!(p.earliest_departure(us(10)), Some(us(51)));
        assert!(!p.can_send(us(50)));
        assert!(p.can_send(us(51)));
        // An ACK lowers c and the wait with it.
        p.on_ack(us(20), 320);
        assert_eq!(p.fixed_interval(), 21);
        assert_eq!(p.earliest_departure(us(20)), Some(us(31)));
        p.on_send(us(31), 320);
        assert_eq!(p.earliest_departure(us(31)), Some(us(72)));
        // The cap bounds the wait.
        p.on_send(us(72), 1 << 30);
        assert_eq!(p.fixed_interval(), 1024);
        assert_eq!(p.earliest_departure(us(72)), Some(us(72 + 1024)));
    }

    #[test]
    fn average_threshold_decides_on_the_windows_average_not_a_run() {
        let mut p = pft(at(100, 50));
        // The first event starts the grid: samples at 1, 2, … µs, windows
        // 1..=8, 9..=16, …
        p.on_send(us(0), 101); // c > t_e
        assert_eq!(p.poll_timeout(), Some(us(6)), "6 samples above");
        p.on_ack(us(3), 60); // samples 1–3 above; c = 41
        assert_eq!(p.state(), ThrottleState::Normal, "FT would throttle");
        assert_eq!(p.poll_timeout(), None, "c below t_e decides nothing");
        p.on_send(us(5), 60); // samples 4–5 below; c = 101 again
        // 3 more above make 6 of the window's 8, though never 6 in a row.
        assert_eq!(p.poll_timeout(), Some(us(8)));
        p.handle_timeout(us(7));
        assert_eq!(p.state(), ThrottleState::Normal);
        p.handle_timeout(us(8));
        assert_eq!(p.state(), ThrottleState::Congested);
        assert_eq!(states(&mut p), [(us(8), ThrottleState::Congested)]);
        // Leaving takes 6 of 8 samples below t_s; the window restarted with
        // the state change.
        p.on_ack(us(8), 101); // c = 0
        assert_eq!(p.poll_timeout(), Some(us(14)));
        p.handle_timeout(us(30));
        assert_eq!(states(&mut p), [(us(14), ThrottleState::Normal)]);
    }

    #[test]
    fn average_threshold_restarts_its_count_each_window() {
        let mut p = pft(at(100, 50));
        p.on_send(us(0), 101);
        p.on_ack(us(5), 60); // 5 of window 1..=8 above
        p.on_send(us(9), 60); // 6–9 below; window 2 starts at 9 with 0
        // 10 samples above in all, but split 5 + 5 over two windows: only
        // the 6th of the second window decides.
        assert_eq!(p.poll_timeout(), Some(us(15)));
        p.handle_timeout(us(14));
        assert_eq!(p.state(), ThrottleState::Normal);
        p.handle_timeout(us(15));
        assert_eq!(p.state(), ThrottleState::Congested);
        // Pacing starts with the state: FI, f(c) = c + 3 ticks after the
        // last departure.
        assert_eq!(p.earliest_departure(us(15)), Some(us(9 + 104)));
    }

    #[test]
    fn average_threshold_catches_up_over_a_long_gap() {
        // The paper's own setting has t_e < t_s: with c between them the
        // state alternates, every 6 ticks here.
        let mut p = pft(at(100, 200));
        p.on_send(us(0), 150);
        p.handle_timeout(us(60));
        let got = states(&mut p);
        let want: Vec<_> = (1..=10)
            .map(|i| {
                let s = if i % 2 == 1 {
                    ThrottleState::Congested
                } else {
                    ThrottleState::Normal
                };
                (us(6 * i), s)
            })
            .collect();
        assert_eq!(got, want);
    }

    /// RI over `p` with `c` held: the intervals of `count` departures, each
    /// sent as soon as allowed.
    fn ri_intervals(p: &mut Pft, count: usize) -> Vec<u64> {
        let tick = p.tick_ns;
        let mut now = us(1000);
        let mut out = Vec::new();
        for _ in 0..count {
            p.on_send(now, 1);
            let Some(next) = p.earliest_departure(now) else {
                out.push(0);
                continue;
            };
            out.push((next - now).as_nanos() as u64 / tick);
            now = next;
        }
        out
    }

    fn ri(r_bits: u8, credit_bytes: u64, max_interval: u64) -> PftConfig {
        PftConfig {
            state_machine: StateMachine::FixedThreshold { enter: 0, exit: 0 },
            pacing: Pacing::RandomInterval { r_bits },
            m: 0,
            n: 0,
            k: 0,
            credit_bytes,
            tick: TICK,
            max_interval,
        }
    }

    #[test]
    fn random_interval_is_geometric_within_its_bounds() {
        // r in [0, 256), f(c) = c = 192: a tick allows a departure with
        // probability 1/4, so intervals average 4 ticks.
        let mut p = pft(ri(8, 1000, 64));
        p.on_send(us(0), 191_000);
        assert_eq!(p.credit(), 191);
        let iv = ri_intervals(&mut p, 2000);
        assert_eq!(p.credit(), 193, "c moved out of its credit");
        assert!(iv.iter().all(|&t| (1..=64).contains(&t)), "{iv:?}");
        let mean = iv.iter().sum::<u64>() as f64 / iv.len() as f64;
        assert!((3.6..4.4).contains(&mean), "mean interval {mean}");
        assert!(iv.contains(&1) && iv.iter().any(|&t| t > 10));
    }

    #[test]
    fn random_interval_extremes() {
        // f(c) = 0 (nothing to throttle on): the next tick.
        let mut p = pft(PftConfig {
            k: 0,
            n: 40,
            ..ri(8, 1, 64)
        });
        assert!(ri_intervals(&mut p, 50).iter().all(|&t| t == 1));
        // f(c) ≥ 2^r_bits: never allowed, so the cap.
        let mut p = pft(ri(8, 1, 64));
        p.on_send(us(0), 300);
        assert!(ri_intervals(&mut p, 20).iter().all(|&t| t == 64));
    }

    #[test]
    fn random_interval_redraws_when_an_ack_lowers_c() {
        // Congested for any c; f(c) = c against r in [0, 256).
        let mut p = pft(ri(8, 1, 64));
        p.on_send(us(0), 300); // f ≥ 256: blocked until the cap
        assert_eq!(p.earliest_departure(us(0)), Some(us(64)));
        p.on_ack(us(10), 300); // c = 0, f = 0: allowed from the next tick
        assert_eq!(p.state(), ThrottleState::Congested);
        assert_eq!(p.earliest_departure(us(10)), Some(us(11)));
        // Leaving the Congested state lifts the wait at once.
        let mut p = pft(PftConfig {
            state_machine: StateMachine::FixedThreshold {
                enter: 100,
                exit: 50,
            },
            ..ri(8, 1, 64)
        });
        p.on_send(us(0), 300);
        assert_eq!(p.state(), ThrottleState::Congested);
        assert!(!p.can_send(us(10)));
        p.on_ack(us(10), 300);
        assert_eq!(p.state(), ThrottleState::Normal);
        assert!(p.can_send(us(10)));
    }

    #[test]
    fn default_throttle_slows_a_stalled_sender_and_releases_it() {
        // The paper's AT-RI defaults on a sender whose ACKs stopped: it sends
        // whenever allowed, one 4160-B packet per tick at most.
        let mut p = pft(PftConfig::default());
        let tick = p.config().tick;
        let mut now = Instant::from_nanos(1_000_000);
        let mut sent_at = Vec::new();
        for _ in 0..20_000 {
            p.handle_timeout(now);
            if p.can_send(now) {
                p.on_send(now, 4160);
                sent_at.push(now);
            }
            now += tick;
        }
        let PftEvent::State {
            now: entered,
            state,
            credit,
        } = p
            .poll_event()
            .unwrap_or_else(|| unreachable!("never throttled"));
        assert_eq!(state, ThrottleState::Congested);
        // One packet per tick until throttled. The 37th (tick 36) takes c
        // past 0x250 credits (37 × 4160 / 256 > 592); the window of ticks
        // 1–64 then holds only 28 samples above, so the 48th above in the
        // window 65–128 decides, at tick 112.
        assert!(credit > 0x250);
        assert_eq!(entered, Instant::from_nanos(1_000_000) + tick * 112);
        let before = sent_at.iter().filter(|&&t| t < entered).count();
        assert_eq!(before, 112, "one per tick before throttling");
        // Then fewer and fewer departures as c (and f(c)) grows.
        let rate = |from: usize, to: usize| {
            let n = sent_at.len();
            let (a, b) = (sent_at[from.min(n - 1)], sent_at[to.min(n - 1)]);
            (to - from) as f64 / ((b - a).as_nanos() as f64 / tick.as_nanos() as f64)
        };
        let early = rate(before, before + 500);
        let late = rate(sent_at.len() - 101, sent_at.len() - 1);
        assert!(
            early < 1.0 && late < 0.5 * early,
            "early {early}, late {late}"
        );
        // All acknowledged: c < 0x2a0 for 48 ticks releases the throttle.
        let used = p.used_bytes();
        p.on_ack(now, used);
        assert_eq!(
            p.state(),
            ThrottleState::Congested,
            "AT leaves only after 48 ticks"
        );
        let release = p.poll_timeout().unwrap_or_else(|| unreachable!("stuck"));
        p.handle_timeout(release);
        assert_eq!(p.state(), ThrottleState::Normal);
        assert!(p.can_send(release));
    }

    #[test]
    fn control_factor_is_bc_d0_over_b0_dc() {
        // Twice the bandwidth at half the delay: F_C = 4.
        assert!((control_factor(2.0, 10.0, 1.0, 5.0) - 4.0).abs() < 1e-12);
        // No change: 1.
        assert!((control_factor(3.0, 7.0, 3.0, 7.0) - 1.0).abs() < 1e-12);
        // Less bandwidth at the same delay: below 1.
        assert!(control_factor(1.0, 7.0, 3.0, 7.0) < 1.0);
    }

    proptest::proptest! {
        /// AT decides the same whether it is woken every tick or only at
        /// events: the catch-up over a gap is exact.
        #[test]
        fn average_threshold_lazy_equals_every_tick(
            ops in proptest::collection::vec((0u64..40, proptest::prelude::any::<bool>(), 0u64..120), 1..40),
        ) {
            let mut lazy = pft(at(100, 60));
            let mut eager = pft(at(100, 60));
            lazy.on_send(us(0), 0);
            eager.on_send(us(0), 0);
            let mut now = 0;
            for (gap, send, bytes) in ops {
                for t in now + 1..=now + gap {
                    eager.handle_timeout(us(t));
                }
                now += gap;
                for p in [&mut lazy, &mut eager] {
                    if send {
                        p.on_send(us(now), bytes);
                    } else {
                        p.on_ack(us(now), bytes);
                    }
                }
                proptest::prop_assert_eq!(lazy.state(), eager.state());
            }
            proptest::prop_assert_eq!(states(&mut lazy), states(&mut eager));
        }
    }
}
