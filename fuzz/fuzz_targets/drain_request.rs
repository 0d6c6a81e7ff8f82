//! The gate's request parsing: any bytes a pod sends as a drain request
//! either parse into a checked request or give an error line; never a panic.
#![no_main]

use graceful_api::{DrainRequest, MAX_BODY};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match DrainRequest::parse(data) {
        Ok(r) => {
            assert_ne!(r.max_ms, Some(0));
            assert!(data.len() <= MAX_BODY);
            // What parses serializes back and parses again the same.
            let again = serde_json::to_vec(&r).unwrap();
            assert_eq!(DrainRequest::parse(&again).unwrap(), r);
        }
        Err(e) => assert!(!e.is_empty() && !e.contains('\n')),
    }
});
