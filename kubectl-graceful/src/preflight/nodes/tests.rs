use super::*;

#[test]
fn versions_read_as_the_api_server_reports_them() {
    assert_eq!(minor("v1.37.2"), Some((1, 37)));
    assert_eq!(minor("v1.30.4-gke.1348000"), Some((1, 30)));
    assert_eq!(minor("2.1.4"), Some((2, 1)));
    assert_eq!(minor("v1"), None);
}

#[test]
fn image_volumes_by_kubelet_and_runtime() {
    assert_eq!(image_volume("v1.37.2", "containerd://2.1.4").level, Level::Ok);
    let f = image_volume("v1.34.1", "containerd://2.1.4");
    assert_eq!(f.level, Level::Warn);
    assert!(f.message.contains("ImageVolume=true"), "{}", f.message);
    let f = image_volume("v1.36.0", "containerd://1.7.22");
    assert_eq!(f.level, Level::Warn);
    assert!(f.message.contains("containerd 1.7.22"), "{}", f.message);
    assert!(image_volume("v1.29.9", "cri-o://1.29.1")
        .message
        .contains("no image volumes"));
    assert_eq!(image_volume("v1.35.0", "cri-o://1.35.0").level, Level::Ok);
}
