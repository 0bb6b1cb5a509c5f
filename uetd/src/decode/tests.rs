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
