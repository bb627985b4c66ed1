//! The pipeline's stage for a server's tool, after admission (grant, run, input
//! checked against the pinned schema, workspace): withheld definitions refused, the
//! approval `approve` asks for, the `running` record, the connection (started or
//! restarted), the call under its timeout, the result under its cap. A failure on the
//! way has the kind of the step that failed ([`super::SourceError::kind`]).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, RequestParamsMeta as _};

use super::Server;
use crate::approvals::Broker;
use crate::call::{Answer, CallScope, RecordSink, say, why_not};
use crate::capability;
use crate::records::Status;
use crate::{ErrorKind, ToolResult};

/// Call `tool` of `server` with `input` (already admitted and validated); its records
/// go to `records`, its approval card to `broker`.
pub(crate) async fn run(
    records: &RecordSink,
    broker: &Broker,
    scope: &Arc<CallScope>,
    server: &Arc<Server>,
    tool: &str,
    root: &std::path::Path,
) -> ToolResult {
    let id = server.id().to_string();
    if let Some(why) = server.withheld(tool) {
        return withheld(scope, &id, &why);
    }
    if let Err(r) = records.start(scope) {
        return r;
    }
    if server.config().approve.asks(tool)
        && let Err(r) = approve(broker, scope, server, tool).await
    {
        return r;
    }
    let conn = match server.conn(root).await {
        Ok(c) => c,
        Err(why) => return failed(scope, &id, why.kind(), &why.to_string()),
    };
    if conn.watch.list_changed.load(std::sync::atomic::Ordering::SeqCst)
        && let Err(why) = server.refresh(&conn).await
    {
        return failed(scope, &id, why.kind(), &why.to_string());
    }
    if let Some(why) = server.withheld(tool) {
        return withheld(scope, &id, &why);
    }
    let arguments = scope.input.as_object().cloned().unwrap_or_default();
    let mut params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    // The call's trace context, in the `_meta` keys the MCP revision of 2026-07-28
    // reserves (a server that predates them ignores them); an HTTP server gets them as
    // headers too (`conn::Traced`).
    for (name, value) in scope.trace_headers() {
        match name {
            "traceparent" => params.set_traceparent(&value),
            _ => params.set_tracestate(&value),
        }
    }
    let budget = Duration::from_millis(server.config().timeout_ms);
    let answer = tokio::time::timeout(budget, conn.service.peer().call_tool(params)).await;
    let result = match answer {
        Err(_) => {
            // Dropping the request told the server to cancel it.
            return scope.timed_out(&format!(
                "the MCP server \"{id}\" did not answer within {} ms and was told to cancel",
                budget.as_millis()
            ));
        }
        Ok(Err(rmcp::ServiceError::McpError(e))) => {
            return scope.fail(
                Status::Error,
                ErrorKind::InvalidArgument,
                format!(
                    "The MCP server \"{id}\" refused the call: {}",
                    cheng_contract::text::escape_line(&cheng_contract::text::cut_chars(&e.message, 2000))
                ),
            );
        }
        Ok(Err(e)) => return failed(scope, &id, ErrorKind::TransportError, &conn.why(&e.to_string())),
        Ok(Ok(r)) => r,
    };
    server.succeeded(root).await;
    let value = serde_json::to_value(&result).unwrap_or_default();
    let is_error = value.get("isError").and_then(|v| v.as_bool()).unwrap_or(false);
    let output = capped(&value, server.config().output_bytes);
    ToolResult {
        call_id: scope.id.clone(),
        status: if is_error { Status::Error } else { Status::Ok },
        output,
        error_kind: None,
        terminal: false,
        duration: scope.elapsed(),
    }
}

/// The server could not take the call: `kind` says at which step, `why` how.
fn failed(scope: &CallScope, id: &str, kind: ErrorKind, why: &str) -> ToolResult {
    let tool = &scope.tool;
    let message = match kind {
        ErrorKind::SpawnFailed => format!("The MCP server \"{id}\" behind \"{tool}\" could not be started: {why}."),
        ErrorKind::HandshakeTimeout => {
            format!(
                "The MCP server \"{id}\" behind \"{tool}\" did not finish starting: {why}. A later call starts it again."
            )
        }
        ErrorKind::RefreshFailed => format!(
            "The tool list of the MCP server \"{id}\" behind \"{tool}\" could not be read, so the call was not sent: {why}."
        ),
        ErrorKind::TransportError => {
            format!("The connection to the MCP server \"{id}\" behind \"{tool}\" failed: {why}.")
        }
        _ => format!("The MCP server \"{id}\" behind \"{tool}\" failed: {why}."),
    };
    let advice = if kind.default_terminal() { " Report this to the user rather than working around it." } else { "" };
    scope.fail(Status::Error, kind, format!("{message}{advice}"))
}

fn withheld(scope: &CallScope, id: &str, why: &str) -> ToolResult {
    scope.refuse(capability::withheld(&scope.tool, id, why))
}

/// Ask a person, showing the server, the tool and the exact arguments.
async fn approve(broker: &Broker, scope: &Arc<CallScope>, server: &Server, tool: &str) -> Result<(), ToolResult> {
    let args = scope.input.to_string();
    let detail = format!("MCP server \"{}\" ({}), tool \"{tool}\", arguments: {args}", server.id(), server.display());
    let summary = format!("{}: {tool} {}", server.id(), cheng_contract::text::cut_chars(&args, 80));
    let card = scope.card(summary, detail, String::new());
    match scope.ask(broker, card, |d| capability::tool_approval(&scope.tool, why_not(d))).await {
        Answer::Go { .. } => Ok(()),
        Answer::Cancelled => Err(scope.fail(
            Status::Error,
            ErrorKind::Cancelled,
            say::cancelled_waiting("nothing was sent to the server"),
        )),
        Answer::Refused { denial, .. } => Err(scope.fail(Status::Denied, denial.kind, denial.message)),
    }
}

/// The result as the tool's output: content blocks with their text (and data) within
/// `cap` bytes in all, the structured content when it fits.
fn capped(result: &serde_json::Value, cap: usize) -> serde_json::Value {
    let mut left = cap;
    let mut truncated = false;
    let mut blocks = Vec::new();
    for block in result.get("content").and_then(|c| c.as_array()).into_iter().flatten() {
        let mut b = block.clone();
        for key in ["text", "data", "blob"] {
            let target = if b.get(key).is_some() {
                Some(&mut b)
            } else {
                b.get_mut("resource").filter(|r| r.get(key).is_some())
            };
            let Some(obj) = target else { continue };
            let Some(s) = obj.get(key).and_then(|v| v.as_str()).map(str::to_string) else { continue };
            if s.len() <= left {
                left -= s.len();
            } else if key == "text" {
                let (kept, _) = cheng_contract::text::head_tail(&s, left.max(128));
                left = left.saturating_sub(kept.len());
                obj[key] = serde_json::Value::String(kept);
                truncated = true;
            } else {
                obj[key] = serde_json::Value::Null;
                obj["omitted_bytes"] = serde_json::json!(s.len());
                truncated = true;
            }
        }
        blocks.push(b);
    }
    let mut out = serde_json::json!({ "content": blocks, "truncated": truncated });
    if let Some(sc) = result.get("structuredContent").filter(|v| !v.is_null()) {
        let size = sc.to_string().len();
        if size <= left.max(cap / 2) {
            out["structuredContent"] = sc.clone();
        } else {
            out["truncated"] = serde_json::Value::Bool(true);
            out["structuredContent_omitted_bytes"] = serde_json::json!(size);
        }
    }
    if result.get("isError").and_then(|v| v.as_bool()) == Some(true) {
        out["isError"] = serde_json::Value::Bool(true);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_large_text_keeps_head_and_tail_within_the_cap() {
        let text = format!("BEGIN{}END", "x".repeat(100_000));
        let out = capped(&json!({"content": [{"type": "text", "text": text}]}), 4096);
        let kept = out["content"][0]["text"].as_str().unwrap();
        assert!(
            kept.starts_with("BEGIN") && kept.ends_with("END") && kept.contains("bytes omitted"),
            "{}",
            &kept[..80]
        );
        assert!(kept.len() < 4096 + 64);
        assert_eq!(out["truncated"], true);
        let small = capped(&json!({"content": [{"type": "text", "text": "hi"}], "isError": true}), 4096);
        assert_eq!(small["content"][0]["text"], "hi");
        assert_eq!(small["truncated"], false);
        assert_eq!(small["isError"], true);
    }
}
