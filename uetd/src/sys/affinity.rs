//! CPU pinning and scheduling class of worker threads.

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
