//! Congestion management (NSCC, RCCC, entropy selection): see `../shared/design.md` §2. Not built yet.
