//! The cryptographic primitives TSS needs, behind traits: an AEAD
//! (AES-256-GCM with a 96-bit IV and a 128-bit tag) and a PRF (AES-256-CMAC)
//! for the key derivation (`docs/security.md` §2).
//!
//! [`RustCrypto`] is the default [`Provider`]: the `aes-gcm`, `aes` and
//! `cmac` crates, which pick AES-NI/VAES and PCLMULQDQ (or the ARMv8 crypto
//! extensions) at run time and fall back to constant-time software. Tests and
//! the simulator may substitute their own provider; the protocol code never
//! names a crate.
//!
//! Secrets: [`SecretKey`] and [`KeyMaterial`] are zeroized when dropped and
//! their `Debug` prints no byte of them; the prepared cipher states of the
//! default provider are zeroized on drop by the crates themselves (their
//! `zeroize` features are on).

use core::fmt;

use aes::Aes256;
use aes_gcm::aead::{AeadInOut, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce, Tag};
use cmac::{Cmac, Mac};
use zeroize::{Zeroize, ZeroizeOnDrop};

/// Length of an AES-256 key.
pub const KEY_LEN: usize = 32;
/// Length of the AES-GCM IV.
pub const IV_LEN: usize = 12;
/// Length of the AES-GCM tag (the TSS ICV).
pub const TAG_LEN: usize = 16;
/// Length of the key material the KDF yields: a key and an IV mask (REF
/// `UET_SEC_KDF_GEN_SIZE`).
pub const KEY_MATERIAL_LEN: usize = KEY_LEN + IV_LEN;

/// A 256-bit secret key: a security domain's key for one AN. Zeroized on
/// drop; `Debug` shows no byte.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey([u8; KEY_LEN]);

impl SecretKey {
    /// Wraps key bytes.
    #[must_use]
    pub const fn new(bytes: [u8; KEY_LEN]) -> Self {
        Self(bytes)
    }

    /// Copies a key out of a slice; `None` unless it is exactly 32 bytes.
    #[must_use]
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        <[u8; KEY_LEN]>::try_from(bytes).ok().map(Self)
    }

    /// The key bytes, for a [`Provider`].
    #[must_use]
    pub const fn expose(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl ZeroizeOnDrop for SecretKey {}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(..)")
    }
}

/// Key material: an AES-256 key and the 96-bit mask XORed into the IV (the
/// 44 bytes REF's KDF yields, key first). In server mode a client holds one
/// of these instead of the domain key. Zeroized on drop; `Debug` shows no
/// byte.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyMaterial {
    key: [u8; KEY_LEN],
    iv_mask: [u8; IV_LEN],
}

impl KeyMaterial {
    /// Splits 44 bytes into key (0..32) and IV mask (32..44).
    #[must_use]
    pub fn from_bytes(bytes: &[u8; KEY_MATERIAL_LEN]) -> Self {
        let mut key = [0u8; KEY_LEN];
        let mut iv_mask = [0u8; IV_LEN];
        key.copy_from_slice(&bytes[..KEY_LEN]);
        iv_mask.copy_from_slice(&bytes[KEY_LEN..]);
        Self { key, iv_mask }
    }

    /// The key.
    #[must_use]
    pub const fn key(&self) -> &[u8; KEY_LEN] {
        &self.key
    }

    /// The IV mask.
    #[must_use]
    pub const fn iv_mask(&self) -> &[u8; IV_LEN] {
        &self.iv_mask
    }
}

impl Drop for KeyMaterial {
    fn drop(&mut self) {
        self.key.zeroize();
        self.iv_mask.zeroize();
    }
}

impl ZeroizeOnDrop for KeyMaterial {}

impl fmt::Debug for KeyMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyMaterial(..)")
    }
}

/// The AEAD refused: a tag that does not verify, or input longer than
/// AES-GCM allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AeadError;

/// An AEAD key, prepared once (key schedule, GHASH key) and used for many
/// packets.
pub trait Aead {
    /// Encrypts `buf` in place and returns the tag.
    ///
    /// # Errors
    /// Input longer than the algorithm allows.
    fn seal(
        &self,
        iv: &[u8; IV_LEN],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN], AeadError>;

    /// Checks `tag` over `aad` and the ciphertext `buf`, then decrypts `buf`
    /// in place. On error the contents of `buf` are unspecified (`ring`
    /// may have decrypted it before the tag failed): a caller that must keep
    /// a dropped datagram opens a copy, as the daemon's worker does.
    ///
    /// # Errors
    /// The tag does not verify.
    fn open(
        &self,
        iv: &[u8; IV_LEN],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), AeadError>;
}

/// A PRF key (AES-256-CMAC), prepared once.
pub trait Prf {
    /// The 16-byte MAC of the concatenation of `parts`.
    fn mac(&self, parts: &[&[u8]]) -> [u8; 16];
}

/// Makes prepared AEAD and PRF keys from key bytes.
pub trait Provider {
    /// The prepared AEAD key.
    type Aead: Aead;
    /// The prepared PRF key.
    type Prf: Prf;
    /// An AES-256-GCM key.
    fn aead(&self, key: &[u8; KEY_LEN]) -> Self::Aead;
    /// An AES-256-CMAC key.
    fn prf(&self, key: &[u8; KEY_LEN]) -> Self::Prf;
}

/// RustCrypto's `aes-gcm`, `aes` and `cmac`, with hardware AES and
/// carry-less multiply detected at run time: the reference the other
/// provider is tested against, and the PRF of both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RustCrypto;

/// The default provider: `ring`'s AES-256-GCM (one stitched AES-NI and
/// carry-less-multiply pass per packet, detected at run time: about 3x
/// faster than `aes-gcm`'s separate passes on a 3.5 KB frame) and
/// RustCrypto's AES-256-CMAC for the key derivation, which runs once per
/// key, not per packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ring;

/// A prepared AES-256-GCM key of [`Ring`].
pub struct RingAead(ring::aead::LessSafeKey);

impl fmt::Debug for RingAead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RingAead(..)")
    }
}

impl Provider for Ring {
    type Aead = RingAead;
    type Prf = RustCryptoPrf;

    fn aead(&self, key: &[u8; KEY_LEN]) -> RingAead {
        // A 32-byte key is what AES_256_GCM takes: this cannot fail.
        let key = ring::aead::UnboundKey::new(&ring::aead::AES_256_GCM, key)
            .unwrap_or_else(|_| unreachable!("AES-256 takes a 32-byte key"));
        RingAead(ring::aead::LessSafeKey::new(key))
    }

    fn prf(&self, key: &[u8; KEY_LEN]) -> RustCryptoPrf {
        RustCrypto.prf(key)
    }
}

impl Aead for RingAead {
    fn seal(
        &self,
        iv: &[u8; IV_LEN],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN], AeadError> {
        // The caller never reuses an IV under a key (the TSC, `domain.rs`).
        let nonce = ring::aead::Nonce::assume_unique_for_key(*iv);
        let tag = self
            .0
            .seal_in_place_separate_tag(nonce, ring::aead::Aad::from(aad), buf)
            .map_err(|_| AeadError)?;
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        Ok(out)
    }

    fn open(
        &self,
        iv: &[u8; IV_LEN],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), AeadError> {
        let nonce = ring::aead::Nonce::assume_unique_for_key(*iv);
        let tag = ring::aead::Tag::from(*tag);
        let len = buf.len();
        match self
            .0
            .open_in_place_separate_tag(nonce, ring::aead::Aad::from(aad), tag, buf, 0..)
        {
            Ok(plain) if plain.len() == len => Ok(()),
            _ => Err(AeadError),
        }
    }
}

/// A prepared AES-256-GCM key of [`RustCrypto`].
#[derive(Clone)]
pub struct RustCryptoAead(Aes256Gcm);

impl fmt::Debug for RustCryptoAead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RustCryptoAead(..)")
    }
}

/// A prepared AES-256-CMAC key of [`RustCrypto`].
#[derive(Clone)]
pub struct RustCryptoPrf(Cmac<Aes256>);

impl fmt::Debug for RustCryptoPrf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RustCryptoPrf(..)")
    }
}

impl Provider for RustCrypto {
    type Aead = RustCryptoAead;
    type Prf = RustCryptoPrf;

    fn aead(&self, key: &[u8; KEY_LEN]) -> RustCryptoAead {
        RustCryptoAead(Aes256Gcm::new(&(*key).into()))
    }

    fn prf(&self, key: &[u8; KEY_LEN]) -> RustCryptoPrf {
        RustCryptoPrf(<Cmac<Aes256> as KeyInit>::new(&(*key).into()))
    }
}

impl Aead for RustCryptoAead {
    fn seal(
        &self,
        iv: &[u8; IV_LEN],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; TAG_LEN], AeadError> {
        let nonce = Nonce::from(*iv);
        self.0
            .encrypt_inout_detached(&nonce, aad, buf.into())
            .map(Into::into)
            .map_err(|_| AeadError)
    }

    fn open(
        &self,
        iv: &[u8; IV_LEN],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; TAG_LEN],
    ) -> Result<(), AeadError> {
        let nonce = Nonce::from(*iv);
        let tag = Tag::from(*tag);
        self.0
            .decrypt_inout_detached(&nonce, aad, buf.into(), &tag)
            .map_err(|_| AeadError)
    }
}

impl Prf for RustCryptoPrf {
    fn mac(&self, parts: &[&[u8]]) -> [u8; 16] {
        let mut m = self.0.clone();
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn hex<const N: usize>(s: &str) -> [u8; N] {
        let v = hex_vec(s);
        <[u8; N]>::try_from(v.as_slice()).unwrap()
    }

    pub(crate) fn hex_vec(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// AES-256-GCM, the GCM specification's test cases 13, 14 and 16 (as
    /// reproduced in NIST SP 800-38D's validation material): 96-bit IVs.
    #[test]
    fn aes256_gcm_vectors() {
        gcm_vectors(RustCrypto);
        gcm_vectors(Ring);
    }

    /// The same keys, IVs and AAD give the same ciphertext and tag with
    /// both providers, each opens what the other sealed, and both refuse a
    /// flipped tag bit.
    #[test]
    fn the_providers_agree() {
        use proptest::prelude::*;
        proptest!(|(key in any::<[u8; 32]>(), iv in any::<[u8; 12]>(),
                    aad in proptest::collection::vec(any::<u8>(), 0..64),
                    pt in proptest::collection::vec(any::<u8>(), 0..9300),
                    flip in any::<usize>())| {
            let (a, b) = (RustCrypto.aead(&key), Ring.aead(&key));
            let (mut x, mut y) = (pt.clone(), pt.clone());
            let ta = a.seal(&iv, &aad, &mut x).unwrap();
            let tb = b.seal(&iv, &aad, &mut y).unwrap();
            prop_assert_eq!(&x, &y);
            prop_assert_eq!(ta, tb);
            let mut z = x.clone();
            b.open(&iv, &aad, &mut z, &ta).unwrap();
            prop_assert_eq!(&z, &pt);
            let mut z = y.clone();
            a.open(&iv, &aad, &mut z, &tb).unwrap();
            prop_assert_eq!(&z, &pt);
            let mut bad = tb;
            bad[flip % TAG_LEN] ^= 1 << (flip % 8);
            let mut z = y.clone();
            prop_assert_eq!(b.open(&iv, &aad, &mut z, &bad), Err(AeadError));
            let mut z = x.clone();
            prop_assert_eq!(a.open(&iv, &aad, &mut z, &bad), Err(AeadError));
        });
    }

    fn gcm_vectors<P: Provider>(p: P) {
        // Test case 13: zero key, zero IV, no plaintext, no AAD.
        let k = p.aead(&[0; 32]);
        let mut empty = [];
        assert_eq!(
            k.seal(&[0; 12], &[], &mut empty).unwrap(),
            hex::<16>("530f8afbc74536b9a963b4f1c4cb738b")
        );
        // Test case 14: one zero block.
        let mut b = [0u8; 16];
        let tag = k.seal(&[0; 12], &[], &mut b).unwrap();
        assert_eq!(b, hex::<16>("cea7403d4d606b6e074ec5d3baf39d18"));
        assert_eq!(tag, hex::<16>("d0d1c8a799996bf0265b98b5d48ab919"));
        // Test case 16: 60 bytes of plaintext, 20 bytes of AAD.
        let k = p.aead(&hex(
            "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
        ));
        let iv = hex::<12>("cafebabefacedbaddecaf888");
        let aad = hex::<20>("feedfacedeadbeeffeedfacedeadbeefabaddad2");
        let pt = hex_vec(
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72
             1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
        );
        let ct = hex_vec(
            "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa
             8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
        );
        let want_tag = hex::<16>("76fc6ece0f4e1768cddf8853bb2d551b");
        let mut b = pt.clone();
        assert_eq!(k.seal(&iv, &aad, &mut b).unwrap(), want_tag);
        assert_eq!(b, ct);
        k.open(&iv, &aad, &mut b, &want_tag).unwrap();
        assert_eq!(b, pt);
        // A wrong tag is refused.
        let mut b = ct;
        let mut bad = want_tag;
        bad[15] ^= 1;
        assert_eq!(k.open(&iv, &aad, &mut b, &bad), Err(AeadError));
    }

    /// AES-256-CMAC, NIST SP 800-38B appendix D.3 examples 9-12 (the same
    /// messages as RFC 4493, with the 256-bit key).
    #[test]
    fn aes256_cmac_vectors() {
        let k = RustCrypto.prf(&hex(
            "603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4",
        ));
        let m = hex_vec(
            "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51
             30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710",
        );
        assert_eq!(k.mac(&[]), hex::<16>("028962f61b7bf89efc6b551f4667d983"));
        assert_eq!(
            k.mac(&[&m[..16]]),
            hex::<16>("28a7023f452e8f82bd4bf28d8c37c35c")
        );
        assert_eq!(
            k.mac(&[&m[..40]]),
            hex::<16>("aaf3d8f1de5640c232f5b169b9c911e6")
        );
        assert_eq!(k.mac(&[&m]), hex::<16>("e1992190549f6ed5696a2c056c315410"));
        // Parts are concatenated.
        assert_eq!(
            k.mac(&[&m[..7], &m[7..33], &m[33..40]]),
            hex::<16>("aaf3d8f1de5640c232f5b169b9c911e6")
        );
    }

    #[test]
    fn secrets_are_not_printed() {
        let k = SecretKey::new([0x5a; 32]);
        assert_eq!(format!("{k:?}"), "SecretKey(..)");
        let m = KeyMaterial::from_bytes(&[0x5a; 44]);
        assert_eq!(format!("{m:?}"), "KeyMaterial(..)");
        assert_eq!(
            format!("{:?}", RustCrypto.aead(&[1; 32])),
            "RustCryptoAead(..)"
        );
        assert!(SecretKey::from_slice(&[0; 31]).is_none());
        assert_eq!(SecretKey::from_slice(&[7; 32]).unwrap().expose(), &[7; 32]);
    }
}
