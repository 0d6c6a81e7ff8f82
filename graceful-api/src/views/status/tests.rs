use super::*;

/// The agent's answer as it goes on the wire, spelled as probes and
/// scripts read it, and read back the same.
#[test]
fn the_wire_spells_every_state_in_lowercase_and_reads_back() {
    for (kube_api, spelled) in [
        (KubeApi::Connected, "connected"),
        (KubeApi::Connecting, "connecting"),
        (KubeApi::Lost, "lost"),
        (KubeApi::Standalone, "standalone"),
    ] {
        let s = Status {
            ready: true,
            programs: Programs::Unreadable,
            pods: 3,
            kube_api,
            version: "0.1.0".into(),
        };
        let wire = serde_json::to_string(&s).unwrap();
        assert_eq!(
            wire,
            format!(
                r#"{{"ready":true,"programs":"unreadable","pods":3,"kube_api":"{spelled}","version":"0.1.0"}}"#
            )
        );
        assert_eq!(serde_json::from_str::<Status>(&wire).unwrap(), s);
    }
}

#[test]
fn an_unknown_state_is_an_error_that_names_it() {
    let e = serde_json::from_str::<Status>(
        r#"{"ready":false,"programs":"attached","pods":0,"kube_api":"sleeping","version":"0.1.0"}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("sleeping"), "{e}");
}
