//! The TSS key derivation: NIST SP 800-108 counter mode with AES-256-CMAC
//! as PRF, an 8-bit counter before the fixed input, and REF's labels and
//! contexts (`docs/security.md` §2.3; REF `kdf_ctr_cmac_aes.c`, `uet_sec.c`).
//!
//! ```text
//! K(i)   = CMAC(KI, [i]_8 ‖ fixed)            i = 1, 2, 3
//! fixed  = label ‖ 0x00 ‖ context ‖ [L]_32    L = 352 (bits), big-endian
//! output = first 44 bytes of K(1) ‖ K(2) ‖ K(3) = key (32) ‖ IV mask (12)
//! ```
//!
//! Contexts (every integer big-endian):
//!
//! ```text
//! small (10 B, IPv4 or SSI):  epoch:16 | rekey:32 | SSI or IPv4 address:32
//! large (26 B, IPv6):         0:32 | epoch:16 | rekey:32 | IPv6 address:128
//! ```

use crate::crypto::{KEY_MATERIAL_LEN, KeyMaterial, Prf};

/// Label of a cluster-mode source key ("U1").
pub const LABEL_CLUSTER: &[u8] = b"U1";
/// Label of a server-mode client key ("U2").
pub const LABEL_SERVER: &[u8] = b"U2";
/// Length of the small context.
pub const SMALL_CONTEXT_LEN: usize = 10;
/// Length of the large context.
pub const LARGE_CONTEXT_LEN: usize = 26;

/// Most PRF blocks an 8-bit counter can number.
const MAX_BLOCKS: usize = 255;

/// SP 800-108 counter mode, counter of 8 bits before the fixed input data:
/// fills `out` with `PRF(KI, [1] ‖ fixed) ‖ PRF(KI, [2] ‖ fixed) ‖ …`, where
/// `fixed` is the concatenation of `fixed_parts`. Returns `false` (and
/// leaves `out` alone) when `out` needs more than 255 blocks or there are
/// more than 7 parts.
pub fn counter_mode<P: Prf>(prf: &P, fixed_parts: &[&[u8]], out: &mut [u8]) -> bool {
    let n = fixed_parts.len();
    if out.len().div_ceil(16) > MAX_BLOCKS || n > 7 {
        return false;
    }
    for (i, chunk) in out.chunks_mut(16).enumerate() {
        // i < 255 by the check above.
        let counter = [(i + 1) as u8];
        let mut parts: [&[u8]; 8] = [&[]; 8];
        parts[0] = &counter;
        parts[1..=n].copy_from_slice(&fixed_parts[..n]);
        let block = prf.mac(&parts[..=n]);
        chunk.copy_from_slice(&block[..chunk.len()]);
    }
    true
}

/// Derives 44 bytes of key material from `label` and `context` (REF
/// `kdf_ctr_cmac_aes`: the label without its NUL, a 0x00 separator, the
/// context, and L = 352 bits as a 32-bit big-endian integer).
#[must_use]
pub fn derive<P: Prf>(prf: &P, label: &[u8], context: &[u8]) -> KeyMaterial {
    let l_bits = ((KEY_MATERIAL_LEN * 8) as u32).to_be_bytes();
    let mut out = [0u8; KEY_MATERIAL_LEN];
    let done = counter_mode(prf, &[label, &[0x00], context, &l_bits], &mut out);
    debug_assert!(done, "44 bytes are 3 blocks");
    let m = KeyMaterial::from_bytes(&out);
    zeroize::Zeroize::zeroize(&mut out);
    m
}

/// The small context: epoch, rekey value, and the SSI or IPv4 address as
/// they appear on the wire (REF `uet_sec_enc_pkt`, IPv4 branch).
#[must_use]
pub fn small_context(epoch: u16, rekey: u32, id: [u8; 4]) -> [u8; SMALL_CONTEXT_LEN] {
    let mut c = [0u8; SMALL_CONTEXT_LEN];
    c[..2].copy_from_slice(&epoch.to_be_bytes());
    c[2..6].copy_from_slice(&rekey.to_be_bytes());
    c[6..].copy_from_slice(&id);
    c
}

/// The large context: four zero bytes, epoch, rekey value, and the IPv6
/// address (REF `uet_sec_enc_pkt`, IPv6 branch).
#[must_use]
pub fn large_context(epoch: u16, rekey: u32, addr: [u8; 16]) -> [u8; LARGE_CONTEXT_LEN] {
    let mut c = [0u8; LARGE_CONTEXT_LEN];
    c[4..6].copy_from_slice(&epoch.to_be_bytes());
    c[6..10].copy_from_slice(&rekey.to_be_bytes());
    c[10..].copy_from_slice(&addr);
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::tests::{hex, hex_vec};
    use crate::crypto::{Provider, RustCrypto};

    /// NIST CAVP KDFCTR (CAVS 14.4, `KDFCTR_gen.rsp`), [PRF=CMAC_AES256]
    /// [CTRLOCATION=BEFORE_FIXED] [RLEN=8_BITS], COUNT=35 and COUNT=39:
    /// L = 320, so three PRF blocks with counters 1, 2, 3 — the same shape
    /// as TSS's 352-bit output.
    #[test]
    fn cavp_kdfctr_cmac_aes256_8bit_counter_before_fixed() {
        let cases = [
            (
                "1b0e7858d6e81c7b7fb8cd0fe2494b3376ba8359a15ecf6dea6f32c9d7dd33ab",
                "7cb42e5a0dd3000d10899bcc68297e569a4d6dfcebe125425a71f5fc374f7bf3
                 77f9b09128838725926873a9d5fd93958c409a17747be5ca2484f1ce",
                "34feba20ce90d8535f3a705198c75bfc2148871c7d81209bdd9aadccf52a0b2f
                 4ab475cfb2cc729e",
            ),
            (
                "3c3fb56af835d12186d46a76c2b18907fbde9836f5fbf4b5da23ff767ee370c6",
                "a4a89e00526f3ac20aaed6b6a300e2fc388bdab9ac20354f9a4c59544b21ff7b
                 fdfdce1b2439c53ae21757d53327c65133575e04aff0a1b42020e551",
                "fba54e92c3cd9fff5999ed03592f2f0c54277102d7a5c5b4760042e660e95a99
                 2858e2edb45807b2",
            ),
        ];
        for (ki, fixed, ko) in cases {
            let prf = RustCrypto.prf(&hex(ki));
            let fixed = hex_vec(fixed);
            let mut out = [0u8; 40];
            assert!(counter_mode(&prf, &[&fixed], &mut out));
            assert_eq!(out.to_vec(), hex_vec(ko));
            // Split fixed input gives the same bytes.
            let mut out2 = [0u8; 40];
            assert!(counter_mode(&prf, &[&fixed[..3], &fixed[3..]], &mut out2));
            assert_eq!(out, out2);
        }
        let prf = RustCrypto.prf(&[0; 32]);
        assert!(!counter_mode(&prf, &[], &mut [0u8; 256 * 16]));
    }

    /// The TSS derivation is counter mode over `label ‖ 0 ‖ context ‖ L`:
    /// worked from the CMAC primitive, block by block, for REF's cluster
    /// label and a small context (epoch 1, rekey 2, source 10.0.0.1).
    #[test]
    fn tss_derivation_is_counter_mode_over_the_fixed_input() {
        let key = hex::<32>("07e9724958d9e1f710f594e18e11fd8d4a3582c256ccfecfc5eb1902e556bed4");
        let prf = RustCrypto.prf(&key);
        let ctx = small_context(1, 2, [10, 0, 0, 1]);
        assert_eq!(ctx, [0, 1, 0, 0, 0, 2, 10, 0, 0, 1]);
        let m = derive(&prf, LABEL_CLUSTER, &ctx);
        // The fixed input, byte by byte: "U1", 0x00, the context, 352 BE.
        let fixed: Vec<u8> = [&b"U1"[..], &[0], &ctx, &[0, 0, 0x01, 0x60]].concat();
        assert_eq!(fixed.len(), 2 + 1 + 10 + 4);
        let mut want = Vec::new();
        for i in 1u8..=3 {
            let mut msg = vec![i];
            msg.extend_from_slice(&fixed);
            want.extend_from_slice(&prf.mac(&[&msg]));
        }
        assert_eq!(m.key()[..], want[..32]);
        assert_eq!(m.iv_mask()[..], want[32..44]);
        // Known-answer of the above, so a change of any input is caught.
        assert_eq!(
            [&m.key()[..], &m.iv_mask()[..]].concat(),
            hex_vec(KNOWN_U1_SMALL)
        );
        // Label, context and large-context layout all matter.
        assert_ne!(derive(&prf, LABEL_SERVER, &ctx), m);
        let large = large_context(1, 2, [0xfd; 16]);
        assert_eq!(&large[..10], &[0, 0, 0, 0, 0, 1, 0, 0, 0, 2]);
        assert_ne!(derive(&prf, LABEL_CLUSTER, &large), m);
    }

    /// `derive(REF key 0, "U1", small_context(1, 2, 10.0.0.1))`, computed by
    /// the block-by-block construction in the test above.
    const KNOWN_U1_SMALL: &str = "71e3d3645f7bd308b2ce51b702eaca3c510fc513e3900b77f34d1b1225841ee1\
     117c9e64cf3524ee5fee45f2";
}
