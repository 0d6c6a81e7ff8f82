use super::{is_generic_amd64, source, split_parts};

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

#[test]
fn a_split_image_pins_its_parts() {
    let depends = "dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, \
                   linux-base-7.2.13+deb14-amd64 (= 7.2.13-1), linux-binary-7.2.13+deb14-amd64 (= 7.2.13-1), \
                   linux-modules-7.2.13+deb14-amd64 (= 7.2.13-1)";
    assert_eq!(
        split_parts("linux-image-7.2.13+deb14-amd64", depends),
        [
            "linux-base-7.2.13+deb14-amd64=7.2.13-1",
            "linux-binary-7.2.13+deb14-amd64=7.2.13-1",
            "linux-modules-7.2.13+deb14-amd64=7.2.13-1",
        ]
    );
    // bookworm's image holds vmlinuz and modules itself.
    assert!(split_parts(
        "linux-image-6.1.0-57-amd64",
        "kmod, linux-base (>= 4.3~), initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool"
    )
    .is_empty());
    // Another flavour's parts are not this image's.
    assert!(split_parts(
        "linux-image-7.2.13+deb14-amd64",
        "linux-binary-7.2.13+deb14-cloud-amd64 (= 7.2.13-1)"
    )
    .is_empty());
}

#[test]
fn suite_specs() {
    let s = source::parse("sid:7.2").unwrap();
    assert_eq!((s.suite.as_deref(), s.what.as_str()), (Some("sid"), "7.2"));
    let s = source::parse("6.1").unwrap();
    assert_eq!((s.suite, s.what.as_str()), (None, "6.1"));
    assert!(source::parse("Sid:7.2").is_err());
    assert!(source::parse("trixie:").is_err());
    assert_eq!(source::sources("sid").len(), 1);
    assert!(source::sources("bullseye")[1].contains("bullseye-security"));
    assert!(is_generic_amd64("linux-image-7.2.13+deb14-amd64", "7.2"));
    assert!(is_generic_amd64("linux-image-6.12.115+deb13.1-amd64", "6.12"));
}
