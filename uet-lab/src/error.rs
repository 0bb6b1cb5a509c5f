//! What can go wrong in the lab, by culprit: a command it ran (`ip`, `tc`),
//! a system call or file, the kernel's BPF and netlink interfaces, a daemon
//! that did not start or died, a wait that timed out, a daemon's client
//! request or write, options that do not make sense, or a check that
//! failed (a verification mismatch). Every variant names what was being
//! done; its source, if any, is why. [`Error::Step`] adds the lab step in
//! progress to an error of a lower layer.

use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;

use uet_api::ClientError;

/// The source of an error whose type belongs to another library (aya, the
/// daemon library's XDP and netlink helpers).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error of the lab.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A command exited with a failure status.
    #[error("{command} failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// How it exited.
        status: ExitStatus,
        /// What it printed on stderr (trimmed).
        stderr: String,
    },
    /// A system call, file or process operation failed.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// The kernel's BPF or netlink interface refused, or a BPF object lacks
    /// what the lab needs.
    #[error("{what}")]
    Kernel {
        /// What was being done.
        what: String,
        /// Why it failed (none: `what` says it all).
        #[source]
        source: Option<BoxError>,
    },
    /// A program printed something the lab cannot use (`ip -j`, a daemon's
    /// JSON lines or counters, a state file).
    #[error("{what}")]
    Output {
        /// What was read, and what is wrong with it.
        what: String,
        /// The parser's complaint, if it was JSON.
        #[source]
        source: Option<serde_json::Error>,
    },
    /// A daemon of the lab did not come up, stopped answering, or exited.
    #[error("uetd in host {host} {what}")]
    Daemon {
        /// The host it runs in.
        host: usize,
        /// What went wrong (`did not come up`, …).
        what: String,
        /// The wait that failed, with the daemon's last log lines.
        #[source]
        source: Box<Self>,
    },
    /// A process the lab waits on exited before it printed what was
    /// awaited.
    #[error("the process exited; {log}")]
    Exited {
        /// Its last lines of stdout and stderr.
        log: String,
    },
    /// A run failed, and the daemons' counters and logs at that moment were
    /// kept in `saved` ([`crate::Lab::save_state`]).
    #[error("a run failed; the daemons' counters and logs at that moment are in {}", saved.display())]
    Kept {
        /// What failed.
        #[source]
        error: Box<Self>,
        /// Where the state was kept.
        saved: PathBuf,
    },
    /// Something awaited did not happen in time.
    #[error("timed out waiting for {awaiting}; {state}")]
    Timeout {
        /// What was awaited.
        awaiting: String,
        /// How far it got (log lines, operations done).
        state: String,
    },
    /// A request to a daemon's control socket failed.
    #[error("{what}")]
    Client {
        /// What was asked.
        what: String,
        /// Why it failed.
        #[source]
        source: ClientError,
    },
    /// An RMA operation completed with an error status.
    #[error("{what} failed: {status}")]
    Operation {
        /// Which operation.
        what: String,
        /// The status the daemon reported.
        status: String,
    },
    /// A client command of `uet_tools` failed.
    #[error("{what}")]
    Tool {
        /// Which one.
        what: String,
        /// Why.
        #[source]
        source: uet_tools::Error,
    },
    /// Options or a configuration that cannot work.
    #[error("{what}: {why}")]
    Invalid {
        /// What is wrong (`lab config`, `incast options`, …).
        what: &'static str,
        /// Why.
        why: String,
    },
    /// A check of what the lab measured failed (a hash or byte count
    /// differs).
    #[error("{0}")]
    Check(String),
    /// No lab of this name has a state file.
    #[error("no lab {name:?} ({} unreadable)", path.display())]
    NoLab {
        /// The name asked for.
        name: String,
        /// Its state file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: io::Error,
    },
    /// A binary the lab runs was not found.
    #[error("no {name} binary next to {} (build it, or set {env})", near.display())]
    MissingBinary {
        /// `uetd` or `uet`.
        name: String,
        /// The running executable it was looked for beside.
        near: PathBuf,
        /// The environment variable that names it.
        env: String,
    },
    /// A thread of the lab panicked.
    #[error("the {0} thread panicked")]
    Panicked(String),
    /// The process is tearing its labs down (a signal arrived).
    #[error("interrupted")]
    Interrupted,
    /// Removing a lab left something behind.
    #[error("removing lab {lab}: {}", errors.join("; "))]
    Teardown {
        /// The lab.
        lab: String,
        /// Every step that failed.
        errors: Vec<String>,
    },
    /// Removing several labs failed; each error names its lab.
    #[error("{}", chains(.0))]
    Teardowns(Vec<Self>),
    /// Drawing a figure of a report.
    #[error("{what}: {message}")]
    Plot {
        /// What was being drawn or loaded.
        what: String,
        /// plotters' or the font loader's complaint.
        message: String,
    },
    /// A step of building or running a lab failed; `source` says how.
    #[error("{what}")]
    Step {
        /// The step.
        what: String,
        /// The failure.
        #[source]
        source: Box<Self>,
    },
}

/// The lab's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A failed system call or I/O, `what` naming it (turned into a
    /// `String` only when there is an error).
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Self {
        move |source| Self::Io {
            what: what.into(),
            source,
        }
    }

    /// A failed request to a daemon, `what` naming it.
    pub(crate) fn client(what: impl Into<String>) -> impl FnOnce(ClientError) -> Self {
        move |source| Self::Client {
            what: what.into(),
            source,
        }
    }

    /// A failure of the kernel's BPF or netlink interface.
    pub(crate) fn kernel<E: Into<BoxError>>(what: impl Into<String>) -> impl FnOnce(E) -> Self {
        move |source| Self::Kernel {
            what: what.into(),
            source: Some(source.into()),
        }
    }

    /// Output that is not the JSON expected.
    pub(crate) fn json(what: impl Into<String>) -> impl FnOnce(serde_json::Error) -> Self {
        move |source| Self::Output {
            what: what.into(),
            source: Some(source),
        }
    }

    /// This error as the cause of lab step `what`.
    pub(crate) fn during(what: impl Into<String>) -> impl FnOnce(Self) -> Self {
        move |e| Self::Step {
            what: what.into(),
            source: Box::new(e),
        }
    }

    /// Options that cannot work.
    pub(crate) fn invalid(what: &'static str, why: impl Into<String>) -> Self {
        Self::Invalid {
            what,
            why: why.into(),
        }
    }

    /// The message with every cause after it (`a: b: c`), for errors the
    /// lab prints or collects itself.
    pub fn chain(&self) -> String {
        let mut out = self.to_string();
        let mut cur: &dyn std::error::Error = self;
        while let Some(next) = cur.source() {
            out.push_str(": ");
            out.push_str(&next.to_string());
            cur = next;
        }
        out
    }
}

fn chains(errors: &[Error]) -> String {
    errors
        .iter()
        .map(Error::chain)
        .collect::<Vec<_>>()
        .join("; ")
}

/// `Err` with [`Error::invalid`] unless `cond` holds.
pub(crate) fn require(cond: bool, what: &'static str, why: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(Error::invalid(what, why()))
    }
}
