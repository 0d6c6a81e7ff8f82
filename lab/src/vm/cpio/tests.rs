use super::*;

#[test]
fn newc_entries_are_padded_and_parents_come_first() {
    let mut a = Archive::default();
    a.bytes("/etc/conf", "abcde", 0o644);
    a.char_dev("/dev/console", 5, 1);
    let paths: Vec<&str> = a.nodes.keys().map(String::as_str).collect();
    assert_eq!(paths, ["dev", "dev/console", "etc", "etc/conf"]);

    let mut w = Writer {
        out: Vec::new(),
        ino: 1,
        written: 0,
    };
    w.raw("etc/conf", 0o100644, 0, 0, b"abcde").unwrap();
    let out = String::from_utf8(w.out).unwrap();
    assert!(out.starts_with("070701"));
    // Header (110) + name and NUL (9), padded to 120; data (5) padded to 8.
    assert_eq!(out.len(), 128);
    assert_eq!(&out[110..119], "etc/conf\0");
    assert_eq!(&out[120..125], "abcde");
    // filesize and namesize fields.
    assert_eq!(&out[54..62], "00000005");
    assert_eq!(&out[94..102], "00000009");
}
