use std::time::{Duration, Instant};

use super::*;

#[test]
fn a_repeat_is_counted_on_the_event_and_written_once_a_flush() {
    let mut c = Correlator::default();
    let t0 = Instant::now();
    assert_eq!(
        c.decide("p", "DrainMisconfigured", "max too long", t0),
        Decision::Create("max too long".into())
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
    assert_eq!(
        c.decide("p", "DrainMisconfigured", "other", t0),
        Decision::Create("other".into())
    );
}

#[test]
fn a_pod_that_posts_in_a_loop_is_held_to_its_budget_and_others_are_not() {
    let mut c = Correlator::default();
    let t0 = Instant::now();
    // Reasons of their own, so that none is combined: the budget alone.
    let created = (0..1000)
        .filter(|i| matches!(c.decide("loop", &format!("R{i}"), "m", t0), Decision::Create(_)))
        .count();
    assert_eq!(created, BURST as usize);
    assert_eq!(
        c.decide("other", "DrainReleased", "drained", t0),
        Decision::Create("drained".into())
    );
    // The budget comes back, one write each REFILL.
    assert_eq!(
        c.decide("loop", "X", "y", t0 + REFILL),
        Decision::Create("y".into())
    );
    assert_eq!(c.decide("loop", "X", "z", t0 + REFILL), Decision::Dropped);
}

#[test]
fn messages_that_differ_each_time_are_combined_into_one_event() {
    let mut c = Correlator::default();
    let t0 = Instant::now();
    let mut posted = Vec::new();
    for i in 0..1000 {
        let message = format!("started {i} s before its request");
        match c.decide("loop", "DrainMisconfigured", &message, t0) {
            Decision::Create(m) => {
                c.created("loop", "DrainMisconfigured", &m, format!("e.{i}"));
                posted.push(m);
            }
            Decision::Counted { .. } => {}
            Decision::Dropped => panic!("dropped at {i}"),
        }
    }
    // SIMILAR - 1 as they are, then one combined, on which the rest count.
    assert_eq!(posted.len(), SIMILAR, "{posted:?}");
    assert!(posted[..SIMILAR - 1].iter().all(|m| !m.starts_with(COMBINED)));
    assert_eq!(
        posted[SIMILAR - 1],
        format!("{COMBINED}started {} s before its request", SIMILAR - 1)
    );
    assert_eq!(
        c.flush(&format!("e.{}", SIMILAR - 1), t0 + FLUSH),
        Some(Flush {
            name: format!("e.{}", SIMILAR - 1),
            count: 1000 - SIMILAR as u32 + 1
        })
    );
    // A message posted as it was is still counted on its own Event.
    assert!(matches!(
        c.decide("loop", "DrainMisconfigured", "started 0 s before its request", t0),
        Decision::Counted { .. }
    ));
    // Another reason is not combined with these.
    assert_eq!(
        c.decide("loop", "DrainReleased", "drained", t0),
        Decision::Create("drained".into())
    );
}

#[test]
fn an_event_past_its_window_is_posted_anew() {
    let mut c = Correlator::default();
    let t0 = Instant::now();
    assert_eq!(c.decide("p", "R", "m", t0), Decision::Create("m".into()));
    c.created("p", "R", "m", "e.1".into());
    assert_eq!(
        c.decide("p", "R", "m", t0 + WINDOW + Duration::from_secs(1)),
        Decision::Create("m".into())
    );
}
