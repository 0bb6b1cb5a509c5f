//! What can go wrong in the tools, by culprit: the daemon (connecting to
//! it, or a request or operation it refused or failed), a file being read
//! or written, the datapath pieces the raw blasters set up, or the input
//! the caller gave. Every variant names what was being done; its source,
//! if any, is why.

use std::io;
use std::path::PathBuf;

use uet_api::ClientError;

/// An error of the tools.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The daemon's control socket could not be reached.
    #[error("connecting to uetd at {}", socket.display())]
    Connect {
        /// The control socket.
        socket: PathBuf,
        /// Why.
        #[source]
        source: ClientError,
    },
    /// A request to the daemon failed (it refused, the connection broke,
    /// nothing came in time).
    #[error("{what}")]
    Daemon {
        /// What was asked of it.
        what: String,
        /// Why it failed.
        #[source]
        source: ClientError,
    },
    /// The daemon completed an operation with an error status.
    #[error("operation {tag} failed: {status}")]
    Operation {
        /// The operation's tag.
        tag: u64,
        /// The status the daemon reported.
        status: String,
    },
    /// The daemon sent something this client does not expect from it.
    #[error("{what}")]
    Reply {
        /// What came, and where.
        what: String,
    },
    /// The daemon took longer than it may.
    #[error("timed out waiting for {awaiting}")]
    Timeout {
        /// What was awaited.
        awaiting: String,
    },
    /// Reading or writing a file.
    #[error("{what} {}", path.display())]
    File {
        /// `reading`, `writing` or `creating`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// Another system call or local I/O (a shared region, a signal
    /// handler, a socket, the AF_XDP rings).
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// Setting up the XDP steering program (its errors are the daemon
    /// library's own).
    #[error("{what}")]
    Xdp {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The caller's input does not make sense.
    #[error("{0}")]
    Invalid(String),
}

/// The tools' result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A failed request to the daemon, `what` naming the request (turned
    /// into a `String` only when there is an error).
    pub(crate) fn daemon(what: impl Into<String>) -> impl FnOnce(ClientError) -> Self {
        move |source| Self::Daemon {
            what: what.into(),
            source,
        }
    }

    /// A failed system call or local I/O, `what` naming it.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Self {
        move |source| Self::Io {
            what: what.into(),
            source,
        }
    }

    /// A failed file operation.
    pub(crate) fn file(
        what: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| Self::File { what, path, source }
    }
}
