use super::*;

#[test]
fn container_ids_lose_their_scheme() {
    let id = "4e1d0b4a5b6c7d8e9f00112233445566778899aabbccddeeff00112233445566";
    for scheme in ["containerd", "cri-o", "docker"] {
        assert_eq!(
            split_container_id(&format!("{scheme}://{id}")),
            Some((Some(scheme), id))
        );
    }
    assert_eq!(split_container_id(id), Some((None, id)));
    assert_eq!(split_container_id("containerd://"), None);
    assert_eq!(split_container_id(""), None);
}

#[test]
fn a_pod_without_uid_is_not_taken() {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "x", "namespace": "default"},
        "spec": {"containers": [{"name": "app"}]}
    }))
    .unwrap();
    assert!(PodInfo::from_pod(&pod).is_none());
}
