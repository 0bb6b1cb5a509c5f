//! Every `unsafe` block of uet lives under this module (`design.md` §2),
//! each with a `// SAFETY:` line. The rest of the crate calls the safe
//! wrappers defined here.
#![allow(unsafe_code)]

pub(crate) mod affinity;
pub(crate) mod bpffs;
pub(crate) mod cred;
pub(crate) mod eventfd;
pub(crate) mod ifaddr;
pub(crate) mod mem;
pub(crate) mod ns;
pub(crate) mod packet;
pub(crate) mod udp;
pub(crate) mod xsk;
