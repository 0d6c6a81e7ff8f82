use super::*;

fn varint(v: u64) -> Vec<u8> {
    let mut b = Vec::new();
    put_varint(&mut b, v);
    b
}

#[test]
fn varint_round_trips_at_every_width_boundary() {
    // SPOE.txt: 1 byte below 240, 2 below 2288, 3 below 264432, 4 below
    // 33818864, 5 below 4328786160.
    let cases = [
        (0, 1),
        (239, 1),
        (240, 2),
        (2287, 2),
        (2288, 3),
        (264431, 3),
        (264432, 4),
        (33818863, 4),
        (33818864, 5),
        (u32::MAX as u64, 5),
        (4328786159, 5),
        (4328786160, 6),
        (1 << 50, 8),
        (u64::MAX - 1, 10),
        (u64::MAX, 10),
    ];
    for (v, len) in cases {
        let b = varint(v);
        assert_eq!(b.len(), len, "{v}: {b:02x?}");
        let mut r = Reader::new(&b);
        assert_eq!(r.varint().unwrap(), v, "{b:02x?}");
        assert!(r.is_empty());
    }
    // As HAProxy writes them.
    assert_eq!(varint(240), [0xF0, 0x00]);
    assert_eq!(varint(16380), [0xFC, 0xF0, 0x06]);
}

#[test]
fn varint_rejects_truncation_and_overflow() {
    assert!(Reader::new(&[0xF0]).varint().is_err());
    assert!(Reader::new(&[0xF0, 0x80]).varint().is_err());
    assert!(Reader::new(&[0xFF; 12]).varint().is_err());
    assert!(
        Reader::new(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F])
            .varint()
            .is_err()
    );
}

/// A HAPROXY-HELLO as HAProxy 2.6 sends it (spoe_prepare_hahello_frame).
fn haproxy_hello() -> Vec<u8> {
    let mut f = vec![HAPROXY_HELLO, 0, 0, 0, 1, 0, 0];
    let kv = |f: &mut Vec<u8>, k: &str, tag: u8, v: &[u8]| {
        f.push(k.len() as u8);
        f.extend_from_slice(k.as_bytes());
        f.push(tag);
        f.extend_from_slice(v);
    };
    kv(&mut f, "supported-versions", 8, b"\x032.0");
    kv(&mut f, "max-frame-size", 3, &varint(16380));
    kv(&mut f, "capabilities", 8, b"\x10pipelining,async");
    kv(&mut f, "engine-id", 8, b"\x05E-123");
    kv(&mut f, "healthcheck", 0x11, b"");
    let mut framed = (f.len() as u32).to_be_bytes().to_vec();
    framed.extend(f);
    framed
}

#[test]
fn parses_a_haproxy_hello() {
    let buf = haproxy_hello();
    let len = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
    assert_eq!(len, buf.len() - 4);
    let frame = Frame::parse(&buf[4..]).unwrap();
    assert_eq!((frame.kind, frame.flags), (HAPROXY_HELLO, FLAG_FIN));
    assert_eq!((frame.stream_id, frame.frame_id), (0, 0));
    let kv = frame.kv_list().unwrap();
    let names: Vec<&[u8]> = kv.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        names,
        [
            &b"supported-versions"[..],
            b"max-frame-size",
            b"capabilities",
            b"engine-id",
            b"healthcheck"
        ]
    );
    assert_eq!(kv[0].1, Value::Str(b"2.0"));
    assert_eq!(kv[1].1.as_u64(), Some(16380));
    assert_eq!(kv[2].1.as_bytes(), Some(&b"pipelining,async"[..]));
    assert_eq!(kv[4].1, Value::Bool(true));
    // Cut anywhere inside its items, it is an error, never a panic.
    for cut in 11..buf.len() - 1 {
        let f = Frame::parse(&buf[4..cut]).unwrap();
        let _ = f.kv_list();
    }
    assert!(Frame::parse(&buf[4..9]).is_err());
}

#[test]
fn parses_notify_messages_and_writes_an_ack() {
    let mut f = vec![NOTIFY, 0, 0, 0, 1];
    f.extend(varint(2288));
    f.extend(varint(7));
    f.extend(b"\x0dcheck-request\x03");
    f.extend(b"\x06method\x08\x03GET");
    f.extend(b"\x04path\x08\x07/attack");
    f.extend(b"\x03src\x06\x7f\x00\x00\x01");
    let frame = Frame::parse(&f).unwrap();
    assert_eq!((frame.stream_id, frame.frame_id), (2288, 7));
    let m = frame.messages().unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].name, b"check-request");
    assert_eq!(m[0].args[1], (&b"path"[..], Value::Str(b"/attack")));
    assert_eq!(m[0].args[2].1, Value::Ipv4([127, 0, 0, 1]));

    let ack = FrameWriter::new(ACK, 2288, 7)
        .set_var_str(SCOPE_TRANSACTION, "action", "deny")
        .finish();
    let mut want = vec![0, 0, 0, 0, ACK, 0, 0, 0, 1, 0xF0, 0x80, 0x00, 7];
    want.extend(b"\x01\x03\x02\x06action\x08\x04deny");
    want[3] = (want.len() - 4) as u8;
    assert_eq!(ack, want);
}
