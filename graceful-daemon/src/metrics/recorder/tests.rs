use std::{collections::BTreeSet, path::Path};

use super::ERROR_KINDS;

/// Every `.error("kind")` in the crate's sources.
fn called(dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            called(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("recorder/tests.rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            for part in text.split(".error(\"").skip(1) {
                if let Some((kind, _)) = part.split_once("\")") {
                    out.insert(kind.to_string());
                }
            }
        }
    }
}

#[test]
fn every_error_kind_called_is_listed_and_starts_at_zero() {
    let mut kinds = BTreeSet::new();
    called(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut kinds);
    let listed: BTreeSet<String> = ERROR_KINDS.iter().map(|k| k.to_string()).collect();
    assert_eq!(
        kinds, listed,
        "ERROR_KINDS must list exactly the kinds passed to Recorder::error"
    );
}
