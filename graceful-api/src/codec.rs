//! The hook's side of the wire without serde: the drain request written,
//! and the agent's lines read, with std alone. graceful-wait, copied into
//! every pod and built static, links this and no serde symbol; the tests
//! hold it to the serde types the agent reads and writes.
//!
//! - [`request`]: a [`DrainRequest`] as the JSON the agent's serde reads;
//! - [`string`]: any text as a JSON string;
//! - [`fields`]: the top-level members of a one-line JSON object, strings
//!   unescaped, every other value as its JSON text; [`last`]: one member
//!   by name.

use crate::DrainRequest;

/// `s` as a JSON string, quotes included.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The request as JSON: the members serde writes, in its order, absent
/// ones left out.
pub fn request(r: &DrainRequest) -> String {
    let mut f: Vec<String> = Vec::new();
    if let Some(p) = r.policy {
        f.push(format!("\"policy\":{}", string(p.as_str())));
    }
    if let Some(s) = r.scope {
        f.push(format!("\"scope\":{}", string(s.as_str())));
    }
    for (k, v) in [
        ("min_ms", r.min_ms),
        ("max_ms", r.max_ms),
        ("settle_ms", r.settle_ms),
        ("quiet_ms", r.quiet_ms),
    ] {
        if let Some(v) = v {
            f.push(format!("\"{k}\":{v}"));
        }
    }
    if let Some(names) = &r.after_containers {
        let names: Vec<String> = names.iter().map(|n| string(n)).collect();
        f.push(format!("\"after_containers\":[{}]", names.join(",")));
    }
    for (k, v) in [
        ("ignore_ports", &r.ignore_ports),
        ("ignore_peers", &r.ignore_peers),
    ] {
        if let Some(v) = v {
            f.push(format!("\"{k}\":{}", string(v)));
        }
    }
    f.push(format!("\"started_unix_ms\":{}", r.started_unix_ms));
    if let Some(b) = &r.resumed {
        let points: Vec<String> = b
            .timeline
            .iter()
            .map(|p| format!("{{\"ms\":{},\"inbound\":{}}}", p.ms, p.inbound))
            .collect();
        f.push(format!(
            "\"resumed\":{{\"inbound_at_start\":{},\"peak_inbound\":{},\"timeline\":[{}]}}",
            b.inbound_at_start,
            b.peak_inbound,
            points.join(",")
        ));
    }
    format!("{{{}}}", f.join(","))
}

/// One member's value: a string, unescaped, or any other value as its
/// JSON text (`12`, `null`, `["a"]`, `{"k":1}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Field {
    Str(String),
    Raw(String),
}

impl Field {
    /// The string, or the other value's text.
    pub fn text(&self) -> &str {
        match self {
            Field::Str(s) | Field::Raw(s) => s,
        }
    }
}

/// The top-level members of the JSON object `line`, in order; `None` if
/// it is not one.
pub fn fields(line: &str) -> Option<Vec<(String, Field)>> {
    let mut r = Reader {
        b: line.as_bytes(),
        i: 0,
    };
    r.ws();
    r.eat(b'{')?;
    let mut out = Vec::new();
    r.ws();
    if r.peek() == Some(b'}') {
        r.i += 1;
    } else {
        loop {
            r.ws();
            let key = r.string()?;
            r.ws();
            r.eat(b':')?;
            r.ws();
            let value = if r.peek() == Some(b'"') {
                Field::Str(r.string()?)
            } else {
                let start = r.i;
                r.value()?;
                Field::Raw(line[start..r.i].to_string())
            };
            out.push((key, value));
            r.ws();
            match r.next()? {
                b',' => continue,
                b'}' => break,
                _ => return None,
            }
        }
    }
    r.ws();
    (r.i == r.b.len()).then_some(out)
}

/// The member named `key` among `members` (the last, if it is named
/// twice, as serde reads it).
pub fn last<'a>(members: &'a [(String, Field)], key: &str) -> Option<&'a Field> {
    members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

/// How deep arrays and objects may nest in a value skipped over.
const MAX_DEPTH: usize = 64;

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let s = std::str::from_utf8(self.b.get(self.i..self.i + 4)?).ok()?;
        self.i += 4;
        u32::from_str_radix(s, 16).ok()
    }

    /// A string, after its opening quote is next; unescaped.
    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let mut out = String::new();
        loop {
            let start = self.i;
            while !matches!(self.peek()?, b'"' | b'\\') {
                if self.peek()? < 0x20 {
                    return None;
                }
                self.i += 1;
            }
            out.push_str(std::str::from_utf8(&self.b[start..self.i]).ok()?);
            if self.next()? == b'"' {
                return Some(out);
            }
            let c = match self.next()? {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => {
                    let hi = self.hex4()?;
                    let code = if (0xd800..0xdc00).contains(&hi) {
                        self.eat(b'\\')?;
                        self.eat(b'u')?;
                        let lo = self.hex4()?;
                        if !(0xdc00..0xe000).contains(&lo) {
                            return None;
                        }
                        0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                    } else {
                        hi
                    };
                    char::from_u32(code)?
                }
                _ => return None,
            };
            out.push(c);
        }
    }

    /// Skips one value of any kind, checking its shape.
    fn value(&mut self) -> Option<()> {
        self.nested(0)
    }

    fn nested(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' | b'[' => {
                let close = if self.next()? == b'{' { b'}' } else { b']' };
                self.ws();
                if self.peek()? == close {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.ws();
                    if close == b'}' {
                        self.string()?;
                        self.ws();
                        self.eat(b':')?;
                        self.ws();
                    }
                    self.nested(depth + 1)?;
                    self.ws();
                    match self.next()? {
                        b',' => continue,
                        c if c == close => return Some(()),
                        _ => return None,
                    }
                }
            }
            b't' => self.word("true"),
            b'f' => self.word("false"),
            b'n' => self.word("null"),
            _ => self.number(),
        }
    }

    fn word(&mut self, w: &str) -> Option<()> {
        let end = self.i + w.len();
        (self.b.get(self.i..end)? == w.as_bytes()).then(|| self.i = end)
    }

    /// A number as JSON writes one: `-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.digit()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            self.digit()?;
        }
        Some(())
    }

    /// At least one digit.
    fn digit(&mut self) -> Option<()> {
        self.next().filter(u8::is_ascii_digit)?;
        self.digits();
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }
}

// Its tests read and write with serde (the default feature).
#[cfg(all(test, feature = "serde"))]
pub(crate) mod tests;
