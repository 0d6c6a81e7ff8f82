//! graceful-wait's response parsing: whatever answers on the socket (an
//! old agent, another server, garbage), the hook never panics or hangs.

use graceful_wait::http::read_head;

/// The target: panics if `data` breaks what this file asserts.
pub fn check(data: &[u8]) {
    if let Ok(mut r) = read_head(data) {
        let mut n = 0;
        while let Ok(Some(_)) = r.next_line() {
            n += 1;
            assert!(n <= data.len() + 1, "more lines than bytes");
        }
    }
}
