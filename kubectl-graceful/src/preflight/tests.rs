use super::*;

fn result(levels: &[(Level, &str)]) -> NodeResult {
    NodeResult {
        node: "node-a".into(),
        findings: levels
            .iter()
            .map(|(l, check)| finding(*l, check, format!("{check} says")))
            .collect(),
    }
}

#[test]
fn a_nodes_line_names_every_failure_else_every_warning_else_its_kernel() {
    let r = result(&[
        (Level::Ok, "kernel"),
        (Level::Fail, "bpffs"),
        (Level::Warn, "mesh"),
        (Level::Fail, "seccomp"),
    ]);
    assert_eq!(
        node_line(&r),
        ["node-a", "FAIL", "bpffs: bpffs says; seccomp: seccomp says"]
    );
    let r = result(&[(Level::Ok, "kernel"), (Level::Warn, "image-volume")]);
    assert_eq!(node_line(&r)[1], "ready, with warnings");
    assert_eq!(node_line(&r)[2], "image-volume: image-volume says");
    let r = result(&[(Level::Ok, "kernel"), (Level::Ok, "btf")]);
    assert_eq!(node_line(&r)[1..], ["ready", "kernel kernel says"]);
}
