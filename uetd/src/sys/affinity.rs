//! CPU pinning of worker threads.

use std::io;

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cpu out of range",
        ));
    }
    // SAFETY: `cpu` is below CPU_SETSIZE, so CPU_SET stays inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: passes a valid cpu_set_t of the size given; 0 = this thread.
    let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes the calling thread SCHED_FIFO at `priority` (1–99; needs
/// CAP_SYS_NICE). For a measurement thread that sleeps between samples: it
/// runs microseconds per wake-up, so it cannot starve the others, and its
/// samples come when due rather than when a loaded CPU gets round to it.
pub fn set_fifo_priority(priority: i32) -> io::Result<()> {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: passes a valid sched_param; 0 = this thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
