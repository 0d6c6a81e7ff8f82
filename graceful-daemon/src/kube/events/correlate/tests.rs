use std::time::{Duration, Instant};

use super::*;

#[test]
fn a_repeat_is_counted_on_the_event_and_written_once_a_flush() {
    let mut c = Correlator::default();
    let t0 = Instant::now();
    assert_eq!(
        c.decide("p", "DrainMisconfigured", "max too long", t0),
        Decision::Create
    );
    // Counted while its create is in flight, then named: 1 + 1 + 1 + 100.
    assert!(matches!(
        c.decide("p", "DrainMisconfigured", "max too long", t0),
        Decision::Counted { flush: false, .. }
    ));
    c.created("p", "DrainMisconfigured", "max too long", "web.1".into());
    assert_eq!(
        c.decide("p", "DrainMisconfigured", "max too long", t0),
        Decision::Counted {
            name: "web.1".into(),
            flush: true
        }
    );
    for _ in 0..100 {
        assert_eq!(
            c.decide("p", "DrainMisconfigured", "max too long", t0),
            Decision::Counted {
                name: "web.1".into(),
                flush: false
            }
        );
    }
    assert_eq!(
        c.flush("web.1", t0 + FLUSH),
        Some(Flush {
            name: "web.1".into(),
            count: 103
        })
    );
    // Nothing new: nothing to write.
    assert_eq!(c.flush("web.1", t0 + 2 * FLUSH), None);
    // Another message, another Event.
    assert_eq!(c.decide("p", "DrainMisconfigured", "other", t0), Decision::Create);
}

#[test]
fn a_pod_that_posts_in_a_loop_is_held_to_its_budget_and_others_are_not() {
    let mut c = Correlator::default();
    let t0 = Instant::now();
    let created = (0..1000)
        .filter(|i| c.decide("loop", "DrainMisconfigured", &format!("attempt {i}"), t0) == Decision::Create)
        .count();
    assert_eq!(created, BURST as usize);
    assert_eq!(
        c.decide("other", "DrainReleased", "drained", t0),
        Decision::Create
    );
    // The budget comes back, one write each REFILL.
    assert_eq!(c.decide("loop", "X", "y", t0 + REFILL), Decision::Create);
    assert_eq!(c.decide("loop", "X", "z", t0 + REFILL), Decision::Dropped);
}

#[test]
fn an_event_past_its_window_is_posted_anew() {
    let mut c = Correlator::default();
    let t0 = Instant::now();
    assert_eq!(c.decide("p", "R", "m", t0), Decision::Create);
    c.created("p", "R", "m", "e.1".into());
    assert_eq!(
        c.decide("p", "R", "m", t0 + WINDOW + Duration::from_secs(1)),
        Decision::Create
    );
}
