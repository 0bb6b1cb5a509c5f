//! Semantic Sublayer and the `Endpoint`, sans-IO: see `../shared/design.md` §2. Not built yet.
