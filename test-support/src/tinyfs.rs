//! A tmpfs of 64 KiB on a directory of the test's own: a disk that fills
//! after a few writes. Unmounted, and the directory removed, when dropped.

use std::{
    ffi::CString,
    path::{Path, PathBuf},
};

pub struct TinyFs(PathBuf);

impl TinyFs {
    /// Mounts it on a new directory named after `name` (made unique).
    pub fn mount(name: &str) -> TinyFs {
        let dir = std::env::temp_dir().join(crate::unique(name));
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

    pub fn dir(&self) -> &Path {
        &self.0
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
