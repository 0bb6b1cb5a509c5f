//! Network namespaces and veth links for the lab and the real-kernel tests
//! of every crate (`docs/architecture.md` §6): every namespace gets a unique name, and
//! dropping the handle deletes it — also when a test fails and unwinds.
//!
//! Commands go through iproute2's `ip` (the same tool an operator uses to
//! look at what the lab built); code runs inside a namespace on a thread of
//! its own ([`NetNs::run`]), since a network namespace is per thread.

use std::fs::File;
use std::io;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{Error, Result};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A network namespace this process created; deleted on drop.
#[derive(Debug)]
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// Creates a namespace named `{prefix}-{pid}-{n}` and brings its
    /// loopback up.
    pub fn create(prefix: &str) -> Result<Self> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        run(Command::new("ip").args(["netns", "add", &name]))
            .map_err(Error::during(format!("creating network namespace {name}")))?;
        let ns = Self { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Its name (`ip netns exec NAME …`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NAME args…` and fails with its stderr when it fails.
    pub fn ip(&self, args: &[&str]) -> Result<Output> {
        run(Command::new("ip").arg("-n").arg(&self.name).args(args))
    }

    /// A command to run inside the namespace (`ip netns exec NAME prog`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Runs `f` on a new thread that has entered the namespace, and returns
    /// its result (a panic in `f` is re-raised here).
    pub fn run<R: Send + 'static>(&self, f: impl FnOnce() -> R + Send + 'static) -> Result<R> {
        let h = self.spawn(f)?;
        match h.join() {
            Ok(r) => r.map_err(Error::io(format!("entering namespace {}", self.name))),
            Err(p) => std::panic::resume_unwind(p),
        }
    }

    /// Spawns a thread inside the namespace (the caller joins it).
    pub fn spawn<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Result<std::thread::JoinHandle<io::Result<R>>> {
        let file = self.open()?;
        std::thread::Builder::new()
            .name(format!("ns-{}", self.name))
            .spawn(move || -> io::Result<R> {
                uetd::sys::ns::enter_net_ns(&file)?;
                Ok(f())
            })
            .map_err(Error::io(format!(
                "starting a thread for namespace {}",
                self.name
            )))
    }

    /// The namespace's file, for `setns`.
    pub fn open(&self) -> Result<File> {
        File::open(format!("/run/netns/{}", self.name))
            .map_err(Error::io(format!("opening namespace {}", self.name)))
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        // Deleting the namespace destroys its interfaces (a veth pair goes
        // with either end).
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// Creates a veth pair with one end in each namespace, gives each end an
/// address (CIDR, e.g. `10.0.0.1/24`) and MTU, and brings both up.
pub fn veth_pair(
    a: &NetNs,
    a_if: &str,
    a_addr: &str,
    b: &NetNs,
    b_if: &str,
    b_addr: &str,
    mtu: u32,
) -> Result<()> {
    veth_pair_queues(a, a_if, a_addr, b, b_if, b_addr, mtu, 1)
}

/// [`veth_pair`] with `queues` TX and RX queues on each end, for a daemon
/// with one worker per queue. veth hands a frame to the peer's RX queue
/// of the same index as the TX queue it was sent on (the sender's XPS or
/// flow hash picks that), so the frames of one flow keep to one queue and
/// different flows spread.
#[allow(clippy::too_many_arguments)]
pub fn veth_pair_queues(
    a: &NetNs,
    a_if: &str,
    a_addr: &str,
    b: &NetNs,
    b_if: &str,
    b_addr: &str,
    mtu: u32,
    queues: u32,
) -> Result<()> {
    let mtu = mtu.to_string();
    let q = queues.max(1).to_string();
    run(Command::new("ip").args([
        "link",
        "add",
        a_if,
        "netns",
        &a.name,
        "mtu",
        &mtu,
        "numtxqueues",
        &q,
        "numrxqueues",
        &q,
        "type",
        "veth",
        "peer",
        "name",
        b_if,
        "netns",
        &b.name,
        "mtu",
        &mtu,
        "numtxqueues",
        &q,
        "numrxqueues",
        &q,
    ]))
    .map_err(Error::during(format!("creating veth {a_if}<->{b_if}")))?;
    for (ns, ifname, addr) in [(a, a_if, a_addr), (b, b_if, b_addr)] {
        ns.ip(&["addr", "add", addr, "dev", ifname])?;
        ns.ip(&["link", "set", ifname, "up"])?;
    }
    Ok(())
}

/// Runs a command and turns a non-zero exit into an error with its stderr.
pub fn run(cmd: &mut Command) -> Result<Output> {
    let out = cmd
        .output()
        .map_err(|e| Error::io(format!("running {cmd:?}"))(e))?;
    if !out.status.success() {
        return Err(Error::Command {
            command: format!("{cmd:?}"),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_command_is_a_command_error_with_its_status_and_stderr() {
        let e = run(Command::new("sh").args(["-c", "echo oops >&2; exit 3"])).unwrap_err();
        let Error::Command {
            command,
            status,
            stderr,
        } = &e
        else {
            panic!("{e:?}");
        };
        assert!(command.contains("exit 3"), "{command}");
        assert_eq!(status.code(), Some(3));
        assert_eq!(stderr, "oops");
        assert!(
            e.to_string().ends_with("failed (exit status: 3): oops"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_program_is_an_io_error_naming_the_command() {
        let e = run(&mut Command::new("/nonexistent/uet-lab-prog")).unwrap_err();
        let Error::Io { what, source } = &e else {
            panic!("{e:?}");
        };
        assert!(what.contains("/nonexistent/uet-lab-prog"), "{what}");
        assert_eq!(source.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn veth_between_namespaces_carries_ping_and_namespaces_are_removed() {
        let a = NetNs::create("uet-t").unwrap();
        let b = NetNs::create("uet-t").unwrap();
        veth_pair(&a, "v0", "10.9.0.1/24", &b, "v1", "10.9.0.2/24", 1500).unwrap();
        let out = a
            .command("ping")
            .args(["-c", "1", "-W", "2", "10.9.0.2"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        // A thread inside `b` sees its veth end and nothing of `a`.
        let names: Vec<String> = b
            .run(|| {
                let out = Command::new("ip").args(["-o", "link"]).output().unwrap();
                String::from_utf8_lossy(&out.stdout).into_owned()
            })
            .unwrap()
            .lines()
            .map(|l| l.split(':').nth(1).unwrap().trim().to_owned())
            .collect();
        assert!(names.iter().any(|n| n.starts_with("v1")), "{names:?}");
        assert!(!names.iter().any(|n| n.starts_with("v0")), "{names:?}");
        let name = a.name().to_owned();
        drop(a);
        assert!(!std::path::Path::new(&format!("/run/netns/{name}")).exists());
    }
}
