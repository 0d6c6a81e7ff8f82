//! A broken rule, named: the Pod Security and gate checks return these
//! rather than panic at the first, so a test can show that a broken copy
//! of a pod spec fails exactly the rule it breaks.

use std::fmt;

/// Each rule the restricted example and the httpGet gate hooks are held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    // Pod Security restricted (which includes baseline).
    NamespaceEnforcesRestricted,
    NoHostVolumes,
    NoHostNamespaces,
    NotPrivileged,
    RunAsNonRoot,
    NoPrivilegeEscalation,
    CapabilitiesDropAll,
    SeccompProfile,
    NoHostInHooksOrProbes,
    // The httpGet gate, as the agent reads a pod.
    GateOptIn,
    GateTarget,
    GateQuery,
    GateContainer,
    GateFitsGrace,
}

/// One rule broken, and where.
#[derive(Clone, Debug)]
pub struct Finding {
    pub rule: Rule,
    pub msg: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:?}] {}", self.rule, self.msg)
    }
}

/// Findings, one a line, for an assertion message.
pub fn report(findings: &[Finding]) -> String {
    findings.iter().map(|f| format!("\n  {f}")).collect::<String>()
}

/// Collects findings: `check(rule, ok, || message)`.
#[derive(Default)]
pub struct Findings(pub Vec<Finding>);

impl Findings {
    pub fn check(&mut self, rule: Rule, ok: bool, msg: impl FnOnce() -> String) {
        if !ok {
            self.0.push(Finding { rule, msg: msg() });
        }
    }
}
