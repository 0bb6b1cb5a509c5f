//! Application ⇄ daemon contract: see `../shared/design.md` §2. Not built yet.
