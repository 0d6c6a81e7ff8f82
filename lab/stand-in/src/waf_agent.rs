//! The WAF agent: coraza-spoa in deploy/examples/haproxy-waf, an SPOA
//! (SPOP 2.0, see [`super::spop`]) that HAProxy consults on every request
//! over connections it keeps open (the example's `timeout idle 2m`).
//!
//! Each NOTIFY is answered with an ACK that sets `txn.<prefix>.action` to
//! `deny` when a message's `path` or `query` argument contains `attack`,
//! else `allow`: the example's HAProxy denies on `var(txn.waf.action) -m
//! str deny`. That one rule stands for coraza's rule set.
//!
//! On SIGTERM it stops the way the example counts on: it closes its
//! listener (new connections are refused), answers the frames in flight,
//! tells HAProxy on each connection that it is going (AGENT-DISCONNECT,
//! status 0) and closes them, then exits 0.

use super::{
    server::{spawn, Conn, Conns, Listener},
    spop::{self, Frame, FrameWriter, Message, Value},
    Signals,
};
use anyhow::Result;
use std::{
    io::{self, BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpStream},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

/// The largest frame it accepts (HAProxy's default: tune.bufsize - 4).
const MAX_FRAME_SIZE: u32 = 16380;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:9000")]
    addr: String,
    /// Seconds a shutdown waits for frames in flight before closing their
    /// connections.
    #[arg(long, default_value_t = 10)]
    grace_period: u64,
}

#[derive(Default)]
struct Stats {
    allowed: AtomicU64,
    denied: AtomicU64,
}

/// The verdict on one NOTIFY: `deny` if any message's `path` or `query`
/// contains `attack`.
pub fn verdict(messages: &[Message]) -> &'static str {
    let attack = messages.iter().flat_map(|m| &m.args).any(|(name, value)| {
        matches!(*name, b"path" | b"query")
            && value
                .as_bytes()
                .is_some_and(|b| b.windows(6).any(|w| w == b"attack"))
    });
    if attack {
        "deny"
    } else {
        "allow"
    }
}

/// A SPOP error (SPOE.txt, section 3.5): sent as AGENT-DISCONNECT.
struct Fail(u32, &'static str);

const INVALID: Fail = Fail(4, "invalid frame received");

/// Answers a HAPROXY-HELLO: AGENT-HELLO with version 2.0, the smaller
/// max-frame-size, no capabilities. Returns it, the frame size and
/// whether this is a health check.
fn hello(frame: &Frame) -> Result<(Vec<u8>, u32, bool), Fail> {
    let (mut versions, mut max, mut caps, mut health) = (None, None, None, false);
    for (key, value) in frame.kv_list().map_err(|_| INVALID)? {
        match key {
            b"supported-versions" => versions = value.as_bytes(),
            b"max-frame-size" => max = value.as_u64(),
            b"capabilities" => caps = value.as_bytes(),
            b"healthcheck" => health = value == Value::Bool(true),
            _ => {}
        }
    }
    let versions = versions.ok_or(Fail(5, "version value not found"))?;
    let v2 = String::from_utf8_lossy(versions)
        .split(',')
        .any(|v| v.trim().split('.').next() == Some("2"));
    if !v2 {
        return Err(Fail(8, "unsupported version"));
    }
    let max = max.ok_or(Fail(6, "max-frame-size value not found"))?;
    caps.ok_or(Fail(7, "capabilities value not found"))?;
    if max < 256 {
        return Err(Fail(9, "max-frame-size too big or too small"));
    }
    let max = max.min(MAX_FRAME_SIZE.into()) as u32;
    let reply = FrameWriter::new(spop::AGENT_HELLO, 0, 0)
        .kv_str("version", "2.0")
        .kv_u32("max-frame-size", max)
        .kv_str("capabilities", "")
        .finish();
    Ok((reply, max, health))
}

fn read_frame(input: &mut BufReader<TcpStream>, max: u32) -> io::Result<Result<Vec<u8>, Fail>> {
    let mut len = [0; 4];
    input.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len);
    if len > max {
        return Ok(Err(Fail(3, "frame is too big")));
    }
    let mut frame = vec![0; len as usize];
    input.read_exact(&mut frame)?;
    Ok(Ok(frame))
}

/// One connection from HAProxy; returns why it ended.
fn serve(stream: TcpStream, conn: &Conn, stats: &Stats) -> String {
    let _ = stream.set_nodelay(true);
    let Ok(mut out) = stream.try_clone() else {
        return "cannot duplicate the socket".into();
    };
    let mut input = BufReader::new(stream);
    let mut max = MAX_FRAME_SIZE;
    let mut greeted = false;
    let fail = |out: &mut TcpStream, Fail(code, why): Fail| {
        let _ = out.write_all(&spop::agent_disconnect(code, why));
        format!("sent AGENT-DISCONNECT {code} ({why})")
    };
    loop {
        // Idle until the next frame's first byte.
        match input.fill_buf() {
            Ok([]) if conn.stopping() => return "closed: stopping".into(),
            Ok([]) => return "closed by HAProxy".into(),
            Err(e) => return format!("read: {e}"),
            Ok(_) => conn.busy(),
        }
        let buf = match read_frame(&mut input, max) {
            Ok(Ok(buf)) => buf,
            Ok(Err(f)) => return fail(&mut out, f),
            Err(e) => return format!("read: {e}"),
        };
        let Ok(frame) = Frame::parse(&buf) else {
            return fail(&mut out, INVALID);
        };
        let reply = match frame.kind {
            spop::HAPROXY_HELLO if !greeted => match hello(&frame) {
                Ok((reply, size, health)) => {
                    if health {
                        let _ = out.write_all(&reply);
                        return "health check answered".into();
                    }
                    (greeted, max) = (true, size);
                    reply
                }
                Err(f) => return fail(&mut out, f),
            },
            spop::NOTIFY if greeted => {
                if frame.flags & spop::FLAG_FIN == 0 {
                    return fail(&mut out, Fail(10, "payload fragmentation is not supported"));
                }
                let Ok(messages) = frame.messages() else {
                    return fail(&mut out, INVALID);
                };
                let action = verdict(&messages);
                let n = if action == "deny" {
                    &stats.denied
                } else {
                    &stats.allowed
                };
                n.fetch_add(1, Ordering::Relaxed);
                FrameWriter::new(spop::ACK, frame.stream_id, frame.frame_id)
                    .set_var_str(spop::SCOPE_TRANSACTION, "action", action)
                    .finish()
            }
            spop::HAPROXY_DISCONNECT => {
                let _ = out.write_all(&spop::agent_disconnect(0, "normal"));
                let kv = frame.kv_list().unwrap_or_default();
                let get = |k: &[u8]| kv.iter().find(|(n, _)| *n == k).map(|(_, v)| v);
                let code = get(b"status-code").and_then(|v| v.as_u64());
                let why = get(b"message").and_then(|v| v.as_bytes().map(String::from_utf8_lossy));
                return format!(
                    "HAProxy disconnected: status {} ({})",
                    code.map_or("?".into(), |c| c.to_string()),
                    why.unwrap_or_default()
                );
            }
            // HELLO twice, NOTIFY before HELLO, fragments (type 0) we never
            // asked for.
            spop::HAPROXY_HELLO | spop::NOTIFY | 0 => return fail(&mut out, INVALID),
            // "Unknown frames may be silently skipped."
            _ => Vec::new(),
        };
        if let Err(e) = out.write_all(&reply) {
            return format!("write: {e}");
        }
        if !conn.idle() {
            return fail(&mut out, Fail(0, "normal"));
        }
    }
}

pub fn run(args: Args, signals: Signals) -> Result<()> {
    let stats = Arc::new(Stats::default());
    let conns = Conns::new();
    let (table, st) = (conns.clone(), stats.clone());
    let listener = Listener::bind(&args.addr, "waf-agent", move |stream, peer: SocketAddr| {
        let Some(conn) = table.add(&stream) else {
            return;
        };
        eprintln!("waf-agent: connection from {peer} ({} open)", table.open());
        let (table, stats) = (table.clone(), st.clone());
        spawn("waf-agent", move || {
            let why = serve(stream, &conn, &stats);
            drop(conn);
            eprintln!(
                "waf-agent: connection from {peer} ended: {why} ({} open)",
                table.open()
            );
        });
    })?;
    eprintln!("waf-agent: listening {}", listener.local_addr());

    let sig = signals.wait()?;
    eprintln!(
        "waf-agent: {}, stopping: not accepting, answering frames in flight, then closing \
         ({} connections open)",
        sig.name(),
        conns.open()
    );
    listener.close();
    conns.stop(&spop::agent_disconnect(0, "normal"));
    let cut = conns.wait_empty(Duration::from_secs(args.grace_period));
    let (allowed, denied) = (
        stats.allowed.load(Ordering::Relaxed),
        stats.denied.load(Ordering::Relaxed),
    );
    eprintln!(
        "waf-agent: exiting, {} NOTIFY frames answered ({allowed} allowed, {denied} denied), \
         {cut} connections cut at the grace period",
        allowed + denied
    );
    Ok(())
}

#[cfg(test)]
mod tests;
