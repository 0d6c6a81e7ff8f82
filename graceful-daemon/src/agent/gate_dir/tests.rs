use std::{ffi::CString, path::PathBuf};

use super::*;

/// A 64 KiB tmpfs on a directory of the test's own, unmounted (and the
/// directory removed) when dropped.
struct TinyFs(PathBuf);

impl TinyFs {
    fn mount(name: &str) -> TinyFs {
        let dir = std::env::temp_dir().join(format!("graceful-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: the strings are live and NUL-terminated for the call.
        let rc = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                c"size=64k".as_ptr().cast(),
            )
        };
        assert_eq!(
            rc,
            0,
            "mount tmpfs on {}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        );
        TinyFs(dir)
    }
}

impl Drop for TinyFs {
    fn drop(&mut self) {
        let target = CString::new(self.0.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: as in `mount`.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        let _ = std::fs::remove_dir(&self.0);
    }
}

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
    let gate = fs.0.join("gate");
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
