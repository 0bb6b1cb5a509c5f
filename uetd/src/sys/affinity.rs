//! CPU pinning and scheduling class of worker threads.

use std::time::Duration;

use rustix::thread::{CpuSet, sched_setaffinity};

use super::{Error, Named as _, Result};

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> Result<()> {
    if cpu >= CpuSet::MAX_CPU {
        return Err(Error::invalid("sched_setaffinity", "cpu out of range"));
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    // None = this thread.
    sched_setaffinity(None, &set).named("sched_setaffinity")
}

/// Makes the calling thread SCHED_FIFO at `priority` (1–99; needs
/// CAP_SYS_NICE). For a measurement thread that sleeps between samples: it
/// runs microseconds per wake-up, so it cannot starve the others, and its
/// samples come when due rather than when a loaded CPU gets round to it.
/// (rustix has no `sched_setscheduler`, hence libc.)
pub fn set_fifo_priority(priority: i32) -> Result<()> {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: passes a valid sched_param; 0 = this thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
    super::cvt("sched_setscheduler", rc).map(drop)
}

/// What [`set_slice`] did to the calling thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceOutcome {
    /// The thread's time slice is now this (the kernel's base slice when
    /// none was asked for).
    Set(Duration),
    /// The thread runs a real-time or deadline policy (`chrt`), which has
    /// no EEVDF slice: left as it is.
    NotFair,
    /// The kernel took the call but has no per-thread slice for
    /// `SCHED_OTHER` (before Linux 6.12).
    Unsupported,
}

/// Asks the kernel's fair scheduler (EEVDF) for a time slice of `slice`
/// for the calling thread (`sched_setattr`'s `sched_runtime`; Linux ≥
/// 6.12 clamps it to 100 µs – 100 ms), or for its default slice with
/// `None`. The policy and nice value stay as they are; a thread that runs
/// a real-time policy is left alone.
///
/// A thread with a shorter slice than the one running is picked sooner
/// when it wakes: a worker woken by a packet or by its pacer's timer then
/// waits for the CPU about its own slice rather than the default
/// (1.4 ms on two CPUs with Linux 6.18) of whatever runs there. Its share of the
/// CPU stays the same. Needs no privilege. (rustix has no
/// `sched_setattr`, hence libc.)
pub fn set_slice(slice: Option<Duration>) -> Result<SliceOutcome> {
    let mut attr = get_attr(0)?;
    if !fair(&attr) {
        return Ok(SliceOutcome::NotFair);
    }
    // Only the flag that belongs to the thread rather than to this call.
    attr.sched_flags &= libc::SCHED_FLAG_RESET_ON_FORK as u64;
    attr.sched_runtime = slice.map_or(0, |s| u64::try_from(s.as_nanos()).unwrap_or(u64::MAX));
    attr.sched_deadline = 0;
    attr.sched_period = 0;
    // SAFETY: `attr` is a valid, initialised `sched_attr` whose `size`
    // field says how much the kernel may read; 0 = this thread.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &raw const attr, 0) };
    if rc != 0 {
        return Err(Error::last("sched_setattr"));
    }
    match get_attr(0)?.sched_runtime {
        0 => Ok(SliceOutcome::Unsupported),
        ns => Ok(SliceOutcome::Set(Duration::from_nanos(ns))),
    }
}

/// The fair scheduler's time slice of thread `tid` (0: the calling
/// thread): its own if it asked for one, else the kernel's base slice.
/// `None` before Linux 6.12 and for real-time threads, whose runtime is
/// not a slice.
pub fn thread_slice(tid: i32) -> Result<Option<Duration>> {
    let attr = get_attr(tid)?;
    Ok((fair(&attr) && attr.sched_runtime > 0).then(|| Duration::from_nanos(attr.sched_runtime)))
}

/// Whether `attr`'s policy is one of the fair scheduler's (`SCHED_OTHER`,
/// `SCHED_BATCH`).
fn fair(attr: &libc::sched_attr) -> bool {
    [libc::SCHED_OTHER, libc::SCHED_BATCH]
        .iter()
        .any(|&p| u32::try_from(p) == Ok(attr.sched_policy))
}

/// `sched_getattr(tid)`.
fn get_attr(tid: i32) -> Result<libc::sched_attr> {
    let size = size_of::<libc::sched_attr>();
    let mut attr = libc::sched_attr {
        size: u32::try_from(size).unwrap_or(u32::MAX),
        sched_policy: 0,
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: 0,
        sched_runtime: 0,
        sched_deadline: 0,
        sched_period: 0,
    };
    // SAFETY: the kernel writes at most `size` bytes into `attr`, which
    // is that large.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &raw mut attr,
            libc::c_uint::try_from(size).unwrap_or(0),
            0,
        )
    };
    if rc != 0 {
        return Err(Error::last("sched_getattr"));
    }
    Ok(attr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_gets_the_slice_it_asks_for_and_its_default_back() {
        std::thread::spawn(|| {
            // Before Linux 6.12 a fair thread's runtime reads 0.
            let before = thread_slice(0).unwrap();
            let asked = Duration::from_micros(250);
            let got = set_slice(Some(asked)).unwrap();
            if before.is_none() {
                assert_eq!(got, SliceOutcome::Unsupported);
                return;
            }
            assert_eq!(got, SliceOutcome::Set(asked));
            assert_eq!(thread_slice(0).unwrap(), Some(asked));
            // Below the kernel's floor: clamped to 100 µs.
            assert_eq!(
                set_slice(Some(Duration::from_micros(10))).unwrap(),
                SliceOutcome::Set(Duration::from_micros(100))
            );
            // None: back to the base slice it started with.
            assert_eq!(set_slice(None).unwrap(), SliceOutcome::Set(before.unwrap()));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_real_time_thread_is_left_alone() {
        std::thread::spawn(|| {
            if set_fifo_priority(1).is_err() {
                // Without CAP_SYS_NICE there is no real-time thread to test.
                return;
            }
            assert_eq!(
                set_slice(Some(Duration::from_micros(100))).unwrap(),
                SliceOutcome::NotFair
            );
            assert_eq!(get_attr(0).unwrap().sched_policy, libc::SCHED_FIFO as u32);
        })
        .join()
        .unwrap();
    }
}
