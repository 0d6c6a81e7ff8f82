use super::*;

#[test]
fn reads_kib_fields() {
    let status = "Name:\tgraceful\nVmHWM:\t   26956 kB\nVmRSS:\t   10404 kB\nRssAnon:\t    1816 kB\n";
    assert_eq!(kib(status, "VmRSS:"), Some(10404));
    assert_eq!(kib(status, "RssAnon:"), Some(1816));
    assert_eq!(kib(status, "RssFile:"), None);
}

#[test]
fn reads_this_process() {
    let me = ProcMem::read(std::process::id()).unwrap();
    assert!(me.rss > 0 && me.hwm >= me.rss, "{me:?}");
    // RssShmem is the rest of VmRSS.
    assert!(me.anon + me.file <= me.rss, "{me:?}");
    assert!(
        me.private > 0 && me.private <= me.rss && me.pss <= me.rss,
        "{me:?}"
    );
    assert!(children(std::process::id()).unwrap().is_empty());
}
