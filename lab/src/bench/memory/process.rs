//! One process's memory as the kernel accounts it: `/proc/<pid>/status`
//! (VmRSS, its anonymous and file-backed parts, VmHWM) and
//! `/proc/<pid>/smaps_rollup` (PSS, and the private pages: what ending the
//! process would free). File-backed pages are code a process touched: a
//! keeper that ran in the agent's executable mapped 6.9 MiB of the agent's
//! code (shared with the agent, counted in both VmRSS), which is why it is
//! a program of its own.

use anyhow::Context as _;

/// In KiB.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ProcMem {
    pub(super) rss: u64,
    pub(super) hwm: u64,
    pub(super) anon: u64,
    pub(super) file: u64,
    pub(super) pss: u64,
    /// Private_Clean + Private_Dirty: pages no other process maps.
    pub(super) private: u64,
}

impl ProcMem {
    pub(super) fn read(pid: u32) -> anyhow::Result<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .with_context(|| format!("read /proc/{pid}/status"))?;
        let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
            .with_context(|| format!("read /proc/{pid}/smaps_rollup"))?;
        let status_kib =
            |name| kib(&status, name).with_context(|| format!("no {name} in /proc/{pid}/status"));
        let rollup_kib =
            |name| kib(&rollup, name).with_context(|| format!("no {name} in /proc/{pid}/smaps_rollup"));
        Ok(Self {
            rss: status_kib("VmRSS:")?,
            hwm: status_kib("VmHWM:")?,
            anon: status_kib("RssAnon:")?,
            file: status_kib("RssFile:")?,
            pss: rollup_kib("Pss:")?,
            private: rollup_kib("Private_Clean:")? + rollup_kib("Private_Dirty:")?,
        })
    }

    /// "VmRSS 10.2 MiB (anon 1.8, file 8.4), VmHWM 26.9 MiB".
    pub(super) fn line(&self) -> String {
        format!(
            "VmRSS {:.1} MiB (anon {:.1}, file {:.1}), VmHWM {:.1} MiB; PSS {:.1} MiB, private {:.1} MiB",
            mib(self.rss),
            mib(self.anon),
            mib(self.file),
            mib(self.hwm),
            mib(self.pss),
            mib(self.private)
        )
    }
}

/// The value of the first line starting `name` (`VmRSS:    1234 kB`).
fn kib(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    line[name.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

pub(super) fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The children of `pid` (its main thread's), from
/// `/proc/<pid>/task/<pid>/children`.
pub(super) fn children(pid: u32) -> anyhow::Result<Vec<u32>> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    let text = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    Ok(text.split_whitespace().filter_map(|p| p.parse().ok()).collect())
}

#[cfg(test)]
mod tests;
