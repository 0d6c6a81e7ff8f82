use super::Summary;

#[test]
fn median_of_odd_and_even() {
    let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
    assert_eq!((s.min, s.median, s.max), (1.0, 2.0, 3.0));
    let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
    assert_eq!((s.min, s.median, s.max), (1.0, 2.5, 4.0));
    assert!(Summary::of(&[]).is_none());
}
