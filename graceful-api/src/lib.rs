//! The agent's wire contract, shared by the agent, its clients and the
//! fuzz targets: what a pod may ask (`POST /v1/drain`), and the names of
//! the policies and release reasons that reports carry; what the agent
//! answers ([`drain`]: the hook's lines, a drain's report, the drains in
//! progress and their feed, the caller's view, an error; [`termination`]: a
//! terminating pod watched, and its report), written with
//! serde and read by graceful-wait with the std-only [`codec`] over the
//! std-only [`client`] (Linux); the
//! httpGet gate's query ([`hook_query`]), with the durations it carries
//! ([`duration`]); and the local API's answers with the tables every
//! client prints from them ([`views`]).

#[cfg(target_os = "linux")]
pub mod client;
pub mod codec;
#[cfg(feature = "serde")]
pub mod drain;
pub mod duration;
pub mod exclusions;
pub mod hook_query;
#[cfg(feature = "serde")]
pub mod termination;
#[cfg(feature = "serde")]
pub mod views;

pub use exclusions::Peer;

/// A drain's settings by the names people write them: graceful-wait's
/// flags (without `--`), the `graceful.dev/` annotations' keys, and the
/// httpGet gate's query.
pub const SETTINGS: [&str; 9] = [
    "policy",
    "scope",
    "min",
    "max",
    "settle",
    "quiet",
    "after-containers",
    "ignore-ports",
    "ignore-peers",
];

/// The abstract unix socket the agent binds in the network namespace of a
/// pod annotated `graceful.dev/gate: socket`, named without its leading
/// NUL. `graceful-wait --socket @graceful.dev/gate` reaches it from any
/// container of that pod, with no hostPath: an abstract socket belongs to
/// a network namespace, not to a filesystem.
pub const POD_SOCKET: &str = "graceful.dev/gate";

/// The pod's annotation naming its httpGet gate's port.
pub const GATE_PORT_ANNOTATION: &str = "graceful.dev/gate-port";
/// The httpGet gate's port where a pod names none.
pub const DEFAULT_GATE_PORT: u16 = 9711;

/// `graceful.dev/gate-port` as everything of graceful's reads it (the
/// agent, `kubectl graceful adopt`, and the injection and hook policies in
/// CEL): trimmed, one to five digits, 1 to 65535 (`" 09800"` is 9800;
/// `"+9800"`, which Rust's parse alone takes, is no port). Where two
/// readings differ, an injected hook knocks on a port the agent does not
/// listen on.
pub fn gate_port(raw: &str) -> Option<u16> {
    let t = raw.trim();
    let digits = (1..=5).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| t.parse::<u16>().ok()).flatten().filter(|p| *p > 0)
}

/// The agent's whole local API, on its pod's loopback in the DaemonSet
/// (`kubectl graceful` reaches it by port-forward).
pub const POD_API_PORT: u16 = 9465;

/// Largest request body the gate accepts.
pub const MAX_BODY: usize = 64 * 1024;

/// How a drain decides it is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Policy {
    /// Live inbound connections have been zero for `settle`, and none arrived meanwhile.
    Drained,
    /// No new inbound connection and no inbound payload for `quiet`, even
    /// if idle keep-alive connections remain (the app's own SIGTERM
    /// handling closes them). Also released when drained.
    Quiet,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Drained => "drained",
            Policy::Quiet => "quiet",
        }
    }
}

/// Why a drain was released. The names are the report's contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Reason {
    Drained,
    Quiet,
    Deadline,
    ContainersExited,
    AgentUnreachable,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Drained => "drained",
            Reason::Quiet => "quiet",
            Reason::Deadline => "deadline",
            Reason::ContainersExited => "containers-exited",
            Reason::AgentUnreachable => "agent-unreachable",
        }
    }
}

/// Which connections a drain counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum Scope {
    /// The whole pod's inbound connections (sidecars that must outlive the app).
    #[default]
    Pod,
    /// Only the calling container's own.
    Container,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Pod => "pod",
            Scope::Container => "container",
        }
    }
}

/// What a pod's hook asks. Every setting is optional: what the hook's flags
/// leave out comes from the pod's annotations or the agent's defaults (the
/// deadline from the pod's terminationGracePeriodSeconds), and an
/// annotation overrides a flag. The agent answers with [`Accepted`] first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct DrainRequest {
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub policy: Option<Policy>,
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub scope: Option<Scope>,
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub min_ms: Option<u64>,
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub max_ms: Option<u64>,
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub settle_ms: Option<u64>,
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub quiet_ms: Option<u64>,
    /// Release once these containers of the same pod have exited (names,
    /// once the Kubernetes API has told them, or id prefixes).
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub after_containers: Option<Vec<String>>,
    /// `ignore-ports` and `ignore-peers` as the hook was given them: the
    /// agent parses them as it does the annotations (see [`exclusions`]),
    /// so a bad value is reported and the drain runs without it.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub ignore_ports: Option<String>,
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub ignore_peers: Option<String>,
    /// When the client started waiting (Unix ms). A client that reconnects
    /// after an agent restart sends the same value, so the drain continues
    /// from its original start (the agent holds it to a sane bound: see
    /// [`Accepted::warnings`]).
    pub started_unix_ms: u64,
    /// What a client that reconnects saw of the drain before (the agent
    /// it asked then has restarted, and its memory with it): the report
    /// carries these values on.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Option::is_none"))]
    pub resumed: Option<Resumed>,
}

/// One point of a drain's inbound timeline: milliseconds since the drain
/// started, and the live inbound count from then on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Point {
    pub ms: u64,
    pub inbound: u64,
}

/// The earlier attempts of a drain, as its client saw them in their
/// progress lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct Resumed {
    pub inbound_at_start: u64,
    pub peak_inbound: u64,
    /// The timeline so far, in order, at most [`MAX_RESUMED_POINTS`].
    pub timeline: Vec<Point>,
}

/// The most timeline points a resumed request carries.
pub const MAX_RESUMED_POINTS: usize = 512;

impl Resumed {
    /// A drain seen so far from its first point.
    pub fn starting(p: Point) -> Resumed {
        Resumed {
            inbound_at_start: p.inbound,
            peak_inbound: p.inbound,
            timeline: vec![p],
        }
    }

    /// Carries `p` on: a point that repeats the last count, or comes
    /// before it, adds nothing; past [`MAX_RESUMED_POINTS`] the start
    /// and the latest are kept (as `graceful-wait` keeps them). Whether
    /// it added `p`.
    pub fn point(&mut self, p: Point) -> bool {
        if self
            .timeline
            .last()
            .is_some_and(|l| l.inbound == p.inbound || l.ms > p.ms)
        {
            return false;
        }
        if self.timeline.len() >= MAX_RESUMED_POINTS {
            self.timeline.remove(1);
        }
        self.timeline.push(p);
        self.peak_inbound = self.peak_inbound.max(p.inbound);
        true
    }
}

/// Defaults when neither an annotation nor a flag sets a value.
pub const DEFAULT_MIN_MS: u64 = 2000;
pub const DEFAULT_SETTLE_MS: u64 = 1000;
pub const DEFAULT_QUIET_MS: u64 = 5000;
/// The deadline when the pod's grace period is unknown (no Kubernetes
/// API): Kubernetes' default grace period, 30 s, less a 5 s budget.
pub const DEFAULT_MAX_MS: u64 = 25_000;

/// Where an effective setting came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Source {
    /// A pod annotation naming this container.
    ContainerAnnotation,
    /// A pod annotation for every container.
    PodAnnotation,
    /// The hook's own flag.
    Flag,
    /// terminationGracePeriodSeconds less the agent's shutdown budget.
    GracePeriod,
    Default,
}

/// The first line of a drain's stream: the settings in effect, where
/// each came from, and what was wrong with the ones given (a deadline at or
/// past the grace period, an annotation that does not parse). The hook
/// takes its deadline from here.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Accepted {
    pub policy: Policy,
    pub scope: Scope,
    pub min_ms: u64,
    pub max_ms: u64,
    pub settle_ms: u64,
    pub quiet_ms: u64,
    pub after_containers: Vec<String>,
    /// Local ports and peers whose connections the drain leaves out.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Vec::is_empty"))]
    pub ignore_ports: Vec<u16>,
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "Vec::is_empty"))]
    pub ignore_peers: Vec<Peer>,
    /// The grace period in effect for the pod (the deletion's own, else the
    /// spec's), when the API has told it.
    pub grace_period_ms: Option<u64>,
    /// Setting name (`max_ms`, ...) → where its value came from.
    pub sources: std::collections::BTreeMap<String, Source>,
    pub warnings: Vec<String>,
}

#[cfg(feature = "serde")]
impl DrainRequest {
    /// Parses and checks a request body: the one place untrusted bytes
    /// from a pod become a drain (fuzzed by `fuzz/fuzz_targets/drain_request.rs`).
    pub fn parse(body: &[u8]) -> Result<DrainRequest, String> {
        if body.len() > MAX_BODY {
            return Err(format!("request body over {MAX_BODY} bytes"));
        }
        let r: DrainRequest =
            serde_json::from_slice(body).map_err(|e| one_line(&format!("invalid drain request: {e}")))?;
        if r.max_ms == Some(0) {
            return Err("max_ms must be above zero".into());
        }
        if let Some(a) = &r.after_containers {
            check_containers(a)?;
        }
        for v in [&r.ignore_ports, &r.ignore_peers].into_iter().flatten() {
            if v.len() > MAX_EXCLUSIONS_TEXT {
                return Err(format!(
                    "ignore_ports, ignore_peers: at most {MAX_EXCLUSIONS_TEXT} bytes each"
                ));
            }
        }
        if let Some(p) = &r.resumed {
            if p.timeline.len() > MAX_RESUMED_POINTS {
                return Err(format!("resumed: at most {MAX_RESUMED_POINTS} timeline points"));
            }
            if p.timeline.windows(2).any(|w| w[1].ms < w[0].ms) {
                return Err("resumed: the timeline's points must be in order".into());
            }
        }
        Ok(r)
    }
}

/// The longest `ignore_ports` or `ignore_peers` a request may carry.
pub const MAX_EXCLUSIONS_TEXT: usize = 1024;

/// The most names `after_containers` may carry.
pub const MAX_AFTER_CONTAINERS: usize = 64;
/// The longest of them: a container name is a DNS label (63), an id
/// prefix at most the 64 hex digits of an id.
pub const MAX_CONTAINER_NAME: usize = 64;

/// The bounds on `after_containers`, wherever the names come from: what a
/// container name or id prefix can be (letters, digits, `-`, `.`, `_`),
/// so that a held hook's record stays small whatever a pod sends.
pub fn check_containers(names: &[String]) -> Result<(), String> {
    let name_ok = |c: &String| {
        !c.is_empty()
            && c.len() <= MAX_CONTAINER_NAME
            && c.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    };
    if names.len() > MAX_AFTER_CONTAINERS || !names.iter().all(name_ok) {
        return Err(format!(
            "after_containers: at most {MAX_AFTER_CONTAINERS} container names or id prefixes of 1 to \
             {MAX_CONTAINER_NAME} letters, digits, '-', '.' or '_'"
        ));
    }
    Ok(())
}

/// For `skip_serializing_if`: a tally of zero is left out of the JSON.
#[cfg(feature = "serde")]
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Error messages quote the request (an unknown variant, say): keep them
/// one line, and short, whatever the pod sent.
#[cfg(feature = "serde")]
fn one_line(s: &str) -> String {
    let s: String = s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    clip(&s, 4 * MAX_ECHO)
}

/// The most characters of a caller's value (a path, an id) an error
/// message quotes.
pub const MAX_ECHO: usize = 128;

/// `s` as an error message may quote it: whole when short, else its
/// first `max` characters, an ellipsis and its length. A caller's value is
/// echoed so the caller can tell which it was, not to hand it back whole
/// (a 60 KB id would make every log line and answer 60 KB).
pub fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((end, _)) => format!("{}… ({} bytes)", &s[..end], s.len()),
    }
}

/// A command line's error as the CLIs print it, in one line: the first
/// line of clap's rendering without its `error: `, and the indented lines
/// that continue it (the arguments a "required arguments were not
/// provided:" names), but no usage block or tip.
pub fn usage_error_line(rendered: &str) -> String {
    let mut lines = rendered.lines();
    let mut line = lines
        .next()
        .unwrap_or("invalid arguments")
        .trim_start_matches("error: ")
        .to_string();
    let more: Vec<&str> = lines
        .take_while(|l| l.starts_with(' ') && !l.trim().is_empty())
        .map(str::trim)
        .collect();
    if !more.is_empty() {
        line = format!("{} {}", line.trim_end(), more.join(", "));
    }
    line
}

// Its tests read and write with serde (the default feature).
#[cfg(all(test, feature = "serde"))]
mod tests;
