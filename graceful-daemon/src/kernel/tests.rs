use super::*;

#[test]
fn versions() {
    assert_eq!(parse_version("6.1.0-50-amd64"), Some((6, 1)));
    assert_eq!(parse_version("6.12.100+deb12-amd64"), Some((6, 12)));
    assert_eq!(parse_version("5.15"), Some((5, 15)));
    assert_eq!(parse_version("x"), None);
    assert!((5, 15) < FLOOR && (6, 18) >= FLOOR);
}
