use super::*;

const NOW: Clocks = Clocks {
    unix_ms: 1_800_000_000_000,
    monotonic_ns: 5_000_000_000_000,
};

#[test]
fn a_start_from_the_epoch_counts_from_just_before_the_request() {
    // Arrived 100 ms ago; the request says it started in 1970.
    let arrived = NOW.monotonic_ns - 100_000_000;
    let (start, warning) = bounded_start(0, NOW, arrived, false, 3000, None);
    assert_eq!(start, arrived - START_ALLOWANCE_MS * 1_000_000);
    let w = warning.expect("a clamped start is reported");
    assert!(w.contains("started_unix_ms 0") && w.contains("2s"), "{w}");
}

#[test]
fn a_start_within_the_allowance_or_in_the_future_is_kept() {
    let arrived = NOW.monotonic_ns - 100_000_000;
    // The hook took 1.5 s to connect.
    let (start, warning) = bounded_start(NOW.unix_ms - 1600, NOW, arrived, false, 3000, None);
    assert_eq!((start, warning), (NOW.monotonic_ns - 1_600_000_000, None));
    let (start, warning) = bounded_start(NOW.unix_ms + 60_000, NOW, arrived, false, 3000, None);
    assert_eq!((start, warning), (NOW.monotonic_ns, None));
}

#[test]
fn a_resumed_drain_keeps_its_start_within_its_deadline() {
    let arrived = NOW.monotonic_ns;
    // Resumed 12 s in, after an agent restart: the start stands.
    let (start, warning) = bounded_start(NOW.unix_ms - 12_000, NOW, arrived, true, 20_000, None);
    assert_eq!((start, warning), (NOW.monotonic_ns - 12_000_000_000, None));
    // Older than its deadline: no older than the deadline.
    let (start, warning) = bounded_start(0, NOW, arrived, true, 20_000, None);
    assert_eq!(start, arrived - 20_000_000_000);
    assert!(warning.unwrap().contains("resumed"));
}

#[test]
fn a_resumed_drain_starts_no_earlier_than_its_pods_deletion() {
    let arrived = NOW.monotonic_ns;
    // The pod was deleted 8 s ago; a reconnecting hook claims 15 s.
    let deleted = Some(NOW.unix_ms - 8_000);
    let (start, warning) = bounded_start(NOW.unix_ms - 15_000, NOW, arrived, true, 20_000, deleted);
    assert_eq!(start, NOW.monotonic_ns - 8_000_000_000);
    let w = warning.expect("a clamped start is reported");
    assert!(w.contains("7s before the pod's deletion was requested"), "{w}");
    // A start after the deletion stands.
    let (start, warning) = bounded_start(NOW.unix_ms - 5_000, NOW, arrived, true, 20_000, deleted);
    assert_eq!((start, warning), (NOW.monotonic_ns - 5_000_000_000, None));
    // A deletion older than the deadline bounds nothing the deadline does not.
    let old = Some(NOW.unix_ms - 60_000);
    let (start, _) = bounded_start(0, NOW, arrived, true, 20_000, old);
    assert_eq!(start, arrived - 20_000_000_000);
    // A new drain is bounded by its allowance alone (a hook run by hand
    // may start before any deletion).
    let (start, warning) = bounded_start(NOW.unix_ms - 1_000, NOW, arrived, false, 20_000, deleted);
    assert_eq!((start, warning), (NOW.monotonic_ns - 1_000_000_000, None));
}
