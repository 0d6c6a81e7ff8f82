//! Which sock_ops programs run at a cgroup, by name: the sock_ops design
//! counts by each socket's callback flags, and another program at the root
//! that sets a socket's flags without keeping the ones already set (an
//! assignment instead of an OR) would take graceful's away. No such program
//! is known, but an operator should see any program there.

use std::{
    ffi::c_long,
    io,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    path::Path,
};

const BPF_PROG_GET_FD_BY_ID: c_long = 13;
const BPF_OBJ_GET_INFO_BY_FD: c_long = 15;
const BPF_PROG_QUERY: c_long = 16;
const BPF_CGROUP_SOCK_OPS: u64 = 3;
const BPF_F_QUERY_EFFECTIVE: u64 = 1;

/// `union bpf_attr`, zeroed beyond the fields a command uses.
type Attr = [u64; 16];

fn sys_bpf(cmd: c_long, attr: &mut Attr) -> io::Result<c_long> {
    // SAFETY: `attr` is a valid, writable buffer of the size passed.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), std::mem::size_of::<Attr>()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// The program `id`'s name, if it is still loaded.
fn name(id: u32) -> Option<String> {
    let mut attr: Attr = [0; 16];
    attr[0] = u64::from(id);
    let fd = sys_bpf(BPF_PROG_GET_FD_BY_ID, &mut attr).ok()?;
    // SAFETY: the kernel just returned this new descriptor to us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut info = [0u64; 32];
    let mut attr: Attr = [0; 16];
    attr[0] = fd.as_raw_fd() as u32 as u64 | ((std::mem::size_of_val(&info) as u64) << 32);
    attr[1] = info.as_mut_ptr() as u64;
    sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr).ok()?;
    // struct bpf_prog_info: name[16] at byte 64.
    let bytes: Vec<u8> = info[8..10].iter().flat_map(|w| w.to_ne_bytes()).collect();
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
}

/// The sock_ops programs at `root` other than graceful's: what the agent
/// warns of and doctor names. Empty when the query fails.
pub fn foreign_sock_ops(root: &Path) -> Vec<String> {
    sock_ops_programs(root)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n != graceful_common::names::PROG_SOCK_OPS)
        .collect()
}

/// The names of the sock_ops programs that run for the sockets of the
/// cgroup directory `dir` (at the root: for every socket).
pub fn sock_ops_programs(dir: &Path) -> io::Result<Vec<String>> {
    let cgroup = std::fs::File::open(dir)?;
    let mut ids = [0u32; 64];
    let mut attr: Attr = [0; 16];
    attr[0] = cgroup.as_raw_fd() as u32 as u64 | (BPF_CGROUP_SOCK_OPS << 32);
    attr[1] = BPF_F_QUERY_EFFECTIVE;
    attr[2] = ids.as_mut_ptr() as u64;
    attr[3] = ids.len() as u64;
    sys_bpf(BPF_PROG_QUERY, &mut attr)?;
    let count = (attr[3] as u32 as usize).min(ids.len());
    Ok(ids[..count].iter().filter_map(|id| name(*id)).collect())
}
