//! Every function's length in the product's crates (those that take the
//! workspace's lints), counted as clippy's `too_many_lines` counts it:
//! the lines of its body, braces included, that hold code, neither blank
//! nor comment.
//!
//! The bound is clippy's default, 100: the length at which a function of
//! this codebase stops fitting on one screen with its doc, and past which
//! the agent's wiring hid its order (the start was 149 lines, the serving
//! loop 242, before they were split). A function over it says why with
//! `#[expect(clippy::too_many_lines, reason = "...")]`, the attribute
//! clippy reads too: one excuse serves both, and both fail once it is no
//! longer needed.

/// One function's length.
#[derive(Debug)]
pub struct Length {
    pub name: String,
    /// The line of its `fn`, from 1.
    pub line: usize,
    pub lines: usize,
    /// It carries `#[expect(clippy::too_many_lines, ...)]`.
    pub excused: bool,
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Every function with a body in `original` (whose comments and literals
/// `stripped` has blanked).
pub fn lengths(original: &str, stripped: &str) -> Vec<Length> {
    let b = stripped.as_bytes();
    let lines: Vec<&str> = original.lines().collect();
    let stripped_lines: Vec<&str> = stripped.lines().collect();
    let line_of = |at: usize| stripped[..at].bytes().filter(|&c| c == b'\n').count();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(pos) = stripped[from..].find("fn ") {
        let at = from + pos;
        from = at + 3;
        if at > 0 && is_ident(b[at - 1]) {
            continue;
        }
        let rest = &stripped[at + 3..];
        let name: String = rest
            .trim_start()
            .bytes()
            .take_while(|&c| is_ident(c))
            .map(char::from)
            .collect();
        if name.is_empty() {
            continue; // a pointer type, `fn(u8) -> u8`
        }
        let Some(end) = rest.find(['{', ';']) else {
            continue;
        };
        if rest.as_bytes()[end] == b';' {
            continue; // a declaration: a trait's method without a body
        }
        let open = at + 3 + end;
        let mut depth = 0usize;
        let mut close = open;
        for (i, &c) in b.iter().enumerate().skip(open) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let (first, last) = (line_of(open), line_of(close));
        let code = (first..=last)
            .filter(|&l| stripped_lines.get(l).is_some_and(|s| !s.trim().is_empty()))
            .count();
        let fn_line = line_of(at);
        out.push(Length {
            name,
            line: fn_line + 1,
            lines: code,
            excused: excused(&lines, fn_line),
        });
    }
    out
}

/// Whether the attributes above line `fn_line` (from 0) excuse its length.
fn excused(lines: &[&str], fn_line: usize) -> bool {
    for l in lines[..fn_line].iter().rev() {
        let t = l.trim();
        let item_end = !t.starts_with('#')
            && !t.starts_with("//")
            && (t.ends_with('}') || t.ends_with(';') || t.ends_with('{'));
        if t.is_empty() || item_end {
            return false;
        }
        if t.contains("clippy::too_many_lines") {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests;
