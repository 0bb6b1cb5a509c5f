//! The XDP steering program (C, built by clang) and loader-facing constants. Not built yet.
