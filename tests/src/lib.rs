//! The deterministic fabric simulator and integration tests live here.
