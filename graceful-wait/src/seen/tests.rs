use super::*;

#[test]
fn a_reconnect_carries_the_start_the_peak_and_the_timeline() {
    let mut s = Seen::default();
    for (ms, n) in [(0, 6), (40, 6), (900, 4), (1200, 2)] {
        s.point(ms, n);
    }
    let a = args::Args::default();
    let first = request(&a, 77, None);
    assert_eq!(first, r#"{"started_unix_ms":77}"#);
    let again = request(&a, 77, Some(&s));
    assert_eq!(
        again,
        r#"{"started_unix_ms":77,"resumed":{"inbound_at_start":6,"peak_inbound":6,"timeline":[{"ms":0,"inbound":6},{"ms":900,"inbound":4},{"ms":1200,"inbound":2}]}}"#
    );
}

#[test]
fn a_long_drain_keeps_its_start_and_its_latest_points() {
    let mut s = Seen::default();
    for i in 0..2000u64 {
        s.point(i, i % 2 + 1);
    }
    assert_eq!(s.timeline.len(), MAX_POINTS);
    assert_eq!(s.timeline[0], (0, 1));
    assert_eq!(s.timeline.last(), Some(&(1999, 2)));
    assert_eq!(s.peak, 2);
}
