//! `uet decode`: frames to one line of text or one JSON object each.
//!
//! The JSON shape (issue "uet-wire"): `{"ip": {"src","dst","dscp","ecn"},
//! "udp": {"src_port","dst_port"}, "pds": {"type", "next_hdr", "flags":
//! {…}, <fields>}, "ses": {"opcode", <fields>}, "payload_len": n}`, every
//! field by its spec name in snake_case. A frame that does not parse becomes
//! `{"error": "<what> at byte <n>"}`.

/// Parses a hex string; whitespace, `:`/`-` separators and a `0x` prefix are
/// ignored.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    let digits: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b':' && *b != b'-')
        .collect();
    if digits.len() % 2 != 0 {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    digits
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| {
            let hi = hex_val(pair[0]).ok_or_else(|| bad_digit(pair[0], 2 * i))?;
            let lo = hex_val(pair[1]).ok_or_else(|| bad_digit(pair[1], 2 * i + 1))?;
            Ok(hi << 4 | lo)
        })
        .collect()
}

fn hex_val(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

fn bad_digit(c: u8, at: usize) -> String {
    format!("{:?} is not a hex digit (digit {at})", c as char)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_forms() {
        assert_eq!(parse_hex("0x0a0B ff").unwrap(), vec![0x0a, 0x0b, 0xff]);
        assert_eq!(
            parse_hex("de:ad-be ef").unwrap(),
            vec![0xde, 0xad, 0xbe, 0xef]
        );
        assert!(parse_hex("abc").unwrap_err().contains("odd"));
        assert!(parse_hex("zz").unwrap_err().contains("not a hex digit"));
        assert_eq!(parse_hex("").unwrap(), Vec::<u8>::new());
    }
}
