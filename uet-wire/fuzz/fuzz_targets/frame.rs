//! Arbitrary bytes into every entry point of the parsers: the whole-frame
//! walk under each encapsulation and trailer setting, and the UET headers
//! alone, full and trimmed. The first byte picks the settings. Parsing must
//! never panic, whatever the input, and what parses must print.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uet_wire::encap::EncapConfig;
use uet_wire::{parse_frame_with, parse_uet};

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, bytes)) = data.split_first() else {
        return;
    };
    let cfg = EncapConfig {
        crc_trailer: knobs & 1 != 0,
        // The native-IP protocol number is configurable (253 by default).
        ip_protocol: if knobs & 2 != 0 { 254 } else { 253 },
        ..EncapConfig::default()
    };
    if let Ok(frame) = parse_frame_with(bytes, &cfg) {
        let _ = frame.to_string();
    }
    if let Ok(uet) = parse_uet(bytes, knobs & 4 != 0) {
        let _ = uet.to_string();
    }
});
