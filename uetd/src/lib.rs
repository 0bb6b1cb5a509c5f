//! # uetd — the uet daemon and the `uet` CLI
//!
//! The datapath (AF_XDP and UDP backends, workers) and the control socket
//! arrive with their issues; today the crate holds the frame decoder behind
//! `uet decode` and the generator of the sample capture it is shown with.

pub mod decode;
pub mod io;
pub mod sample;
