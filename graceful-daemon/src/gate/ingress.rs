//! Attaches the `cgroup_skb/ingress` program to a draining scope's cgroup
//! for the length of a `quiet` drain, and only then.

use std::{
    fs::File,
    path::Path,
    sync::{Arc, Mutex},
};

use crate::sync;
use aya::{
    programs::{cgroup_skb::CgroupSkbLinkId, CgroupAttachMode, CgroupSkb, CgroupSkbAttachType},
    Ebpf,
};
use graceful_common::names;
use tracing::warn;

/// The loaded program, shared by every drain.
pub struct Ingress {
    ebpf: Arc<Mutex<Ebpf>>,
}

impl Ingress {
    /// Loads the program from the agent's object (which the agent's
    /// repair pass shares).
    pub fn load(ebpf: Arc<Mutex<Ebpf>>) -> anyhow::Result<Arc<Self>> {
        {
            let mut guard = sync::lock(&ebpf);
            let prog: &mut CgroupSkb = guard
                .program_mut(names::PROG_INGRESS)
                .ok_or_else(|| anyhow::anyhow!("the ingress program is missing from the object"))?
                .try_into()?;
            prog.load()?;
        }
        Ok(Arc::new(Self { ebpf }))
    }

    /// Attaches to the cgroup directory `dir` until the guard drops.
    pub fn attach(self: &Arc<Self>, dir: &Path) -> anyhow::Result<Attachment> {
        let file = File::open(dir)?;
        let mut ebpf = sync::lock(&self.ebpf);
        let prog: &mut CgroupSkb = ebpf
            .program_mut(names::PROG_INGRESS)
            .expect("loaded")
            .try_into()?;
        // A BPF link takes no attach flags, and links on a cgroup always run
        // beside other programs: Single is the mode that passes no flags.
        let link = prog.attach(&file, CgroupSkbAttachType::Ingress, CgroupAttachMode::Single)?;
        Ok(Attachment {
            ingress: self.clone(),
            link: Some(link),
        })
    }
}

pub struct Attachment {
    ingress: Arc<Ingress>,
    link: Option<CgroupSkbLinkId>,
}

impl Drop for Attachment {
    fn drop(&mut self) {
        let Some(link) = self.link.take() else { return };
        let mut ebpf = sync::lock(&self.ingress.ebpf);
        let detached = ebpf
            .program_mut(names::PROG_INGRESS)
            .and_then(|p| <&mut CgroupSkb>::try_from(p).ok())
            .map(|p| p.detach(link));
        if !matches!(detached, Some(Ok(()))) {
            warn!("could not detach the ingress program from a drained cgroup");
        }
    }
}
