//! Subcommands of the `uet` tool that live in the library (so tests and
//! other tools can drive them too).

pub mod incast;
pub mod lab;
