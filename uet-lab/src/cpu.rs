//! Machine CPU time from `/proc/stat`: what every CPU of the machine
//! spent (user + nice + system + irq + softirq, kernel and other
//! processes included) between two samples, so a transfer's cost can be
//! read as CPU-seconds per gigabyte beside a ceiling's measured the same
//! way, and what the hypervisor took from a virtual machine's CPUs
//! meanwhile (steal), which says whether a run measured its neighbours.

use std::time::Instant;

use crate::error::{Error, Result};

/// The machine's CPU counters at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuSample {
    /// user + nice + system + irq + softirq, all CPUs, in clock ticks.
    busy: u64,
    /// Every field of the `cpu` line (guest time is inside user/nice).
    total: u64,
    /// steal: ticks a vCPU wanted to run while the hypervisor ran
    /// something else (0 on bare metal).
    steal: u64,
    /// CPUs (`cpuN` lines).
    cpus: u32,
    at: Instant,
}

impl CpuSample {
    /// Reads `/proc/stat` now.
    pub fn now() -> Result<Self> {
        let text =
            std::fs::read_to_string("/proc/stat").map_err(Error::io("reading /proc/stat"))?;
        Self::parse(&text, Instant::now())
    }

    fn parse(text: &str, at: Instant) -> Result<Self> {
        let bad = || Error::Output {
            what: "/proc/stat has no aggregate cpu line".into(),
            source: None,
        };
        let line = text
            .lines()
            .find(|l| l.starts_with("cpu "))
            .ok_or_else(bad)?;
        let f: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| bad())?;
        // user nice system idle iowait irq softirq steal guest guest_nice
        if f.len() < 7 {
            return Err(bad());
        }
        let cpus = text
            .lines()
            .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
            .count();
        Ok(Self {
            busy: f[0] + f[1] + f[2] + f[5] + f[6],
            total: f.iter().take(8).sum(),
            steal: f.get(7).copied().unwrap_or(0),
            cpus: u32::try_from(cpus.max(1)).unwrap_or(u32::MAX),
            at,
        })
    }

    /// CPU-seconds the machine spent busy from `self` to `later`: the busy
    /// share of all ticks, times the CPUs, times the wall time (no clock
    /// tick rate needed).
    pub fn busy_seconds_until(&self, later: &Self) -> f64 {
        let total = later.total.saturating_sub(self.total);
        if total == 0 {
            return 0.0;
        }
        let busy = later.busy.saturating_sub(self.busy) as f64 / total as f64;
        busy * f64::from(self.cpus) * later.at.duration_since(self.at).as_secs_f64()
    }

    /// The share of all CPU time from `self` to `later` that the
    /// hypervisor took (steal over all ticks, 0..=1).
    pub fn steal_share_until(&self, later: &Self) -> f64 {
        let total = later.total.saturating_sub(self.total);
        if total == 0 {
            return 0.0;
        }
        later.steal.saturating_sub(self.steal) as f64 / total as f64
    }

    /// The busy share of all CPU time from `self` to `later`, steal
    /// counted as busy, and the steal share on its own; `None` when no
    /// tick passed.
    pub fn shares_until(&self, later: &Self) -> Option<(f64, f64)> {
        let total = later.total.saturating_sub(self.total);
        (total > 0).then(|| {
            let steal = later.steal.saturating_sub(self.steal);
            let busy = later.busy.saturating_sub(self.busy) + steal;
            (busy as f64 / total as f64, steal as f64 / total as f64)
        })
    }

    /// [`Self::steal_share_until`] now.
    pub fn steal_share(&self) -> Result<f64> {
        Ok(self.steal_share_until(&Self::now()?))
    }

    /// CPU-seconds busy from `self` until now.
    pub fn busy_seconds(&self) -> Result<f64> {
        Ok(self.busy_seconds_until(&Self::now()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn busy_seconds_are_the_busy_share_of_all_cpus_over_the_wall_time() {
        let t0 = Instant::now();
        let a = CpuSample::parse(
            "cpu  100 0 50 800 10 5 5 0 0 0\ncpu0 50 0 25 400 5 3 2 0 0 0\ncpu1 50 0 25 400 5 2 3 0 0 0\n",
            t0,
        )
        .unwrap();
        // 200 more ticks, 100 of them busy (user 60, system 20, irq 10,
        // softirq 10), idle 100: half of 2 CPUs over 2 s = 2 CPU-seconds.
        let b = CpuSample::parse(
            "cpu  160 0 70 900 10 15 15 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0 0 0\n",
            t0 + Duration::from_secs(2),
        )
        .unwrap();
        assert_eq!(a.cpus, 2);
        assert!((a.busy_seconds_until(&b) - 2.0).abs() < 1e-9);
        assert_eq!(b.busy_seconds_until(&b), 0.0);
        assert_eq!(a.steal_share_until(&b), 0.0);
    }

    #[test]
    fn steal_is_its_share_of_all_ticks_and_not_busy_time() {
        let t0 = Instant::now();
        let a = CpuSample::parse(
            "cpu  100 0 50 800 10 5 5 30 0 0
cpu0 0
",
            t0,
        )
        .unwrap();
        // 200 more ticks: 100 busy, 50 idle, 50 stolen.
        let b = CpuSample::parse(
            "cpu  180 0 70 850 10 5 5 80 0 0
cpu0 0
",
            t0 + Duration::from_secs(1),
        )
        .unwrap();
        assert!((a.steal_share_until(&b) - 0.25).abs() < 1e-9);
        // As a share of all ticks, steal counts as busy: 150 of 200.
        let (busy, steal) = a.shares_until(&b).unwrap();
        assert!((busy - 0.75).abs() < 1e-9 && (steal - 0.25).abs() < 1e-9);
        assert_eq!(b.shares_until(&b), None);
        // Busy time leaves the stolen ticks out: half of 1 CPU over 1 s.
        assert!((a.busy_seconds_until(&b) - 0.5).abs() < 1e-9);
        // A line without the steal field (very old kernels) steals nothing.
        let c = CpuSample::parse(
            "cpu  1 0 1 1 0 0 0
cpu0 0
",
            t0,
        )
        .unwrap();
        assert_eq!(c.steal_share_until(&c), 0.0);
    }

    #[test]
    fn a_stat_without_a_cpu_line_is_an_error() {
        assert!(CpuSample::parse("intr 1 2 3\n", Instant::now()).is_err());
        assert!(CpuSample::parse("cpu  1 2\n", Instant::now()).is_err());
    }
}
