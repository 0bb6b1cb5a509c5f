//! A request packet as the layer above the PDS names it: the one type
//! the engine and its packet queue share.

/// One request packet as the layer above knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PktRef {
    /// The upper layer's handle (e.g. its message slot).
    pub token: u64,
    /// Fragment index within the message.
    pub frag: u32,
    /// Bytes of SES header + payload.
    pub len: u32,
    /// The last packet of its message (sent with `ar`).
    pub last: bool,
}
