use std::time::Duration;

use super::{parse, MAX_SECS};

#[test]
fn what_people_write() {
    assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
    assert_eq!(parse(".5s"), Ok(Duration::from_millis(500)));
    assert_eq!(parse("2.s"), Ok(Duration::from_secs(2)));
    assert_eq!(parse("15"), Ok(Duration::from_secs(15)));
    for bad in ["", "ms", "5x", ".s", "1.2.3s", "1e300h", "-1s"] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

/// A bare number was seconds without any bound, while `Ns` had one: the
/// gate took `max=11511111111` (365 years) and refused the same in ms.
#[test]
fn one_bound_for_bare_numbers_units_and_sums() {
    assert_eq!(parse(&MAX_SECS.to_string()), Ok(Duration::from_secs(MAX_SECS)));
    assert!(parse(&(MAX_SECS + 1).to_string()).is_err());
    assert!(parse("11511111111").is_err());
    assert!(parse(&format!("{MAX_SECS}s1ms")).is_err());
    assert!(parse(&format!("{MAX_SECS}s{MAX_SECS}s")).is_err());
    assert_eq!(
        parse(&format!("{}ms", MAX_SECS * 1000)),
        Ok(Duration::from_secs(MAX_SECS))
    );
}

/// Through a float, `999980000002ms` came back as ...001 ms: what a
/// duration written in ms says is what it is.
#[test]
fn milliseconds_are_exact() {
    for ms in [1u64, 3, 1001, 999_980_000_002, 999_999_999_999, MAX_SECS * 1000] {
        assert_eq!(parse(&format!("{ms}ms")), Ok(Duration::from_millis(ms)), "{ms}");
    }
    assert_eq!(parse("1.001s"), Ok(Duration::from_millis(1001)));
    assert_eq!(parse("0.000000001s"), Ok(Duration::from_nanos(1)));
}
