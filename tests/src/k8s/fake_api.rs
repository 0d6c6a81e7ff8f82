//! A scripted stand-in for the Kubernetes API server on 127.0.0.1, plain
//! HTTP/1.1, serving recorded payloads (tests/fixtures/k8s/): pod lists,
//! chunked watch streams (held open for lines pushed later), and Event
//! POSTs, which it keeps. It can be stopped (connections cut, port closed)
//! and started again on the same port.

use std::{
    collections::{HashMap, VecDeque},
    convert::Infallible,
    net::SocketAddr,
    path::{Path, PathBuf},
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt as _, Full};
use hyper::{body::Frame, service::service_fn, Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::{net::TcpListener, sync::mpsc, task::AbortHandle};

/// What one request gets.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A whole response: status and JSON body.
    Full(u16, String),
    /// A watch stream: these lines; then the stream ends, or with `hold`
    /// stays open for [`FakeApi::push`].
    Stream { lines: Vec<String>, hold: bool },
}

impl Reply {
    pub fn list(body: String) -> Reply {
        Reply::Full(200, body)
    }

    pub fn lines(lines: Vec<String>) -> Reply {
        Reply::Stream { lines, hold: false }
    }

    pub fn hold(lines: Vec<String>) -> Reply {
        Reply::Stream { lines, hold: true }
    }
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: HashMap<String, String>,
}

impl Seen {
    pub fn is_watch(&self) -> bool {
        self.query.get("watch").is_some_and(|v| v == "true" || v == "1")
    }
}

#[derive(Default)]
struct Script {
    /// Replies to successive pod lists; the last one is repeated.
    lists: VecDeque<Reply>,
    /// Replies to successive watches; once empty, watches are held open.
    watches: VecDeque<Reply>,
    seen: Vec<Seen>,
    events: Vec<Value>,
    open: Vec<mpsc::UnboundedSender<Bytes>>,
    conns: Vec<AbortHandle>,
}

pub struct FakeApi {
    pub addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    accept: Option<AbortHandle>,
    /// Kubeconfigs written for it, removed on drop.
    files: Mutex<Vec<PathBuf>>,
}

impl FakeApi {
    /// Serves on a new port.
    pub async fn start() -> FakeApi {
        Self::start_on("127.0.0.1:0".parse().unwrap()).await
    }

    /// Serves on `addr` (a port reserved before, say).
    pub async fn start_on(addr: SocketAddr) -> FakeApi {
        let mut api = FakeApi {
            addr,
            script: Arc::default(),
            accept: None,
            files: Mutex::default(),
        };
        api.resume().await;
        api
    }

    /// Starts serving again on the same port after [`stop`](Self::stop).
    pub async fn resume(&mut self) {
        assert!(self.accept.is_none(), "already serving");
        let listener = TcpListener::bind(self.addr).await.expect("bind the fake API");
        self.addr = listener.local_addr().unwrap();
        let script = self.script.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let script2 = script.clone();
                let conn = tokio::spawn(async move {
                    let svc = service_fn(move |req| {
                        let script = script2.clone();
                        async move { Ok::<_, Infallible>(handle(&script, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
                script.lock().unwrap().conns.push(conn.abort_handle());
            }
        });
        self.accept = Some(task.abort_handle());
    }

    /// The API goes away: the port closes and every connection is cut
    /// (an open watch ends mid-stream).
    pub fn stop(&mut self) {
        if let Some(a) = self.accept.take() {
            a.abort();
        }
        let mut s = self.script.lock().unwrap();
        for c in s.conns.drain(..) {
            c.abort();
        }
        s.open.clear();
    }

    pub fn push_list(&self, r: Reply) {
        self.script.lock().unwrap().lists.push_back(r);
    }

    pub fn push_watch(&self, r: Reply) {
        self.script.lock().unwrap().watches.push_back(r);
    }

    /// Sends `line` on every watch held open; returns how many got it.
    pub fn push(&self, line: &str) -> usize {
        let mut s = self.script.lock().unwrap();
        let data = Bytes::from(format!("{}\n", line.trim_end()));
        s.open.retain(|tx| tx.send(data.clone()).is_ok());
        s.open.len()
    }

    /// Watches held open now.
    pub fn open_watches(&self) -> usize {
        let mut s = self.script.lock().unwrap();
        s.open.retain(|tx| !tx.is_closed());
        s.open.len()
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.script.lock().unwrap().seen.clone()
    }

    /// Event objects POSTed, as sent.
    pub fn events(&self) -> Vec<Value> {
        self.script.lock().unwrap().events.clone()
    }

    /// Waits (10 s at most) until an Event with `reason` is POSTed.
    pub fn wait_event(&self, reason: &str) {
        crate::wait_for(10, &format!("the {reason} Event"), || {
            self.events().iter().any(|e| e["reason"] == reason).then_some(())
        });
    }

    /// A kubeconfig for this server (plain http, no credentials) in `dir`.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join(format!("kubeconfig-{}", self.addr.port()));
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\ncurrent-context: fake\nusers:\n- name: fake\n  user: {{}}\n",
            self.addr
        );
        std::fs::write(&path, text).unwrap();
        self.files.lock().unwrap().push(path.clone());
        path
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.stop();
        for f in self.files.lock().unwrap().drain(..) {
            let _ = std::fs::remove_file(f);
        }
    }
}

type Body = BoxBody<Bytes, Infallible>;

fn full(status: u16, body: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)).boxed())
        .unwrap()
}

fn status(code: u16, reason: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code
    });
    full(code, body.to_string())
}

async fn handle(script: &Mutex<Script>, req: Request<hyper::body::Incoming>) -> Response<Body> {
    let seen = Seen {
        method: req.method().to_string(),
        path: req.uri().path().to_string(),
        query: req
            .uri()
            .query()
            .unwrap_or_default()
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), decode(v)))
            .collect(),
    };
    script.lock().unwrap().seen.push(seen.clone());
    let path = seen.path.clone();
    match (seen.method.as_str(), path.as_str()) {
        ("GET", "/api/v1/pods") if seen.is_watch() => {
            let reply = script.lock().unwrap().watches.pop_front();
            match reply.unwrap_or(Reply::hold(Vec::new())) {
                Reply::Full(code, body) => full(code, body),
                Reply::Stream { lines, hold } => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    for l in lines {
                        let _ = tx.send(Bytes::from(format!("{}\n", l.trim_end())));
                    }
                    if hold {
                        script.lock().unwrap().open.push(tx);
                    }
                    Response::builder()
                        .status(200)
                        .header("content-type", "application/json")
                        .header("transfer-encoding", "chunked")
                        .body(ChanBody(rx).boxed())
                        .unwrap()
                }
            }
        }
        ("GET", "/api/v1/pods") => {
            let mut s = script.lock().unwrap();
            let reply = if s.lists.len() > 1 {
                s.lists.pop_front()
            } else {
                s.lists.front().cloned()
            };
            match reply {
                Some(Reply::Full(code, body)) => full(code, body),
                _ => status(500, "InternalError", "the fake API has no list scripted"),
            }
        }
        ("POST", p) if p.starts_with("/api/v1/namespaces/") && p.ends_with("/events") => {
            let body = req
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let Ok(mut ev) = serde_json::from_slice::<Value>(&body) else {
                return status(400, "BadRequest", "the body is not JSON");
            };
            script.lock().unwrap().events.push(ev.clone());
            // What the API server answers: the object with its metadata filled in.
            ev["metadata"]["uid"] = "5e1d2c3b-4a59-4687-9a1b-2c3d4e5f6a7b".into();
            ev["metadata"]["resourceVersion"] = "50231".into();
            ev["metadata"]["creationTimestamp"] = "2026-11-29T18:50:40Z".into();
            full(201, ev.to_string())
        }
        _ => status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ),
    }
}

fn decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let h = std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match h {
                    Some(c) => {
                        out.push(c);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A chunked body fed line by line.
struct ChanBody(mpsc::UnboundedReceiver<Bytes>);

impl hyper::body::Body for ChanBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}
