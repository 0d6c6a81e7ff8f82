use proptest::prelude::*;
use serde_json::Value;

use super::*;
use crate::{Point, Policy, Resumed, Scope};

/// Text with quotes, backslashes, control characters, non-ASCII and astral
/// characters: what a pod name or a warning could hold.
pub(crate) fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            any::<char>(),
            Just('"'),
            Just('\\'),
            Just('\n'),
            Just('\u{1}'),
            Just('\u{8}'),
            Just('\u{c}'),
            Just('\u{7f}'),
            Just('\u{1F600}'),
        ],
        0..12,
    )
    .prop_map(|c| c.into_iter().collect())
}

pub(crate) fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![Just(Policy::Drained), Just(Policy::Quiet)]
}

pub(crate) fn scope() -> impl Strategy<Value = Scope> {
    prop_oneof![Just(Scope::Pod), Just(Scope::Container)]
}

fn request_strategy() -> impl Strategy<Value = DrainRequest> {
    let durations = proptest::array::uniform4(proptest::option::of(any::<u64>()));
    let resumed = proptest::option::of(
        (
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec((any::<u64>(), any::<u64>()), 0..4),
        )
            .prop_map(|(a, p, t)| Resumed {
                inbound_at_start: a,
                peak_inbound: p,
                timeline: t.into_iter().map(|(ms, inbound)| Point { ms, inbound }).collect(),
            }),
    );
    (
        proptest::option::of(policy()),
        proptest::option::of(scope()),
        durations,
        proptest::option::of(proptest::collection::vec(text(), 0..3)),
        proptest::option::of(text()),
        proptest::option::of(text()),
        any::<u64>(),
        resumed,
    )
        .prop_map(
            |(policy, scope, d, after, ports, peers, started, resumed)| DrainRequest {
                policy,
                scope,
                min_ms: d[0],
                max_ms: d[1],
                settle_ms: d[2],
                quiet_ms: d[3],
                after_containers: after,
                ignore_ports: ports,
                ignore_peers: peers,
                started_unix_ms: started,
                resumed,
            },
        )
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        // Floats serde_json's parser reads back exactly.
        (any::<i32>(), 0..4i32).prop_map(|(m, e)| Value::from(f64::from(m) / 2f64.powi(e))),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    /// What the agent's serde reads is what was written, and serde writes
    /// the same text.
    #[test]
    fn a_request_reads_back_as_written(r in request_strategy()) {
        let json = request(&r);
        let back: DrainRequest = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back, &r);
        prop_assert_eq!(json, serde_json::to_string(&r).unwrap());
    }

    /// Any object serde writes, compact or pretty, reads member by member
    /// as serde reads it: strings unescaped, other values as their text.
    #[test]
    fn fields_read_what_serde_wrote(
        members in proptest::collection::btree_map(text(), json_value(), 0..6),
        pretty in any::<bool>(),
    ) {
        let obj = Value::Object(members.clone().into_iter().collect());
        let line = if pretty {
            serde_json::to_string_pretty(&obj).unwrap()
        } else {
            serde_json::to_string(&obj).unwrap()
        };
        let got = fields(&line).expect("an object");
        prop_assert_eq!(got.len(), members.len());
        for ((k, v), (gk, gv)) in members.iter().zip(&got) {
            prop_assert_eq!(k, gk);
            match (v, gv) {
                (Value::String(s), Field::Str(g)) => prop_assert_eq!(s, g),
                (v, Field::Raw(g)) => {
                    prop_assert_eq!(v, &serde_json::from_str::<Value>(g).unwrap());
                }
                (v, g) => prop_assert!(false, "{v:?} read as {g:?}"),
            }
        }
    }

    /// Whatever the bytes, reading them ends, and says yes only to what
    /// serde reads as an object.
    #[test]
    fn anything_else_is_not_an_object(line in "\\PC{0,40}") {
        if fields(&line).is_some() {
            prop_assert!(serde_json::from_str::<serde_json::Map<String, Value>>(&line).is_ok(), "{line:?}");
        }
    }
}

/// The member `key` of the object `line`, as graceful-wait reads it.
pub(crate) fn field(line: &str, key: &str) -> Option<Field> {
    last(&fields(line)?, key).cloned()
}

#[test]
fn the_agents_lines_read_by_member() {
    let accepted = r#"{"type":"accepted","policy":"drained","scope":"pod","max_ms":25000,"sources":{"max_ms":"annotation"},"warnings":["a \"quoted\" one"]}"#;
    assert_eq!(field(accepted, "type"), Some(Field::Str("accepted".into())));
    assert_eq!(field(accepted, "max_ms").unwrap().text(), "25000");
    assert_eq!(
        field(accepted, "warnings").unwrap().text(),
        r#"["a \"quoted\" one"]"#
    );
    // A member named inside a string or a nested object is not the line's.
    let tricky = r#"{"detail":"\"type\":\"report\"","nested":{"type":"report"},"type":"progress"}"#;
    assert_eq!(field(tricky, "type"), Some(Field::Str("progress".into())));
    // Named twice, the last counts, as serde reads it.
    assert_eq!(field(r#"{"a":1,"a":2}"#, "a").unwrap().text(), "2");
    assert_eq!(fields("{} "), Some(vec![]));
    for bad in [
        "",
        "[]",
        "{",
        "{\"a\":}",
        "{\"a\":1,}",
        "{\"a\":1} x",
        "{\"a\":\"\u{1}\"}",
    ] {
        assert_eq!(fields(bad), None, "{bad:?}");
    }
    // Nesting past the bound is refused, not followed.
    let deep = format!("{{\"a\":{}{}}}", "[".repeat(100), "]".repeat(100));
    assert_eq!(fields(&deep), None);
    assert_eq!(string("a\"b\\c\u{7}\n"), r#""a\"b\\c\u0007\n""#);
}
