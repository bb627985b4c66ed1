//! `cheng tools` (the tools a host offers, as a table or JSON) and `cheng call` (one
//! call; its output, or its whole record, on stdout; the exit code says how it ended).

use std::io::{Read, Write};
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use cheng_host::{Context, Host, Status};
use serde_json::json;

use super::args::Cli;
use super::{EXIT_DENIED, EXIT_ERROR, UsageError, emit_json, known_role, workspace_of};

/// `cheng tools [--json]`.
pub fn tools(host: &Host, json: bool) -> Result<u8> {
    let tools = host.tools();
    if json {
        let list: Vec<_> = tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.input_schema,
                    "output_schema": t.output_schema,
                    "component": t.component,
                    "component_tool": t.component_tool,
                })
            })
            .collect();
        emit_json(&list)?;
        return Ok(0);
    }
    let mut out = std::io::stdout().lock();
    for t in &tools {
        let first = t.description.split(". ").next().unwrap_or("");
        // A plugin's tool is called by its registered name; the name inside the
        // component is shown beside it when they differ.
        let origin = if t.component_tool == t.name {
            t.component.clone()
        } else {
            format!("{}:{}", t.component, t.component_tool)
        };
        // A server's or plugin's text is shown, never interpreted by the terminal
        // (escape sequences, bidi overrides), and cut.
        let esc = |s: &str| cheng_contract::text::escape_line(&cheng_contract::text::cut_chars(s, 200));
        writeln!(out, "{:<24} {:<16} {}", esc(&t.name), esc(&origin), esc(first))?;
    }
    Ok(0)
}

/// The input of `cheng call`: absent (`{}`), `-` for stdin, or the JSON text itself.
fn input(arg: Option<&str>) -> Result<serde_json::Value> {
    let text = match arg {
        None => "{}".to_string(),
        Some("-") => {
            let mut s = String::new();
            std::io::stdin().read_to_string(&mut s).map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData => {
                    anyhow::Error::new(UsageError("the input on stdin is not valid UTF-8 (JSON is UTF-8)".into()))
                }
                _ => anyhow::Error::new(e).context("cannot read the input from stdin"),
            })?;
            s
        }
        Some(s) => s.to_string(),
    };
    Ok(serde_json::from_str(&text).map_err(|e| UsageError(format!("the input is not valid JSON: {e}")))?)
}

/// `cheng call TOOL [INPUT] [--record]`.
pub async fn call(
    cli: &Cli,
    state: &Option<PathBuf>,
    host: Host,
    tool: &str,
    arg: Option<&str>,
    record: bool,
) -> Result<u8> {
    let value = input(arg)?;
    let workspace = workspace_of(&cli.workspace, state)?;
    let role = match &cli.role {
        Some(r) => r.clone(),
        None => {
            let r = host.policy().default_role().to_string();
            eprintln!("cheng: calling as role \"{r}\" (the default; --role to change)");
            r
        }
    };
    known_role(host.policy(), &role)?;
    let mut cx = Context::new(workspace).role(role).given(cli.workspace.is_some());
    if let Some(run) = &cli.run {
        cx = cx.run(run.clone());
    }
    // A caller's trace, as OpenTelemetry's environment carriers pass it to a process.
    if let Ok(parent) = std::env::var("TRACEPARENT") {
        cx = cx.traceparent(&parent, std::env::var("TRACESTATE").ok().as_deref());
    }
    // SIGINT or SIGTERM cancels the call, which then ends as any call does: its final
    // record written, the head file brought up to it. A second signal stops at once,
    // the head file brought up to the last record written.
    // The handlers are in place before the call starts (a spawned task would only set
    // them up once the call first waits, and a signal before that would kill the process).
    let token = cx.cancel.clone();
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        let _ = writeln!(std::io::stderr(), "cheng: cancelling the call (again to stop at once)");
        token.cancel();
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        super::flush_audit_log();
        std::process::exit(130);
    });
    tracing::debug!(target: "cheng::startup", "calling");
    let (result, rec) = host.call_recorded(&cx, tool, value).await;
    tracing::debug!(target: "cheng::startup", "called");
    // The head file reaches the call's final record before its output reaches the caller.
    super::flush_audit_log();
    // The process exits right after printing: dropping the host would only unmap
    // compiled code first.
    if record {
        emit_json(&rec)?;
    } else {
        emit_json(&result.output)?;
    }
    // The call's span and the counters leave before the process does.
    host.flush_telemetry();
    std::mem::forget(host);
    Ok(match result.status {
        Status::Ok => 0,
        Status::Denied => EXIT_DENIED,
        _ => EXIT_ERROR,
    })
}
