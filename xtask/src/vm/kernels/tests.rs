use super::is_generic_amd64;

#[test]
fn only_the_generic_flavour_of_the_series() {
    assert!(is_generic_amd64("linux-image-6.1.0-57-amd64", "6.1"));
    assert!(is_generic_amd64("linux-image-6.12.117+deb12-amd64", "6.12"));
    assert!(!is_generic_amd64("linux-image-6.12.117+deb12-amd64", "6.1"));
    assert!(!is_generic_amd64("linux-image-6.1.0-57-cloud-amd64", "6.1"));
    assert!(!is_generic_amd64("linux-image-6.1.0-57-rt-amd64", "6.1"));
    assert!(!is_generic_amd64("linux-image-6.1.0-57-amd64-unsigned", "6.1"));
    assert!(!is_generic_amd64("linux-image-6.1.0-57-amd64-dbg", "6.1"));
    assert!(!is_generic_amd64("linux-image-amd64", "6.1"));
}
