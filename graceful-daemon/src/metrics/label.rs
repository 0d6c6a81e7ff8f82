//! The one-label sets of the series (`outcome`, `reason`, `kind`, `map`).

pub(super) type Label = [(&'static str, String); 1];

pub(super) fn label(key: &'static str, value: &str) -> Label {
    [(key, value.to_string())]
}
