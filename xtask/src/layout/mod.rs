//! `cargo xtask layout`: checks the tree's structure, the way a reviewer
//! reads it, for every crate root of the workspace (each library, binary
//! and test target `cargo metadata` lists):
//!
//! - no import circle between modules (files), nor between the rooms they
//!   sit in (a crate's top-level modules);
//! - no source file over `--max-lines` lines (600);
//! - no test module inside a product file: tests sit beside it
//!   (`#[cfg(test)] mod tests;` and `x/tests.rs`);
//! - the agent's rooms import in the order its crate root's map lists
//!   them (`//! - [`room`]: ...`, the order data flows), and the small
//!   pieces the map does not list import none of them;
//! - `docs/architecture.md` shows the agent's rooms, in layers, as the
//!   code has them (`--write` writes them there).
//!
//! - no function of the product's crates over `--max-fn-lines` lines of
//!   code (100) unless it says why, as [`functions`] explains.
//!
//! One line per finding, with the file and line that cause it; exit status
//! 1 if there is any.

mod functions;
mod graph;
mod house;
mod scan;

use std::{collections::BTreeSet, path::PathBuf};

use anyhow::Context as _;

use graph::{show, Graph, ModPath};
use xtask::util;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The most lines a source file may have.
    #[arg(long, default_value_t = 600)]
    max_lines: usize,
    /// The most lines of code a function of the product's crates may have
    /// without `#[expect(clippy::too_many_lines, reason = ...)]`.
    #[arg(long, default_value_t = 100)]
    max_fn_lines: usize,
    /// Also print every crate's rooms and the imports between them.
    #[arg(long)]
    verbose: bool,
    /// Write the agent's rooms, in layers, into docs/architecture.md.
    #[arg(long)]
    write: bool,
}

/// Every target's root file, from `cargo metadata`: the workspace's
/// members and the lab's (a workspace of its own).
fn roots() -> anyhow::Result<Vec<(String, PathBuf, bool)>> {
    let mut roots = roots_of(&util::workspace_root().join("Cargo.toml"))?;
    roots.extend(roots_of(&xtask::lab::manifest())?);
    Ok(roots)
}

fn roots_of(manifest: &std::path::Path) -> anyhow::Result<Vec<(String, PathBuf, bool)>> {
    let out = util::output(
        util::cargo()
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--manifest-path",
            ])
            .arg(manifest)
            .current_dir(util::workspace_root()),
    )?;
    let meta: serde_json::Value = serde_json::from_str(&out).context("cargo metadata's JSON")?;
    let mut roots = Vec::new();
    for pkg in meta["packages"].as_array().into_iter().flatten() {
        // The product's crates: those that take the workspace's lints.
        let product = pkg["manifest_path"]
            .as_str()
            .and_then(|m| std::fs::read_to_string(m).ok())
            .is_some_and(|t| t.contains("[lints]\nworkspace = true"));
        for t in pkg["targets"].as_array().into_iter().flatten() {
            let kinds: Vec<&str> = t["kind"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|k| k.as_str())
                .collect();
            if kinds.contains(&"custom-build") {
                continue;
            }
            let name = format!(
                "{} ({} {})",
                pkg["name"].as_str().unwrap_or("?"),
                kinds.join(","),
                t["name"].as_str().unwrap_or("?")
            );
            if let Some(p) = t["src_path"].as_str() {
                roots.push((name, PathBuf::from(p), product));
            }
        }
    }
    Ok(roots)
}

/// docs/architecture.md's rooms against the code's: a finding if they
/// differ, unless `write`, which makes them the same.
fn architecture(g: &Graph, write: bool) -> anyhow::Result<Option<String>> {
    let page_file = util::workspace_root().join("docs/architecture.md");
    let page = std::fs::read_to_string(&page_file).with_context(|| format!("{}", page_file.display()))?;
    let Some(section) = house::section(g) else {
        return Ok(None);
    };
    let Some(new) = house::replaced(&page, &section) else {
        return Ok(Some(format!(
            "docs/architecture.md: no `{}` ... `{}` markers for the rooms",
            house::BEGIN,
            house::END
        )));
    };
    if new == page {
        return Ok(None);
    }
    if write {
        std::fs::write(&page_file, new)?;
        println!("wrote the rooms into docs/architecture.md");
        return Ok(None);
    }
    Ok(Some(
        "docs/architecture.md: its rooms are not the code's: run `cargo xtask layout --write`".into(),
    ))
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let root = util::workspace_root();
    let rel = |p: &std::path::Path| p.strip_prefix(&root).unwrap_or(p).display().to_string();
    let mut findings = Vec::new();
    let mut seen_files = BTreeSet::new();
    let mut largest: Vec<(usize, String)> = Vec::new();
    let mut longest_fns: Vec<(usize, String)> = Vec::new();
    for (name, file, product) in roots()? {
        let g = Graph::of(&file);
        if name.starts_with("graceful-daemon (lib") {
            findings.extend(architecture(&g, args.write)?);
            findings.extend(house::order_findings(&g, &file));
        }
        let files: Vec<_> = g
            .modules
            .iter()
            .filter(|m| seen_files.insert(m.file.clone()))
            .collect();
        for m in &files {
            largest.push((m.lines, rel(&m.file)));
            if product && !m.test {
                let text = std::fs::read_to_string(&m.file).unwrap_or_default();
                for f in functions::lengths(&text, m.stripped()) {
                    let at = format!("{}:{}", rel(&m.file), f.line);
                    if f.lines > args.max_fn_lines && !f.excused {
                        findings.push(format!(
                            "{at}: fn {} has {} lines of code, over {}: split it, or say why with #[expect(clippy::too_many_lines, reason = ...)]",
                            f.name, f.lines, args.max_fn_lines
                        ));
                    } else if f.lines <= args.max_fn_lines && f.excused {
                        findings.push(format!(
                            "{at}: fn {} has {} lines of code and excuses its length: drop the #[expect]",
                            f.name, f.lines
                        ));
                    }
                    longest_fns.push((
                        f.lines,
                        format!("{at} {}{}", f.name, if f.excused { " (says why)" } else { "" }),
                    ));
                }
            }
            if m.lines > args.max_lines {
                findings.push(format!(
                    "{}: {} lines, over {}",
                    rel(&m.file),
                    m.lines,
                    args.max_lines
                ));
            }
            for (a, b) in &m.inline_tests {
                findings.push(format!(
                    "{}:{a}: an inline test module (lines {a}-{b}): put it beside the file (`mod tests;`)",
                    rel(&m.file)
                ));
            }
        }
        let file_of = |p: &ModPath| {
            g.modules
                .iter()
                .find(|m| &m.path == p)
                .map(|m| rel(&m.file))
                .unwrap_or_default()
        };
        let room = |p: &ModPath| p.iter().take(1).cloned().collect::<ModPath>();
        for (what, key) in [("modules", false), ("rooms", true)] {
            let k = |p: &ModPath| if key { room(p) } else { p.clone() };
            for circle in g.circles(k) {
                let members: BTreeSet<ModPath> = circle.iter().cloned().collect();
                let mut why: Vec<String> = g
                    .edges
                    .iter()
                    .filter(|e| {
                        members.contains(&k(&e.from)) && members.contains(&k(&e.to)) && k(&e.from) != k(&e.to)
                    })
                    .map(|e| format!("{}:{} → {}", file_of(&e.from), e.line, show(&e.to)))
                    .collect();
                why.sort();
                why.dedup_by(|a, b| {
                    a.split(':').next() == b.split(':').next() && a.rsplit('→').next() == b.rsplit('→').next()
                });
                findings.push(format!(
                    "{name}: an import circle between {what} {}:\n    {}",
                    circle.iter().map(|p| show(p)).collect::<Vec<_>>().join(", "),
                    why.join("\n    ")
                ));
            }
        }
        if args.verbose {
            let mut rooms: BTreeSet<(String, String)> = BTreeSet::new();
            for e in &g.edges {
                let (a, b) = (room(&e.from), room(&e.to));
                if a != b {
                    rooms.insert((show(&a), show(&b)));
                }
            }
            println!("{name}: {} modules, {} imports", g.modules.len(), g.edges.len());
            for (a, b) in rooms {
                println!("    {a} → {b}");
            }
        }
    }
    largest.sort_by(|a, b| b.cmp(a));
    println!("largest files:");
    for (n, f) in largest.iter().take(5) {
        println!("    {n:>5}  {f}");
    }
    longest_fns.sort_by(|a, b| b.cmp(a));
    println!("longest functions of the product (lines of code):");
    for (n, f) in longest_fns.iter().take(5) {
        println!("    {n:>5}  {f}");
    }
    if findings.is_empty() {
        println!(
            "layout: no import circle, rooms in their declared order, no file over {} lines, no function over {} lines of code without its reason, no test inside a product file, docs/architecture.md's rooms are the code's",
            args.max_lines, args.max_fn_lines
        );
        Ok(0)
    } else {
        for f in &findings {
            println!("{f}");
        }
        println!("layout: {} finding(s)", findings.len());
        Ok(1)
    }
}
