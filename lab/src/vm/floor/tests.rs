use super::*;

#[test]
fn the_agents_floor_is_read() {
    assert_eq!(
        parse_floor("pub const FLOOR: (u32, u32) = (6, 1);\n"),
        Some((6, 1))
    );
    assert_eq!(parse_floor("const X: u8 = 1;"), None);
    // The real file parses, and the Debian kernels fall on the right sides.
    let f = floor();
    assert!(f >= (5, 0));
    assert!(below("5.10.0-46-amd64"));
    assert!(!below("7.2.13+deb14-amd64"));
    assert!(!below("nonsense"));
}
