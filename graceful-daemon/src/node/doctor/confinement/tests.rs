use super::*;

#[test]
fn apparmor_labels_as_the_kernel_writes_them() {
    assert_eq!(
        apparmor("unconfined\n"),
        Label::AppArmor {
            profile: "unconfined".into(),
            mode: None
        }
    );
    assert_eq!(
        apparmor("cri-containerd.apparmor.d (enforce)\n"),
        Label::AppArmor {
            profile: "cri-containerd.apparmor.d".into(),
            mode: Some("enforce".into())
        }
    );
    assert_eq!(judge(&apparmor("unconfined")).0, Level::Ok);
    let (level, text) = judge(&apparmor("cri-containerd.apparmor.d (enforce)"));
    assert_eq!(level, Level::Fail);
    assert!(text.contains("appArmorProfile to Unconfined"), "{text}");
    assert_eq!(judge(&apparmor("crio-default (complain)")).0, Level::Ok);
    assert_eq!(judge(&apparmor("my-agent-profile (enforce)")).0, Level::Warn);
}

#[test]
fn selinux_container_types_fail_only_where_enforced() {
    let label = |context: &str, enforcing| Label::SeLinux {
        context: context.into(),
        enforcing,
    };
    let (level, text) = judge(&label("system_u:system_r:container_t:s0:c12,c34", true));
    assert_eq!(level, Level::Fail);
    assert!(text.contains("spc_t"), "{text}");
    assert_eq!(
        judge(&label("system_u:system_r:container_t:s0:c12,c34", false)).0,
        Level::Ok
    );
    assert_eq!(judge(&label("system_u:system_r:spc_t:s0", true)).0, Level::Ok);
}

#[test]
fn lockdown_and_seccomp_fields() {
    assert_eq!(lockdown("none [integrity] confidentiality\n"), Some("integrity"));
    assert_eq!(lockdown("[none] integrity confidentiality"), Some("none"));
    assert_eq!(lockdown("garbage"), None);
    let status =
        "Name:\tgraceful\nSeccomp:\t2\nSeccomp_filters:\t1\nSpeculation_Store_Bypass:\tthread vulnerable\n";
    assert_eq!(seccomp_mode(status), (2, 1));
    assert_eq!(seccomp_mode("Name:\tx\n"), (0, 0));
}
