use super::*;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("graceful-claim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_holder_is_read_from_proc_locks() {
    let text = "1: FLOCK  ADVISORY  WRITE 4242 00:1f:77 0 EOF\n\
                1: -> FLOCK  ADVISORY  WRITE 99 00:1f:77 0 EOF\n\
                2: POSIX  ADVISORY  WRITE 7 00:1f:78 0 EOF\n";
    assert_eq!(holder_in(text, "00:1f:77"), Some(4242));
    // A POSIX lock is not ours; an unknown file has no holder.
    assert_eq!(holder_in(text, "00:1f:78"), None);
    assert_eq!(holder_in(text, "00:1f:79"), None);
}

#[test]
fn a_second_claim_is_refused_naming_the_holder_and_a_released_one_is_taken() {
    let dir = scratch("twice");
    let pins = PinDir::new(dir.join("pins"));
    std::fs::create_dir_all(pins.root()).unwrap();
    let api = dir.join("api.sock");
    let first = take(&pins, &api, None).unwrap();
    match take(&pins, &api, None) {
        Err(ClaimError::Held { path, pid }) => {
            assert_eq!(path, pins.root());
            assert_eq!(pid, Some(std::process::id()));
        }
        other => panic!("a second claim was not refused: {other:?}"),
    }
    assert_eq!(pins_held(&pins).unwrap(), Some(Some(std::process::id())));
    let msg = take(&pins, &api, None).unwrap_err().to_string();
    assert!(msg.contains(&format!("pid {}", std::process::id())), "{msg}");
    drop(first);
    assert_eq!(pins_held(&pins).unwrap(), None);
    take(&pins, &api, None).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_live_api_socket_is_refused_and_a_gate_listener_without_the_pins_is_no_agent() {
    let dir = scratch("socket");
    let pins = PinDir::new(dir.join("pins"));
    std::fs::create_dir_all(pins.root()).unwrap();
    let api = dir.join("api.sock");
    let gate = dir.join("gate.sock");
    // The API socket is in the agent's own directory: one that answers
    // there is another agent's.
    let live = std::os::unix::net::UnixListener::bind(&api).unwrap();
    match take(&pins, &api, Some(&gate)) {
        Err(ClaimError::Serving { path, pid }) => {
            assert_eq!(path, api);
            assert_eq!(pid, Some(std::process::id()));
        }
        other => panic!("a live API socket was not refused: {other:?}"),
    }
    drop(live);
    // The gate socket's directory is the pods': whatever listens there
    // while this claim holds the pins is not an agent, and is no reason
    // to stop.
    let squatter = std::os::unix::net::UnixListener::bind(&gate).unwrap();
    take(&pins, &api, Some(&gate)).unwrap();
    drop(squatter);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_api_lock_sits_beside_its_socket() {
    assert_eq!(
        api_lock_path(Path::new("/run/graceful/api.sock")),
        Path::new("/run/graceful/api.sock.lock")
    );
}
