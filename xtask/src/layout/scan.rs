//! Reading a Rust source for the module paths it names: comments, strings
//! and character literals blanked out, then every `crate::…`, `super::…`
//! and `self::…` path, `use` trees with braces expanded.

/// `src` with comments, string and char literals replaced by spaces (line
/// breaks kept, so positions still tell the line).
pub fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    out.push(b' ');
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        out.extend_from_slice(b"  ");
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        out.extend_from_slice(b"  ");
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        blank(&mut out, b[i]);
                        i += 1;
                    }
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'"') | Some(b'#')) && !ident_before(b, i) => {
                // A raw string: r"…" or r#"…"#.
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    out.push(b[i]);
                    i += 1;
                    continue;
                }
                j += 1;
                while j < b.len() {
                    if b[j] == b'"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&b'#')) {
                        j += 1 + hashes;
                        break;
                    }
                    j += 1;
                }
                for &c in &b[i..j.min(b.len())] {
                    blank(&mut out, c);
                }
                i = j;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                for &c in &b[i..(j + 1).min(b.len())] {
                    blank(&mut out, c);
                }
                i = j + 1;
            }
            // A char literal ('a', '\n', '\''), not a lifetime ('a).
            b'\'' if is_char_literal(b, i) => {
                let mut j = i + 1;
                if b.get(j) == Some(&b'\\') {
                    j += 2;
                    while j < b.len() && b[j] != b'\'' {
                        j += 1;
                    }
                } else {
                    j += char_len(b[j]);
                }
                for &c in &b[i..(j + 1).min(b.len())] {
                    blank(&mut out, c);
                }
                i = j + 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn ident_before(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

fn char_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

fn is_char_literal(b: &[u8], i: usize) -> bool {
    match b.get(i + 1) {
        Some(b'\\') => true,
        Some(&c) => b.get(i + 1 + char_len(c)) == Some(&b'\''),
        None => false,
    }
}

/// One path the source names, and the line it is on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    /// `crate`, `super`, `self` first, then the segments.
    pub path: Vec<String>,
    pub line: usize,
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Every `crate::…`, `super::…` and `self::…` path in stripped source.
pub fn refs(stripped: &str) -> Vec<Ref> {
    let b = stripped.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !is_ident(b[i]) || (i > 0 && (is_ident(b[i - 1]) || b[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && is_ident(b[i]) {
            i += 1;
        }
        let word = &stripped[start..i];
        if !matches!(word, "crate" | "super" | "self") || !stripped[i..].starts_with("::") {
            continue;
        }
        let line = stripped[..start].matches('\n').count() + 1;
        let (paths, end) = tree(stripped, start);
        for path in paths {
            out.push(Ref { path, line });
        }
        i = end.max(i);
    }
    out
}

/// The paths of a path or use tree starting at `at`: `a::b`, `a::{b, c::d}`,
/// `a::*` (as `a`), `a::b as c` (as `a::b`). Returns them and where it ended.
fn tree(s: &str, at: usize) -> (Vec<Vec<String>>, usize) {
    let b = s.as_bytes();
    let mut i = at;
    let mut prefix = Vec::new();
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < b.len() && b[i] == b'{' {
            let mut out = Vec::new();
            i += 1;
            loop {
                while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b',') {
                    i += 1;
                }
                if i >= b.len() || b[i] == b'}' {
                    return (out, i + 1);
                }
                let (sub, end) = tree(s, i);
                for p in sub {
                    let mut full = prefix.clone();
                    full.extend(p);
                    out.push(full);
                }
                if end <= i {
                    return (out, i + 1);
                }
                i = end;
            }
        }
        if i < b.len() && b[i] == b'*' {
            return (vec![prefix], i + 1);
        }
        let start = i;
        while i < b.len() && is_ident(b[i]) {
            i += 1;
        }
        if start == i {
            return (vec![prefix], i);
        }
        prefix.push(s[start..i].to_string());
        let mut j = i;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        if s[j..].starts_with("::") {
            i = j + 2;
            continue;
        }
        // `name as other`: the path is `name`'s.
        if s[j..].starts_with("as") && s.as_bytes().get(j + 2).is_some_and(|c| c.is_ascii_whitespace()) {
            let mut k = j + 2;
            while k < b.len() && b[k].is_ascii_whitespace() {
                k += 1;
            }
            while k < b.len() && is_ident(b[k]) {
                k += 1;
            }
            return (vec![prefix], k);
        }
        return (vec![prefix], i);
    }
}

/// Line ranges (1-based, inclusive) of `#[cfg(test)] mod … { … }` blocks.
pub fn test_blocks(stripped: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut search = 0;
    while let Some(pos) = stripped[search..].find("#[cfg(test)]") {
        let at = search + pos;
        search = at + 1;
        let rest = &stripped[at + "#[cfg(test)]".len()..];
        let trimmed = rest.trim_start();
        let Some(after_mod) = trimmed
            .strip_prefix("mod ")
            .or_else(|| trimmed.strip_prefix("pub mod "))
            .or_else(|| trimmed.strip_prefix("pub(crate) mod "))
        else {
            continue;
        };
        let offset =
            at + "#[cfg(test)]".len() + (rest.len() - trimmed.len()) + (trimmed.len() - after_mod.len());
        let Some(brace) = stripped[offset..].find(['{', ';']) else {
            continue;
        };
        if stripped.as_bytes()[offset + brace] == b';' {
            continue; // `mod tests;`: beside the file, as it should be
        }
        let open = offset + brace;
        let mut depth = 0;
        let mut close = open;
        for (k, c) in stripped[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let line_of = |p: usize| stripped[..p].matches('\n').count() + 1;
        out.push((line_of(at), line_of(close)));
    }
    out
}

#[cfg(test)]
mod tests;
