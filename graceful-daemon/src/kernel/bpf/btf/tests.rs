use super::*;

fn real_blob() -> Option<Vec<u8>> {
    match std::fs::read(VMLINUX_BTF_PATH) {
        Ok(data) => Some(data),
        Err(err) => {
            eprintln!("skipping: cannot read {VMLINUX_BTF_PATH}: {err}");
            None
        }
    }
}

/// Deterministic xorshift so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Assembles BTF blobs by hand. Type ids follow call order, starting at 1.
struct Builder {
    types: Vec<u8>,
    strs: Vec<u8>,
}

impl Builder {
    fn new() -> Self {
        Builder {
            types: Vec::new(),
            strs: vec![0],
        }
    }
    fn name(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        let off = self.strs.len() as u32;
        self.strs.extend_from_slice(s.as_bytes());
        self.strs.push(0);
        off
    }
    fn word(&mut self, v: u32) -> &mut Self {
        self.types.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn ty(&mut self, name: &str, kind: u32, kflag: bool, vlen: u32, size_or_type: u32) -> &mut Self {
        let n = self.name(name);
        let info = (u32::from(kflag) << 31) | (kind << 24) | vlen;
        self.word(n).word(info).word(size_or_type)
    }
    fn int(&mut self, name: &str, size: u32) -> &mut Self {
        self.ty(name, KIND_INT, false, 0, size).word(size * 8)
    }
    fn member(&mut self, name: &str, type_id: u32, offset: u32) -> &mut Self {
        let n = self.name(name);
        self.word(n).word(type_id).word(offset)
    }
    fn build(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&BTF_MAGIC.to_le_bytes());
        out.extend_from_slice(&[BTF_VERSION, 0]);
        for v in [
            HEADER_LEN as u32,
            0,
            self.types.len() as u32,
            self.types.len() as u32,
            self.strs.len() as u32,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.types);
        out.extend_from_slice(&self.strs);
        out
    }
}

/// ```c
/// struct outer {                       // id 7, kind_flag set
///     int a;                           // bit 0
///     const union {                    // bit 32 (via CONST id 6)
///         int b;                       //   +0
///         struct { int c; int d; };    //   +0 (id 4)
///     };
///     int e : 3;                       // bit 96
///     int f;                           // bit 128
/// };
/// ```
/// plus records of other kinds so the walk has to size them correctly.
fn tiny_blob() -> Vec<u8> {
    let mut b = Builder::new();
    b.int("int", 4); // 1
    let (x, y) = (b.name("X"), b.name("Y"));
    b.ty("", KIND_ENUM, false, 2, 4) // 2: enum { X, Y }, 8 bytes per value
        .word(x)
        .word(0)
        .word(y)
        .word(1);
    b.ty("", KIND_FUNC_PROTO, false, 1, 1).word(0).word(1); // 3
    b.ty("", KIND_STRUCT, false, 2, 8) // 4
        .member("c", 1, 0)
        .member("d", 1, 32);
    b.ty("", KIND_UNION, false, 2, 8) // 5
        .member("b", 1, 0)
        .member("", 4, 0);
    b.ty("", KIND_CONST, false, 0, 5); // 6
    b.ty("outer", KIND_STRUCT, true, 4, 24) // 7
        .member("a", 1, 0)
        .member("", 6, 32)
        .member("e", 1, (3 << 24) | 96)
        .member("f", 1, 128);
    b.ty("", KIND_ARRAY, false, 0, 0).word(1).word(1).word(4); // 8
    b.ty("v", KIND_VAR, false, 0, 1).word(1); // 9
    b.ty(".data", KIND_DATASEC, false, 1, 4).word(9).word(0).word(4); // 10
    b.ty("t", KIND_DECL_TAG, false, 0, 7).word(u32::MAX); // 11
    b.ty("E64", KIND_ENUM64, false, 1, 8).word(x).word(1).word(2); // 12
    b.ty("outer", KIND_FWD, false, 0, 0); // 13
    b.ty("legacy", KIND_STRUCT, false, 2, 8) // 14
        .member("whole", 1, 0)
        .member("narrow", 15, 32);
    b.ty("int", KIND_INT, false, 0, 4).word(3); // 15: a 3-bit int
    b.ty("dup", KIND_STRUCT, false, 1, 4).member("x", 1, 0); // 16
    b.ty("dup", KIND_UNION, false, 1, 8).member("x", 1, 0); // 17
    b.build()
}

#[test]
fn tiny_blob_nested_lookup() {
    let btf = Btf::parse(tiny_blob()).expect("hand-built blob parses");
    assert_eq!(btf.type_pos.len() - 1, 17);
    assert!(btf.has_struct("outer"));
    assert!(!btf.has_struct("X"));
    assert_eq!(btf.struct_size("outer"), Some(24));
    assert_eq!(btf.struct_size("nope"), None);
    assert!(btf.has_struct("dup"));
    assert_eq!(btf.struct_size("dup"), None);
    assert!(matches!(
        btf.member_offset("dup", "x"),
        Err(BtfError::AmbiguousStruct { definitions: 2, .. })
    ));

    assert_eq!(btf.member_offset("outer", "a").unwrap(), 0);
    assert_eq!(btf.member_offset("outer", "b").unwrap(), 4);
    assert_eq!(btf.member_offset("outer", "c").unwrap(), 4);
    assert_eq!(btf.member_offset("outer", "d").unwrap(), 8);
    assert_eq!(btf.member_offset("outer", "f").unwrap(), 16);
    assert_eq!(btf.member_offset("legacy", "whole").unwrap(), 0);

    assert!(matches!(
        btf.member_offset("outer", "e"),
        Err(BtfError::Bitfield { .. })
    ));
    assert!(matches!(
        btf.member_offset("legacy", "narrow"),
        Err(BtfError::Bitfield { .. })
    ));
    assert!(matches!(
        btf.member_offset("outer", "zz"),
        Err(BtfError::MemberNotFound { .. })
    ));
    assert!(matches!(
        btf.member_offset("outer", ""),
        Err(BtfError::MemberNotFound { .. })
    ));
    assert!(matches!(
        btf.member_offset("outer", "a."),
        Err(BtfError::MemberNotFound { .. })
    ));
    assert!(matches!(
        btf.member_offset("outer", "a.b"),
        Err(BtfError::NotAggregate { .. })
    ));
    assert!(matches!(
        btf.member_offset("nope", "a"),
        Err(BtfError::StructNotFound(_))
    ));
}

#[test]
fn real_vmlinux_offsets() {
    let Some(data) = real_blob() else { return };
    let start = std::time::Instant::now();
    let btf = Btf::parse(data).expect("kernel BTF parses");
    eprintln!("parsed {VMLINUX_BTF_PATH} in {:?}: {btf:?}", start.elapsed());

    assert_eq!(btf.member_offset("sock_common", "skc_state").unwrap(), 18);
    assert_eq!(btf.member_offset("sock_common", "skc_family").unwrap(), 16);
    assert_eq!(btf.member_offset("sock", "__sk_common").unwrap(), 0);
    assert_eq!(btf.member_offset("sock", "__sk_common.skc_state").unwrap(), 18);
    assert!(btf.has_struct("sock"));
    assert!(btf.has_struct("tcp_sock"));
    assert!(btf.struct_size("sock_common").unwrap() >= 20);
    assert!(matches!(
        btf.member_offset("sock_common", "skc_reuseport"),
        Err(BtfError::Bitfield { .. })
    ));
    assert!(matches!(
        btf.member_offset("sock_common", "no_such_member"),
        Err(BtfError::MemberNotFound { .. })
    ));
    assert!(!btf.has_struct("no_such_struct_graceful"));

    let via_fs = Btf::from_sys_fs().expect("from_sys_fs");
    assert_eq!(via_fs.member_offset("sock_common", "skc_state").unwrap(), 18);
}

#[test]
fn missing_file_is_actionable() {
    let err = Btf::from_path("/nonexistent/graceful/vmlinux").unwrap_err();
    assert!(matches!(err, BtfError::NotFound { .. }));
    assert!(err.to_string().contains("CONFIG_DEBUG_INFO_BTF=y"), "{err}");
}

#[test]
fn header_errors() {
    let good = tiny_blob();
    let mut bad = good.clone();
    bad[0] = 0;
    assert!(matches!(Btf::parse(bad), Err(BtfError::BadMagic(_))));
    let mut bad = good.clone();
    bad.swap(0, 1);
    assert!(matches!(Btf::parse(bad), Err(BtfError::WrongEndian)));
    let mut bad = good.clone();
    bad[2] = 2;
    assert!(matches!(Btf::parse(bad), Err(BtfError::UnsupportedVersion(2))));
    let mut bad = good.clone();
    bad[4..8].copy_from_slice(&8u32.to_le_bytes());
    assert!(matches!(Btf::parse(bad), Err(BtfError::Malformed(_))));
    let mut bad = good.clone();
    bad[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(Btf::parse(bad), Err(BtfError::Malformed(_))));
    let mut bad = good;
    bad[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(Btf::parse(bad), Err(BtfError::Malformed(_))));
    assert!(Btf::parse(Vec::new()).is_err());
}

#[test]
fn hostile_structures_error_instead_of_hanging() {
    // Huge vlen on the last record.
    let mut b = Builder::new();
    b.int("int", 4);
    b.ty("s", KIND_STRUCT, false, 0xffff, 4).member("a", 1, 0);
    assert!(matches!(Btf::parse(b.build()), Err(BtfError::Malformed(_))));

    // Unknown kind.
    let mut b = Builder::new();
    b.ty("x", 31, false, 0, 0);
    assert!(matches!(
        Btf::parse(b.build()),
        Err(BtfError::UnknownKind { id: 1, kind: 31 })
    ));

    // A struct whose anonymous members are itself, twice: unbounded
    // recursion and exponential fan-out if unchecked.
    let mut b = Builder::new();
    b.ty("loop", KIND_STRUCT, false, 2, 8)
        .member("", 1, 0)
        .member("", 1, 0);
    let btf = Btf::parse(b.build()).unwrap();
    assert!(matches!(
        btf.member_offset("loop", "x"),
        Err(BtfError::Malformed(_))
    ));

    // A typedef cycle reached through an anonymous member.
    let mut b = Builder::new();
    b.ty("s", KIND_STRUCT, false, 1, 4).member("", 2, 0);
    b.ty("t", KIND_TYPEDEF, false, 0, 3);
    b.ty("u", KIND_TYPEDEF, false, 0, 2);
    let btf = Btf::parse(b.build()).unwrap();
    assert!(matches!(btf.member_offset("s", "x"), Err(BtfError::Malformed(_))));

    // Dangling member type id and name offset.
    let mut b = Builder::new();
    b.ty("s", KIND_STRUCT, false, 1, 4).member("", 99, 0);
    let btf = Btf::parse(b.build()).unwrap();
    assert!(matches!(btf.member_offset("s", "x"), Err(BtfError::Malformed(_))));
    let mut b = Builder::new();
    b.ty("s", KIND_STRUCT, false, 1, 4).word(1 << 20).word(0).word(0);
    let btf = Btf::parse(b.build()).unwrap();
    assert!(matches!(btf.member_offset("s", "x"), Err(BtfError::Malformed(_))));
}

fn poke(btf: &Btf) {
    for (s, m) in [
        ("sock_common", "skc_state"),
        ("sock", "__sk_common.skc_family"),
        ("outer", "d"),
        ("tcp_sock", "snd_una"),
    ] {
        let _ = btf.member_offset(s, m);
        let _ = btf.struct_size(s);
    }
}

#[test]
fn truncated_and_garbage_inputs_do_not_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let tiny = tiny_blob();
    for len in 0..tiny.len() {
        assert!(Btf::parse(tiny[..len].to_vec()).is_err(), "prefix {len} parsed");
    }

    for _ in 0..2000 {
        let len = rng.below(512);
        let mut junk: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let _ = Btf::parse(junk.clone());
        // Also with a plausible header, so the type walk sees the garbage.
        if junk.len() >= HEADER_LEN {
            let body = (junk.len() - HEADER_LEN) as u32;
            let split = rng.below(body as usize + 1) as u32;
            junk[..4].copy_from_slice(&[0x9f, 0xeb, 1, 0]);
            for (i, v) in [HEADER_LEN as u32, 0, split, split, body - split]
                .iter()
                .enumerate()
            {
                junk[4 + 4 * i..8 + 4 * i].copy_from_slice(&v.to_le_bytes());
            }
            if let Ok(btf) = Btf::parse(junk) {
                poke(&btf);
            }
        }
    }

    // Single-byte corruptions of a valid blob reach every code path with
    // otherwise-consistent data.
    for _ in 0..2000 {
        let mut blob = tiny.clone();
        let at = rng.below(blob.len());
        blob[at] = rng.next() as u8;
        if let Ok(btf) = Btf::parse(blob) {
            poke(&btf);
        }
    }

    let Some(real) = real_blob() else { return };
    // Raw prefixes: the header then promises more than is present.
    let mut lens: Vec<usize> = (0..=64).collect();
    lens.extend((0..200).map(|_| rng.below(real.len())));
    lens.push(real.len() - 1);
    for len in lens {
        assert!(Btf::parse(real[..len].to_vec()).is_err(), "prefix {len} parsed");
    }
    // Type section cut at arbitrary points with a header that agrees, so
    // the walker itself meets a truncated record.
    let hdr_len = read_u32(&real, 4).unwrap() as usize;
    let types = section(
        hdr_len,
        read_u32(&real, 8).unwrap(),
        read_u32(&real, 12).unwrap(),
        real.len(),
        "t",
    )
    .unwrap();
    let strs = section(
        hdr_len,
        read_u32(&real, 16).unwrap(),
        read_u32(&real, 20).unwrap(),
        real.len(),
        "s",
    )
    .unwrap();
    for i in 0..24 {
        let cut = if i < 8 { i * 5 } else { rng.below(types.len()) };
        let mut blob = real[..hdr_len].to_vec();
        blob[8..12].copy_from_slice(&0u32.to_le_bytes());
        blob[12..16].copy_from_slice(&(cut as u32).to_le_bytes());
        blob[16..20].copy_from_slice(&(cut as u32).to_le_bytes());
        blob.extend_from_slice(&real[types.start..types.start + cut]);
        blob.extend_from_slice(&real[strs.clone()]);
        if let Ok(btf) = Btf::parse(blob) {
            poke(&btf);
        }
    }
    // And random corruption of the real blob.
    for _ in 0..16 {
        let mut blob = real.clone();
        for _ in 0..8 {
            let at = types.start + rng.below(types.len());
            blob[at] = rng.next() as u8;
        }
        if let Ok(btf) = Btf::parse(blob) {
            poke(&btf);
        }
    }
}
