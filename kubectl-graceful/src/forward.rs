//! One `GET` on an agent's local API, through a port-forward to its pod's
//! loopback: the request kubectl port-forward would carry, with
//! hyper's HTTP/1.1 client over the forwarded stream.

use http_body_util::{BodyExt as _, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use crate::agents::said;

/// How long one agent may take to answer.
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// An agent's local API: its pod, and the port on the pod's loopback.
pub struct Target {
    pub namespace: String,
    pub pod: String,
    pub port: u16,
}

/// The body of `GET path` on `to`, or one line saying why not.
pub async fn get(pods: &Api<Pod>, to: &Target, path: &str) -> Result<Bytes, String> {
    tokio::time::timeout(TIMEOUT, get_now(pods, to, path))
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", TIMEOUT.as_secs())))
}

async fn get_now(pods: &Api<Pod>, to: &Target, path: &str) -> Result<Bytes, String> {
    let Target { namespace, pod, port } = to;
    let port = *port;
    let mut pf = pods.portforward(pod, &[port]).await.map_err(|e| {
        format!(
            "cannot port-forward to {namespace}/{pod}: {} (needs `get` and `create` on pods/portforward in {namespace}: the API server asks `get` of a websocket port-forward, and `create` of SPDY and of newer servers)",
            said(&e)
        )
    })?;
    let stream = pf.take_stream(port).ok_or("the port-forward gave no stream")?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("{namespace}/{pod}: {e}"))?;
    let conn = tokio::spawn(conn);
    let req = http::Request::get(path)
        .header(http::header::HOST, "graceful")
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("{namespace}/{pod}: the agent did not answer on port {port}: {e}"))?;
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("{namespace}/{pod}: {e}"))?
        .to_bytes();
    drop(sender);
    conn.abort();
    pf.abort();
    if status.is_success() {
        Ok(body)
    } else {
        let msg = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&body).trim().to_string());
        Err(format!("{namespace}/{pod} answered {status}: {msg}"))
    }
}
