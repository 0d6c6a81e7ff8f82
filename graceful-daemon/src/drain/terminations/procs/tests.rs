use super::*;

#[test]
fn this_process_is_alive_and_a_missing_one_is_not() {
    assert!(process_alive(std::process::id()));
    assert!(!process_alive(u32::MAX - 1));
    assert!(!has_live_process(Path::new("/nonexistent/cgroup")));
}
