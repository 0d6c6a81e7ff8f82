use super::*;

#[test]
fn parses_what_people_write() {
    assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse("2s"), Ok(Duration::from_secs(2)));
    assert_eq!(parse("1m"), Ok(Duration::from_secs(60)));
    assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse("15"), Ok(Duration::from_secs(15)));
    assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
    assert!(parse("").is_err());
    assert!(parse("5x").is_err());
    assert!(parse("ms").is_err());
    assert!(parse("1e300h").is_err());
    for (ms, text) in [
        (30_000, "30s"),
        (1500, "1.5s"),
        (500, "500ms"),
        (0, "0s"),
        (4230, "4.2s"),
    ] {
        assert_eq!(format(Duration::from_millis(ms)), text);
    }
}
