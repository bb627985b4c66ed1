//! The MCP handler: `tools/list` shows the tools the caller's role holds, `tools/call`
//! is one [`Host::call`] with the caller's role and run. It adds a transport and
//! nothing else: every grant, approval, limit and record is the call pipeline's.
//!
//! - **Who**: over stdio, the role `cheng serve` was started with; over HTTP, the role of
//!   the bearer token the request carried (checked by [`super::http`] before anything
//!   here runs).
//! - **Run**: the MCP session (`Mcp-Session-Id`); for a stateless request, the run the
//!   client names in `_meta` under `cheng/run` (as `<token name>.<run>`, so tokens never
//!   share a run), else one per connection; over stdio one
//!   per process.
//! - **Workspace**: given, pinned to the token, or chosen from the client's roots (see
//!   [`super::workspace`]); a call with none is a refusal that says how to give one.
//! - **Results**: a success's JSON output is `structuredContent` (valid against the tool's
//!   `outputSchema`) and the same JSON as text. A failure or denial is `isError` with the
//!   whole error envelope (`error`, `error_kind`, `summary`, `terminal`) as text and no
//!   `structuredContent`, which would have to match the success schema: clients that
//!   validate it would turn every refusal into an opaque protocol error. A call outside
//!   the role, bad arguments and a crashed component are tool results the model reads; an
//!   unknown tool name is a protocol error (`-32602`).
//! - **Approvals a person must answer**: while a call waits on one, the client hears at
//!   once — a progress notification (when the request carried a progress token) and a
//!   log notification (`logging/setLevel` honoured) saying what waits and how to answer
//!   it — and the same line goes to stderr.

//! - **Cancellation** (`notifications/cancelled`, or an HTTP client going away) reaches
//!   the call's token: a running command and its tree are stopped, an approval wait ends.
//! - **Progress**: with a `progressToken`, a notification at the start and every two
//!   seconds while the call runs.
//! - **Bounds**: calls in flight per session and in all; past them a call waits
//!   (`[serve] busy_wait_ms`), then gets a "busy" result — never a crash.

// Roots and logging are marked deprecated in rmcp (SEP-2577 plans to remove them from
// a later revision); every client this server is tested with still uses both.
#![allow(deprecated)]

use std::collections::HashMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, Implementation, ListToolsResult,
    LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, ServerCapabilities, ServerConfig, SetLevelRequestParams, Tool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, Peer, RequestContext};
use rmcp::{RoleServer, ServerHandler};
use tokio::sync::Semaphore;

use super::approver::ClientApprover;
use super::tokens::{Kind, Principal};
use super::workspace::{NoWorkspace, WorkspaceChoice};
use cheng_host::approvals::{ApprovalEvent, ApprovalRequest};
use cheng_host::policy::ServeConfig;
use cheng_host::{Context, ErrorKind, FsAccess, Host, Status, ToolInfo, ToolResult};

/// The trace context a request carries: in `_meta` (preferred), else in HTTP headers.
fn trace_context(cx: &RequestContext<RoleServer>) -> Option<(String, Option<String>)> {
    if let Some(parent) = cx.meta.get_traceparent() {
        return Some((parent.to_string(), cx.meta.get_tracestate().map(str::to_string)));
    }
    let headers = &parts(cx)?.headers;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    Some((header("traceparent")?, header("tracestate")))
}

/// The `_meta` key a stateless request may name its run under.
pub const RUN_META_KEY: &str = "cheng/run";

/// Where a request came from, for its run: the HTTP transport puts this in the request's
/// extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection(pub String);

/// The MCP handler. Cheap to clone (the HTTP transport makes one per session).
#[derive(Clone)]
pub struct ChengMcp {
    inner: Arc<State>,
}

struct State {
    host: Host,
    workspace: WorkspaceChoice,
    /// Over stdio: who the one client is, and its run.
    stdio: Option<(Principal, String)>,
    config: ServeConfig,
    total: Arc<Semaphore>,
    sessions: Mutex<HashMap<String, Arc<Semaphore>>>,
    approver: Option<Arc<ClientApprover>>,
    /// The workspace each session chose from its roots (until they change).
    chosen: Mutex<HashMap<String, PathBuf>>,
    /// The least severe log level each session asked for (`logging/setLevel`).
    levels: Mutex<HashMap<String, LoggingLevel>>,
    /// How a person answers an approval (`cheng … approve ID`, the console), for notices.
    answer_hint: String,
}

/// How long a client gets to answer `roots/list`.
const ROOTS_WAIT: Duration = Duration::from_secs(10);

/// The workspace is chosen per session: over stdio there is one; over HTTP the MCP
/// session (`Mcp-Session-Id`). Stateless requests have no session and cannot be asked.
fn session_key(stdio: bool, extensions: &rmcp::model::Extensions) -> Option<String> {
    if stdio {
        return Some("stdio".into());
    }
    let parts = extensions.get::<http::request::Parts>()?;
    parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_string)
}

impl ChengMcp {
    /// A handler serving `host` in `workspace`. `stdio_role`: the role of the one stdio
    /// client (`None` over HTTP, where tokens decide). `approver`: the elicitation path
    /// for approvals, when `[serve] approvals_via_client` is on.
    /// `answer_hint`: how a person answers an approval, told to the client and on stderr
    /// while a call waits on one.
    pub fn new(
        host: Host,
        workspace: WorkspaceChoice,
        stdio_role: Option<String>,
        config: ServeConfig,
        approver: Option<Arc<ClientApprover>>,
        answer_hint: String,
    ) -> ChengMcp {
        let stdio = stdio_role.map(|role| {
            (
                Principal { name: "stdio".into(), kind: Kind::Agent, role: Some(role), workspace: None },
                cheng_host::new_id(),
            )
        });
        ChengMcp {
            inner: Arc::new(State {
                total: Arc::new(Semaphore::new(config.max_calls.max(1))),
                host,
                workspace,
                stdio,
                config,
                sessions: Mutex::default(),
                approver,
                chosen: Mutex::default(),
                levels: Mutex::default(),
                answer_hint,
            }),
        }
    }

    /// The workspace of a call: the token's pin, the given one, the one this session
    /// chose from its roots (asked once, again after they change), else the fallback.
    async fn workspace(&self, cx: &RequestContext<RoleServer>, who: &Principal) -> Result<PathBuf, NoWorkspace> {
        if let Some(w) = &who.workspace {
            return Ok(w.clone());
        }
        let stdio = self.inner.stdio.is_some();
        let choice = &self.inner.workspace;
        if !choice.asks_roots() {
            return choice.fallback(stdio);
        }
        let stateless = cx.protocol_version().is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let declares = cx.client_capabilities().is_some_and(|c| c.roots.is_some());
        let key = session_key(stdio, &cx.extensions);
        let (Some(key), true, false) = (key, declares, stateless) else {
            return choice.fallback(stdio);
        };
        if let Some(w) = lock(&self.inner.chosen).get(&key) {
            return Ok(w.clone());
        }
        let roots = match tokio::time::timeout(ROOTS_WAIT, cx.peer.list_roots()).await {
            Ok(Ok(r)) => r.roots.into_iter().map(|r| r.uri).collect::<Vec<_>>(),
            Ok(Err(e)) => {
                return Err(NoWorkspace(format!(
                    "the client declares roots but did not list them ({e}); start cheng serve with --workspace DIR"
                )));
            }
            Err(_) => {
                return Err(NoWorkspace(format!(
                    "the client declares roots but did not list them within {} s; start cheng serve with \
                     --workspace DIR",
                    ROOTS_WAIT.as_secs()
                )));
            }
        };
        let w = choice.pick(&roots, stdio)?;
        tracing::info!(target: "cheng::server", session = %key, workspace = %w.display(), "workspace chosen from the client's roots");
        lock(&self.inner.chosen).insert(key, w.clone());
        Ok(w)
    }

    /// Tell the client (and the operator's stderr) that a call waits on a person.
    async fn tell_waiting(
        &self,
        peer: &Peer<RoleServer>,
        session: Option<&str>,
        progress: Option<(&ProgressToken, f64)>,
        req: &ApprovalRequest,
        timeout_ms: u64,
    ) {
        let message = format!(
            "{} waits for a person to approve: {} (approval {}, waiting up to {} s). {}",
            req.tool,
            req.summary,
            req.id,
            timeout_ms / 1000,
            self.inner.answer_hint.replace("{id}", &req.id)
        );
        let _ = writeln!(std::io::stderr(), "cheng: {message}");
        if let Some((token, n)) = progress {
            let _ = peer.notify_progress(ProgressNotificationParam::new(token.clone(), n).with_message(&message)).await;
        }
        let floor = session.and_then(|s| lock(&self.inner.levels).get(s).copied()).unwrap_or(LoggingLevel::Info);
        if severity(LoggingLevel::Warning) >= severity(floor) {
            let data = serde_json::json!({
                "message": message, "approval": req.id, "tool": req.tool, "summary": req.summary,
                "detail": req.detail, "timeout_ms": timeout_ms,
            });
            let note = LoggingMessageNotificationParam::new(LoggingLevel::Warning, data).with_logger("cheng.approvals");
            let _ = peer.notify_logging_message(note).await;
        }
    }

    /// The caller: the stdio client, or the principal the HTTP layer verified.
    fn principal(&self, cx: &RequestContext<RoleServer>) -> Result<Principal, ErrorData> {
        if let Some((p, _)) = &self.inner.stdio {
            return Ok(p.clone());
        }
        parts(cx)
            .and_then(|p| p.extensions.get::<Principal>().cloned())
            .filter(|p| p.kind == Kind::Agent)
            .ok_or_else(|| ErrorData::invalid_request("this request carries no agent credentials", None))
    }

    /// The run a request belongs to (see the module docs).
    fn run(&self, cx: &RequestContext<RoleServer>, who: &Principal, workspace: &std::path::Path) -> String {
        if let Some((_, run)) = &self.inner.stdio {
            return run.clone();
        }
        // A run a client names is kept apart per token and per workspace, so one agent
        // cannot join another's run (its approvals, its notes, its places) by naming it,
        // nor one session see another workspace's: the prefix is readable, the digest of
        // the token's exact name and the workspace keeps distinct ones apart (`dup.a` and
        // `dup_a` read alike, and never share a run).
        let named = cx.meta.0.get(RUN_META_KEY).and_then(|v| v.as_str()).filter(|r| valid_run(r));
        if let Some(r) = named {
            return format!(
                "{}-{}.{r}",
                sanitize(&who.name).chars().take(24).collect::<String>(),
                run_digest(who, workspace)
            );
        }
        let parts = parts(cx);
        if let Some(s) = parts.and_then(|p| p.headers.get("mcp-session-id")).and_then(|v| v.to_str().ok()) {
            return session_run(s);
        }
        match parts.and_then(|p| p.extensions.get::<Connection>()) {
            Some(c) => format!("conn-{}", sanitize(&c.0)),
            None => format!("mcp-{}", cheng_host::new_id()),
        }
    }

    /// MCP session `sid` was closed by its client: the run ends (its "this run"
    /// answers are forgotten) and so does what the session chose.
    pub fn session_closed(&self, sid: &str) {
        let run = session_run(sid);
        self.inner.host.end_run(&run);
        lock(&self.inner.chosen).remove(sid);
        lock(&self.inner.levels).remove(sid);
        lock(&self.inner.sessions).remove(&run);
        tracing::debug!(target: "cheng::server", session = %sanitize(sid), "session closed; its run ended");
    }

    /// The session's own limit on calls in flight.
    fn session_slots(&self, run: &str) -> Arc<Semaphore> {
        let mut map = self.inner.sessions.lock().unwrap_or_else(|p| p.into_inner());
        // Forget sessions nobody holds a place in (idle ones), so the map stays small.
        if map.len() > 4096 {
            map.retain(|_, s| Arc::strong_count(s) > 1);
        }
        map.entry(run.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.inner.config.max_calls_per_session.max(1))))
            .clone()
    }

    /// A tool as listed: its schemas in the listed form ([`crate::listed::listed`]), and
    /// hints from its grants, each only where it differs from the specification's default
    /// (not read-only, destructive, open world) — `readOnlyHint` always.
    fn tool(&self, t: ToolInfo) -> Tool {
        use crate::listed::{Side, listed};
        let schema = |v: serde_json::Value| match v {
            serde_json::Value::Object(m) => Arc::new(m),
            _ => Arc::default(),
        };
        let writes = t.needs.fs == FsAccess::Write;
        let mut annotations = ToolAnnotations::new().read_only(!writes && !t.needs.spawn);
        if t.needs.network.is_empty() {
            annotations = annotations.open_world(false);
        }
        let title = title(&t.name);
        Tool::new(t.name, t.description, schema(listed(t.input_schema, Side::Input, t.builtin)))
            .with_title(title)
            .with_raw_output_schema(schema(listed(t.output_schema, Side::Output, t.builtin)))
            .with_annotations(annotations)
    }
}

/// The HTTP request a call arrived in, when it came over HTTP.
fn parts(cx: &RequestContext<RoleServer>) -> Option<&http::request::Parts> {
    cx.extensions.get::<http::request::Parts>()
}

/// Ten hex digits of SHA-256 over the token's name and the workspace.
fn run_digest(who: &Principal, workspace: &std::path::Path) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(who.name.as_bytes());
    h.update([0]);
    h.update(workspace.as_os_str().as_encoded_bytes());
    hex::encode(h.finalize())[..10].to_string()
}

/// A run a client may name: it is kept as `<token>-<digest>.<run>`, within the 128
/// characters a run id may have.
fn valid_run(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= 90
        && !r.starts_with('.')
        && r.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A log level's rank, least severe first.
fn severity(l: LoggingLevel) -> u8 {
    match l {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// A refusal made here, before any call: the pipeline's envelope, sent as every error
/// result is (`isError`, the envelope as text, no `structuredContent`).
fn error_result(message: String, kind: ErrorKind, terminal: bool) -> CallToolResult {
    let r = ToolResult::failure(String::new(), Status::Error, kind, message, terminal, Duration::ZERO);
    CallToolResult::error(vec![ContentBlock::text(r.output.to_string())])
}

/// The run of MCP session `sid`.
fn session_run(sid: &str) -> String {
    format!("mcp-{}", sanitize(sid))
}

fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).take(96).collect()
}

/// A tool's title: `read_file` → "Read file", `acme__wordcount` → "acme: wordcount".
fn title(name: &str) -> String {
    let (prefix, rest) = match name.split_once("__") {
        Some((p, r)) => (format!("{p}: "), r),
        None => (String::new(), name),
    };
    let words = rest.replace('_', " ");
    let mut chars = words.chars();
    let first = if prefix.is_empty() { chars.next().map(|c| c.to_uppercase().collect::<String>()) } else { None };
    format!("{prefix}{}{}", first.unwrap_or_default(), chars.collect::<String>())
}

/// A tool result that says the host is busy.
fn busy(what: &str) -> CallToolResult {
    let message = format!(
        "The host is busy: {what} already has as many calls in flight as it allows. Retry shortly, or wait for a \
         running call to finish."
    );
    error_result(message, ErrorKind::Io, false)
}

impl ServerHandler for ChengMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_logging().enable_tools().build())
            .with_server_info(Implementation::new("cheng", env!("CARGO_PKG_VERSION")).with_title("Cheng"))
            .with_instructions(crate::listed::GLOSSARY)
    }

    async fn set_level(&self, request: SetLevelRequestParams, cx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        if let Some(key) = session_key(self.inner.stdio.is_some(), &cx.extensions) {
            lock(&self.inner.levels).insert(key, request.level);
        }
        Ok(())
    }

    async fn on_roots_list_changed(&self, cx: NotificationContext<RoleServer>) {
        // The next call asks again; calls in flight keep the workspace they have.
        if let Some(key) = session_key(self.inner.stdio.is_some(), &cx.extensions) {
            lock(&self.inner.chosen).remove(&key);
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let p = self.principal(&cx)?;
        let role = p.role.unwrap_or_default();
        let policy = self.inner.host.policy();
        let tools = self
            .inner
            .host
            .tools()
            .into_iter()
            .filter(|t| policy.grants(&role, &t.name))
            .map(|t| self.tool(t))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let p = self.principal(&cx)?;
        let name = request.name.to_string();
        if !self.inner.host.has_tool(&name) {
            return Err(ErrorData::invalid_params(format!("Unknown tool: {name}"), None));
        }
        let workspace = match self.workspace(&cx, &p).await {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(target: "cheng::server", tool = %name, "call refused: {e}");
                return Ok(error_result(e.0, ErrorKind::PathRefused, true).into());
            }
        };
        let run = self.run(&cx, &p, &workspace);
        // A place in the session and in the host, or a clear "busy".
        let wait = Duration::from_millis(self.inner.config.busy_wait_ms);
        let session = self.session_slots(&run);
        let Ok(Ok(_session_place)) = tokio::time::timeout(wait, session.acquire_owned()).await else {
            return Ok(busy("this session").into());
        };
        let Ok(Ok(_host_place)) = tokio::time::timeout(wait, self.inner.total.clone().acquire_owned()).await else {
            return Ok(busy("the host").into());
        };
        let role = p.role.clone().unwrap_or_default();
        // Who asks, for the person answering its approvals: the token and the client.
        let client = cx.client_info().map(|i| format!(" via {} {}", i.name, i.version)).unwrap_or_default();
        let caller = match &self.inner.stdio {
            Some(_) => format!("the stdio client{client}"),
            None => format!("token \"{}\"{client}", p.name),
        };
        // The call ends when the client cancels it, when its session ends, and (over HTTP)
        // when the connection its answer was to travel on closes: a card nobody will see
        // answered is withdrawn, and nothing runs for nobody.
        let ct = cx.ct.child_token();
        let gone = parts(&cx).and_then(|p| p.extensions.get::<super::http::RequestGone>()).map(|g| g.0.clone());
        // Given: pinned to the token or by --workspace; else found (the host refuses a
        // found one that is `/`, the home, or holds either or the state directory).
        let given = p.workspace.is_some() || !self.inner.workspace.asks_roots();
        let mut cx_call = Context::new(&workspace)
            .role(role)
            .run(run.clone())
            .cancel_with(ct.clone())
            .caller(caller)
            .given(given)
            .mcp_method("tools/call");
        // The caller's trace: `_meta` (the MCP revision of 2026-07-28) or, over HTTP, the
        // request's headers.
        if let Some((parent, state)) = trace_context(&cx) {
            cx_call = cx_call.traceparent(&parent, state.as_deref());
        }
        // Approvals may be sent to this client while the call runs.
        let _peer = self.inner.approver.as_ref().map(|a| a.attach(&run, &cx));
        // Subscribed before the call starts, so no request of this run is missed.
        let mut approvals = self.inner.host.approvals().subscribe();
        let input = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let call = self.inner.host.call(&cx_call, &name, input);
        tokio::pin!(call);
        let progress = cx.meta.get_progress_token();
        let session = session_key(self.inner.stdio.is_some(), &cx.extensions);
        let mut tick = tokio::time::interval(Duration::from_secs(2));
        let mut ticks = 0u64;
        // The progress value of the next notification (ticks and approval notices).
        let mut sent = 0u64;
        let mut listening = true;
        let result = loop {
            tokio::select! {
                r = &mut call => break r,
                // The call sees the cancellation and ends; this loop waits for it.
                _ = async { if let Some(g) = &gone { g.cancelled().await } }, if gone.is_some() && !ct.is_cancelled() => {
                    ct.cancel();
                }
                event = approvals.recv(), if listening => match event {
                    Ok(ApprovalEvent::Requested { request, timeout_ms }) if request.run == run => {
                        // Progress values must only increase: the notice takes the next number.
                        let at = progress.as_ref().map(|t| (t, sent as f64));
                        sent += u64::from(at.is_some());
                        self.tell_waiting(&cx.peer, session.as_deref(), at, &request, timeout_ms).await;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => listening = false,
                    _ => {}
                },
                _ = tick.tick(), if progress.is_some() => {
                    let msg = if ticks == 0 { "started".to_string() } else { format!("running ({} s)", ticks * 2) };
                    if let Some(token) = &progress {
                        let note = ProgressNotificationParam::new(token.clone(), sent as f64).with_message(msg);
                        let _ = cx.peer.notify_progress(note).await;
                    }
                    ticks += 1;
                    sent += 1;
                }
            }
        };
        // What does not apply is left out, as the listed output schemas say.
        let mut output = result.output;
        crate::listed::strip_nulls(&mut output);
        let text = output.to_string();
        let out = if result.status == Status::Ok {
            let mut out = CallToolResult::success(vec![ContentBlock::text(text)]);
            out.structured_content = Some(output);
            out
        } else {
            CallToolResult::error(vec![ContentBlock::text(text)])
        };
        Ok(out.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_read_well() {
        assert_eq!(title("read_file"), "Read file");
        assert_eq!(title("workspace_git"), "Workspace git");
        assert_eq!(title("acme__word_count"), "acme: word count");
    }
}
