//! A crate's modules (one per file) and the imports between them.
//!
//! An edge A → B is a path in A's code that names B (or something in it):
//! `crate::b::…`, `super::…` or `self::…`. A module naming its own
//! submodules (its dispatch, its re-exports) owns them: that is no edge. A
//! `pub use` is a module's door: a path that goes through it counts as
//! naming the module it re-exports from. Test code (files named `tests.rs` or under a
//! `tests/` directory, and inline `#[cfg(test)]` blocks) is left out: tests
//! may look anywhere.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

use super::scan::{self, Ref};

pub type ModPath = Vec<String>;

pub struct Module {
    pub path: ModPath,
    pub file: PathBuf,
    pub lines: usize,
    pub test: bool,
    /// Line ranges of inline `#[cfg(test)] mod … { … }` blocks.
    pub inline_tests: Vec<(usize, usize)>,
    stripped: String,
}

impl Module {
    /// Its source with comments and literals blanked.
    pub fn stripped(&self) -> &str {
        &self.stripped
    }
}

/// An edge, with where it comes from.
#[derive(Debug, Clone)]
pub struct Edge {
    pub from: ModPath,
    pub to: ModPath,
    pub line: usize,
}

pub fn show(p: &[String]) -> String {
    if p.is_empty() {
        "crate".into()
    } else {
        p.join("::")
    }
}

/// The file of module `name` declared in `file` (module path `parent`).
fn child_file(file: &Path, parent_is_dir: bool, name: &str) -> Option<PathBuf> {
    let dir = if parent_is_dir {
        file.parent()?.to_path_buf()
    } else {
        file.with_extension("")
    };
    [dir.join(format!("{name}.rs")), dir.join(name).join("mod.rs")]
        .into_iter()
        .find(|p| p.is_file())
}

/// The names declared with `mod name;` (a file of its own) in stripped source.
fn declared(stripped: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in stripped.match_indices("mod ") {
        if stripped[..i]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = &stripped[i + 4..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && rest[name.len()..].trim_start().starts_with(';') {
            out.push(name);
        }
    }
    out
}

/// The modules of the crate whose root file is `root`, found by following
/// its `mod name;` declarations.
pub fn modules(root: &Path) -> Vec<Module> {
    let mut out = Vec::new();
    let mut todo = vec![(root.to_path_buf(), ModPath::new(), true)];
    while let Some((file, path, is_dir_owner)) = todo.pop() {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        let stripped = scan::strip(&text);
        for name in declared(&stripped) {
            if let Some(f) = child_file(&file, is_dir_owner, &name) {
                let owner = f.file_name().is_some_and(|n| n == "mod.rs");
                let mut p = path.clone();
                p.push(name);
                todo.push((f, p, owner));
            }
        }
        let test = path.iter().any(|s| s == "tests");
        out.push(Module {
            inline_tests: if test {
                Vec::new()
            } else {
                scan::test_blocks(&stripped)
            },
            lines: text.lines().count(),
            path,
            file,
            test,
            stripped,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// What a module's `pub use` statements export: name → the path it names.
type Door = BTreeMap<String, Vec<String>>;

/// Each `pub use` statement's (start line, end line), and what it exports.
fn reexports(m: &Module) -> (Vec<(usize, usize)>, Door) {
    let s = &m.stripped;
    let mut spans = Vec::new();
    let mut names = BTreeMap::new();
    for (i, _) in s.match_indices("use ") {
        let before = s[..i].trim_end();
        if !(before.ends_with("pub") || before.ends_with("pub(crate)") || before.ends_with(')')) {
            continue;
        }
        let Some(end) = s[i..].find(';') else { continue };
        let stmt = &s[i + 4..i + end];
        let line = |p: usize| s[..p].matches('\n').count() + 1;
        spans.push((line(i), line(i + end)));
        for r in scan::refs(&format!("self::{}", stmt.trim().trim_start_matches("self::"))) {
            let mut p = r.path;
            if p.get(1).is_some_and(|x| x == "crate" || x == "super") {
                p.remove(0);
            }
            if let Some(last) = p.last().cloned() {
                names.insert(last, p);
            }
        }
    }
    (spans, names)
}

pub struct Graph {
    pub modules: Vec<Module>,
    pub edges: Vec<Edge>,
}

impl Graph {
    pub fn of(root: &Path) -> Graph {
        let modules = modules(root);
        let known: BTreeSet<ModPath> = modules.iter().map(|m| m.path.clone()).collect();
        let doors: BTreeMap<ModPath, Door> =
            modules.iter().map(|m| (m.path.clone(), reexports(m).1)).collect();
        let mut edges = Vec::new();
        for m in modules.iter().filter(|m| !m.test) {
            let (skip, _) = reexports(m);
            let in_tests = |line: usize| m.inline_tests.iter().any(|&(a, b)| (a..=b).contains(&line));
            let in_door = |line: usize| skip.iter().any(|&(a, b)| (a..=b).contains(&line));
            let children: BTreeSet<&str> = known
                .iter()
                .filter(|k| k.len() == m.path.len() + 1 && k.starts_with(&m.path))
                .map(|k| k.last().unwrap().as_str())
                .collect();
            let mut refs = scan::refs(&m.stripped);
            refs.extend(bare_child_refs(&m.stripped, &children));
            for Ref { path, line } in refs {
                if in_tests(line) || in_door(line) {
                    continue;
                }
                let Some(abs) = absolute(&m.path, &path) else {
                    continue;
                };
                // A module naming its own submodules (its dispatch, its
                // re-exports) is how it owns them, not an import.
                let own = |to: &ModPath| to.len() > m.path.len() && to.starts_with(&m.path);
                if let Some(to) = resolve(&abs, &known, &doors).filter(|to| *to != m.path && !own(to)) {
                    edges.push(Edge {
                        from: m.path.clone(),
                        to,
                        line,
                    });
                }
            }
        }
        Graph { modules, edges }
    }

    /// The strongly connected components with more than one module: the
    /// import circles (Tarjan's algorithm).
    pub fn circles(&self, key: impl Fn(&ModPath) -> ModPath) -> Vec<Vec<ModPath>> {
        let mut adj: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
        for e in &self.edges {
            let (a, b) = (key(&e.from), key(&e.to));
            if a != b {
                adj.entry(a).or_default().insert(b.clone());
                adj.entry(b).or_default();
            }
        }
        let nodes: Vec<ModPath> = adj.keys().cloned().collect();
        let index_of: BTreeMap<&ModPath, usize> = nodes.iter().enumerate().map(|(i, n)| (n, i)).collect();
        let succ: Vec<Vec<usize>> = nodes
            .iter()
            .map(|n| adj[n].iter().map(|s| index_of[s]).collect())
            .collect();
        tarjan(&succ)
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|c| c.into_iter().map(|i| nodes[i].clone()).collect())
            .collect()
    }
}

/// `path` (as written in module `from`) made absolute from the crate root.
fn absolute(from: &[String], path: &[String]) -> Option<Vec<String>> {
    let (head, rest) = path.split_first()?;
    let mut base: Vec<String> = match head.as_str() {
        "crate" => Vec::new(),
        "self" => from.to_vec(),
        "super" => from.get(..from.len().checked_sub(1)?)?.to_vec(),
        _ => from.to_vec(), // a bare child name: relative to here
    };
    let mut rest = if matches!(head.as_str(), "crate" | "self" | "super") {
        rest.to_vec()
    } else {
        path.to_vec()
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest.remove(0);
    }
    base.extend(rest);
    Some(base)
}

/// The module `abs` lands in: its longest prefix that is a module, followed
/// through that module's re-exports.
fn resolve(abs: &[String], known: &BTreeSet<ModPath>, doors: &BTreeMap<ModPath, Door>) -> Option<ModPath> {
    resolve_within(abs, known, doors, 4)
}

fn resolve_within(
    abs: &[String],
    known: &BTreeSet<ModPath>,
    doors: &BTreeMap<ModPath, Door>,
    hops: usize,
) -> Option<ModPath> {
    let n = (0..=abs.len()).rev().find(|&n| known.contains(&abs[..n]))?;
    let module = abs[..n].to_vec();
    let Some(next) = abs.get(n) else {
        return Some(module);
    };
    match doors.get(&module).and_then(|d| d.get(next)) {
        Some(target) if hops > 0 => {
            let via = absolute(&module, target)?;
            if via.starts_with(&module) && via.len() == module.len() + 1 {
                return Some(module);
            }
            resolve_within(&via, known, doors, hops - 1).or(Some(module))
        }
        _ => Some(module),
    }
}

/// Paths that start with one of `children`'s names (`child::item`), as a
/// parent module writes them.
fn bare_child_refs(stripped: &str, children: &BTreeSet<&str>) -> Vec<Ref> {
    let mut out = Vec::new();
    for child in children {
        let pat = format!("{child}::");
        for (i, _) in stripped.match_indices(&pat) {
            let before = stripped[..i].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let line = stripped[..i].matches('\n').count() + 1;
            out.push(Ref {
                path: vec![child.to_string(), "_".into()],
                line,
            });
        }
    }
    out
}

fn tarjan(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct St<'a> {
        succ: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut St, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on[v] = true;
        for &w in &s.succ[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on[w] => s.low[v] = s.low[v].min(iw),
                _ => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(comp);
        }
    }
    let n = succ.len();
    let mut s = St {
        succ,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}
