//! Enough of the Containerfile syntax to check what it refers to: its
//! stages, and each stage's instructions with line continuations joined
//! and comments dropped.

#[derive(Debug)]
pub struct Instruction {
    /// Upper case: `COPY`, `RUN`, ...
    pub keyword: String,
    pub args: String,
    /// 1-based line where it starts, for messages.
    pub line: usize,
}

#[derive(Debug)]
pub struct Stage {
    /// The image it starts from.
    pub base: String,
    /// `AS name`, if given.
    pub name: Option<String>,
    /// `--platform=...`, if given.
    pub platform: Option<String>,
    pub instructions: Vec<Instruction>,
}

impl Stage {
    pub fn all<'a>(&'a self, keyword: &'a str) -> impl Iterator<Item = &'a Instruction> + 'a {
        self.instructions.iter().filter(move |i| i.keyword == keyword)
    }
}

/// The stages of a Containerfile. Instructions before the first FROM (ARG)
/// are dropped.
pub fn parse(text: &str) -> Vec<Stage> {
    let mut stages: Vec<Stage> = Vec::new();
    let mut pending = String::new();
    let mut start = 0;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        // Comment and blank lines end nothing: they may sit inside a
        // continued instruction.
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if pending.is_empty() {
            start = n + 1;
        }
        match line.strip_suffix('\\') {
            Some(part) => {
                pending.push_str(part);
                pending.push(' ');
                continue;
            }
            None => pending.push_str(line),
        }
        let text = std::mem::take(&mut pending);
        let (keyword, args) = text
            .trim()
            .split_once(char::is_whitespace)
            .unwrap_or((text.trim(), ""));
        let keyword = keyword.to_ascii_uppercase();
        let args = args.trim().to_string();
        if keyword == "FROM" {
            let words: Vec<&str> = args.split_whitespace().filter(|w| !w.starts_with("--")).collect();
            let name = match words[..] {
                [_, kw, name] if kw.eq_ignore_ascii_case("as") => Some(name.to_string()),
                _ => None,
            };
            let platform = args
                .split_whitespace()
                .find_map(|w| w.strip_prefix("--platform="))
                .map(str::to_string);
            stages.push(Stage {
                base: words.first().copied().unwrap_or_default().to_string(),
                name,
                platform,
                instructions: Vec::new(),
            });
        } else if let Some(stage) = stages.last_mut() {
            stage.instructions.push(Instruction {
                keyword,
                args,
                line: start,
            });
        }
    }
    stages
}

/// A COPY: its `--from` stage, sources and destination. Both the shell form
/// (`COPY a b dest`) and the JSON form (`COPY ["a", "dest"]`) are read.
#[derive(Debug)]
pub struct Copy {
    pub from: Option<String>,
    pub sources: Vec<String>,
    pub dest: String,
}

pub fn copy(i: &Instruction) -> Copy {
    let mut from = None;
    let mut rest = i.args.as_str();
    while let Some(flag) = rest.strip_prefix("--") {
        let (flag, tail) = flag.split_once(char::is_whitespace).unwrap_or((flag, ""));
        if let Some(stage) = flag.strip_prefix("from=") {
            from = Some(stage.to_string());
        }
        rest = tail.trim_start();
    }
    let mut words: Vec<String> = if rest.starts_with('[') {
        serde_json::from_str(rest).unwrap_or_else(|e| panic!("line {}: bad JSON form: {e}", i.line))
    } else {
        rest.split_whitespace().map(str::to_string).collect()
    };
    assert!(
        words.len() >= 2,
        "line {}: COPY needs a source and a destination",
        i.line
    );
    let dest = words.pop().unwrap();
    Copy {
        from,
        sources: words,
        dest,
    }
}

#[test]
fn parses_stages_continuations_and_copies() {
    let text =
        "ARG X=1\nFROM --platform=$BUILDPLATFORM rust:1 AS builder\n# a comment\nRUN a \\\n  # inside\n  b\nCOPY --chown=0:0 x y /d/\n\
                FROM scratch\nCOPY --from=builder [\"/a b\", \"/c\"]\nENTRYPOINT [\"/c\"]\n";
    let s = parse(text);
    assert_eq!(s.len(), 2);
    assert_eq!(
        (s[0].base.as_str(), s[0].name.as_deref(), s[0].platform.as_deref()),
        ("rust:1", Some("builder"), Some("$BUILDPLATFORM"))
    );
    assert_eq!(s[1].platform, None);
    let run = s[0].all("RUN").next().unwrap();
    assert_eq!(
        (run.args.split_whitespace().collect::<Vec<_>>(), run.line),
        (vec!["a", "b"], 4)
    );
    let c = copy(s[0].all("COPY").next().unwrap());
    assert_eq!(
        (c.from, c.sources, c.dest.as_str()),
        (None, vec!["x".to_string(), "y".into()], "/d/")
    );
    let c = copy(s[1].all("COPY").next().unwrap());
    assert_eq!(
        (c.from.as_deref(), c.sources, c.dest.as_str()),
        (Some("builder"), vec!["/a b".to_string()], "/c")
    );
}
