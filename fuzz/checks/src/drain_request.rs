//! The gate's request parsing: any bytes a pod sends as a drain request
//! either parse into a checked request or give an error line; never a panic.
//! The exclusions it carries as written go through their own parser, as
//! the agent's settings take them: a bounded list, or one error line.

use graceful_api::{
    exclusions::{parse_peers, parse_ports, peer, MAX_PEERS, MAX_PORTS},
    DrainRequest, MAX_BODY, MAX_EXCLUSIONS_TEXT,
};

/// The target: panics if `data` breaks what this file asserts.
pub fn check(data: &[u8]) {
    match DrainRequest::parse(data) {
        Ok(r) => {
            assert_ne!(r.max_ms, Some(0));
            assert!(data.len() <= MAX_BODY);
            // What parses serializes back and parses again the same.
            let again = serde_json::to_vec(&r).unwrap();
            assert_eq!(DrainRequest::parse(&again).unwrap(), r);
            if let Some(s) = &r.ignore_ports {
                assert!(s.len() <= MAX_EXCLUSIONS_TEXT);
                match parse_ports(s) {
                    Ok(p) => assert!(!p.is_empty() && p.len() <= MAX_PORTS && !p.contains(&0)),
                    Err(e) => assert!(!e.is_empty() && !e.contains('\n') && e.len() < 2048),
                }
            }
            if let Some(s) = &r.ignore_peers {
                match parse_peers(s) {
                    // Each rule written back reads as itself.
                    Ok(p) => {
                        assert!(!p.is_empty() && p.len() <= MAX_PEERS);
                        for rule in p {
                            assert_eq!(peer(&rule.to_string()).unwrap(), rule);
                        }
                    }
                    Err(e) => assert!(!e.is_empty() && !e.contains('\n') && e.len() < 2048),
                }
            }
        }
        Err(e) => assert!(!e.is_empty() && !e.contains('\n')),
    }
}
