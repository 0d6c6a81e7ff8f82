use super::*;

#[test]
fn versions() {
    assert_eq!(parse_version("6.1.0-50-amd64"), Some((6, 1)));
    assert_eq!(parse_version("6.12.100+deb12-amd64"), Some((6, 12)));
    assert_eq!(parse_version("5.15"), Some((5, 15)));
    assert_eq!(parse_version("x"), None);
    assert!((5, 15) < FLOOR && (6, 18) >= FLOOR);
}

#[test]
fn the_refusal_names_what_is_missing() {
    let old = floor_error("5.10.0-46-amd64").unwrap();
    assert!(old.contains("bpf_sk_storage_get"), "{old}");
    assert!(!old.contains('\n'));
    let untested = floor_error("5.15.0-1-amd64").unwrap();
    assert!(untested.contains("older than 6.1"), "{untested}");
    assert_eq!(floor_error("6.1.0-57-amd64"), None);
    assert_eq!(floor_error("7.2.13+deb14-amd64"), None);
    assert!(MISSING_BEFORE <= FLOOR);
}
