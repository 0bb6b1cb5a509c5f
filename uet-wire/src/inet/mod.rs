//! Ethernet, IPv4, IPv6 and UDP framing (AF_XDP hands us raw frames).
