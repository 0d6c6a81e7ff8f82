//! The agent's house as the code builds it: graceful-daemon's rooms (its
//! top-level modules) in layers, each room importing only rooms of the
//! layers before it, with the first line of its `//!` map. Written into
//! `docs/architecture.md` between two markers by `cargo xtask layout
//! --write`; `cargo xtask layout` says when the page no longer matches.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use super::graph::{Graph, ModPath};

pub const BEGIN: &str = "<!-- rooms: written by `cargo xtask layout --write` from the code -->";
pub const END: &str = "<!-- /rooms -->";

/// Each room (a top-level module of the crate) and the rooms it imports.
fn needs(g: &Graph) -> BTreeMap<String, BTreeSet<String>> {
    let room = |p: &ModPath| p.first().cloned();
    let mut needs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in g.modules.iter().filter(|m| m.path.len() == 1 && !m.test) {
        needs.entry(m.path[0].clone()).or_default();
    }
    for e in &g.edges {
        if let (Some(a), Some(b)) = (room(&e.from), room(&e.to)) {
            if a != b && needs.contains_key(&b) {
                needs.entry(a).or_default().insert(b);
            }
        }
    }
    needs
}

/// The rooms the crate root's `//!` map lists as `//! - [`room`]: ...`,
/// in its order: the order data flows, which the imports must follow.
fn declared(root: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(root).unwrap_or_default();
    text.lines()
        .map_while(|l| l.strip_prefix("//!"))
        .filter_map(|l| {
            l.trim()
                .strip_prefix("- [`")?
                .split_once("`]")
                .map(|(r, _)| r.to_string())
        })
        .collect()
}

/// Where the imports break the order the crate root's map declares: a
/// listed room that imports a room listed after it, and a room the map
/// does not list (a small piece every room may use) that imports a
/// listed one. One finding per pair, with a line that makes it.
pub fn order_findings(g: &Graph, root: &Path) -> Vec<String> {
    let order = declared(root);
    if order.is_empty() {
        return Vec::new();
    }
    let at = |r: &str| order.iter().position(|o| o == r);
    let mut findings = Vec::new();
    for (a, deps) in needs(g) {
        for b in deps {
            let wrong = match (at(&a), at(&b)) {
                (Some(i), Some(j)) => j > i,
                (None, Some(_)) => true,
                _ => false,
            };
            if wrong {
                let at_line = g
                    .edges
                    .iter()
                    .find(|e| e.from.first() == Some(&a) && e.to.first() == Some(&b))
                    .and_then(|e| {
                        let m = g.modules.iter().find(|m| m.path == e.from)?;
                        Some(format!("{}:{}", m.file.display(), e.line))
                    })
                    .unwrap_or_else(|| root.display().to_string());
                findings.push(format!(
                    "{at_line}: room `{a}` imports `{b}`, against the order {} declares: {}",
                    root.display(),
                    order.join(" → ")
                ));
            }
        }
    }
    findings
}

/// The page's section, markers included. `None` if the rooms import in a
/// circle (layout reports that itself).
pub fn section(g: &Graph) -> Option<String> {
    let needs = needs(g);
    // A room's layer: one past the deepest room it imports.
    let mut layer: BTreeMap<String, usize> = BTreeMap::new();
    while layer.len() < needs.len() {
        let before = layer.len();
        for (r, deps) in &needs {
            if layer.contains_key(r) {
                continue;
            }
            if let Some(l) = deps
                .iter()
                .map(|d| layer.get(d).copied())
                .collect::<Option<Vec<_>>>()
            {
                layer.insert(r.clone(), l.into_iter().max().map_or(0, |m| m + 1));
            }
        }
        if layer.len() == before {
            return None;
        }
    }
    let mut out = format!(
        "{BEGIN}\n\n| layer | room | what it holds | its modules | imports |\n|---|---|---|---|---|\n"
    );
    let mut rows: Vec<(usize, &String)> = layer.iter().map(|(r, l)| (*l, r)).collect();
    rows.sort();
    for (l, r) in rows {
        let file = g
            .modules
            .iter()
            .find(|m| m.path.len() == 1 && &m.path[0] == r)
            .map(|m| m.file.clone());
        let what = file.as_deref().map(first_doc_line).unwrap_or_default();
        let inner: Vec<String> = g
            .modules
            .iter()
            .filter(|m| m.path.len() == 2 && &m.path[0] == r && !m.test)
            .map(|m| format!("`{}`", m.path[1]))
            .collect();
        let deps: Vec<String> = needs[r].iter().map(|d| format!("`{d}`")).collect();
        out.push_str(&format!(
            "| {l} | `{r}` | {what} | {} | {} |\n",
            inner.join(" "),
            deps.join(" ")
        ));
    }
    out.push('\n');
    out.push_str(END);
    Some(out)
}

/// The first sentence-line of a file's `//!` map, as one table cell.
fn first_doc_line(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut words = Vec::new();
    for line in text.lines() {
        let Some(l) = line.strip_prefix("//!") else { break };
        let l = l.trim();
        if l.is_empty() {
            break;
        }
        words.push(l.to_string());
    }
    let all = words.join(" ");
    // Its first sentence.
    let end = all.find(". ").map_or(all.len(), |i| i + 1);
    // Rustdoc's links (`[`Finding`]`) read as code on the page.
    all[..end]
        .replace("[`", "`")
        .replace("`]", "`")
        .replace('|', "\\|")
}

/// The page with its section replaced by `section`; `None` if it has no
/// markers.
pub fn replaced(page: &str, section: &str) -> Option<String> {
    let a = page.find(BEGIN)?;
    let b = page[a..].find(END)? + a + END.len();
    Some(format!("{}{section}{}", &page[..a], &page[b..]))
}
