//! Every `unsafe` block of uet lives under this module (`design.md` §2),
//! each with a `// SAFETY:` line. The rest of the crate calls the safe
//! wrappers defined here; the lab and the tools use the public ones.
#![allow(unsafe_code)]

pub mod affinity;
pub mod bpffs;
pub(crate) mod cred;
pub mod eventfd;
pub(crate) mod ifaddr;
pub mod mem;
pub mod ns;
pub(crate) mod packet;
pub mod udp;
pub(crate) mod xsk;
