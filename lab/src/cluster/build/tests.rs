use super::{release, DEFAULT, RELEASES};

#[test]
fn a_minor_picks_its_pinned_patch_release() {
    assert_eq!(release("1.33").unwrap(), "1.33.13");
    assert_eq!(release("v1.37").unwrap(), "1.37.2");
    assert_eq!(release("1.36.3").unwrap(), "1.36.3");
    assert_eq!(release(DEFAULT).unwrap(), *RELEASES.last().unwrap());
}

#[test]
fn an_unknown_release_names_the_ones_there_are() {
    for asked in ["1.20", "1.3", "1.37.1", "2.0"] {
        let e = release(asked).unwrap_err().to_string();
        assert!(e.contains("1.33.13") && e.contains(asked), "{e}");
    }
}
