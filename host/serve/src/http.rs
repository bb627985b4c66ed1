//! `cheng serve --http`: the MCP endpoint at `/mcp` (rmcp's streamable-HTTP transport)
//! behind one gate that every request passes first:
//!
//! 1. `Host` must name this server (its bind address, `localhost`, `127.0.0.1`, `::1`,
//!    or `[serve] allowed_hosts`), else 403 — a page on another site that rebinds a DNS
//!    name to 127.0.0.1 cannot reach the server;
//! 2. an `Origin`, when a browser sends one, must be this server's own or in
//!    `[serve] allowed_origins`, else 403;
//! 3. `/mcp` needs an agent's bearer token (`cheng token add --role R`), else 401; the
//!    token's role is the only way a request gets one — nothing the client sends picks a
//!    role. `/health`, `/metrics` and `/api/…` need an operator's token
//!    (`cheng token add --operator`). Each kind is refused (403) where the other
//!    belongs: an agent can never read the host's state or answer an approval, its own
//!    included, and an operator calls no tool. The console's page itself is public
//!    (it holds nothing until an operator signs in).
//!
//! Every refusal is appended to `<state dir>/access.jsonl` (when, from where, what,
//! why, which token), and logged at `cheng::denials`. Request bodies are capped
//! (`[serve] max_request_bytes`, 413 past it); idle sessions expire.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::ServeError;
use super::mcp::{ChengMcp, Connection};
use super::tokens::{Kind, TokenStore};
use cheng_host::policy::ServeConfig;

/// What the gate checks against.
#[derive(Clone)]
pub struct Gate {
    tokens: TokenStore,
    hosts: Arc<Vec<String>>,
    origins: Arc<Vec<String>>,
    access: PathBuf,
    sessions: Arc<std::sync::Mutex<SessionOwners>>,
    max_body: usize,
}

/// Which token opened each MCP session, so a session id is of no use to another token.
#[derive(Default)]
struct SessionOwners {
    owner: std::collections::HashMap<String, String>,
    order: std::collections::VecDeque<String>,
}

impl SessionOwners {
    /// Sessions remembered; the oldest are forgotten first (they have long expired).
    const MAX: usize = 65_536;

    fn insert(&mut self, session: String, token: String) {
        if self.owner.insert(session.clone(), token).is_none() {
            self.order.push_back(session);
        }
        while self.order.len() > Self::MAX {
            if let Some(old) = self.order.pop_front() {
                self.owner.remove(&old);
            }
        }
    }
}

impl Gate {
    /// The gate for a server bound to `addr`.
    pub fn new(addr: SocketAddr, state_dir: &std::path::Path, config: &ServeConfig) -> Gate {
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into(), "[::1]".into()];
        hosts.push(match addr.ip() {
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        });
        hosts.extend(config.allowed_hosts.iter().cloned());
        let port = addr.port();
        let mut origins: Vec<String> = hosts
            .iter()
            .map(|h| if h.contains(':') && !h.starts_with('[') { format!("[{h}]") } else { h.clone() })
            .flat_map(|h| [format!("http://{h}:{port}"), format!("https://{h}:{port}")])
            .collect();
        origins.extend(config.allowed_origins.iter().cloned());
        Gate {
            tokens: TokenStore::new(state_dir),
            hosts: Arc::new(hosts),
            origins: Arc::new(origins),
            access: state_dir.join("access.jsonl"),
            sessions: Arc::default(),
            max_body: config.max_request_bytes,
        }
    }

    /// The host named by `Host` (without its port).
    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(h) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else { return false };
        let name = if let Some(rest) = h.strip_prefix('[') {
            format!("[{}]", rest.split(']').next().unwrap_or(""))
        } else {
            h.rsplit_once(':').map_or(h, |(n, _)| n).to_string()
        };
        self.hosts.iter().any(|a| a.eq_ignore_ascii_case(&name))
    }

    fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        match headers.get(header::ORIGIN).map(|v| v.to_str()) {
            None => true,
            Some(Ok(o)) => self.origins.iter().any(|a| a.eq_ignore_ascii_case(o)),
            Some(Err(_)) => false,
        }
    }

    /// Append one refusal to the access log and the log.
    fn refuse(&self, status: StatusCode, from: SocketAddr, req: &Request, why: &str, token: Option<&str>) -> Response {
        let line = serde_json::json!({
            "time_ms": cheng_host::unix_ms(),
            "remote": from.to_string(),
            "method": req.method().as_str(),
            // A refusal is logged before any token is checked: what is echoed is cut.
            "path": req.uri().path().chars().take(256).collect::<String>(),
            "status": status.as_u16(),
            "reason": why,
            "token": token,
        });
        tracing::info!(target: "cheng::denials", remote = %from, status = status.as_u16(), "{why}");
        append_access(&self.access, &line);
        let mut resp = (status, format!("{why}\n")).into_response();
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer realm=\"cheng\""));
        }
        resp
    }
}

/// The token a request came with, for a long-lived answer (an event stream) to check
/// again while it runs: a revoked token's stream ends.
#[derive(Clone)]
pub(crate) struct StillValid {
    tokens: TokenStore,
    presented: String,
}

impl StillValid {
    /// Resolves once the token is no longer valid (revoked, or the store unreadable),
    /// checking every `every`.
    pub(crate) async fn revoked(self, every: Duration) {
        loop {
            tokio::time::sleep(every).await;
            if !matches!(self.tokens.verify(&self.presented), Ok(Some(_))) {
                return;
            }
        }
    }
}

/// Who may use a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// The console's static files: anyone the Host and Origin checks let through.
    Public,
    /// `/mcp`: agent tokens.
    Agent,
    /// `/health`, `/metrics`, `/api/…`: operator tokens.
    Operator,
}

fn access(path: &str) -> Access {
    if path == "/mcp" || path.starts_with("/mcp/") {
        Access::Agent
    } else if path == "/health" || path == "/metrics" || path.starts_with("/api/") || path == "/api" {
        Access::Operator
    } else {
        Access::Public
    }
}

/// The gate, as middleware in front of every route.
async fn gate_fn(
    State(gate): State<Gate>,
    ConnectInfo(from): ConnectInfo<SocketAddr>,
    mut req: Request,
    next: Next,
) -> Response {
    if !gate.host_allowed(req.headers()) {
        return gate.refuse(
            StatusCode::FORBIDDEN,
            from,
            &req,
            "Forbidden: the Host header does not name this server",
            None,
        );
    }
    if !gate.origin_allowed(req.headers()) {
        return gate.refuse(
            StatusCode::FORBIDDEN,
            from,
            &req,
            "Forbidden: requests from this Origin are not accepted",
            None,
        );
    }
    // A body declared larger than the cap is refused from its header, not waited on.
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > gate.max_body as u64) {
        let why = format!("the request body is over [serve] max_request_bytes ({} bytes)", gate.max_body);
        return gate.refuse(StatusCode::PAYLOAD_TOO_LARGE, from, &req, &why, None);
    }
    let needs = access(req.uri().path());
    if needs == Access::Public {
        return next.run(req).await;
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .map(str::to_string);
    let Some(presented) = presented else {
        return gate.refuse(
            StatusCode::UNAUTHORIZED,
            from,
            &req,
            "a bearer token is required (cheng token add --role R)",
            None,
        );
    };
    let who = match gate.tokens.verify(&presented) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(target: "cheng::server", "{e}");
            return (StatusCode::INTERNAL_SERVER_ERROR, "the token store cannot be read\n").into_response();
        }
    };
    let Some(who) = who else {
        return gate.refuse(
            StatusCode::UNAUTHORIZED,
            from,
            &req,
            "the bearer token is not valid (unknown or revoked)",
            None,
        );
    };
    match (needs, who.kind) {
        (Access::Agent, Kind::Operator) => {
            let name = who.name.clone();
            return gate.refuse(StatusCode::FORBIDDEN, from, &req, "an operator token cannot call tools", Some(&name));
        }
        (Access::Operator, Kind::Agent) => {
            let name = who.name.clone();
            let why = "an agent token cannot read the host's state or answer approvals";
            return gate.refuse(StatusCode::FORBIDDEN, from, &req, why, Some(&name));
        }
        _ => {}
    }
    // An MCP session belongs to the token that opened it.
    let session = req.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string);
    if let Some(sid) = &session {
        let owner = gate.sessions.lock().unwrap_or_else(|p| p.into_inner()).owner.get(sid).cloned();
        if owner.is_some_and(|o| o != who.name) {
            let name = who.name.clone();
            return gate.refuse(
                StatusCode::NOT_FOUND,
                from,
                &req,
                "this MCP session belongs to another token",
                Some(&name),
            );
        }
    }
    let name = who.name.clone();
    let closing = req.method() == axum::http::Method::DELETE;
    // A call answered on this request's event stream ends when the connection does: a
    // client that went away without a cancel leaves no approval card and no command
    // behind (the MCP handler cancels the call when `gone` fires).
    let gone = (needs == Access::Agent && req.method() == axum::http::Method::POST).then(CancellationToken::new);
    if let Some(g) = &gone {
        req.extensions_mut().insert(RequestGone(g.clone()));
    }
    let says_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/json"));
    req.extensions_mut().insert(Connection(from.to_string()));
    req.extensions_mut().insert(who);
    req.extensions_mut().insert(StillValid { tokens: gate.tokens.clone(), presented });
    let mut resp = next.run(req).await;
    // Ending a session is done when answered: 200, which every client takes (some warn
    // on the transport's 202).
    if needs == Access::Agent && closing && resp.status() == StatusCode::ACCEPTED {
        *resp.status_mut() = StatusCode::OK;
    }
    // A JSON body that is not JSON-RPC is a JSON-RPC parse error (what clients read),
    // not "unsupported media type" (the transport's answer).
    if needs == Access::Agent && says_json && resp.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32700, "message": "Parse error: the body is not a JSON-RPC message"}});
        return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
    }
    if needs == Access::Agent
        && session.is_none()
        && let Some(sid) = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok())
    {
        gate.sessions.lock().unwrap_or_else(|p| p.into_inner()).insert(sid.to_string(), name);
    }
    let streamed = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    match gone {
        Some(token) if streamed => resp.map(|body| watched(body, token)),
        _ => resp,
    }
}

/// Fired when the response of the request that carries it is dropped before its end:
/// the client's connection closed. See [`watched`].
#[derive(Clone)]
pub(crate) struct RequestGone(pub(crate) CancellationToken);

/// `body`, which cancels `token` if it is dropped before its last frame was sent.
fn watched(body: axum::body::Body, token: CancellationToken) -> axum::body::Body {
    use futures::StreamExt as _;
    struct Watch {
        token: CancellationToken,
        finished: bool,
    }
    impl Drop for Watch {
        fn drop(&mut self) {
            if !self.finished {
                self.token.cancel();
            }
        }
    }
    impl Watch {
        fn finish(&mut self) {
            self.finished = true;
        }
    }
    // The closure owns the whole watch (a method call captures all of it, not one
    // field), so the watch is dropped with the body.
    let mut watch = Watch { token, finished: false };
    let mut frames = body.into_data_stream();
    axum::body::Body::from_stream(futures::stream::poll_fn(move |cx| {
        let next = frames.poll_next_unpin(cx);
        if matches!(next, std::task::Poll::Ready(None)) {
            watch.finish();
        }
        next
    }))
}

/// Whether `addr` may be served on: loopback always; anything else only with
/// `allow_remote` (a TLS-terminating proxy in front), since tokens travel in clear text.
pub fn check_bind(addr: SocketAddr, allow_remote: bool) -> Result<(), ServeError> {
    if addr.ip().is_loopback() || allow_remote {
        return Ok(());
    }
    Err(ServeError::Remote(format!(
        "refusing to serve on {addr}: it is not a loopback address, and bearer tokens would cross the network in \
         clear text. Put a TLS-terminating proxy in front and pass --allow-remote, or bind 127.0.0.1"
    )))
}

/// Serve `mcp` over streamable HTTP, the operator API and the console on `listener`
/// until `shutdown` fires.
pub async fn serve(
    listener: tokio::net::TcpListener,
    host: cheng_host::Host,
    mcp: ChengMcp,
    gate: Gate,
    config: &ServeConfig,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(Duration::from_millis(config.idle_session_ms.max(1000)));
    let http_config = StreamableHttpServerConfig::default()
        // The gate checks Host and Origin (and answers 403 before any token is looked at).
        .disable_allowed_hosts()
        .with_max_request_body_bytes(config.max_request_bytes)
        // A stateless (2026-07-28) call whose only message is its answer gets it as one
        // JSON body; one that sends progress first still gets an event stream.
        .with_json_response(true)
        .with_cancellation_token(shutdown.child_token());
    let closer = mcp.clone();
    let service = StreamableHttpService::new(move || Ok(mcp.clone()), Arc::new(sessions), http_config);
    // A session its client deletes ends its run ("this run" answers included); one
    // that goes idle ends with the transport's keep-alive and the grants' idle window.
    let mcp_routes =
        axum::Router::new().nest_service("/mcp", service).layer(middleware::from_fn_with_state(closer, close_session));
    let app = super::api::routes(host)
        .merge(mcp_routes)
        .layer(axum::Extension(super::api::ShuttingDown(shutdown.clone())))
        .layer(middleware::from_fn_with_state(gate, gate_fn))
        .layer(axum::middleware::map_response(|mut r: Response| async move {
            let h = r.headers_mut();
            h.insert(header::X_CONTENT_TYPE_OPTIONS, header::HeaderValue::from_static("nosniff"));
            // Cards and records are hostile text and operator data: never kept in a cache.
            h.entry(header::CACHE_CONTROL).or_insert(header::HeaderValue::from_static("no-store"));
            h.entry(header::REFERRER_POLICY).or_insert(header::HeaderValue::from_static("no-referrer"));
            r
        }));
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
        .await
        .map_err(ServeError::Io)
}

/// After a successful `DELETE /mcp` (the client ends its session), end the session's run.
async fn close_session(
    axum::extract::State(mcp): axum::extract::State<ChengMcp>,
    req: axum::extract::Request,
    next: middleware::Next,
) -> Response {
    let closing = (req.method() == axum::http::Method::DELETE)
        .then(|| req.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string))
        .flatten();
    let resp = next.run(req).await;
    if let Some(sid) = closing
        && resp.status().is_success()
    {
        mcp.session_closed(&sid);
    }
    resp
}

/// Append one refusal to an access log (`access.jsonl`, mode 0600), stamped with the
/// time; a log that cannot be written is reported, never fatal to the refusal.
pub(crate) fn append_access(path: &std::path::Path, line: &serde_json::Value) {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut line = line.clone();
    if line.get("time_ms").is_none() {
        line["time_ms"] = serde_json::json!(cheng_host::unix_ms());
    }
    // Never blocking on a FIFO's open, and appended to only if a regular file.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .and_then(|f| match f.metadata()?.is_file() {
            true => Ok(f),
            false => Err(std::io::Error::other("it is not a regular file")),
        })
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
    if let Err(e) = written {
        tracing::error!(target: "cheng::records", "cannot append to {}: {e}", path.display());
    }
}
