use std::time::{Duration, Instant};

use super::*;

#[test]
fn a_pod_gets_its_burst_then_one_a_second_and_others_are_untouched() {
    let pace = Pace::default();
    let t0 = Instant::now();
    for i in 0..BURST as usize {
        assert_eq!(pace.take_at("a", t0), Ok(()), "start {i}");
    }
    let e = pace.take_at("a", t0).unwrap_err();
    assert_eq!(e.retry_ms, 1000);
    assert!(e.to_string().contains("retry in 1000 ms"), "{e}");
    // Another pod is not slowed by the first.
    assert_eq!(pace.take_at("b", t0), Ok(()));
    // Half a second on: still nothing; a second on: one more.
    assert!(pace.take_at("a", t0 + Duration::from_millis(500)).is_err());
    assert_eq!(pace.take_at("a", t0 + Duration::from_millis(1000)), Ok(()));
    assert!(pace.take_at("a", t0 + Duration::from_millis(1100)).is_err());
}

#[test]
fn a_thousand_starts_in_a_minute_get_about_ninety_through() {
    let pace = Pace::default();
    let t0 = Instant::now();
    let through = (0..1000)
        .filter(|i| pace.take_at("p", t0 + Duration::from_millis(i * 60)).is_ok())
        .count();
    // The burst, then one a second for the minute.
    assert!((88..=93).contains(&through), "{through}");
}

#[test]
fn the_pods_tracked_stay_bounded_as_full_buckets_are_forgotten() {
    let pace = Pace::default();
    let t0 = Instant::now();
    for i in 0..3 * TRACKED {
        let _ = pace.take_at(&format!("pod-{i}"), t0 + Duration::from_secs(60 * i as u64));
    }
    assert!(sync::lock(&pace.buckets).len() <= TRACKED);
}
