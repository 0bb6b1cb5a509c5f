//! Fails when a committed `obj/NAME.bpf.o` no longer matches
//! `src/NAME.bpf.c` (the bpf2go convention, `docs/architecture.md` §5), for every
//! object of `xdp_prog::objects()`:
//!
//! - always: the SHA-256 of the C source, followed by every `src/*.h` it
//!   includes with `#include "…"`, must be the one recorded in
//!   `obj/NAME.bpf.o.stamp` (caught even without clang), and the
//!   committed object must hash to the recorded object hash;
//! - when this build compiled the program with the same clang version that
//!   made the committed copy: the two objects must be byte-identical (the
//!   build is reproducible across checkout directories; see `build.rs`).
//!   With another clang version the bytes legitimately differ, which is
//!   reported, and fails only under `XDP_PROG_REQUIRE_SAME_CLANG=1`.
//!
//! `XDP_PROG_BLESS=1` (what `regen.sh` sets) writes the fresh object and
//! its stamp instead of comparing.

use std::fmt::Write as _;
use std::path::PathBuf;

fn stamp_header(name: &str) -> String {
    format!(
        "# xdp-prog/obj/{name}.bpf.o was built from src/{name}.bpf.c by xdp-prog/regen.sh; \
         checked by tests/committed_object.rs"
    )
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Stamp {
    source: String,
    object: String,
    clang: String,
}

impl Stamp {
    fn parse(text: &str) -> Self {
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
                .unwrap_or_else(|| panic!("stamp has no `{key}` line"))
                .trim()
                .to_owned()
        };
        Self {
            source: field("source-sha256"),
            object: field("object-sha256"),
            clang: field("clang"),
        }
    }

    fn render(&self, name: &str) -> String {
        format!(
            "{}\nsource-sha256 {}\nobject-sha256 {}\nclang {}\n",
            stamp_header(name),
            self.source,
            self.object,
            self.clang
        )
    }
}

#[test]
fn committed_objects_match_their_sources() {
    for (name, fresh) in xdp_prog::objects() {
        check(name, fresh);
    }
}

/// `src/NAME.bpf.c` followed by each header of `src/` it includes with
/// `#include "…"`, in the order included: what its object is built from.
fn source_of(name: &str) -> Vec<u8> {
    let src = root().join("src");
    let mut source = std::fs::read(src.join(format!("{name}.bpf.c"))).unwrap();
    let text = String::from_utf8(source.clone()).unwrap();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("#include \"") else {
            continue;
        };
        let header = rest.split('"').next().unwrap();
        let path = src.join(header);
        source.extend(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    }
    source
}

fn check(name: &str, fresh: &[u8]) {
    let source = source_of(name);
    let obj_path = root().join(format!("obj/{name}.bpf.o"));
    let stamp_path = root().join(format!("obj/{name}.bpf.o.stamp"));

    if std::env::var("XDP_PROG_BLESS").is_ok_and(|v| v == "1") {
        if !xdp_prog::BUILT_WITH_CLANG {
            panic!("blessing needs an object built by clang in this build");
        }
        std::fs::write(&obj_path, fresh).unwrap();
        let stamp = Stamp {
            source: sha256_hex(&source),
            object: sha256_hex(fresh),
            clang: xdp_prog::CLANG_VERSION.to_owned(),
        };
        std::fs::write(&stamp_path, stamp.render(name)).unwrap();
        eprintln!("wrote {} and its stamp", obj_path.display());
    }

    let committed = std::fs::read(&obj_path).unwrap();
    let stamp = Stamp::parse(
        &std::fs::read_to_string(&stamp_path)
            .unwrap_or_else(|e| panic!("{}: {e}: run xdp-prog/regen.sh", stamp_path.display())),
    );
    assert_eq!(
        sha256_hex(&source),
        stamp.source,
        "src/{name}.bpf.c or a header it includes changed since obj/{name}.bpf.o was built: run \
         xdp-prog/regen.sh and commit obj/"
    );
    assert_eq!(
        sha256_hex(&committed),
        stamp.object,
        "obj/{name}.bpf.o is not the object its stamp records: run xdp-prog/regen.sh"
    );

    if !xdp_prog::BUILT_WITH_CLANG {
        eprintln!("{name}: clang absent: compared source hashes only");
        return;
    }
    if xdp_prog::CLANG_VERSION != stamp.clang {
        let msg = format!(
            "{name}: committed object built by `{}`, this build by `{}`: bytes not compared",
            stamp.clang,
            xdp_prog::CLANG_VERSION
        );
        assert!(
            !std::env::var("XDP_PROG_REQUIRE_SAME_CLANG").is_ok_and(|v| v == "1"),
            "{msg}"
        );
        eprintln!("{msg}");
        return;
    }
    assert!(
        fresh == committed.as_slice(),
        "a fresh clang build differs from obj/{name}.bpf.o: run xdp-prog/regen.sh and commit obj/"
    );
}

#[test]
fn sha256_known_answers() {
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        sha256_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    );
}

/// SHA-256 (FIPS 180-4), small and slow: a few kilobytes per run.
fn sha256_hex(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:08x}");
        s
    })
}
