use super::*;

#[test]
fn a_crash_loop_backs_off_then_ends_the_keeper() {
    let mut r = Restarts::default();
    let quick = Duration::from_secs(1);
    let got: Vec<Next> = (0..6).map(|_| r.after(quick)).collect();
    assert_eq!(
        got,
        [
            Next::Now,
            Next::After(Duration::from_secs(1)),
            Next::After(Duration::from_secs(2)),
            Next::After(Duration::from_secs(4)),
            Next::After(Duration::from_secs(8)),
            Next::GiveUp
        ]
    );
}

#[test]
fn an_agent_that_ran_a_while_starts_again_at_once() {
    let mut r = Restarts::default();
    assert_eq!(r.after(Duration::from_secs(1)), Next::Now);
    assert_eq!(
        r.after(Duration::from_secs(1)),
        Next::After(Duration::from_secs(1))
    );
    assert_eq!(r.after(STABLE), Next::Now);
    assert_eq!(r.count(), 1);
}

#[test]
fn only_deaths_against_its_will_are_crashes() {
    assert_eq!(death(Some(0), None, false), Death::Ended(0));
    // A refusal it explained in one line: the keeper ends with it.
    assert_eq!(death(Some(1), None, false), Death::Ended(1));
    assert_eq!(death(Some(PANIC), None, false), Death::Crashed("panicked".into()));
    assert_eq!(death(Some(PANIC), None, true), Death::Ended(PANIC));
    assert!(matches!(death(None, Some(libc::SIGKILL), false), Death::Crashed(w) if w.contains("SIGKILL")));
    assert_eq!(death(None, Some(libc::SIGTERM), true), Death::Ended(143));
    assert!(matches!(
        death(None, Some(libc::SIGTERM), false),
        Death::Crashed(_)
    ));
}
