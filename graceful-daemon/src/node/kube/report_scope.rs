//! Which terminating pods the agent reports on: those that opted in
//! ([`super::adoption`]), and those the agent is told to report on too:
//! `--report-namespaces` (names, or `*` for every namespace) and
//! `--report-selector` (a label selector on the pod, as kubectl spells
//! it). A team that never heard of graceful sees nothing of it until its
//! namespace is named; the platform team widens the scope to find where to
//! start (`graceful at-risk`).

use kube::core::{Expression, Selector, SelectorExt};

use super::PodInfo;

/// The terminating pods reported besides those that opted in.
#[derive(Clone, Debug, Default)]
pub struct ReportScope {
    /// Namespaces whose every pod is reported; `*` is all of them.
    pub namespaces: Vec<String>,
    /// Pods whose labels it selects are reported.
    pub selector: Option<PodSelector>,
}

impl ReportScope {
    /// Whether the agent reports this terminating pod.
    pub fn covers(&self, pod: &PodInfo) -> bool {
        pod.opted_in
            || self.namespaces.iter().any(|n| n == "*" || *n == pod.namespace)
            || self.selector.as_ref().is_some_and(|s| s.0.matches(&pod.labels))
    }
}

/// A label selector as `kubectl -l` takes it: `k=v`, `k==v`, `k!=v`,
/// `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, joined by commas. Matched by
/// kube's own [`Selector`].
#[derive(Clone, Debug)]
pub struct PodSelector(Selector);

impl std::fmt::Display for PodSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// `--report-selector`: one line naming what does not parse.
pub fn parse_selector(s: &str) -> Result<PodSelector, String> {
    let mut exprs = Vec::new();
    for term in terms(s)? {
        exprs.push(expression(term.trim()).map_err(|e| format!("{e} in the selector {s:?}"))?);
    }
    if exprs.is_empty() {
        return Err("an empty selector selects every pod: use --report-namespaces '*' to mean that".into());
    }
    Ok(PodSelector(Selector::from_iter(exprs)))
}

/// The selector's terms: split at commas outside parentheses.
fn terms(s: &str) -> Result<Vec<&str>, String> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, ch) in s.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("unbalanced parentheses in the selector {s:?}"));
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced parentheses in the selector {s:?}"));
    }
    out.push(&s[start..]);
    if out.len() > 1 && out.iter().any(|t| t.trim().is_empty()) {
        return Err(format!("an empty term in the selector {s:?}"));
    }
    Ok(out.into_iter().filter(|t| !t.trim().is_empty()).collect())
}

fn expression(t: &str) -> Result<Expression, String> {
    let key = |k: &str| -> Result<String, String> {
        let k = k.trim();
        let ok = !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
        ok.then(|| k.to_string())
            .ok_or_else(|| format!("{k:?} is not a label key"))
    };
    if let Some(k) = t.strip_prefix('!') {
        return Ok(Expression::DoesNotExist(key(k)?));
    }
    for (op, notin) in [(" notin ", true), (" in ", false)] {
        if let Some((k, set)) = t.split_once(op) {
            let set = set.trim();
            let inner = set
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| format!("{t:?}: the values of in/notin go in parentheses"))?;
            let values: std::collections::BTreeSet<String> =
                inner.split(',').map(|v| v.trim().to_string()).collect();
            if values.iter().any(String::is_empty) {
                return Err(format!("{t:?}: an empty value in the set"));
            }
            return Ok(if notin {
                Expression::NotIn(key(k)?, values)
            } else {
                Expression::In(key(k)?, values)
            });
        }
    }
    if let Some((k, v)) = t.split_once("!=") {
        return Ok(Expression::NotEqual(key(k)?, v.trim().into()));
    }
    if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
        return Ok(Expression::Equal(key(k)?, v.trim().into()));
    }
    Ok(Expression::Exists(key(t)?))
}

#[cfg(test)]
mod tests;
