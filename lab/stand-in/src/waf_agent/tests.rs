use super::*;

fn haproxy_hello(versions: &str, max: u32) -> Vec<u8> {
    FrameWriter::new(spop::HAPROXY_HELLO, 0, 0)
        .kv_str("supported-versions", versions)
        .kv_u32("max-frame-size", max)
        .kv_str("capabilities", "pipelining,async")
        .finish()
}

#[test]
fn hello_agrees_on_version_2_and_the_smaller_frame_size() {
    for (max, agreed) in [(16380, 16380), (100_000, MAX_FRAME_SIZE), (1024, 1024)] {
        let buf = haproxy_hello("2.0", max);
        let Ok((reply, size, health)) = hello(&Frame::parse(&buf[4..]).unwrap()) else {
            panic!("hello refused");
        };
        assert_eq!((size, health), (agreed, false));
        let reply = Frame::parse(&reply[4..]).unwrap();
        assert_eq!((reply.kind, reply.flags), (spop::AGENT_HELLO, spop::FLAG_FIN));
        let kv = reply.kv_list().unwrap();
        assert_eq!(kv[0], (&b"version"[..], Value::Str(b"2.0")));
        assert_eq!(kv[1], (&b"max-frame-size"[..], Value::Uint32(agreed)));
        assert_eq!(kv[2], (&b"capabilities"[..], Value::Str(b"")));
    }
    let refused = |buf: Vec<u8>| hello(&Frame::parse(&buf[4..]).unwrap()).err().map(|f| f.0);
    assert_eq!(refused(haproxy_hello("1.0", 16380)), Some(8));
    assert_eq!(refused(haproxy_hello(" 3.0 , 2.1", 16380)), None);
    assert_eq!(refused(haproxy_hello("2.0", 255)), Some(9));
}

#[test]
fn denies_attack_in_path_or_query_only() {
    let msg = |name: &'static [u8], v: &'static [u8]| Message {
        name: b"check-request",
        args: vec![(&b"method"[..], Value::Str(b"GET")), (name, Value::Str(v))],
    };
    assert_eq!(verdict(&[msg(b"path", b"/x/attack")]), "deny");
    assert_eq!(verdict(&[msg(b"query", b"q=attack")]), "deny");
    assert_eq!(verdict(&[msg(b"headers", b"attack")]), "allow");
    assert_eq!(verdict(&[msg(b"path", b"/")]), "allow");
    assert_eq!(verdict(&[]), "allow");
}
