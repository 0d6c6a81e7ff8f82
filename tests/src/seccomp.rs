//! A seccomp filter that refuses one system call with EPERM, as a
//! runtime's profile refuses what it does not allow, installed in a child
//! between fork and exec (`pre_exec`). Classic BPF, the kernel's own
//! format: no library.

/// `AUDIT_ARCH_*` of this build's target: the filter lets calls of any
/// other architecture's numbering through untouched.
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xc000_00b7;

const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Makes the calling process (and what it executes) get EPERM from
/// system call `nr`. For `CommandExt::pre_exec`: only async-signal-safe
/// calls (prctl).
pub fn refuse(nr: libc::c_long) -> std::io::Result<()> {
    let (ld, jeq, ret) = (
        (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
        (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        (libc::BPF_RET | libc::BPF_K) as u16,
    );
    // struct seccomp_data: nr at 0, arch at 4.
    let mut prog = [
        stmt(ld, 4),
        jump(jeq, ARCH, 0, 3),
        stmt(ld, 0),
        jump(jeq, nr as u32, 0, 1),
        stmt(ret, SECCOMP_RET_ERRNO | libc::EPERM as u32),
        stmt(ret, SECCOMP_RET_ALLOW),
    ];
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: prctl with plain integers, then with a pointer to a filter
    // that outlives the call (the kernel copies it).
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &fprog as *const libc::sock_fprog,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
