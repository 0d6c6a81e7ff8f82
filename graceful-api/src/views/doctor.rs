//! `/v1/doctor` (and `graceful doctor`): can this node run graceful? One
//! [`Finding`] per check, each saying what to do.

use serde::{Deserialize, Serialize};

/// How a check came out, in rising order: the worst of several is their
/// `max` ([`worst`]).
#[derive(PartialEq, Eq, PartialOrd, Ord, Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

/// One check's line: `/v1/doctor` and `kubectl graceful doctor` carry
/// these. The field names are a contract.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Finding {
    pub level: Level,
    pub check: String,
    pub message: String,
}

impl Finding {
    /// `ok   kernel       6.12 ...`, as `graceful doctor` prints it.
    pub fn line(&self) -> String {
        let tag = match self.level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        format!("{tag} {:<12} {}", self.check, self.message)
    }
}

/// The worst level among `findings` (`Ok` for none).
pub fn worst(findings: &[Finding]) -> Level {
    findings.iter().map(|f| f.level).max().unwrap_or(Level::Ok)
}

/// What a set of findings means, as its last line.
pub fn verdict(findings: &[Finding]) -> Option<&'static str> {
    findings
        .iter()
        .any(|f| f.level == Level::Fail)
        .then_some("graceful cannot work on this node until the FAIL lines above are fixed")
}
