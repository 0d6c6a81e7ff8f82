use super::clean;

#[test]
fn control_sequences_are_dropped() {
    assert_eq!(
        clean("\x1bc\x1b[?7l\x1b[2Jinit: kernel 6.1.0-57-amd64\r"),
        "init: kernel 6.1.0-57-amd64"
    );
    assert_eq!(clean("\x1b[0mSeaBIOS"), "SeaBIOS");
}
