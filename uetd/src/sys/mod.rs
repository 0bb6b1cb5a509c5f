//! Every `unsafe` block of uet lives under this module (`design.md` §2),
//! each with a `// SAFETY:` line. The rest of the crate calls the safe
//! wrappers defined here.
#![allow(unsafe_code)]

pub(crate) mod ns;
pub(crate) mod xsk;
