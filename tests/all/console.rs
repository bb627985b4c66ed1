//! The operator side of `cheng serve`: every API route with its refusals (no token, an
//! agent's token, the wrong method, an unknown id, a second answer, an answer after the
//! timeout), the Unix socket, and the console in a real headless Chromium
//! (`tests/browser/console.mjs`, playwright-core driving Debian's chromium): a card an
//! MCP client's call raised appears without a reload, Approve lets the call finish with
//! the command's output, Decline gives the declined result, and a card full of markup,
//! ANSI escapes and a right-to-left override is shown as inert text; answers that
//! remember (the scopes, the rule "always" saves, a refused choice shown on the card,
//! the Learned rules panel and its Revoke), a decline's message reaching the model, and
//! every card of a run approved at once.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_client::{StreamableHttpClientTransport, StreamableHttpClientTransportConfig};
use serde_json::{Value, json};

use crate::serve::{Server, Setup, setup};
use crate::util;

type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

async fn mcp(server: &Server, token: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(server.url()).auth_header(token.to_string());
    ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap()
}

/// Start a call of `workspace_shell` with `args` for `echo` in the background.
fn shell_call(client: &std::sync::Arc<Client>, args: Vec<String>) -> tokio::task::JoinHandle<Value> {
    let c = client.clone();
    tokio::spawn(async move {
        let p = CallToolRequestParams::new("workspace_shell").with_arguments(
            json!({"command": "echo", "args": args, "purpose": "a console test"}).as_object().cloned().unwrap(),
        );
        let r = c.call_tool(p).await.unwrap();
        // An error carries its envelope as text only.
        let text: String = r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
        let envelope = if r.is_error == Some(true) { serde_json::from_str(&text).unwrap() } else { Value::Null };
        json!({"is_error": r.is_error, "structured": r.structured_content, "envelope": envelope})
    })
}

/// An API request with an optional bearer token: (status, JSON body or null).
async fn api(server: &Server, method: &str, path: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut req = client.request(method.parse().unwrap(), format!("http://{}{path}", server.addr));
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    if let Some(b) = body {
        req = req.header("Content-Type", "application/json").body(b.to_string());
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn wait_pending(server: &Server, op: &str, n: usize) -> Vec<Value> {
    for _ in 0..200 {
        let (_, list) = api(server, "GET", "/api/approvals", Some(op), None).await;
        if list.as_array().is_some_and(|l| l.len() >= n) {
            return list.as_array().unwrap().clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no approval request appeared");
}

fn servers(s: &Setup) -> (Server, String, String) {
    let server = s.http();
    let op = s.token(None, "alice");
    let agent = s.token(Some("developer"), "agent");
    (server, op, agent)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_route_answers_the_operator_and_refuses_everyone_else() {
    let s = setup("[approvals]\ntimeout_ms = 1500\n");
    let (server, op, agent) = servers(&s);
    // No token, an agent's token: refused on every route.
    for path in [
        "/health",
        "/metrics",
        "/api/runs",
        "/api/approvals",
        "/api/approvals/history",
        "/api/records",
        "/api/records/x",
        "/api/events",
        "/api/runs/x",
    ] {
        assert_eq!(api(&server, "GET", path, None, None).await.0, 401, "{path}");
        assert_eq!(api(&server, "GET", path, Some(&agent), None).await.0, 403, "{path}");
    }
    // An agent can never answer an approval, its own included.
    let client = std::sync::Arc::new(mcp(&server, &agent).await);
    let call = shell_call(&client, vec!["one".into()]);
    let pending = wait_pending(&server, &op, 1).await;
    let id = pending[0]["request"]["id"].as_str().unwrap().to_string();
    let path = format!("/api/approvals/{id}");
    assert_eq!(api(&server, "POST", &path, Some(&agent), Some(json!({"decision": "approve"}))).await.0, 403);
    assert_eq!(api(&server, "POST", &path, None, Some(json!({"decision": "approve"}))).await.0, 401);
    // Health and runs while it waits: the run says awaiting-approval, with the card's summary.
    let (_, health) = api(&server, "GET", "/health", Some(&op), None).await;
    assert_eq!(health["pendingApprovals"], 1, "{health}");
    assert_eq!(health["audit_log"], "ok");
    let (_, runs) = api(&server, "GET", "/api/runs", Some(&op), None).await;
    let run =
        runs.as_array().unwrap().iter().find(|r| r["status"] == "awaiting-approval").expect("an awaiting run").clone();
    assert!(run["activity"].as_str().unwrap().starts_with("echo one"), "{run}");
    // It names its workspace (the console's runs table shows it), absolute and resolved.
    let ws = std::fs::canonicalize(s.ws.path()).unwrap();
    assert_eq!(run["workspace"], ws.display().to_string(), "{run}");
    // Wrong method, a bad body, an unknown id.
    assert_eq!(api(&server, "GET", &path, Some(&op), None).await.0, 405);
    assert_eq!(api(&server, "POST", &path, Some(&op), Some(json!({"decision": "maybe"}))).await.0, 400);
    assert_eq!(
        api(&server, "POST", "/api/approvals/nope", Some(&op), Some(json!({"decision": "approve"}))).await.0,
        404
    );
    // The operator's answer applies; a second answer is 409 and changes nothing.
    let (code, doc) = api(&server, "POST", &path, Some(&op), Some(json!({"decision": "approve"}))).await;
    assert_eq!((code, doc["answered_by"].as_str()), (200, Some("operator:alice")), "{doc}");
    assert_eq!(api(&server, "POST", &path, Some(&op), Some(json!({"decision": "decline"}))).await.0, 409);
    let out = call.await.unwrap();
    assert_eq!(out["structured"]["stdout"], "one\n", "{out}");
    // An answer after the timeout: 409, and the call got the declined result.
    let late = shell_call(&client, vec!["two".into()]);
    let id = wait_pending(&server, &op, 1).await[0]["request"]["id"].as_str().unwrap().to_string();
    let out = late.await.unwrap();
    assert_eq!(out["is_error"], true, "{out}");
    let (code, _) =
        api(&server, "POST", &format!("/api/approvals/{id}"), Some(&op), Some(json!({"decision": "approve"}))).await;
    assert_eq!(code, 409);
    // Records, newest first, filterable, paginated; the answer is on record with who gave it.
    let (_, recs) = api(&server, "GET", "/api/records?tool=workspace_shell&limit=1", Some(&op), None).await;
    assert_eq!(recs["records"].as_array().unwrap().len(), 1);
    assert!(recs["next_before"].is_u64(), "{recs}");
    let (_, older) = api(
        &server,
        "GET",
        &format!("/api/records?tool=workspace_shell&limit=5&before={}", recs["next_before"]),
        Some(&op),
        None,
    )
    .await;
    let answered = &older["records"][0]["approvals"][0];
    assert_eq!(answered["answered_by"], "operator:alice", "{older}");
    assert_eq!(api(&server, "GET", "/api/records?status=bogus", Some(&op), None).await.0, 400);
    // One record whole: its arguments, its result and the approval with who gave it.
    let id = older["records"][0]["id"].as_str().unwrap();
    let (code, whole) = api(&server, "GET", &format!("/api/records/{id}"), Some(&op), None).await;
    assert_eq!(code, 200, "{whole}");
    assert_eq!(whole["arguments"]["args"], json!(["one"]), "{whole}");
    assert_eq!(whole["result"]["stdout"], "one\n", "{whole}");
    assert_eq!(whole["approvals"][0]["answered_by"], "operator:alice", "{whole}");
    assert_eq!(api(&server, "GET", "/api/records/no-such-call", Some(&op), None).await.0, 404);
    // The history: newest first, the timeout and the operator's answer with the card.
    let (_, h) = api(&server, "GET", "/api/approvals/history", Some(&op), None).await;
    let outcomes: Vec<&str> =
        h["approvals"].as_array().unwrap().iter().map(|a| a["decision"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["timed_out", "approved"], "{h}");
    assert_eq!(h["approvals"][1]["answered_by"], "operator:alice", "{h}");
    assert!(h["approvals"][0]["answered_by"].is_null(), "a timeout has nobody answering: {h}");
    assert!(h["approvals"][1]["request"]["asked_by"].as_str().unwrap().contains("token"), "{h}");
    let (_, h) = api(&server, "GET", "/api/approvals/history?decision=approved&limit=1", Some(&op), None).await;
    assert_eq!(h["approvals"].as_array().unwrap().len(), 1, "{h}");
    assert!(h["next_before"].is_null(), "{h}");
    // The last minute's figures.
    let (_, health) = api(&server, "GET", "/health", Some(&op), None).await;
    assert!(health["last_minute"]["calls"].as_u64().unwrap() >= 2, "{health}");
    assert!(health["last_minute"]["p50_ms"].is_number(), "{health}");
    // A run by id, with its calls; an unknown one is 404.
    let (code, one) = api(&server, "GET", &format!("/api/runs/{}", run["id"].as_str().unwrap()), Some(&op), None).await;
    assert_eq!(code, 200);
    assert!(one["recent_calls"].as_array().unwrap().len() >= 2, "{one}");
    assert_eq!(api(&server, "GET", "/api/runs/no-such-run", Some(&op), None).await.0, 404);
    // Metrics in Prometheus text.
    let text = reqwest::Client::new()
        .get(format!("http://{}/metrics", server.addr))
        .bearer_auth(&op)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("cheng_calls_total{tool=\"workspace_shell\",status=\"ok\"} 1"), "{text}");
    assert!(text.contains("cheng_approvals_answered_total{decision=\"timed_out\"} 1"), "{text}");
    // The console's page: public, with its security headers.
    let resp = reqwest::Client::new().get(format!("http://{}/", server.addr)).send().await.unwrap();
    let csp = resp.headers()["content-security-policy"].to_str().unwrap().to_string();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'") && !csp.contains("unsafe"),
        "{csp}"
    );
    assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
    if let Ok(client) = std::sync::Arc::try_unwrap(client) {
        let _ = client.cancel().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_event_stream_tells_every_console() {
    let s = setup("");
    let (server, op, agent) = servers(&s);
    let resp =
        reqwest::Client::new().get(format!("http://{}/api/events", server.addr)).bearer_auth(&op).send().await.unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let client = std::sync::Arc::new(mcp(&server, &agent).await);
    let call = shell_call(&client, vec!["streamed".into()]);
    use futures::StreamExt as _;
    let mut stream = resp.bytes_stream();
    let mut seen = String::new();
    let mut id = None;
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout(Duration::from_secs(20), stream.next()).await {
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if id.is_none()
            && let Some(at) = seen.find("\"approval_requested\"")
        {
            let rest = &seen[at..];
            let start = rest.find("\"id\":\"").unwrap() + 6;
            id = Some(rest[start..start + rest[start..].find('"').unwrap()].to_string());
            let path = format!("/api/approvals/{}", id.as_ref().unwrap());
            assert_eq!(api(&server, "POST", &path, Some(&op), Some(json!({"decision": "approve"}))).await.0, 200);
        }
        if seen.contains("\"call_finished\"") && seen.contains("\"status\":\"idle\"") {
            break;
        }
    }
    for event in
        ["call_started", "run_status", "awaiting-approval", "approval_requested", "approval_resolved", "call_finished"]
    {
        assert!(seen.contains(event), "{event} missing from the stream:\n{seen}");
    }
    assert_eq!(call.await.unwrap()["structured"]["stdout"], "streamed\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_revoked_token_loses_its_event_stream() {
    let s = setup("");
    let (server, op, _agent) = servers(&s);
    let resp =
        reqwest::Client::new().get(format!("http://{}/api/events", server.addr)).bearer_auth(&op).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    // Control: the stream stays open while the token is valid.
    use futures::StreamExt as _;
    let mut stream = resp.bytes_stream();
    let early =
        tokio::time::timeout(Duration::from_secs(6), async { while let Some(Ok(_)) = stream.next().await {} }).await;
    assert!(early.is_err(), "the stream ended while its token was valid");
    // Operator answers are never cached.
    let health =
        reqwest::Client::new().get(format!("http://{}/health", server.addr)).bearer_auth(&op).send().await.unwrap();
    assert_eq!(health.headers()["cache-control"], "no-store");
    let out = s.cheng().args(["token", "revoke", "alice"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ended =
        tokio::time::timeout(Duration::from_secs(15), async { while let Some(Ok(_)) = stream.next().await {} }).await;
    assert!(ended.is_ok(), "the stream outlived its revoked token");
    assert_eq!(api(&server, "GET", "/health", Some(&op), None).await.0, 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_socket_answers_from_another_terminal() {
    let s = setup("[approvals]\ntimeout_ms = 60000\n");
    let (server, op, agent) = servers(&s);
    let client = std::sync::Arc::new(mcp(&server, &agent).await);
    let call = shell_call(&client, vec!["socket".into()]);
    wait_pending(&server, &op, 1).await;
    // `cheng approvals` lists it; `cheng approve ID` answers it.
    let out = s.cheng().arg("approvals").output().unwrap();
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = list["pending"][0]["request"]["id"].as_str().unwrap().to_string();
    let out = s.cheng().args(["approve", &id]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(call.await.unwrap()["structured"]["stdout"], "socket\n");
    // A second answer is too late (exit 1); an unknown id is a usage error (64).
    assert_eq!(s.cheng().args(["decline", &id]).output().unwrap().status.code(), Some(1));
    assert_eq!(s.cheng().args(["decline", "nope"]).output().unwrap().status.code(), Some(64));
    // The socket is the operator's alone: in a 0700 directory, itself 0600.
    let mode = |p: &std::path::Path| {
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions()) & 0o777
    };
    let dir = cheng_serve::socket::dir(s.state.path());
    assert_eq!(mode(&dir), 0o700);
    let socks: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(socks.len(), 1, "{socks:?}");
    assert_eq!(mode(&socks[0]), 0o600);
    let recs = cheng_host::records::read_log(&s.state.path().join("audit.jsonl"), &Default::default()).unwrap();
    assert!(
        recs.iter()
            .any(|r| r.approvals.iter().any(|a| a.answered_by.as_deref().is_some_and(|b| b.starts_with("socket:"))))
    );
}

/// The browser driver's next answer.
async fn said(rx: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("the browser answers")
        .unwrap_or_default();
    serde_json::from_str(&line).unwrap_or_else(|_| panic!("the browser said: {line}"))
}

fn chromium() -> bool {
    let runner = util::target_dir().join("test-runners/node_modules/playwright-core/package.json");
    let ok = std::path::Path::new("/usr/bin/chromium").exists() && runner.exists();
    util::require("Chromium and playwright-core (.ci/run installs both)", ok)
}

/// The browser driver signed in to `server`'s console: the process, its commands' pipe
/// and its answers, one JSON line each.
fn console_driver(
    server: &Server,
    op: &str,
    agent: &str,
    shot: &std::path::Path,
) -> (std::process::Child, std::process::ChildStdin, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let mut browser = Command::new("node")
        .arg(util::repo().join("tests/browser/console.mjs"))
        .arg(format!("http://{}/", server.addr))
        .arg(op)
        .arg(shot)
        .env("PLAYWRIGHT_CORE", util::target_dir().join("test-runners/node_modules/playwright-core/index.mjs"))
        .env("AGENT_TOKEN", agent)
        .current_dir(util::target_dir().join("test-runners"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let to = browser.stdin.take().unwrap();
    let from = BufReader::new(browser.stdout.take().unwrap());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in from.lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    (browser, to, rx)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_in_a_real_browser_approves_declines_and_shows_hostile_cards_as_text() {
    if !chromium() {
        return;
    }
    let s = setup("");
    let (server, op, agent) = servers(&s);
    let shot = util::target_dir().join("console-screenshot.png");
    let (mut browser, mut to, mut rx) = console_driver(&server, &op, &agent, &shot);
    let ready = said(&mut rx).await;
    assert_eq!(ready["ready"], true, "{ready}");
    // A wrong token and an agent's token are told apart at sign-in.
    let unknown = ready["signin"]["unknown"].as_str().unwrap();
    assert!(unknown.contains("does not know that token"), "{ready}");
    let agent_said = ready["signin"]["agent"].as_str().unwrap();
    assert!(agent_said.contains("agent's token") && agent_said.contains("operator"), "{ready}");
    let client = std::sync::Arc::new(mcp(&server, &agent).await);
    // Approve: the card appears without a reload, and the MCP call completes with the output.
    let call = shell_call(&client, vec!["from-the-console".into()]);
    writeln!(to, "approve").unwrap();
    let card = said(&mut rx).await;
    assert!(card["summary"].as_str().unwrap().starts_with("echo from-the-console"), "{card}");
    assert!(card["detail"].as_str().unwrap().contains("(in "), "{card}");
    assert_eq!(call.await.unwrap()["structured"]["stdout"], "from-the-console\n");
    // Decline: the declined result.
    let call = shell_call(&client, vec!["declined-here".into()]);
    writeln!(to, "decline").unwrap();
    let card = said(&mut rx).await;
    assert!(card["errors"].as_array().unwrap().is_empty(), "{card}");
    let out = call.await.unwrap();
    assert_eq!(out["is_error"], true);
    assert!(out["envelope"]["error"].as_str().unwrap().contains("declined"), "{out}");
    // A hostile card: markup, a closing script tag, an ANSI escape, a right-to-left override.
    let nasty =
        "<img src=x onerror=window.__pwned=1></script><script>window.__pwned=1</script>\u{1b}[31mred\u{202e}txt.exe";
    let call = shell_call(&client, vec![nasty.into()]);
    writeln!(to, "inspect").unwrap();
    let card = said(&mut rx).await;
    assert_eq!(card["pwned"], false, "a script in the card ran: {card}");
    assert_eq!(card["images"], 0, "markup in the card became elements: {card}");
    let detail = card["detail"].as_str().unwrap();
    assert!(detail.contains("<img src=x onerror=") && detail.contains("</script>"), "{detail}");
    assert!(detail.contains("\\u{1b}[31m") && detail.contains("\\u{202e}"), "{detail}");
    assert!(!detail.contains('\u{202e}') && !detail.contains('\u{1b}'));
    assert!(shot.exists(), "the screenshot");
    let _ = call.await;
    // What happened afterwards: the history shows each outcome and who answered it, and
    // the approved call's record opens to its arguments, result and approval.
    writeln!(to, "review").unwrap();
    let review = said(&mut rx).await;
    assert!(review["error"].is_null(), "{review}");
    let history = review["history"].as_array().unwrap();
    let row = |needle: &str| {
        history.iter().find(|r| r.to_string().contains(needle)).unwrap_or_else(|| panic!("{needle} in {review}"))
    };
    let approved = row("from-the-console");
    assert_eq!(approved[1], "approved", "{approved}");
    assert!(approved[2].as_str().unwrap().starts_with("operator:"), "who answered: {approved}");
    assert!(approved[5].as_str().unwrap().contains("token"), "who asked: {approved}");
    assert_eq!(row("declined-here")[1], "declined");
    let detail = review["detail"].as_str().unwrap();
    assert!(detail.contains("from-the-console") && detail.contains("approved by operator:"), "{detail}");
    assert!(review["strip"].as_str().unwrap().contains("calls/min"), "{review}");
    // The runs table names each run's workspace.
    let ws = std::fs::canonicalize(s.ws.path()).unwrap().display().to_string();
    let runs = review["runs"].as_array().unwrap();
    assert!(runs.iter().any(|r| r.as_array().unwrap().iter().any(|c| c == ws.as_str())), "{ws} in {review}");
    // Both widths: nothing overflows the page, no one-line cell wraps.
    for width in ["wide", "narrow"] {
        assert_eq!(review[width]["overflow"], false, "{width}: {review}");
        assert!(review[width]["tallest_line_ratio"].as_f64().unwrap() < 1.9, "{width}: a cell wraps: {review}");
    }
    for w in ["1280", "420"] {
        assert!(util::target_dir().join(format!("console-screenshot-{w}.png")).exists(), "the {w} px screenshot");
    }
    assert!(review["errors"].as_array().unwrap().is_empty(), "{review}");
    writeln!(to, "quit").unwrap();
    drop(to);
    let _ = browser.wait();
    if let Ok(client) = std::sync::Arc::try_unwrap(client) {
        let _ = client.cancel().await;
    }
}

/// Answers that remember, in the console. A card for `echo remembered` offers once,
/// this run and always, with the rule each prefix would save in words (the default
/// kept: `echo remembered` and any further arguments, here) and says what Approve
/// grants ("confined"); full access is a separate button, disabled once "always" is
/// chosen. An expiry past a year is refused and the refusal shown on the card, which
/// stays; approved "always", the rule is in the Learned rules panel (and the API), and
/// the next `echo remembered …` runs with no card. Revoked from the panel, the API's
/// list is empty and the same command asks again; declined with a message, the message
/// is in the tool's result. Two cards of one run are approved at once.
#[tokio::test(flavor = "multi_thread")]
async fn the_console_remembers_an_answer_revokes_it_and_declines_with_a_message() {
    if !chromium() {
        return;
    }
    let s = setup("[approvals]\ntimeout_ms = 60000\n");
    let (server, op, agent) = servers(&s);
    let shot = util::target_dir().join("console-remembered.png");
    let (mut browser, mut to, mut rx) = console_driver(&server, &op, &agent, &shot);
    assert_eq!(said(&mut rx).await["ready"], true);
    let client = std::sync::Arc::new(mcp(&server, &agent).await);
    let ws = std::fs::canonicalize(s.ws.path()).unwrap().display().to_string();

    // "always", after a refused choice; the rule is listed.
    let call = shell_call(&client, vec!["remembered".into()]);
    writeln!(to, "always").unwrap();
    let card = said(&mut rx).await;
    assert!(card["error"].is_null(), "{card}");
    assert!(card["summary"].as_str().unwrap().starts_with("echo remembered"), "{card}");
    assert_eq!(card["scopes"], json!(["once", "for this run", "always"]), "{card}");
    assert_eq!(card["once_only"], "", "{card}");
    let plain = card["grants_plain"].as_str().unwrap();
    assert!(plain.contains("once") && plain.contains("confined") && !plain.contains("network"), "{card}");
    assert!(card["full_text"].as_str().unwrap().contains("full access"), "{card}");
    assert_eq!((card["full_enabled_once"].as_bool(), card["full_disabled_always"].as_bool()), (Some(true), Some(true)));
    assert_eq!((card["rule_hidden_once"].as_bool(), card["rule_visible"].as_bool()), (Some(true), Some(true)));
    assert_eq!(card["every_visible"], true, "{card}");
    let prefixes = card["prefixes"].as_array().unwrap();
    assert_eq!(prefixes.len(), 2, "{card}");
    let kept = "`echo remembered` with any further arguments, in ";
    assert!(prefixes[0]["text"].as_str().unwrap().starts_with("`echo` with any arguments, in "), "{card}");
    assert!(prefixes[1]["text"].as_str().unwrap().starts_with(kept), "{card}");
    assert_eq!((prefixes[0]["checked"].as_bool(), prefixes[1]["checked"].as_bool()), (Some(false), Some(true)));
    let always = card["grants_always"].as_str().unwrap();
    assert!(always.contains("always") && always.contains(kept) && always.contains("confined"), "{card}");
    assert!(card["refused"].as_str().unwrap().contains("a year"), "the 422 on the card: {card}");
    assert_eq!(card["still_pending"], true, "{card}");
    // Only the refused answer's status (and sign-in's) in the console: no script error.
    for e in card["errors"].as_array().unwrap() {
        assert!(e.as_str().unwrap().contains("Failed to load resource"), "{card}");
    }
    assert_eq!(call.await.unwrap()["structured"]["stdout"], "remembered\n");
    let first = card["id"].as_str().unwrap().to_string();
    let rows = card["rules"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{card}");
    let row = rows[0].as_array().unwrap();
    assert!(row[0].as_str().unwrap().starts_with(kept), "{card}");
    assert_eq!(
        (row[1].as_str(), row[2].as_str(), row[3].as_str()),
        (Some("no network"), Some("operator:alice"), Some(first.as_str()))
    );
    let (_, listed) = api(&server, "GET", "/api/rules", Some(&op), None).await;
    let rule = listed["rules"][0].clone();
    assert_eq!(
        (rule["card"].as_str(), rule["saved_by"].as_str()),
        (Some(first.as_str()), Some("operator:alice")),
        "{listed}"
    );
    assert_eq!(rule["workspace"], ws.as_str(), "{listed}");
    assert_eq!(rule["words"], json!(["echo", "remembered"]), "{listed}");

    // The next `echo remembered …` runs with no card (nobody answers it).
    let call = shell_call(&client, vec!["remembered".into(), "again".into()]);
    let out = tokio::time::timeout(Duration::from_secs(30), call).await.expect("the rule admits it").unwrap();
    assert_eq!(out["structured"]["stdout"], "remembered again\n", "{out}");
    let (_, listed) = api(&server, "GET", "/api/rules", Some(&op), None).await;
    assert_eq!(listed["rules"][0]["matches"], 1, "{listed}");

    // Revoked from the panel: the API's list is empty, and the command asks again.
    writeln!(to, "revoke").unwrap();
    let revoked = said(&mut rx).await;
    assert!(revoked["error"].is_null(), "{revoked}");
    assert_eq!(revoked["before"][0][6], "1", "the panel shows the match: {revoked}");
    assert_eq!((revoked["after"].as_array().map(Vec::len), revoked["empty"].as_bool()), (Some(0), Some(true)));
    assert!(revoked["errors"].as_array().unwrap().is_empty(), "{revoked}");
    let (_, listed) = api(&server, "GET", "/api/rules", Some(&op), None).await;
    assert_eq!(listed["rules"], json!([]), "{listed}");
    let id = rule["id"].as_str().unwrap();
    assert_eq!(api(&server, "DELETE", &format!("/api/rules/{id}"), Some(&op), None).await.0, 404);

    // Asked again, and declined with a message: the model reads it in the result.
    let message = "Not now: print it with printf instead";
    let call = shell_call(&client, vec!["remembered".into(), "after-revoke".into()]);
    writeln!(to, "decline-message {message}").unwrap();
    let card = said(&mut rx).await;
    assert!(card["summary"].as_str().unwrap().starts_with("echo remembered after-revoke"), "{card}");
    assert!(card["errors"].as_array().unwrap().is_empty(), "{card}");
    let out = call.await.unwrap();
    assert_eq!(out["is_error"], true, "{out}");
    let error = out["envelope"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("declined"), "{out}");
    assert!(out["envelope"].to_string().contains(message), "the message is not in the result: {out}");

    // Two cards of one run: approved at once.
    let (one, two) = (shell_call(&client, vec!["both-one".into()]), shell_call(&client, vec!["both-two".into()]));
    wait_pending(&server, &op, 2).await;
    writeln!(to, "approve-run").unwrap();
    let all = said(&mut rx).await;
    assert!(all["error"].is_null(), "{all}");
    assert_eq!(all["pending"], 2, "{all}");
    assert_eq!(one.await.unwrap()["structured"]["stdout"], "both-one\n");
    assert_eq!(two.await.unwrap()["structured"]["stdout"], "both-two\n");
    assert!(all["errors"].as_array().unwrap().is_empty(), "{all}");
    writeln!(to, "quit").unwrap();
    drop(to);
    let _ = browser.wait();
    if let Ok(client) = std::sync::Arc::try_unwrap(client) {
        let _ = client.cancel().await;
    }
}

/// A card whose requester has gone is withdrawn at once, and nothing runs: the client
/// closing its session (DELETE), and the client's connection dropping mid-call with no
/// cancel at all. The control: the same card from a client that stays is answered and
/// its command runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_card_whose_requester_left_is_withdrawn_and_nothing_runs() {
    let s = setup("[approvals]\ntimeout_ms = 60000\n");
    let (server, op, agent) = servers(&s);
    let touch = |name: &str| json!({"name": "workspace_shell", "arguments": {"command": "touch", "args": [name], "purpose": "a console test"}});
    // Waits until no card is pending; the history's newest outcome.
    let settled = async |what: &str| -> Value {
        for _ in 0..100 {
            let (_, list) = api(&server, "GET", "/api/approvals", Some(&op), None).await;
            if list.as_array().is_some_and(|l| l.is_empty()) {
                let (_, h) = api(&server, "GET", "/api/approvals/history?limit=1", Some(&op), None).await;
                return h["approvals"][0].clone();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what}: the card stayed pending after its requester left");
    };

    // 1. The client closes its session while its call waits.
    let client = std::sync::Arc::new(mcp(&server, &agent).await);
    let c = client.clone();
    let p = touch("closed.txt");
    let call = tokio::spawn(async move {
        let p: CallToolRequestParams = serde_json::from_value(p).unwrap();
        c.call_tool(p).await
    });
    let id = wait_pending(&server, &op, 1).await[0]["request"]["id"].as_str().unwrap().to_string();
    call.abort();
    let _ = call.await;
    let client = std::sync::Arc::try_unwrap(client).unwrap_or_else(|_| panic!("one owner"));
    let _ = client.cancel().await;
    let last = settled("session closed").await;
    assert_eq!((last["request"]["id"].as_str(), last["decision"].as_str()), (Some(id.as_str()), Some("withdrawn")));
    let path = format!("/api/approvals/{id}");
    let answer = api(&server, "POST", &path, Some(&op), Some(json!({"decision": "approve"}))).await;
    assert_eq!(answer.0, 409, "an answer to a withdrawn card changes nothing");

    // 2. The connection drops in the middle of the call, with no cancel and no DELETE.
    let http = reqwest::Client::new();
    let post = |session: Option<String>, body: Value| {
        let mut r = http
            .post(server.url())
            .bearer_auth(&agent)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(body.to_string());
        if let Some(s) = session {
            r = r.header("Mcp-Session-Id", s).header("Mcp-Protocol-Version", "2025-06-18");
        }
        r.send()
    };
    let init = post(
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "leaver", "version": "1"}}}),
    )
    .await
    .unwrap();
    let session = init.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_string());
    drop(init);
    post(session.clone(), json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await.unwrap();
    let waiting = post(
        session.clone(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": touch("dropped.txt")}),
    );
    // Its answer is read until the task is aborted (the response held open meanwhile).
    let waiting = tokio::spawn(async move { waiting.await.unwrap().bytes().await });
    let id = wait_pending(&server, &op, 1).await[0]["request"]["id"].as_str().unwrap().to_string();
    // The response (an event stream) is in flight; dropping it closes the connection.
    waiting.abort();
    let last = settled("connection dropped").await;
    assert_eq!((last["request"]["id"].as_str(), last["decision"].as_str()), (Some(id.as_str()), Some("withdrawn")));

    // The control: a client that stays gets its card answered, and its command runs.
    let client = std::sync::Arc::new(mcp(&server, &agent).await);
    let c = client.clone();
    let call = tokio::spawn(async move {
        let p: CallToolRequestParams = serde_json::from_value(touch("stayed.txt")).unwrap();
        c.call_tool(p).await.unwrap()
    });
    let id = wait_pending(&server, &op, 1).await[0]["request"]["id"].as_str().unwrap().to_string();
    let path = format!("/api/approvals/{id}");
    assert_eq!(api(&server, "POST", &path, Some(&op), Some(json!({"decision": "approve"}))).await.0, 200);
    assert_ne!(call.await.unwrap().is_error, Some(true));
    assert!(s.ws.path().join("stayed.txt").exists(), "the control's command ran");
    // Nothing of the two who left ran.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for name in ["closed.txt", "dropped.txt"] {
        assert!(!s.ws.path().join(name).exists(), "{name}: a withdrawn command ran");
    }
    if let Ok(client) = std::sync::Arc::try_unwrap(client) {
        let _ = client.cancel().await;
    }
}

/// A prompt on the server's terminal whose request is answered elsewhere is taken down at
/// once, and the next request's prompt is shown: the next answer typed is that one's,
/// never swallowed by a prompt that no longer counts.
#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_prompt_answered_elsewhere_is_taken_down() {
    use std::sync::{Arc, Mutex};
    let s = setup("[approvals]\ntimeout_ms = 30000\n");
    let (op, agent) = (s.token(None, "alice"), s.token(Some("developer"), "agent"));
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let quote = |p: &std::path::Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
    let line = format!(
        "{} --state-dir {} --workspace {} --config {} serve --http {addr}",
        quote(std::path::Path::new(env!("CARGO_BIN_EXE_cheng"))),
        quote(s.state.path()),
        quote(s.ws.path()),
        quote(&s.state.path().join("cheng.toml")),
    );
    // The server with a pseudo-terminal as its controlling terminal (`script`).
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("CHENG_LOG", "error")
        .env("XDG_CONFIG_HOME", s.state.path().join("no-config"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut keys = child.stdin.take().unwrap();
    let screen = Arc::new(Mutex::new(String::new()));
    let (out, shown) = (child.stdout.take().unwrap(), screen.clone());
    std::thread::spawn(move || {
        let mut out = out;
        let mut buf = [0u8; 4096];
        while let Ok(n) = std::io::Read::read(&mut out, &mut buf) {
            if n == 0 {
                break;
            }
            shown.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let server = Server { child, addr };
    let on_screen = async |what: &str, times: usize| {
        for _ in 0..100 {
            if screen.lock().unwrap().matches(what).count() >= times {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what:?} ({times}x) never on the terminal:\n{}", screen.lock().unwrap());
    };
    on_screen("serving MCP over HTTP", 1).await;
    let client = std::sync::Arc::new(mcp(&server, &agent).await);

    // The first request: on the terminal, then answered from the API.
    let first = shell_call(&client, vec!["first".into()]);
    on_screen("Approve? [y", 1).await;
    let id = wait_pending(&server, &op, 1).await[0]["request"]["id"].as_str().unwrap().to_string();
    let path = format!("/api/approvals/{id}");
    assert_eq!(api(&server, "POST", &path, Some(&op), Some(json!({"decision": "approve"}))).await.0, 200);
    assert_eq!(first.await.unwrap()["structured"]["stdout"], "first\n");
    on_screen("(answered elsewhere)", 1).await;

    // The second: its own prompt, shown at once, and the answer typed is its own.
    let second = shell_call(&client, vec!["second".into()]);
    on_screen("Approve? [y", 2).await;
    keys.write_all(b"y\n").unwrap();
    assert_eq!(second.await.unwrap()["structured"]["stdout"], "second\n", "{}", screen.lock().unwrap());
    let (_, h) = api(&server, "GET", "/api/approvals/history?limit=1", Some(&op), None).await;
    assert_eq!(h["approvals"][0]["answered_by"], "terminal", "{h}");
    if let Ok(client) = std::sync::Arc::try_unwrap(client) {
        let _ = client.cancel().await;
    }
}
