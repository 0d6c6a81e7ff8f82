use super::rounds;

#[test]
fn rounds_are_even_and_cover_every_connection() {
    assert_eq!(rounds(200_000, 8, 4000), (8, 3125));
    for (n, k, r) in [(10_000_000, 16, 4000), (1, 2, 4000), (999, 7, 10), (50, 2, 1)] {
        let (rounds, per) = rounds(n, k, r);
        assert!(rounds >= 2 && rounds.is_multiple_of(2), "{rounds}");
        assert!(rounds * per * k >= n);
        assert!(per <= r.max(1) || rounds == 2, "{per} per round");
    }
}
