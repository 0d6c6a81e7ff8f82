use super::*;

#[test]
fn parses_what_it_encodes_and_stops_at_a_torn_tail() {
    let mut buf = encode(3, libc::IN_CREATE | libc::IN_ISDIR, b"pod-a");
    buf.extend(encode(-1, libc::IN_Q_OVERFLOW, b""));
    buf.extend(encode(7, libc::IN_DELETE | libc::IN_ISDIR, &[b'x'; 16]));
    let mut torn = encode(9, libc::IN_CREATE, b"cut");
    torn.truncate(20);
    buf.extend(torn);
    let got: Vec<_> = events(&buf).collect();
    assert_eq!(got.len(), 3);
    assert_eq!((got[0].wd, got[0].name), (3, OsStr::new("pod-a")));
    assert_eq!(
        (got[1].wd, got[1].mask, got[1].name),
        (-1, libc::IN_Q_OVERFLOW, OsStr::new(""))
    );
    assert_eq!(got[2].name.len(), 16);
}

#[test]
fn the_kernel_reports_a_new_directory() {
    let dir = std::env::temp_dir().join(format!("graceful-inotify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ino = Inotify::new().unwrap();
    let wd = ino.add_watch(&dir, DIR_MASK).unwrap();
    assert_eq!(
        ino.add_watch(&dir, DIR_MASK).unwrap(),
        wd,
        "same inode, same watch"
    );
    std::fs::create_dir(dir.join("child")).unwrap();
    std::fs::write(dir.join("file"), b"").unwrap();
    let mut buf = [0u8; 4096];
    let n = ino.read(&mut buf).unwrap();
    let got: Vec<_> = events(&buf[..n])
        .map(|e| (e.wd, e.mask, e.name.to_owned()))
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(got[0], (wd, libc::IN_CREATE | libc::IN_ISDIR, "child".into()));
    assert_eq!(got[1], (wd, libc::IN_CREATE, "file".into()));
}
