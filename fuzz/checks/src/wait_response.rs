//! graceful-wait's response parsing: whatever answers on the socket (an
//! old agent, another server, garbage), the hook never panics or hangs,
//! and it reads each line's members as the agent's serde would
//! (`graceful_api::codec`, which the hook uses without serde).

use graceful_api::{
    client::read_head,
    codec::{fields, Field},
};
use serde_json::Value;

/// The target: panics if `data` breaks what this file asserts.
pub fn check(data: &[u8]) {
    if let Ok(mut r) = read_head(data) {
        let mut n = 0;
        while let Ok(Some(line)) = r.next_line() {
            n += 1;
            assert!(n <= data.len() + 1, "more lines than bytes");
            read_as_serde_does(&line);
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        read_as_serde_does(text);
    }
}

/// How deep `v` nests.
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// An object serde reads (nesting within the codec's bound) the codec
/// reads too, member by member; where both read a line, they agree.
fn read_as_serde_does(line: &str) {
    let ours = fields(line);
    let Ok(Value::Object(theirs)) = serde_json::from_str::<Value>(line) else {
        return;
    };
    if depth(&Value::Object(theirs.clone())) > 64 {
        return;
    }
    let ours = ours.unwrap_or_else(|| panic!("serde reads an object the codec refuses: {line:?}"));
    // A member named twice: serde keeps the last.
    let mut last = serde_json::Map::new();
    for (k, v) in ours {
        let v = match v {
            Field::Str(s) => Value::String(s),
            Field::Raw(text) => serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("member {k:?} of {line:?} read as {text:?}: {e}")),
        };
        last.insert(k, v);
    }
    assert_eq!(last, theirs, "{line:?}");
}
