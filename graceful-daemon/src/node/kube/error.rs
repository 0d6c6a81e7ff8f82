//! How the agent spells an API error: the error and its causes on one
//! line, for the watch's log lines and the Events' error texts alike.

/// An error and its causes on one line, without repeats (hyper's
/// "client error (Connect)" says little without its source).
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        src = s.source();
    }
    out
}
