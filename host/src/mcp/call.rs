//! The pipeline's stage for a server's tool, after admission (grant, run, input
//! checked against the pinned schema, workspace): withheld definitions refused, the
//! approval `approve` asks for, the `running` record, the connection (started or
//! restarted), the call under its timeout, the result under its cap.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::CallToolRequestParams;

use super::Server;
use crate::approvals::{ApprovalRequest, Decision};
use crate::capability::{Denial, Right};
use crate::host::Inner;
use crate::pipeline::CallScope;
use crate::records::Status;
use crate::{ErrorKind, ToolResult};

fn crashed(scope: &CallScope, why: &str) -> ToolResult {
    scope.fail(
        Status::Error,
        ErrorKind::Crashed,
        format!("The tool \"{}\" crashed: {why}. Report this to the user rather than working around it.", scope.tool),
    )
}

/// Call `tool` of `server` with `input` (already admitted and validated).
pub(crate) async fn run(
    inner: &Inner,
    scope: &Arc<CallScope>,
    server: &Arc<Server>,
    tool: &str,
    root: &std::path::Path,
) -> ToolResult {
    let id = server.id().to_string();
    if let Some(why) = server.withheld(tool) {
        return withheld(scope, &id, &why);
    }
    if let Err(r) = inner.records.start(scope) {
        return r;
    }
    if server.config().approve.asks(tool)
        && let Err(r) = approve(inner, scope, server, tool).await
    {
        return r;
    }
    let conn = match server.conn(root).await {
        Ok(c) => c,
        Err(why) => return crashed(scope, &why),
    };
    if conn.watch.list_changed.load(std::sync::atomic::Ordering::SeqCst)
        && let Err(why) = server.refresh(&conn).await
    {
        return crashed(scope, &why);
    }
    if let Some(why) = server.withheld(tool) {
        return withheld(scope, &id, &why);
    }
    let arguments = scope.input.as_object().cloned().unwrap_or_default();
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    let budget = Duration::from_millis(server.config().timeout_ms);
    let answer = tokio::time::timeout(budget, conn.service.peer().call_tool(params)).await;
    let result = match answer {
        Err(_) => {
            // Dropping the request told the server to cancel it.
            return scope.fail(
                Status::Error,
                ErrorKind::Timeout,
                format!(
                    "The tool \"{}\" timed out: the MCP server \"{id}\" did not answer within {} ms and was told to \
                     cancel. Do not retry the same request; narrow it or report the problem to the user.",
                    scope.tool,
                    budget.as_millis()
                ),
            );
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
        Ok(Err(e)) => return crashed(scope, &conn.why(&e.to_string())),
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

fn withheld(scope: &CallScope, id: &str, why: &str) -> ToolResult {
    scope.refuse(Denial::new(
        Right::Tool,
        scope.tool.clone(),
        ErrorKind::NotGranted,
        format!(
            "The tool \"{}\" is withheld: {why}. Tell the user; the operator reviews it with `cheng mcp diff {id}` and \
             takes the new definition with `cheng mcp accept {id}`.",
            scope.tool
        ),
    ))
}

/// Ask a person, showing the server, the tool and the exact arguments.
async fn approve(inner: &Inner, scope: &Arc<CallScope>, server: &Server, tool: &str) -> Result<(), ToolResult> {
    let args = scope.input.to_string();
    let detail = format!("MCP server \"{}\" ({}), tool \"{tool}\", arguments: {args}", server.id(), server.display());
    let card = ApprovalRequest::new(
        &scope.cx.run,
        &scope.cx.role,
        &scope.tool,
        format!("{}: {tool} {}", server.id(), cheng_contract::text::cut_chars(&args, 80)),
        detail,
        String::new(),
    )
    .of_call(&scope.cx);
    let outcome = tokio::select! {
        o = inner.broker.request(card) => o,
        _ = scope.cx.cancel.cancelled() => {
            return Err(scope.fail(Status::Error, ErrorKind::Cancelled,
                "The call was cancelled while it waited for approval; nothing was sent to the server.".into()));
        }
    };
    let d = outcome.decision;
    scope.approval(outcome);
    match d {
        Decision::Approved | Decision::AutoApproved => Ok(()),
        _ => {
            let why = match d {
                Decision::TimedOut => " (nobody answered in time)",
                Decision::NoApprover => " (nobody could be asked)",
                Decision::Withdrawn => " (the call ended before an answer)",
                _ => "",
            };
            Err(scope.refuse(Denial::new(
                Right::Approval,
                scope.tool.clone(),
                ErrorKind::ApprovalDenied,
                format!(
                    "The human declined this call of \"{}\"{why}. Do not call it again with the same arguments; propose \
                     a different approach or ask the user what to do.",
                    scope.tool
                ),
            )))
        }
    }
}

/// Head and tail of `text` in at most `cap` bytes, with what was cut said in between.
fn head_tail(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_string();
    }
    let half = cap / 2;
    let head = &text[..text.floor_char_boundary(half)];
    let tail = &text[text.ceil_char_boundary(text.len() - half)..];
    format!("{head}\n[… {} bytes cut …]\n{tail}", text.len() - head.len() - tail.len())
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
                let kept = head_tail(&s, left.max(64));
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
        assert!(kept.starts_with("BEGIN") && kept.ends_with("END") && kept.contains("bytes cut"), "{}", &kept[..80]);
        assert!(kept.len() < 4096 + 64);
        assert_eq!(out["truncated"], true);
        let small = capped(&json!({"content": [{"type": "text", "text": "hi"}], "isError": true}), 4096);
        assert_eq!(small["content"][0]["text"], "hi");
        assert_eq!(small["truncated"], false);
        assert_eq!(small["isError"], true);
    }
}
