//! The uet daemon: datapath, control socket and the `uet` CLI (built in later issues).
