//! A small HTTP/1.1 server with keep-alive and Go's graceful shutdown (what
//! OPA does on SIGTERM, and what the benchmark app does): stop accepting,
//! answer the requests in flight, close idle keep-alive connections, exit.
//! Enough HTTP for nginx's `auth_request`, curl and load generators:
//! Content-Length and chunked bodies, `Expect: 100-continue`, HEAD.

use super::server::{spawn, Conn, Conns, Listener};
use anyhow::Result;
use std::{
    io::{self, BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpStream},
    sync::Arc,
    time::Duration,
};

const MAX_HEAD: u64 = 64 * 1024;
const MAX_BODY: usize = 1024 * 1024;

pub struct Request {
    pub method: String,
    /// The request target as sent: path and query.
    pub target: String,
    http10: bool,
    headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The target without its query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.header(name)
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    }

    fn keep_alive(&self) -> bool {
        if self.http10 {
            self.has_token("connection", "keep-alive")
        } else {
            !self.has_token("connection", "close")
        }
    }
}

pub struct Response {
    pub status: u16,
    pub content_type: Option<&'static str>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(status: u16, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            content_type: Some("text/plain; charset=utf-8"),
            body: body.into(),
        }
    }

    /// What the tests' fake OPA answers.
    #[cfg(test)]
    pub fn json(status: u16, body: &serde_json::Value) -> Response {
        Response {
            status,
            content_type: Some("application/json"),
            body: body.to_string().into_bytes(),
        }
    }
}

pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// A server: its listener and its connections.
pub struct Server {
    listener: Listener,
    conns: Arc<Conns>,
}

impl Server {
    pub fn start(addr: &str, role: &'static str, handler: Handler) -> Result<Server> {
        let conns = Conns::new();
        let table = conns.clone();
        let listener = Listener::bind(addr, role, move |stream, _peer| {
            let Some(conn) = table.add(&stream) else {
                return;
            };
            let handler = handler.clone();
            spawn(role, move || serve(stream, conn, &handler));
        })?;
        Ok(Server { listener, conns })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    pub fn open(&self) -> usize {
        self.conns.open()
    }

    /// Go's `http.Server.Shutdown`: stops accepting, closes idle
    /// connections now and busy ones once answered, and returns when all
    /// are closed, or after `grace` (then closing the rest). Returns how
    /// many were cut at the deadline.
    pub fn shutdown(self, grace: Duration) -> usize {
        self.listener.close();
        self.conns.stop(&[]);
        self.conns.wait_empty(grace)
    }
}

enum Bad {
    /// The client went away or broke the connection: nothing to answer.
    Io,
    /// A request we can't serve: answered with this status, then closed.
    Status(u16, &'static str),
}

impl From<io::Error> for Bad {
    fn from(_: io::Error) -> Bad {
        Bad::Io
    }
}

fn serve(stream: TcpStream, conn: Conn, handler: &Handler) {
    let _ = stream.set_nodelay(true);
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut input = BufReader::new(stream);
    loop {
        // Idle until the next request's first byte.
        match input.fill_buf() {
            Ok([]) | Err(_) => return,
            Ok(_) => conn.busy(),
        }
        let (response, keep_alive, head) = match read_request(&mut input, &mut out) {
            Ok(req) => (handler(&req), req.keep_alive(), req.method == "HEAD"),
            Err(Bad::Io) => return,
            Err(Bad::Status(status, why)) => (Response::text(status, format!("{why}\n")), false, false),
        };
        let close = !keep_alive || conn.stopping();
        if write_response(&mut out, &response, close, head).is_err() || close || !conn.idle() {
            return;
        }
    }
}

fn read_line(input: &mut BufReader<TcpStream>, budget: &mut u64) -> Result<String, Bad> {
    let mut line = Vec::new();
    let n = input.by_ref().take(*budget).read_until(b'\n', &mut line)?;
    *budget -= n as u64;
    if n == 0 {
        return Err(Bad::Io);
    }
    if line.last() != Some(&b'\n') {
        return Err(Bad::Status(431, "request head too large"));
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    String::from_utf8(line).map_err(|_| Bad::Status(400, "request head is not UTF-8"))
}

fn read_request(input: &mut BufReader<TcpStream>, out: &mut TcpStream) -> Result<Request, Bad> {
    let mut budget = MAX_HEAD;
    let line = read_line(input, &mut budget)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Bad::Status(400, "bad request line"));
    };
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => return Err(Bad::Status(505, "HTTP/1.0 and HTTP/1.1 only")),
    };
    let mut req = Request {
        method: method.to_string(),
        target: target.to_string(),
        http10,
        headers: Vec::new(),
        body: Vec::new(),
    };
    loop {
        let line = read_line(input, &mut budget)?;
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(Bad::Status(400, "bad header line"));
        };
        req.headers
            .push((name.trim().to_string(), value.trim().to_string()));
    }
    if req.has_token("expect", "100-continue") {
        out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    if req.has_token("transfer-encoding", "chunked") {
        req.body = read_chunked(input)?;
    } else if let Some(len) = req.header("content-length") {
        let len: usize = len.parse().map_err(|_| Bad::Status(400, "bad Content-Length"))?;
        if len > MAX_BODY {
            return Err(Bad::Status(413, "body too large"));
        }
        req.body = vec![0; len];
        input.read_exact(&mut req.body)?;
    }
    Ok(req)
}

fn read_chunked(input: &mut BufReader<TcpStream>) -> Result<Vec<u8>, Bad> {
    let mut body = Vec::new();
    let mut budget = MAX_HEAD;
    loop {
        let line = read_line(input, &mut budget)?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16).map_err(|_| Bad::Status(400, "bad chunk size"))?;
        if size == 0 {
            // Trailers, up to the empty line.
            while !read_line(input, &mut budget)?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err(Bad::Status(413, "body too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        input.read_exact(&mut body[start..])?;
        if !read_line(input, &mut budget)?.is_empty() {
            return Err(Bad::Status(400, "bad chunk"));
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

fn write_response(out: &mut TcpStream, r: &Response, close: bool, head: bool) -> io::Result<()> {
    let mut msg = format!(
        "HTTP/1.1 {} {}\r\nContent-Length: {}\r\n",
        r.status,
        reason(r.status),
        r.body.len()
    );
    if let Some(ct) = r.content_type {
        msg.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    if close {
        msg.push_str("Connection: close\r\n");
    }
    msg.push_str("\r\n");
    let mut msg = msg.into_bytes();
    if !head {
        msg.extend_from_slice(&r.body);
    }
    out.write_all(&msg)
}
