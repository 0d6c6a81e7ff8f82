//! Whether a cgroup's processes still run: what tells a container's exit
//! from its connections closing.

use std::path::Path;

/// Whether any process in the cgroup `dir` or below still runs: listed in
/// `cgroup.procs` and not exiting. A process being killed closes its
/// sockets in do_exit after it is marked PF_EXITING but before it leaves
/// `cgroup.procs`, so the flag is what tells an exit from a close.
pub fn has_live_process(dir: &Path) -> bool {
    let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
        return false;
    };
    if procs
        .lines()
        .filter_map(|l| l.trim().parse::<u32>().ok())
        .any(process_alive)
    {
        return true;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .any(|e| has_live_process(&e.path()))
}

const PF_EXITING: u64 = 0x4;

fn process_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // After the command name, which may hold spaces and parentheses.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return false;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let (Some(state), Some(flags)) = (fields.first(), fields.get(6).and_then(|f| f.parse::<u64>().ok()))
    else {
        return false;
    };
    !matches!(*state, "Z" | "X" | "x") && flags & PF_EXITING == 0
}

#[cfg(test)]
mod tests;
