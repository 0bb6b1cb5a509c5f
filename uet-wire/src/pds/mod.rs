//! PDS headers (`uet-spec-notes.md` §2).

pub mod prologue;

pub use prologue::{NextHeader, PdsType};
