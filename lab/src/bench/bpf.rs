//! The few bpf(2) calls the benches need (no bpftool on these machines):
//! which programs are loaded, and what each of the agent's maps costs.

use std::{
    collections::HashMap,
    ffi::CString,
    io,
    os::{
        fd::{FromRawFd as _, OwnedFd},
        unix::ffi::OsStrExt as _,
    },
    path::Path,
};

const BPF_OBJ_GET: libc::c_long = 7;
const BPF_PROG_GET_NEXT_ID: libc::c_long = 11;
const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
const BPF_MAP_GET_FD_BY_ID: libc::c_long = 14;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_ENABLE_STATS: libc::c_long = 32;

/// `union bpf_attr`, zeroed beyond the fields a command uses.
type Attr = [u64; 16];

fn sys_bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a valid, writable buffer of the size we pass.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), std::mem::size_of::<Attr>()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn fd_by_id(cmd: libc::c_long, id: u32) -> io::Result<OwnedFd> {
    let mut attr: Attr = [0; 16];
    attr[0] = u64::from(id);
    let fd = sys_bpf(cmd, &mut attr)?;
    // SAFETY: the kernel just returned this new descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `bpf_prog_info` / `bpf_map_info` of a descriptor, as raw bytes.
fn info(fd: &OwnedFd) -> io::Result<[u8; 256]> {
    use std::os::fd::AsRawFd as _;
    let mut buf = [0u64; 32];
    let mut attr: Attr = [0; 16];
    attr[0] = fd.as_raw_fd() as u32 as u64 | ((std::mem::size_of_val(&buf) as u64) << 32);
    attr[1] = buf.as_mut_ptr() as u64;
    sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    let mut out = [0u8; 256];
    for (chunk, word) in out.chunks_exact_mut(8).zip(buf) {
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    Ok(out)
}

fn c_name(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// Every loaded program: its `bpf_prog_info`, raw.
fn loaded_programs() -> io::Result<Vec<[u8; 256]>> {
    let mut out = Vec::new();
    let mut id = 0u32;
    loop {
        let mut attr: Attr = [0; 16];
        attr[0] = u64::from(id);
        match sys_bpf(BPF_PROG_GET_NEXT_ID, &mut attr) {
            Ok(_) => id = (attr[0] >> 32) as u32,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(out),
            Err(e) => return Err(e),
        }
        // The program may have gone between the two calls.
        let Ok(fd) = fd_by_id(BPF_PROG_GET_FD_BY_ID, id) else {
            continue;
        };
        out.push(info(&fd)?);
    }
}

/// Names of every BPF program loaded on the machine.
pub fn loaded_program_names() -> io::Result<Vec<String>> {
    // struct bpf_prog_info: name[16] at offset 64.
    Ok(loaded_programs()?.iter().map(|i| c_name(&i[64..80])).collect())
}

/// The agent's programs that run on every connection: the sock_ops program
/// (its callbacks, under the default design); both copies of the state
/// program (every state change) and the destruction backstop (every
/// socket's end), under the tracepoint design or while a socket with
/// storage is left.
pub const PER_CONNECTION_PROGRAMS: [&str; 4] =
    ["sock_ops", "sock_set_state", "sock_state_twin", "sock_destroyed"];

/// Run time (ns) and run count of each of [`PER_CONNECTION_PROGRAMS`],
/// summed over every loaded copy, in that order. They only advance while
/// [`RunTimeStats`] is held.
pub fn per_connection_run_times() -> io::Result<[(u64, u64); 4]> {
    let word = |i: &[u8; 256], at: usize| u64::from_ne_bytes(i[at..at + 8].try_into().expect("8 bytes"));
    let mut out = [(0, 0); 4];
    for i in loaded_programs()? {
        // struct bpf_prog_info: run_time_ns at 192, run_cnt at 200.
        if let Some(k) = PER_CONNECTION_PROGRAMS
            .iter()
            .position(|n| *n == c_name(&i[64..80]))
        {
            out[k].0 += word(&i, 192);
            out[k].1 += word(&i, 200);
        }
    }
    Ok(out)
}

/// The kernel's run-time statistics of BPF programs, on while this is held
/// (`BPF_ENABLE_STATS`): nothing to restore, even if the bench dies.
pub struct RunTimeStats {
    _fd: OwnedFd,
}

impl RunTimeStats {
    pub fn enable() -> io::Result<Self> {
        let mut attr: Attr = [0; 16];
        attr[0] = 0; // BPF_STATS_RUN_TIME
        let fd = sys_bpf(BPF_ENABLE_STATS, &mut attr)?;
        // SAFETY: the kernel just returned this new descriptor to us.
        Ok(Self {
            _fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
        })
    }
}

/// How many loaded programs are graceful's state program, whoever loaded them.
pub fn state_programs_loaded() -> io::Result<usize> {
    Ok(loaded_program_names()?
        .iter()
        .filter(|n| n.as_str() == "sock_set_state")
        .count())
}

/// One BPF map, as `/proc/<pid>/fdinfo` and `bpf_map_info` describe it.
#[derive(Debug, Clone, Default)]
pub struct MapInfo {
    pub id: u32,
    pub name: String,
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    /// What the kernel accounts for the map itself (`memlock:`).
    pub memlock: u64,
}

impl MapInfo {
    pub fn type_name(&self) -> &'static str {
        match self.map_type {
            1 => "hash",
            2 => "array",
            5 => "percpu_hash",
            6 => "percpu_array",
            24 => "sk_storage",
            27 => "ringbuf",
            _ => "other",
        }
    }
}

/// Map id → file name of the maps pinned in `dir` (kernel map names stop at 15 characters).
fn pinned_names(dir: &Path) -> HashMap<u32, String> {
    let mut names = HashMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return names;
    };
    for entry in entries.flatten() {
        let Ok(path) = CString::new(entry.path().as_os_str().as_bytes()) else {
            continue;
        };
        let mut attr: Attr = [0; 16];
        attr[0] = path.as_ptr() as u64;
        let Ok(fd) = sys_bpf(BPF_OBJ_GET, &mut attr) else {
            continue;
        };
        // SAFETY: the kernel just returned this new descriptor to us.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        if let Ok(i) = info(&fd) {
            // struct bpf_map_info: id at offset 4.
            let id = u32::from_ne_bytes(i[4..8].try_into().expect("4 bytes"));
            names.insert(id, entry.file_name().to_string_lossy().into_owned());
        }
    }
    names
}

/// Every map a process holds a descriptor to, one entry per map, named
/// after its pin under `pin_dir/maps` if it has one.
pub fn maps_of(pid: u32, pin_dir: &Path) -> anyhow::Result<Vec<MapInfo>> {
    let pinned = pinned_names(&pin_dir.join("maps"));
    let mut maps: Vec<MapInfo> = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))? {
        let entry = entry?;
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if target.to_str() != Some("anon_inode:bpf-map") {
            continue;
        }
        let fd = entry.file_name();
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.to_string_lossy())) else {
            continue;
        };
        let field = |name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim())
                .and_then(|v| match v.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16).ok(),
                    None => v.parse().ok(),
                })
                .unwrap_or(0)
        };
        let id = field("map_id:") as u32;
        if maps.iter().any(|m| m.id == id) {
            continue;
        }
        // struct bpf_map_info: name[16] at offset 24.
        let name = pinned.get(&id).cloned().unwrap_or_else(|| {
            fd_by_id(BPF_MAP_GET_FD_BY_ID, id)
                .and_then(|fd| info(&fd))
                .map(|i| c_name(&i[24..40]))
                .unwrap_or_default()
        });
        maps.push(MapInfo {
            id,
            name,
            map_type: field("map_type:") as u32,
            key_size: field("key_size:") as u32,
            value_size: field("value_size:") as u32,
            max_entries: field("max_entries:") as u32,
            flags: field("map_flags:") as u32,
            memlock: field("memlock:"),
        });
    }
    maps.sort_by_key(|m| std::cmp::Reverse(m.memlock));
    Ok(maps)
}
