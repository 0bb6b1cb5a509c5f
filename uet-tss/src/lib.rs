//! # uet-tss — the UET Transport Security Sublayer, sans-IO
//!
//! What a secured UET packet needs besides its bytes (`uet_wire::pds::tss`
//! has the header and the split of a frame): the key derivation of UEC's
//! reference provider (NIST SP 800-108 counter mode with AES-256-CMAC), the
//! per-packet AES-256-GCM seal and open with REF's IV and additional data,
//! an anti-replay window per sender, key rotation over the two ANs and the
//! epoch check. The rules and their sources are in `docs/security.md`.
//!
//! * [`crypto`] — the [`Aead`](crypto::Aead)/[`Prf`](crypto::Prf)
//!   [`Provider`](crypto::Provider) traits; the default provider is `ring`'s AES-256-GCM
//!   with RustCrypto's CMAC, and RustCrypto's `aes-gcm` is kept as the reference.
//! * [`kdf`] — the counter-mode KDF, REF's labels and contexts.
//! * [`replay`] — the sliding replay window.
//! * [`domain`] — a [`SecurityDomain`]: keys, `seal`/`open` in place, drop
//!   reasons, rotation; [`Tss`] finds the domain of a received frame.
//!
//! No I/O, no threads, no clock (time comes in as `now`), no randomness;
//! no allocation per packet once its bounded tables are full.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod crypto;
pub mod domain;
pub mod kdf;
mod registry;
pub mod replay;

pub use crypto::{KeyMaterial, Provider, Ring, RustCrypto, SecretKey};
pub use domain::{
    DomainConfig, DomainKey, DropCounts, DropReason, Flow, KeyError, Mode, Opened, Rekey,
    SealError, Sealed, SecurityDomain, SourceId, Stats,
};
pub use registry::Tss;

#[cfg(test)]
mod tests;
