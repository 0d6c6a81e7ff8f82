use super::*;

#[test]
fn backoff_doubles_to_its_cap_with_bounded_jitter() {
    let mut b = Backoff::new(Duration::from_millis(400), Duration::from_secs(3));
    let mut base = 400u64;
    for _ in 0..8 {
        let d = b.delay().as_millis() as u64;
        assert!(
            d >= base - base / 4 && d <= base + base / 4,
            "{d} for base {base}"
        );
        base = (base * 2).min(3000);
    }
    b.reset();
    assert!(b.delay() <= Duration::from_millis(500));
}
