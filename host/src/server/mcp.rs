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
//! - **Results**: the tool's JSON output is `structuredContent`, its compact JSON text the
//!   `content`; `isError` when the call failed or was denied. A call outside the role,
//!   bad arguments and a crashed component are tool results the model reads; an unknown
//!   tool name is a protocol error (`-32602`).
//! - **Cancellation** (`notifications/cancelled`, or an HTTP client going away) reaches
//!   the call's token: a running command and its tree are stopped, an approval wait ends.
//! - **Progress**: with a `progressToken`, a notification at the start and every two
//!   seconds while the call runs.
//! - **Bounds**: calls in flight per session and in all; past them a call waits
//!   (`[serve] busy_wait_ms`), then gets a "busy" result — never a crash.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, Implementation, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use tokio::sync::Semaphore;

use super::approver::ClientApprover;
use super::tokens::{Kind, Principal};
use crate::policy::ServeConfig;
use crate::{Context, FsAccess, Host, Status, ToolInfo};

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
    workspace: PathBuf,
    /// Over stdio: who the one client is, and its run.
    stdio: Option<(Principal, String)>,
    config: ServeConfig,
    total: Arc<Semaphore>,
    sessions: Mutex<HashMap<String, Arc<Semaphore>>>,
    approver: Option<Arc<ClientApprover>>,
}

impl ChengMcp {
    /// A handler serving `host` in `workspace`. `stdio_role`: the role of the one stdio
    /// client (`None` over HTTP, where tokens decide). `approver`: the elicitation path
    /// for approvals, when `[serve] approvals_via_client` is on.
    pub fn new(
        host: Host,
        workspace: PathBuf,
        stdio_role: Option<String>,
        config: ServeConfig,
        approver: Option<Arc<ClientApprover>>,
    ) -> ChengMcp {
        let stdio = stdio_role
            .map(|role| (Principal { name: "stdio".into(), kind: Kind::Agent, role: Some(role) }, crate::new_id()));
        ChengMcp {
            inner: Arc::new(State {
                total: Arc::new(Semaphore::new(config.max_calls.max(1))),
                host,
                workspace,
                stdio,
                config,
                sessions: Mutex::default(),
                approver,
            }),
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
    fn run(&self, cx: &RequestContext<RoleServer>, who: &Principal) -> String {
        if let Some((_, run)) = &self.inner.stdio {
            return run.clone();
        }
        // A run a client names is kept apart per token, so one agent cannot join another's
        // run (its approvals, its notes, its places) by naming it.
        let named = cx.meta.0.get(RUN_META_KEY).and_then(|v| v.as_str()).filter(|r| valid_run(r));
        if let Some(r) = named {
            return format!("{}.{r}", sanitize(&who.name));
        }
        let parts = parts(cx);
        if let Some(s) = parts.and_then(|p| p.headers.get("mcp-session-id")).and_then(|v| v.to_str().ok()) {
            return format!("mcp-{}", sanitize(s));
        }
        match parts.and_then(|p| p.extensions.get::<Connection>()) {
            Some(c) => format!("conn-{}", sanitize(&c.0)),
            None => format!("mcp-{}", crate::new_id()),
        }
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

    fn tool(&self, t: &ToolInfo) -> Tool {
        let schema = |v: &serde_json::Value| Arc::new(v.as_object().cloned().unwrap_or_default());
        let writes = t.needs.fs == FsAccess::Write;
        let annotations = ToolAnnotations::new()
            .read_only(!writes && !t.needs.spawn)
            .destructive(writes || t.needs.spawn)
            .open_world(!t.needs.network.is_empty());
        Tool::new(t.name.clone(), t.description.clone(), schema(&t.input_schema))
            .with_title(title(&t.name))
            .with_raw_output_schema(schema(&t.output_schema))
            .with_annotations(annotations)
    }
}

/// The HTTP request a call arrived in, when it came over HTTP.
fn parts(cx: &RequestContext<RoleServer>) -> Option<&http::request::Parts> {
    cx.extensions.get::<http::request::Parts>()
}

fn valid_run(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= 100
        && !r.starts_with('.')
        && r.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
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
    let mut r = CallToolResult::error(vec![ContentBlock::text(message.clone())]);
    r.structured_content = Some(serde_json::json!({
        "success": false, "summary": message, "error_kind": "LOCAL_EXECUTOR_IO", "terminal": false, "error": message,
    }));
    r
}

impl ServerHandler for ChengMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cheng", env!("CARGO_PKG_VERSION")).with_title("Cheng"))
            .with_instructions(
                "Cheng runs each tool as a sandboxed WebAssembly component in the workspace. Commands may ask a person \
                 first; a declined command must not be retried.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let p = self.principal(&cx)?;
        let role = p.role.unwrap_or_default();
        let policy = self.inner.host.policy();
        let tools =
            self.inner.host.tools().iter().filter(|t| policy.grants(&role, &t.name)).map(|t| self.tool(t)).collect();
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
        let run = self.run(&cx, &p);
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
        let cx_call = Context::new(&self.inner.workspace).role(role).run(run.clone()).cancel_with(cx.ct.child_token());
        // Approvals may be sent to this client while the call runs.
        let _peer = self.inner.approver.as_ref().map(|a| a.attach(&run, &cx));
        let input = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let call = self.inner.host.call(&cx_call, &name, input);
        let result = match cx.meta.get_progress_token() {
            None => call.await,
            Some(token) => {
                let peer = cx.peer.clone();
                let ticker = async move {
                    let mut n = 0u64;
                    loop {
                        let msg = if n == 0 { "started".to_string() } else { format!("running ({} s)", n * 2) };
                        let _ = peer
                            .notify_progress(ProgressNotificationParam::new(token.clone(), n as f64).with_message(msg))
                            .await;
                        n += 1;
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                };
                tokio::select! {
                    r = call => r,
                    _ = ticker => unreachable!("the ticker never ends"),
                }
            }
        };
        let text = result.output.to_string();
        let mut out = if result.status == Status::Ok {
            CallToolResult::success(vec![ContentBlock::text(text)])
        } else {
            CallToolResult::error(vec![ContentBlock::text(text)])
        };
        out.structured_content = Some(result.output);
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
