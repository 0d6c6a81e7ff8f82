//! Making sure the bpffs is there.

use std::{ffi::CString, io, path::Path};

const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// Whether `path` lies on a bpffs.
pub fn is_bpffs(path: &Path) -> io::Result<bool> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid C string and st a valid out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)]
    Ok(st.f_type as i64 == BPF_FS_MAGIC)
}

/// Mounts a bpffs at `path` if none is there.
pub fn ensure_mounted(path: &Path) -> io::Result<()> {
    if path.exists() && is_bpffs(path)? {
        return Ok(());
    }
    std::fs::create_dir_all(path)?;
    let target = CString::new(path.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    // SAFETY: all arguments are valid C strings or null.
    let rc = unsafe {
        libc::mount(
            c"bpf".as_ptr(),
            target.as_ptr(),
            c"bpf".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
