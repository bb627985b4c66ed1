//! The operator API (JSON, operator tokens only) and the console page, on the same
//! server as `/mcp`. Routes (documented with examples in `docs/api.md`):
//!
//! | route | what |
//! |---|---|
//! | `GET /health` | `pendingApprovals`, `activeRuns`, uptime, version, confinement, audit log state, the last minute's calls, errors and median time |
//! | `GET /api/runs`, `GET /api/runs/{id}` | each run's status (`running`, `awaiting-approval`, `idle`), role, calls; one run's todo list and recent calls |
//! | `GET /api/approvals` | the requests waiting, oldest first |
//! | `POST /api/approvals/{id}` | `{"decision": "approve" \| "decline"}`, and for a yes `scope` (`once`, `run`, `always`), `tier` (`confined`, `hosts`, `full`), `hosts`, `prefix`, `every_workspace`, `expires_in_ms`; for a no `message`: first answer wins; later: 409; one the card does not offer: 422 |
//! | `POST /api/runs/{id}/approvals` | the same body, answering every request the run waits on: `{"answered": [ids]}` |
//! | `GET /api/rules` | the learned rules (`rules`): each one's rule in words, who saved it from which card, when, its matches and last match; and the "this run" answers still live (`this_run`: `{run, rule}`), which end with their run |
//! | `DELETE /api/rules/{id}` | revoke one (recorded in the audit log); 404 when there is none |
//! | `GET /api/approvals/history` | requests no longer waiting, newest first: who asked, the outcome, who answered, the wait; `decision`, `run`, `before`, `limit` |
//! | `GET /api/records` | the audit log, newest first: `tool`, `status`, `run`, `since`, `before`, `limit` |
//! | `GET /api/records/{id}` | one call's record whole: arguments, result, denials, approvals, requests |
//! | `GET /api/events` | server-sent events: approvals requested and answered, calls started and finished, runs' status |
//! | `GET /metrics` | Prometheus text |
//! | `GET /` | the console (a static page; it signs in with an operator token kept in memory) |
//!
//! Every response carries `X-Content-Type-Options: nosniff`, `Cache-Control: no-store`
//! and `Referrer-Policy: no-referrer` (set once, in the HTTP server's outer layer); the
//! console's files a strict Content-Security-Policy (scripts and styles from this server
//! only, no inline script, no `eval`, no framing).

use std::convert::Infallible;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};

use super::tokens::Principal;
use cheng_host::Host;
use cheng_host::approvals::{Answer, Answered, ApprovalEvent, Decision, Route, Scope, Tier};
use cheng_host::records::{Filter, Status};

/// The console's Content-Security-Policy.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
     img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The operator routes and the console, for the router in [`super::http`].
pub(crate) fn routes(host: Host) -> axum::Router {
    axum::Router::new()
        .route("/", get(console_page))
        .route("/console.js", get(console_js))
        .route("/console.css", get(console_css))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/api/runs", get(runs))
        .route("/api/runs/{id}", get(run))
        .route("/api/approvals", get(approvals))
        .route("/api/approvals/{id}", post(answer))
        .route("/api/approvals/history", get(history))
        .route("/api/runs/{id}/approvals", post(answer_run))
        .route("/api/rules", get(rules))
        .route("/api/rules/{id}", axum::routing::delete(revoke_rule))
        .route("/api/records", get(records))
        .route("/api/records/{id}", get(record))
        .route("/api/events", get(events))
        .with_state(host)
}

fn page(kind: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind), (header::CONTENT_SECURITY_POLICY, CSP), (header::X_FRAME_OPTIONS, "DENY")], body)
        .into_response()
}

async fn console_page() -> Response {
    page("text/html; charset=utf-8", include_str!("console/index.html"))
}

async fn console_js() -> Response {
    page("text/javascript; charset=utf-8", include_str!("console/console.js"))
}

async fn console_css() -> Response {
    page("text/css; charset=utf-8", include_str!("console/console.css"))
}

/// A run's status: waiting on a person, working, or idle.
fn status_of(host: &Host, run: &cheng_host::observe::RunEntry) -> (&'static str, String) {
    if let Some(summary) = host.approvals().awaiting_summary(&run.id) {
        ("awaiting-approval", summary)
    } else if run.active > 0 {
        ("running", run.last_tool.clone())
    } else {
        ("idle", String::new())
    }
}

fn run_json(host: &Host, r: &cheng_host::observe::RunEntry) -> Value {
    let (status, activity) = status_of(host, r);
    json!({
        "id": r.id, "status": status, "activity": activity, "role": r.role, "workspace": r.workspace, "calls": r.calls,
        "active": r.active, "last_tool": r.last_tool, "last_ms": r.last_ms,
    })
}

async fn health(State(host): State<Host>) -> Json<Value> {
    let audit = match host.audit_log() {
        None => "off",
        Some(l) if l.is_healthy() => "ok",
        Some(_) => "unavailable",
    };
    Json(json!({
        "pendingApprovals": host.approvals().pending_count(),
        "activeRuns": host.observer().active_runs(),
        "uptime_s": host.observer().uptime().as_secs_f64(),
        "version": env!("CARGO_PKG_VERSION"),
        "confinement": cheng_host::confinement(),
        "audit_log": audit,
        "last_minute": host.observer().last_minute(),
    }))
}

async fn metrics(State(host): State<Host>) -> Response {
    let text = host.observer().metrics_text(host.approvals().pending_count());
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
}

async fn runs(State(host): State<Host>) -> Json<Value> {
    Json(Value::Array(host.observer().runs().iter().map(|r| run_json(&host, r)).collect()))
}

async fn run(State(host): State<Host>, Path(id): Path<String>) -> Response {
    let Some(r) = host.observer().run(&id) else {
        return (StatusCode::NOT_FOUND, Json(json!({"error": format!("no run \"{id}\" on this host")})))
            .into_response();
    };
    let mut doc = run_json(&host, &r);
    let todos = host.run_state(&id, "notes", "todos").and_then(|t| serde_json::from_str::<Value>(&t).ok());
    doc["todos"] = todos.unwrap_or(json!([]));
    let recent = host
        .audit_log()
        .and_then(|l| l.read(&Filter { run: Some(id.clone()), last: Some(20), ..Default::default() }).ok())
        .unwrap_or_default();
    doc["recent_calls"] =
        serde_json::to_value(recent.iter().rev().map(summary).collect::<Vec<_>>()).unwrap_or_default();
    Json(doc).into_response()
}

/// A record as lists show it (the result itself left out). Its preview and denials hold
/// text a model or a server chose (a refused path, a tool name): shown escaped, one line
/// each, like every card.
fn summary(r: &cheng_host::CallRecord) -> Value {
    json!({
        "id": r.id, "run": r.run, "role": r.role, "tool": r.tool, "status": r.status,
        "preview": shown(json!(r.preview)),
        "duration_ms": r.duration_ms, "started_at_ms": r.started_at_ms, "error_kind": r.error_kind,
        "approvals": r.approvals, "denials": shown(json!(r.denials)),
    })
}

/// `v` with every string in it escaped to one visible line (control, bidirectional and
/// invisible characters written as `\u{…}`).
fn shown(v: Value) -> Value {
    match v {
        Value::String(s) => Value::String(cheng_contract::text::escape_line(&s)),
        Value::Array(a) => Value::Array(a.into_iter().map(shown).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, shown(v))).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_in_a_record_is_shown_escaped() {
        let denials = json!([{"right": "fs_read", "target": "notes\u{202e}txt.exe\u{1b}[2J"}]);
        let out = shown(denials);
        let target = out[0]["target"].as_str().unwrap();
        assert!(!target.chars().any(cheng_contract::text::is_hidden_char), "{target:?}");
        assert!(target.contains("\\u{202e}") && target.contains("\\u{1b}"), "{target}");
        assert_eq!(out[0]["right"], "fs_read");
        // A whole record keeps its lines and tabs; the rest is escaped the same.
        let whole = shown_whole(json!({"stdout": "one\n\ttwo\u{202e}\u{1b}[2J\r"}));
        assert_eq!(whole["stdout"], "one\n\ttwo\\u{202e}\\u{1b}[2J\\r");
    }
}

async fn approvals(State(host): State<Host>) -> Json<Value> {
    Json(serde_json::to_value(host.approvals().pending()).unwrap_or_default())
}

#[derive(Deserialize)]
struct HistoryQuery {
    decision: Option<String>,
    run: Option<String>,
    before: Option<u64>,
    limit: Option<usize>,
}

/// Requests no longer waiting, newest first, a page at a time (`next_before` is the
/// `before` of the next page).
async fn history(State(host): State<Host>, Query(q): Query<HistoryQuery>) -> Response {
    let decision = q.decision.filter(|d| !d.is_empty());
    let all = host.approvals().history();
    let limit = q.limit.unwrap_or(50).clamp(1, 500);
    let page: Vec<_> = all
        .iter()
        .filter(|a| decision.as_deref().is_none_or(|d| a.decision.as_str() == d))
        .filter(|a| q.run.as_deref().is_none_or(|r| r.is_empty() || a.request.run == r))
        .filter(|a| q.before.is_none_or(|b| a.answered_at_ms < b))
        .take(limit + 1)
        .collect();
    let next = (page.len() > limit).then(|| page[limit - 1].answered_at_ms);
    let page = &page[..page.len().min(limit)];
    Json(json!({"approvals": page, "next_before": next})).into_response()
}

/// `v` with every string in it escaped as [`shown`] does, except that line breaks and
/// tabs stay (a whole record's file contents and outputs are read as lines).
fn shown_whole(v: Value) -> Value {
    match v {
        Value::String(s) => Value::String(
            s.split('\n')
                .map(|line| line.split('\t').map(cheng_contract::text::escape_line).collect::<Vec<_>>().join("\t"))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(shown_whole).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, shown_whole(v))).collect()),
        other => other,
    }
}

/// One call's record, whole, with every text in it escaped (line breaks kept).
async fn record(State(host): State<Host>, Path(id): Path<String>) -> Response {
    let not_found = || (StatusCode::NOT_FOUND, Json(json!({"error": format!("no record of a call \"{id}\"")})));
    let Some(log) = host.audit_log() else { return not_found().into_response() };
    match log.read(&Filter::default()) {
        Ok(all) => match all.iter().rev().find(|r| r.id == id) {
            Some(r) => Json(shown_whole(serde_json::to_value(r).unwrap_or_default())).into_response(),
            None => not_found().into_response(),
        },
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": e.to_string()}))).into_response(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    decision: String,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    tier: Option<String>,
    #[serde(default)]
    hosts: Option<Vec<String>>,
    #[serde(default)]
    prefix: Option<usize>,
    #[serde(default)]
    every_workspace: bool,
    #[serde(default)]
    expires_in_ms: Option<u64>,
    #[serde(default)]
    message: Option<String>,
}

fn bad_request(e: impl Into<String>) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": e.into()}))).into_response()
}

/// The answer in a body, or why it is not one.
fn answer_of(body: Result<Json<AnswerBody>, axum::extract::rejection::JsonRejection>) -> Result<Answer, String> {
    let usage = "send {\"decision\": \"approve\"} or {\"decision\": \"decline\"}, with for a yes \
                 \"scope\": \"once\"|\"run\"|\"always\", \"tier\": \"confined\"|\"hosts\"|\"full\", \"hosts\": [..], \
                 \"prefix\": N, \"every_workspace\", \"expires_in_ms\"; for a no \"message\"";
    let Json(b) = body.map_err(|e| format!("{e}; {usage}"))?;
    let decision = match b.decision.as_str() {
        "approve" => Decision::Approved,
        "decline" => Decision::Declined,
        _ => return Err(usage.into()),
    };
    let scope = match b.scope.as_deref() {
        None => Scope::Once,
        Some(s) => Scope::parse(s).ok_or_else(|| format!("scope \"{s}\": {usage}"))?,
    };
    let tier = match b.tier.as_deref() {
        None => None,
        Some(t) => Some(Tier::parse(t).ok_or_else(|| format!("tier \"{t}\": {usage}"))?),
    };
    Ok(Answer {
        decision,
        scope,
        tier,
        hosts: b.hosts,
        prefix: b.prefix,
        every_workspace: b.every_workspace,
        expires_in_ms: b.expires_in_ms,
        message: b.message,
    })
}

async fn answer(
    State(host): State<Host>,
    Path(id): Path<String>,
    axum::Extension(who): axum::Extension<Principal>,
    body: Result<Json<AnswerBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let answer = match answer_of(body) {
        Ok(a) => a,
        Err(e) => return bad_request(e),
    };
    let by = format!("operator:{}", who.name);
    let approve = answer.decision == Decision::Approved;
    match host.approvals().answer_with(&id, answer, &by, Route::Operator) {
        Answered::Applied => {
            let decision = if approve { "approved" } else { "declined" };
            (StatusCode::OK, Json(json!({"id": id, "decision": decision, "answered_by": by}))).into_response()
        }
        Answered::TooLate => {
            let e = json!({"error": "that request was answered already, or timed out; this answer changed nothing"});
            (StatusCode::CONFLICT, Json(e)).into_response()
        }
        Answered::Unknown => {
            (StatusCode::NOT_FOUND, Json(json!({"error": format!("no approval request \"{id}\"")}))).into_response()
        }
        Answered::Invalid(why) => (StatusCode::UNPROCESSABLE_ENTITY, Json(json!({"error": why}))).into_response(),
    }
}

/// `POST /api/runs/{id}/approvals`: one answer for every request the run waits on.
async fn answer_run(
    State(host): State<Host>,
    Path(run): Path<String>,
    axum::Extension(who): axum::Extension<Principal>,
    body: Result<Json<AnswerBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let answer = match answer_of(body) {
        Ok(a) => a,
        Err(e) => return bad_request(e),
    };
    let by = format!("operator:{}", who.name);
    let answered = host.approvals().answer_run(&run, &answer, &by, Route::Operator);
    Json(json!({"run": run, "answered": answered, "answered_by": by})).into_response()
}

/// `GET /api/rules`.
async fn rules(State(host): State<Host>) -> Response {
    match host.learned_rules() {
        Ok(list) => {
            let runs: Vec<Value> =
                host.run_grants().into_iter().map(|(run, rule)| json!({"run": run, "rule": rule})).collect();
            Json(json!({"rules": shown(json!(list)), "this_run": shown(json!(runs))})).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": e.to_string()}))).into_response(),
    }
}

/// `DELETE /api/rules/{id}`.
async fn revoke_rule(
    State(host): State<Host>,
    Path(id): Path<String>,
    axum::Extension(who): axum::Extension<Principal>,
) -> Response {
    match host.revoke_rule(&id, &format!("operator:{}", who.name)) {
        Ok(Some(rule)) => Json(json!({"revoked": shown(json!(rule))})).into_response(),
        Ok(None) => {
            (StatusCode::NOT_FOUND, Json(json!({"error": format!("no learned rule \"{id}\"")}))).into_response()
        }
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": e.to_string()}))).into_response(),
    }
}

#[derive(Deserialize)]
struct RecordQuery {
    tool: Option<String>,
    status: Option<String>,
    run: Option<String>,
    since: Option<u64>,
    before: Option<u64>,
    limit: Option<usize>,
}

async fn records(State(host): State<Host>, Query(q): Query<RecordQuery>) -> Response {
    let status = match q.status.as_deref() {
        None | Some("") => None,
        Some("ok") => Some(Status::Ok),
        Some("error") => Some(Status::Error),
        Some("denied") => Some(Status::Denied),
        Some("running") => Some(Status::Running),
        Some(other) => {
            let e = json!({"error": format!("status \"{other}\" is not ok, error, denied or running")});
            return (StatusCode::BAD_REQUEST, Json(e)).into_response();
        }
    };
    let Some(log) = host.audit_log() else { return Json(json!({"records": [], "next_before": null})).into_response() };
    let filter =
        Filter { status, tool: q.tool.filter(|t| !t.is_empty()), run: q.run.filter(|r| !r.is_empty()), last: None };
    let all = match log.read(&filter) {
        Ok(a) => a,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": e.to_string()}))).into_response(),
    };
    let limit = q.limit.unwrap_or(50).clamp(1, 500);
    let page: Vec<&cheng_host::CallRecord> = all
        .iter()
        .rev()
        .filter(|r| q.since.is_none_or(|s| r.started_at_ms >= s))
        .filter(|r| q.before.is_none_or(|b| r.started_at_ms < b))
        .take(limit + 1)
        .collect();
    let more = page.len() > limit;
    let page = &page[..page.len().min(limit)];
    let next = more.then(|| page.last().map(|r| r.started_at_ms)).flatten();
    Json(json!({"records": page.iter().map(|r| summary(r)).collect::<Vec<_>>(), "next_before": next})).into_response()
}

/// The approvals broker's events in the stream's words; a request also changes its
/// run's status.
fn approval_events(ev: ApprovalEvent) -> Vec<Value> {
    match ev {
        ApprovalEvent::Requested { request, timeout_ms } => vec![
            json!({"event": "run_status", "run": request.run, "status": "awaiting-approval"}),
            json!({"event": "approval_requested", "request": request, "timeout_ms": timeout_ms}),
        ],
        ApprovalEvent::Resolved { id, run, decision, waited_ms, answered_by, scope, tier } => vec![
            json!({"event": "approval_resolved", "id": id, "run": run, "decision": decision, "waited_ms": waited_ms,
                   "answered_by": answered_by, "scope": scope, "tier": tier}),
            json!({"event": "run_status", "run": run, "status": "running"}),
        ],
    }
}

/// The server's shutdown, for streams that must end with it (a graceful shutdown waits
/// for every open response).
#[derive(Clone)]
pub(crate) struct ShuttingDown(pub tokio_util::sync::CancellationToken);

async fn events(
    State(host): State<Host>,
    valid: Option<axum::Extension<super::http::StillValid>>,
    shutting: Option<axum::Extension<ShuttingDown>>,
) -> Sse<impl Stream<Item = Result<SseEvent, Infallible>>> {
    use tokio_stream::wrappers::BroadcastStream;
    let approvals = BroadcastStream::new(host.approvals().subscribe())
        .filter_map(|e| async move { e.ok() })
        .flat_map(|e| stream::iter(approval_events(e)));
    let calls = BroadcastStream::new(host.observer().subscribe())
        .filter_map(|e| async move { e.ok() })
        .map(|e| serde_json::to_value(e).unwrap_or_default());
    let merged = stream::select(approvals, calls).map(|v| Ok(SseEvent::default().data(v.to_string())));
    // The stream ends within seconds of its token being revoked.
    // It also ends at once when the server shuts down.
    let revoked = async move {
        let revoked = async move {
            match valid {
                Some(axum::Extension(v)) => v.revoked(std::time::Duration::from_secs(5)).await,
                None => std::future::pending().await,
            }
        };
        let down = async move {
            match shutting {
                Some(axum::Extension(s)) => s.0.cancelled_owned().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! { _ = revoked => {}, _ = down => {} }
    };
    Sse::new(merged.take_until(Box::pin(revoked))).keep_alive(KeepAlive::default())
}
