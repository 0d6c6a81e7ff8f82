use super::*;

#[test]
fn verdicts() {
    assert_eq!(verdict_of("init: success"), Some(Verdict::Success));
    assert_eq!(
        verdict_of("[   12.1] random: crng init done init: failure"),
        Some(Verdict::Failure)
    );
    assert_eq!(
        verdict_of("test result: ok. init: success is printed later"),
        None
    );
    assert!(matches!(
        verdict_of("[ 99.0] Kernel panic - not syncing: Attempted to kill init!"),
        Some(Verdict::Panic(_))
    ));
    assert!(matches!(
        verdict_of("[ 50.2] watchdog: BUG: soft lockup - CPU#1 stuck for 26s! [graceful:91]"),
        Some(Verdict::SoftLockup(_))
    ));
}
