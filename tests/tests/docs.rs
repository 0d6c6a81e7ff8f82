//! The documentation, checked as a reader meets it: every relative link in
//! the repository's Markdown reaches a file that exists, and every
//! `#anchor` a heading of that file (GitHub's slugs); and the README stays
//! a front door, at most [`README_LINES`] lines, the rest behind its links.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

/// The README's bound: what and why, a drain, install, one pod, one figure,
/// links.
const README_LINES: usize = 150;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the workspace")
}

/// Every Markdown file of the repository (build output and the test
/// node's files left out).
fn markdown(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let name = e.file_name();
        if p.is_dir() {
            if !matches!(name.to_str(), Some("target" | ".git" | "node_modules")) {
                markdown(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// `line` with its inline code spans blanked.
fn without_code(line: &str) -> String {
    let mut out = String::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 0 {
            out.push_str(part);
        }
    }
    out
}

/// The targets of `[text](target)` links in `text`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let line = without_code(line);
        let mut rest = line.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped but
/// `-` and `_`, spaces as `-`; a repeated one gets `-1`, `-2`, ...
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of `text`'s headings.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in prose(text) {
        let Some(h) = line.strip_prefix('#') else {
            continue;
        };
        let h = h.trim_start_matches('#');
        if !h.starts_with(' ') {
            continue;
        }
        let base = slug(&h.replace(['`', '[', ']'], ""));
        let mut s = base.clone();
        let mut n = 0;
        while seen.contains(&s) {
            n += 1;
            s = format!("{base}-{n}");
        }
        seen.insert(s);
    }
    seen
}

#[test]
fn the_slugs_are_githubs() {
    assert_eq!(
        slug("The gates: exec, httpGet and socket"),
        "the-gates-exec-httpget-and-socket"
    );
    assert_eq!(
        slug("A rolling update, three ways"),
        "a-rolling-update-three-ways"
    );
    assert_eq!(slug("Against sleep 15"), "against-sleep-15");
    let a = anchors("# Title\n## Step\n```\n# not a heading\n```\n## Step\n### `graceful` and it\n");
    assert_eq!(
        a.into_iter().collect::<Vec<_>>(),
        ["graceful-and-it", "step", "step-1", "title"]
    );
    assert_eq!(
        links("see [a](b.md#c), `[not](x)` and [d](https://e)\n```\n[no](y)\n```\n"),
        ["b.md#c", "https://e"]
    );
}

#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let mut files = Vec::new();
    markdown(root(), &mut files);
    assert!(files.len() >= 10, "{files:?}");
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let dest = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let rel = file.strip_prefix(root()).unwrap().display().to_string();
            if !dest.exists() {
                broken.push(format!("{rel}: {target}: no such file"));
                continue;
            }
            if anchor.is_empty() || dest.extension().is_none_or(|x| x != "md") {
                continue;
            }
            let there = anchors(&std::fs::read_to_string(&dest).unwrap());
            if !there.contains(anchor) {
                broken.push(format!("{rel}: {target}: no heading has that anchor"));
            }
        }
    }
    assert!(checked >= 50, "only {checked} links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= README_LINES,
        "README.md has {lines} lines: the details belong in docs/ or lab/README.md, behind a link"
    );
    // The two commands come first.
    let first_block = readme.split("```sh\n").nth(1).unwrap_or_default();
    assert!(
        first_block.starts_with("cargo xtask demo --cluster") && first_block.contains("\ncargo xtask test "),
        "{first_block}"
    );
}

/// The chart's NOTES.txt, which `helm install` prints, names pages of the
/// repository as `docs/<page>.md`, and a section as `docs/<page>.md,
/// "<heading>"`: each page exists and each section is one of its headings.
#[test]
fn the_charts_notes_name_real_pages_and_sections() {
    let notes = std::fs::read_to_string(root().join("deploy/helm/graceful/templates/NOTES.txt")).unwrap();
    let text = notes.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut named = 0;
    for (i, _) in text.match_indices("docs/") {
        let rest = &text[i..];
        let Some(end) = rest.find(".md") else { continue };
        let page = &rest[..end + 3];
        let path = root().join(page);
        assert!(path.is_file(), "NOTES.txt names {page}, which does not exist");
        named += 1;
        if let Some(quoted) = rest[end + 3..].strip_prefix(", \"") {
            let heading = quoted.split('"').next().unwrap();
            let page_text = std::fs::read_to_string(&path).unwrap();
            assert!(
                anchors(&page_text).contains(&slug(heading)),
                "NOTES.txt names the section \"{heading}\" of {page}, which has no such heading"
            );
        }
    }
    assert!(
        named >= 2,
        "NOTES.txt names {named} pages: did its wording change?"
    );
}
