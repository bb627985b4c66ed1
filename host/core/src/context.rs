//! The types of one call as a caller sees them: who calls, where and for which run
//! ([`Context`]), and what comes back ([`ToolResult`]).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::{ErrorKind, policy};

/// Who is calling, in which workspace, for which run.
#[derive(Debug, Clone)]
pub struct Context {
    /// The workspace root for this call.
    pub workspace: PathBuf,
    /// The caller's role.
    pub role: String,
    /// The run this call belongs to.
    pub run: String,
    /// Cancel the call by cancelling this token (or by dropping the call's future).
    pub cancel: CancellationToken,
    /// Who is calling, in words for a person answering its approvals (a token's name,
    /// the MCP client's name and version); empty when the embedder says nothing.
    pub caller: String,
    /// The caller's trace context (W3C `traceparent`, `tracestate`), when it sent one:
    /// the call's span is its child, and what the call sends on carries it.
    /// Always `None` without the `telemetry` feature.
    pub trace: Option<crate::trace::TraceContext>,
    /// The workspace was given explicitly (a command-line flag, a token pinned to it,
    /// the embedder's own setting) rather than found (a client's roots, the current
    /// directory). A found workspace that is `/`, the home, or holds the home or the
    /// host's state directory is refused ([`crate::guard::found_workspace_refusal`]).
    pub given: bool,
    /// The MCP request this call is the handling of (`tools/call`), when a server says
    /// so: its span is then named and attributed as MCP's conventions have it. `None`
    /// (an embedder's or the command line's own call): the span is named for what it is,
    /// `execute_tool <tool>`.
    pub mcp_method: Option<&'static str>,
}

impl Context {
    /// A context for `workspace`, role `developer`, a fresh run id.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Context {
            workspace: workspace.into(),
            role: policy::DEFAULT_ROLE.to_string(),
            run: new_id(),
            cancel: CancellationToken::new(),
            caller: String::new(),
            trace: None,
            given: false,
            mcp_method: None,
        }
    }

    /// Say who is calling (shown on approval cards).
    pub fn caller(mut self, caller: impl Into<String>) -> Self {
        self.caller = caller.into();
        self
    }

    /// Say this call handles an MCP request (`method`, e.g. `tools/call`): for its span.
    pub fn mcp_method(mut self, method: &'static str) -> Self {
        self.mcp_method = Some(method);
        self
    }

    /// Set the role.
    pub fn role(mut self, role: impl Into<String>) -> Self {
        self.role = role.into();
        self
    }

    /// Set the run id.
    pub fn run(mut self, run: impl Into<String>) -> Self {
        self.run = run.into();
        self
    }

    /// Continue the caller's trace: `traceparent` (and `tracestate`) as W3C Trace Context
    /// writes them. A value that does not parse is ignored (the call starts a trace), as
    /// is every value without the `telemetry` feature.
    #[cfg(feature = "telemetry")]
    pub fn traceparent(mut self, traceparent: &str, tracestate: Option<&str>) -> Self {
        self.trace = crate::trace::extract(traceparent, tracestate);
        self
    }

    /// Continue the caller's trace: without the `telemetry` feature, there is none to
    /// continue, and the values are ignored.
    #[cfg(not(feature = "telemetry"))]
    pub fn traceparent(self, traceparent: &str, tracestate: Option<&str>) -> Self {
        let _ = (traceparent, tracestate);
        self
    }

    /// Say whether the workspace was given explicitly (`true`) or found (`false`, the
    /// default): only a given one may be `/`, the home, or hold the home or the host's
    /// state directory.
    pub fn given(mut self, given: bool) -> Self {
        self.given = given;
        self
    }

    /// Use `token` for cancellation.
    pub fn cancel_with(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }
}

/// The time now, in Unix milliseconds (0 before 1970): the stamp of every record, card
/// and event.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// A fresh random id.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The result of one call.
#[derive(Debug, Clone, Serialize)]
pub struct ToolResult {
    /// The call's id (as in its record).
    pub call_id: String,
    /// `ok`, `error` or `denied`.
    pub status: Status,
    /// The tool's output; for failures, the envelope `{success, summary, error_kind,
    /// terminal, error}`.
    pub output: serde_json::Value,
    /// The failure kind, if any.
    pub error_kind: Option<ErrorKind>,
    /// Whether the failure must not be retried.
    pub terminal: bool,
    /// How long the call took.
    #[serde(serialize_with = "ser_duration_ms")]
    pub duration: Duration,
}

fn ser_duration_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

impl ToolResult {
    /// A failure: the envelope `{success: false, summary, error_kind, terminal, error}`.
    pub fn failure(
        call_id: String,
        status: Status,
        kind: ErrorKind,
        message: String,
        terminal: bool,
        duration: Duration,
    ) -> Self {
        let output = serde_json::json!({
            "success": false,
            "summary": message,
            "error_kind": kind.code(),
            "terminal": terminal,
            "error": message,
        });
        ToolResult { call_id, status, output, error_kind: Some(kind), terminal, duration }
    }
}

/// A call's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The tool ran and answered.
    Ok,
    /// The tool (or the host, about the call) reported a failure.
    Error,
    /// Policy refused the call before it ran.
    Denied,
    /// Still running.
    Running,
}

impl Status {
    /// The status as it is written in records and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Denied => "denied",
            Status::Running => "running",
        }
    }
}
