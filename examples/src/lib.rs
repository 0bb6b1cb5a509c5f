//! Example programs using `uet-api`. Not built yet.
