//! Every route that answers, with its scopes, end to end against a real `cheng serve`:
//! the operator API (`always` with a shortened prefix, a 422 for what the card does not
//! offer, an agent's token refused, the rule listed and revoked through `/api/rules`),
//! `cheng approve --for run|always` and `cheng decline --message` over the approvals
//! socket, `cheng rules` offline, the terminal prompt through a pseudo-terminal, and
//! elicitation from the official Python SDK client (once or this run; "always" from
//! there is a no).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::clients::http;
use crate::serve::{Target, py, python_sdk, setup};
use crate::util;

/// A tool call over MCP's streamable HTTP with an agent token, in a thread: the
/// structured result or the error envelope, as text.
fn call_in_background(url: String, token: String, args: Value) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let (calls, results, thread) = session(url, token);
        calls.send(args).unwrap();
        let out = results.recv().unwrap();
        drop(calls);
        thread.join().unwrap();
        out
    })
}

/// Wait for a pending card whose summary contains `needle`, through `pending()`.
fn wait_card(mut pending: impl FnMut() -> Vec<Value>, needle: &str) -> Value {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(p) = pending().into_iter().find(|p| p["request"]["summary"].as_str().unwrap_or("").contains(needle))
        {
            return p;
        }
        assert!(Instant::now() < end, "no card for {needle}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_api_answers_with_a_scope_lists_and_revokes_rules_and_refuses_agents() {
    let s = setup("");
    let operator = s.token(None, "alice");
    let agent = s.token(Some("developer"), "agent");
    let server = s.http();
    let addr = server.addr.clone();
    let pending = || http(&addr, "GET", "/api/approvals", &operator, None).1.as_array().cloned().unwrap_or_default();

    let call = call_in_background(server.url(), agent.clone(), json!({"command": "nl", "args": ["inside.txt"]}));
    let card = wait_card(pending, "nl inside.txt");
    let id = card["request"]["id"].as_str().unwrap().to_string();
    let offer = &card["request"]["offer"];
    assert_eq!(offer["scopes"], json!(["once", "run", "always"]), "{card}");
    assert!(offer["prefixes"][0]["text"].as_str().unwrap().starts_with("`nl` with any arguments, in "), "{offer}");
    // An agent's token cannot answer, let alone pick a scope.
    let (st, _) = http(
        &addr,
        "POST",
        &format!("/api/approvals/{id}"),
        &agent,
        Some(json!({"decision": "approve", "scope": "always"})),
    );
    assert_eq!(st, 403);
    // What the card does not offer is 422, and the card keeps waiting.
    let (st, body) = http(
        &addr,
        "POST",
        &format!("/api/approvals/{id}"),
        &operator,
        Some(json!({"decision": "approve", "scope": "always", "tier": "full"})),
    );
    assert_eq!(st, 422, "{body}");
    assert!(body["error"].as_str().unwrap().contains("full access"), "{body}");
    // Always, the program alone.
    let (st, body) = http(
        &addr,
        "POST",
        &format!("/api/approvals/{id}"),
        &operator,
        Some(json!({"decision": "approve", "scope": "always", "prefix": 1})),
    );
    assert_eq!(st, 200, "{body}");
    let out = call.join().unwrap();
    assert!(out.contains("1\\tinside"), "{out}");
    // The rule is listed, with who saved it from which card.
    let (_, rules) = http(&addr, "GET", "/api/rules", &operator, None);
    let rule = rules["rules"][0].clone();
    assert_eq!(
        (rule["saved_by"].as_str(), rule["card"].as_str()),
        (Some("operator:alice"), Some(id.as_str())),
        "{rules}"
    );
    // The next `nl` in this workspace runs without a card.
    let again =
        call_in_background(server.url(), agent.clone(), json!({"command": "nl", "args": ["-ba", "inside.txt"]}));
    let out = again.join().unwrap();
    assert!(out.contains("1\\tinside"), "{out}");
    assert_eq!(http(&addr, "GET", "/api/rules", &operator, None).1["rules"][0]["matches"], 1);
    // Revoked through the API (an agent's token cannot).
    let rid = rule["id"].as_str().unwrap();
    assert_eq!(http(&addr, "DELETE", &format!("/api/rules/{rid}"), &agent, None).0, 403);
    assert_eq!(http(&addr, "DELETE", &format!("/api/rules/{rid}"), &operator, None).0, 200);
    assert_eq!(http(&addr, "DELETE", &format!("/api/rules/{rid}"), &operator, None).0, 404);
    assert_eq!(http(&addr, "GET", "/api/rules", &operator, None).1["rules"], json!([]));
    // Asked again, and declined with a message for the model.
    let call = call_in_background(server.url(), agent, json!({"command": "nl", "args": ["inside.txt"]}));
    let card = wait_card(pending, "nl inside.txt");
    let id = card["request"]["id"].as_str().unwrap();
    let (st, _) = http(
        &addr,
        "POST",
        &format!("/api/approvals/{id}"),
        &operator,
        Some(json!({"decision": "decline", "message": "read it with read_file"})),
    );
    assert_eq!(st, 200);
    let out = call.join().unwrap();
    assert!(out.contains("read it with read_file") && out.contains("declined"), "{out}");
}

/// An MCP session over HTTP that makes one `workspace_shell` call per word sent on
/// `calls` (answering each result on the returned channel) and closes itself (the
/// client's `DELETE`) when `calls` is dropped.
fn session(
    url: String,
    token: String,
) -> (std::sync::mpsc::Sender<Value>, std::sync::mpsc::Receiver<String>, std::thread::JoinHandle<()>) {
    let (calls, todo) = std::sync::mpsc::channel::<Value>();
    let (done, results) = std::sync::mpsc::channel::<String>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            use rmcp::ServiceExt;
            use rmcp::transport::StreamableHttpClientTransport;
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
            let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
            while let Ok(args) = tokio::task::block_in_place(|| todo.recv()) {
                let params = rmcp::model::CallToolRequestParams::new("workspace_shell")
                    .with_arguments(args.as_object().cloned().unwrap());
                let r = client.call_tool(params).await.unwrap();
                let _ = done.send(serde_json::to_string(&r).unwrap());
            }
            client.cancel().await.unwrap();
        })
    });
    (calls, results, thread)
}

#[test]
fn a_this_run_answer_is_listed_and_ends_when_the_client_closes_its_session() {
    let s = setup("");
    let operator = s.token(None, "alice");
    let agent = s.token(Some("developer"), "agent");
    let server = s.http();
    let addr = server.addr.clone();
    let pending = || http(&addr, "GET", "/api/approvals", &operator, None).1.as_array().cloned().unwrap_or_default();
    let this_run = || http(&addr, "GET", "/api/rules", &operator, None).1["this_run"].as_array().cloned().unwrap();

    let (calls, results, thread) = session(server.url(), agent);
    calls.send(json!({"command": "nl", "args": ["inside.txt"]})).unwrap();
    let id = wait_card(pending, "nl inside.txt").pointer("/request/id").unwrap().as_str().unwrap().to_string();
    let (st, body) = http(
        &addr,
        "POST",
        &format!("/api/approvals/{id}"),
        &operator,
        Some(json!({"decision": "approve", "scope": "run"})),
    );
    assert_eq!(st, 200, "{body}");
    assert!(results.recv_timeout(Duration::from_secs(60)).unwrap().contains("1\\tinside"));
    // Listed while the session lives, and it admits the next one of its kind unasked.
    let live = this_run();
    assert_eq!(live.len(), 1, "{live:?}");
    assert!(live[0]["run"].as_str().unwrap().starts_with("mcp-"), "{live:?}");
    calls.send(json!({"command": "nl", "args": ["inside.txt", "-ba"]})).unwrap();
    assert!(results.recv_timeout(Duration::from_secs(60)).unwrap().contains("1\\tinside"));
    assert!(pending().is_empty());
    // The client closes its session: the answer ends with it.
    drop(calls);
    thread.join().unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while !this_run().is_empty() {
        assert!(Instant::now() < end, "the run's answer outlived its session: {:?}", this_run());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_cli_answers_for_the_run_and_always_and_lists_and_revokes_rules() {
    let s = setup("");
    let agent = s.token(Some("developer"), "agent");
    let server = s.http();
    let state = s.state.path().to_path_buf();
    let cli = || util::cheng_in(std::path::Path::new("/tmp"), &state);
    let pending = || {
        let out = cli().arg("approvals").output().unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null)["pending"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    // `--for always --prefix 1`.
    let call = call_in_background(server.url(), agent.clone(), json!({"command": "nl", "args": ["inside.txt"]}));
    let id = wait_card(pending, "nl inside.txt").pointer("/request/id").unwrap().as_str().unwrap().to_string();
    let bad = cli().args(["approve", &id, "--for", "always", "--tier", "full"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(64), "{}", String::from_utf8_lossy(&bad.stdout));
    assert!(cli().args(["approve", &id, "--for", "always", "--prefix", "1"]).status().unwrap().success());
    assert!(call.join().unwrap().contains("1\\tinside"));
    let listed: Vec<Value> = serde_json::from_slice(&cli().args(["rules", "list"]).output().unwrap().stdout).unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0]["saved_by"].as_str().unwrap().starts_with("socket:uid "), "{listed:?}");
    let rid = listed[0]["id"].as_str().unwrap().to_string();
    let out = cli().args(["rules", "revoke", &rid]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(cli().args(["rules", "revoke", &rid]).status().unwrap().code(), Some(64));
    let recs = cheng_host::records::read_log(&state.join("audit.jsonl"), &Default::default()).unwrap();
    assert!(recs.iter().any(|r| r.tool == "cheng.rules.revoke" && r.arguments["rule"] == rid.as_str()));

    // `cheng decline --message`.
    let call = call_in_background(server.url(), agent.clone(), json!({"command": "nl", "args": ["inside.txt"]}));
    let id = wait_card(pending, "nl inside.txt").pointer("/request/id").unwrap().as_str().unwrap().to_string();
    assert!(cli().args(["decline", &id, "--message", "count with read_file"]).status().unwrap().success());
    assert!(call.join().unwrap().contains("count with read_file"));
    drop(server);
}

#[test]
fn the_terminal_prompt_takes_a_scope() {
    if !util::require(
        "script(1) for a pseudo-terminal",
        std::process::Command::new("script").arg("-V").output().is_ok(),
    ) {
        return;
    }
    let ws = util::workspace();
    let state = tempfile::tempdir().unwrap();
    let ws_s = ws.path().display().to_string();
    let state_s = state.path().display().to_string();
    let input = json!({"command": "nl", "args": ["inside.txt"]}).to_string();
    // `a1`: always, keeping the program alone.
    let out = util::cheng_at_terminal(
        &["--workspace", &ws_s, "--state-dir", &state_s, "call", "workspace_shell", &input],
        state.path(),
        "a1\n",
        Duration::from_secs(3),
    );
    assert!(out.contains("a: always") && out.contains("`nl` with any arguments"), "{out}");
    assert!(out.contains("1\\tinside"), "{out}");
    // The next `nl` here runs with nobody to ask (no terminal now): the rule admits it.
    let out = util::cheng_in(ws.path(), state.path()).args(["call", "workspace_shell", &input]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1\\tinside"), "{text}{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn elicitation_answers_once_or_for_this_run_never_always() {
    if !python_sdk() {
        return;
    }
    let s = setup("[serve]\napprovals_via_client = true\n");
    let words = s.stdio_words("developer");
    // For this run: asked once, both calls run.
    let doc = py("approve_twice", "legacy", Target::Stdio(&words), &["--answer", "run"]);
    assert_eq!(doc["elicitations"].as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc["again"]["structured"]["stdout"], "approved\n", "{doc}");
    // Once: asked twice.
    let doc = py("approve_twice", "legacy", Target::Stdio(&words), &["--answer", "accept"]);
    assert_eq!(doc["elicitations"].as_array().unwrap().len(), 2, "{doc}");
    // "Always" from the client is a no, and saves nothing.
    let doc = py("approve", "legacy", Target::Stdio(&words), &["--answer", "always"]);
    assert_eq!(doc["result"]["is_error"], true, "{doc}");
    let rules = s.cheng().args(["rules", "list"]).output().unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&rules.stdout).unwrap(), json!([]));
    // A no with a message reaches the model.
    let doc = py("approve", "legacy", Target::Stdio(&words), &["--answer", "message:try echo later"]);
    assert!(doc["result"]["envelope"]["error"].as_str().unwrap().contains("try echo later"), "{doc}");
}
