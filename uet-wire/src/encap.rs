//! UET encapsulation: UDP port, the native-IP entropy header and the CRC32C trailer (`uet-spec-notes.md` §1).
