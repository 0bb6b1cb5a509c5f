//! SES headers (`uet-spec-notes.md` §4).

pub mod atomic;
pub mod opcode;
pub mod return_code;

pub use atomic::{AtomicDatatype, AtomicOpcode};
pub use opcode::{ListKind, Opcode, ResponseOpcode};
pub use return_code::ReturnCode;
