use graceful_test_support::tinyfs::TinyFs;

use super::*;

#[test]
fn a_full_disk_names_the_file_and_leaves_no_temporary_copy() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: mounting a tmpfs needs root");
        return;
    }
    let fs = TinyFs::mount("gate-dir-full");
    // A "graceful-wait" of 1 MiB, outside the tiny filesystem.
    let src = std::env::temp_dir().join(format!("graceful-wait-big-{}", std::process::id()));
    std::fs::write(&src, vec![0x7f; 1 << 20]).unwrap();
    let gate = fs.dir().join("gate");
    let e = open(&gate, Some(src.clone()), None).unwrap_err();
    let _ = std::fs::remove_file(&src);
    let text = format!("{e:#}");
    let tmp = gate.join(".graceful-wait.tmp");
    assert!(
        text.contains(&tmp.display().to_string()) && text.contains("os error 28"),
        "{text}"
    );
    assert!(!tmp.exists(), "the failed copy was left at {}", tmp.display());
    assert!(!gate.join("graceful-wait").exists());
}
