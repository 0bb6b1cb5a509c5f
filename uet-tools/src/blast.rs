//! Raw blasters and sinks: the ceiling of a link with no protocol on it.

pub mod udp;
pub mod xsk;
