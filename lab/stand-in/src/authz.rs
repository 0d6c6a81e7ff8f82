//! The app's question to its policy engine, asked as an app with an OPA
//! client asks it: `POST <path>` (`/v1/data/httpapi/authz/allow`) with
//! `{"input": {"method": ..., "path": ...}}`, over keep-alive connections
//! kept between requests; allowed when the answer's `result` is `true`.
//!
//! A kept connection that the engine has closed meanwhile is found out by
//! the write or the first read; the question is then asked once more on a
//! new connection, as Go's HTTP client retries a request on a reused
//! connection that died before any answer. What fails after that is the
//! app's failure: it answers 502.

use anyhow::{bail, Context as _, Result};
use std::{
    io::{BufRead, BufReader, Write},
    net::{SocketAddr, TcpStream},
    sync::Mutex,
    time::Duration,
};

const TIMEOUT: Duration = Duration::from_secs(5);
/// Idle connections kept, at most.
const KEEP: usize = 16;

pub struct Authz {
    addr: SocketAddr,
    path: String,
    idle: Mutex<Vec<BufReader<TcpStream>>>,
}

/// What the engine said.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny,
    /// No answer: why.
    Unreachable(String),
}

impl Authz {
    /// `http://ADDR/PATH`.
    pub fn parse(url: &str) -> Result<Authz> {
        let rest = url
            .strip_prefix("http://")
            .with_context(|| format!("{url}: not an http:// URL"))?;
        let (addr, path) = rest.split_once('/').unwrap_or((rest, ""));
        let addr: SocketAddr = addr
            .parse()
            .with_context(|| format!("{url}: the host must be an IP address and port"))?;
        if path.is_empty() {
            bail!("{url}: no path (OPA's is /v1/data/<package path>/<rule>)");
        }
        Ok(Authz {
            addr,
            path: format!("/{path}"),
            idle: Mutex::new(Vec::new()),
        })
    }

    /// Asks whether `method` on `path` is allowed.
    pub fn ask(&self, method: &str, path: &str) -> Verdict {
        let body = serde_json::json!({"input": {"method": method, "path": path}}).to_string();
        let kept = self.idle.lock().unwrap().pop();
        let reused = kept.is_some();
        let first = match kept {
            Some(c) => self.exchange(c, &body),
            None => self.connect().and_then(|c| self.exchange(c, &body)),
        };
        let answer = match first {
            Err(Failed::BeforeAnswer(_)) if reused => self.connect().and_then(|c| self.exchange(c, &body)),
            other => other,
        };
        match answer {
            Ok(true) => Verdict::Allow,
            Ok(false) => Verdict::Deny,
            Err(Failed::BeforeAnswer(e) | Failed::During(e)) => Verdict::Unreachable(e),
        }
    }

    fn connect(&self) -> std::result::Result<BufReader<TcpStream>, Failed> {
        let s = TcpStream::connect_timeout(&self.addr, TIMEOUT)
            .map_err(|e| Failed::During(format!("connect {}: {e}", self.addr)))?;
        let _ = s.set_read_timeout(Some(TIMEOUT));
        let _ = s.set_nodelay(true);
        Ok(BufReader::new(s))
    }

    /// One question on `conn`; the connection goes back to the idle ones
    /// if the answer leaves it open.
    fn exchange(&self, mut conn: BufReader<TcpStream>, body: &str) -> std::result::Result<bool, Failed> {
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: policy\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.path,
            body.len()
        );
        conn.get_mut()
            .write_all(format!("{head}{body}").as_bytes())
            .map_err(|e| Failed::BeforeAnswer(e.to_string()))?;
        // Nothing back on this connection yet: a kept one may have died.
        match conn.fill_buf() {
            Ok([]) => return Err(Failed::BeforeAnswer("closed before an answer".into())),
            Err(e) => return Err(Failed::BeforeAnswer(e.to_string())),
            Ok(_) => {}
        }
        let answer = crate::http_response::read(&mut conn).map_err(|e| Failed::During(e.to_string()))?;
        if answer.status != 200 {
            return Err(Failed::During(format!("the engine answered {}", answer.status)));
        }
        let v: serde_json::Value =
            serde_json::from_slice(&answer.body).map_err(|e| Failed::During(format!("its answer: {e}")))?;
        if answer.reusable {
            let mut idle = self.idle.lock().unwrap();
            if idle.len() < KEEP {
                idle.push(conn);
            }
        }
        // No result: the rule is undefined for this input, which denies.
        Ok(v["result"] == serde_json::Value::Bool(true))
    }
}

enum Failed {
    /// Nothing came back on this connection: a kept one may have died.
    BeforeAnswer(String),
    During(String),
}

#[cfg(test)]
mod tests;
