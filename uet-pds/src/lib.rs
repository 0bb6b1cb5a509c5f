//! Packet Delivery Sublayer, sans-IO: see `../shared/design.md` §2. Not built yet.
