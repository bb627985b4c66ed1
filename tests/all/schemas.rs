//! What `cheng serve` sends matches what it declares, for every tool: over the MCP wire
//! (stdio, an rmcp client), each tool's success result is checked against its
//! `outputSchema` with the `jsonschema` crate (draft 2020-12), and its text is the same
//! JSON; every error result — bad arguments, a refused path, a missing file, a denial,
//! a declined approval, a crash — carries no `structuredContent` (which would have to
//! match the success schema) and keeps the whole envelope as text. The declared schemas
//! use only standard formats, and every property says what it is.
//!
//! The clients' own validators (Ajv in the TypeScript SDKs, pydantic in the Python ones)
//! check the same results in `tests/clients/`.

// MCP logging is marked deprecated upstream (SEP-2577); the server still sends it.
#![allow(deprecated)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, LoggingMessageNotificationParam, Tool};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::serve::setup;
use crate::util;

/// A loopback server for web_fetch (`/page`) and web_search (SearXNG's JSON at
/// `/search`); one request per connection, until the test process ends.
fn web_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
            }
            let path = first.split_whitespace().nth(1).unwrap_or("/").to_string();
            let (kind, body) = if path.starts_with("/search") {
                let results = json!({"query": "q", "results": [
                    {"title": "One", "url": "https://one.example/", "content": "First result."}
                ]});
                ("application/json", results.to_string())
            } else {
                ("text/html", "<html><head><title>T</title></head><body><p>Hello page</p></body></html>".to_string())
            };
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

/// The client: records the log notifications the server sends.
#[derive(Clone, Default)]
struct Listener {
    logs: Arc<Mutex<Vec<Value>>>,
}

impl ClientHandler for Listener {
    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _cx: NotificationContext<RoleClient>) {
        self.logs.lock().unwrap().push(serde_json::to_value(&params).unwrap());
    }
}

/// A success input for every tool the `tester` role holds (developer + a plugin tool).
/// The test fails when a listed tool has none here, so a new tool cannot go unchecked.
fn success_inputs(web: &str) -> BTreeMap<&'static str, Value> {
    BTreeMap::from([
        ("list_dir", json!({})),
        ("find_files", json!({"pattern": "*.txt"})),
        ("read_file", json!({"path": "inside.txt"})),
        ("read_files", json!({"paths": ["inside.txt", "docs/a.md"]})),
        ("search_files", json!({"pattern": "inside"})),
        ("workspace_git", json!({"operation": "status"})),
        ("workspace_markdown", json!({"operation": "outline", "path": "docs/a.md"})),
        ("workspace_preview", json!({"operation": "markdown", "path": "docs/a.md"})),
        ("think", json!({"thought": "check the schemas"})),
        ("todo_write", json!({"todos": [{"id": "1", "content": "validate", "status": "in_progress"}]})),
        ("write_file", json!({"path": "out/new.txt", "content": "new\n"})),
        ("edit_file", json!({"path": "edit.txt", "old_text": "before", "new_text": "after"})),
        ("apply_patch", json!({"patch": "--- a/patch.txt\n+++ b/patch.txt\n@@ -1 +1 @@\n-one\n+two\n"})),
        ("workspace_shell", json!({"command": "echo", "args": ["hello"]})),
        ("workspace_tests", json!({"operation": "detect"})),
        ("workspace_git_write", json!({"operation": "add", "pathspecs": ["inside.txt"]})),
        ("web_fetch", json!({"url": format!("{web}/page")})),
        ("web_search", json!({"query": "two words"})),
        ("evil__probe", json!({"action": "read", "target": "inside.txt"})),
    ])
}

/// Every keyword that says what a value is.
const SAYS_WHAT: &[&str] = &["type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref"];

/// Walk `schema`, collecting what clients' validators would warn about.
fn lint(schema: &Value, at: &str, problems: &mut Vec<String>) {
    let Some(map) = schema.as_object() else { return };
    if let Some(f) = map.get("format").and_then(Value::as_str) {
        let standard = ["date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uri", "uuid"];
        if !standard.contains(&f) {
            problems.push(format!("{at}: non-standard format \"{f}\""));
        }
    }
    if map.get("type").is_some_and(Value::is_array) {
        problems.push(format!("{at}: a list of types (clients want anyOf branches)"));
    }
    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            let here = format!("{at}.{name}");
            if !p.as_object().is_some_and(|o| SAYS_WHAT.iter().any(|k| o.contains_key(*k))) {
                problems.push(format!("{here}: a property schema that says nothing of its value ({p})"));
            }
            lint(p, &here, problems);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(s) = map.get(key) {
            lint(s, &format!("{at}[{key}]"), problems);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for (i, s) in map.get(key).and_then(Value::as_array).into_iter().flatten().enumerate() {
            lint(s, &format!("{at}.{key}[{i}]"), problems);
        }
    }
}

/// The checks on one result: a success validates and repeats itself as text; an error
/// has no structured content and its text is the whole envelope.
fn check(tool: &Tool, r: &CallToolResult, what: &str) -> Result<(), String> {
    let text: String = r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
    if r.is_error == Some(true) {
        if r.structured_content.is_some() {
            return Err(format!("{} {what}: an error result carries structuredContent", tool.name));
        }
        let env: Value =
            serde_json::from_str(&text).map_err(|e| format!("{} {what}: error text is not JSON: {e}", tool.name))?;
        for key in ["error", "error_kind", "summary", "terminal"] {
            if env.get(key).is_none() {
                return Err(format!("{} {what}: the error text lacks \"{key}\": {env}", tool.name));
            }
        }
        return Ok(());
    }
    let out = r.structured_content.as_ref().ok_or_else(|| format!("{} {what}: no structuredContent", tool.name))?;
    let schema = Value::Object(tool.output_schema.as_deref().cloned().unwrap_or_default());
    let validator = jsonschema::draft202012::new(&schema).map_err(|e| format!("{}: bad schema: {e}", tool.name))?;
    let errors: Vec<String> = validator.iter_errors(out).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    if !errors.is_empty() {
        return Err(format!("{} {what}: the result does not match the output schema: {errors:?}\n{out}", tool.name));
    }
    let again: Value = serde_json::from_str(&text).map_err(|e| format!("{} {what}: text not JSON: {e}", tool.name))?;
    if &again != out {
        return Err(format!("{} {what}: the text is not the structured content", tool.name));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn every_tools_results_match_what_it_declares_over_the_wire() {
    let web = web_server();
    let s = setup(&format!(
        "[[process.rules]]\nprogram = \"echo\"\ndecision = \"allow\"\n\
         [[git.rules]]\noperations = [\"add\"]\ndecision = \"allow\"\n\
         [web]\nallow_private = [\"127.0.0.1/32\"]\n\
         [web.search]\nprovider = \"searxng\"\nurl = \"{web}/\"\n"
    ));
    let ws = s.ws.path();
    std::fs::write(ws.join("edit.txt"), "before\n").unwrap();
    std::fs::write(ws.join("patch.txt"), "one\n").unwrap();
    assert!(util::git(ws).arg("init").arg("-q").status().unwrap().success());

    let words = s.stdio_words("tester");
    let mut cmd = tokio::process::Command::new(&words[0]);
    cmd.args(&words[1..]).env("CHENG_LOG", "error").stderr(std::process::Stdio::null());
    let listener = Listener::default();
    let client = listener.clone().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let inputs = success_inputs(&web);

    // The declarations: each tool has a success case here, and nothing a client warns on.
    let listed: BTreeSet<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let covered: BTreeSet<&str> = inputs.keys().copied().collect();
    assert_eq!(listed, covered, "every listed tool needs a success input here (and nothing else)");
    let mut problems = Vec::new();
    for t in &tools {
        lint(&Value::Object((*t.input_schema).clone()), &format!("{} input", t.name), &mut problems);
        let out = t.output_schema.as_deref().cloned().expect("every tool declares an output schema");
        lint(&Value::Object(out), &format!("{} output", t.name), &mut problems);
    }
    assert!(problems.is_empty(), "schemas clients warn about:\n{}", problems.join("\n"));

    let call = |name: &str, args: Value| {
        let req = CallToolRequestParams::new(name.to_string()).with_arguments(args.as_object().unwrap().clone());
        let client = &client;
        async move { client.call_tool(req).await.unwrap() }
    };
    let mut failures = Vec::new();
    for t in &tools {
        let name = t.name.as_ref();
        // Success.
        let r = call(name, inputs[name].clone()).await;
        if r.is_error == Some(true) {
            failures.push(format!("{name}: the success case failed: {:?}", r.content));
        }
        failures.extend(check(t, &r, "success").err());
        // Bad arguments: every tool refuses a field it does not know.
        let r = call(name, json!({"no_such_field": 1})).await;
        if r.is_error != Some(true) {
            failures.push(format!("{name}: an unknown field was accepted"));
        }
        failures.extend(check(t, &r, "bad arguments").err());
        // A path outside the workspace, and one that does not exist.
        let props = t.input_schema.get("properties").and_then(Value::as_object);
        if props.is_some_and(|p| p.contains_key("path")) {
            let mut args = inputs[name].clone();
            for (case, path) in [("refused path", "../outside.txt"), ("not found", "no/such/file.md")] {
                args["path"] = json!(path);
                let r = call(name, args.clone()).await;
                failures.extend(check(t, &r, case).err());
            }
        }
    }
    // A crash inside a component.
    let probe = tools.iter().find(|t| t.name == "evil__probe").unwrap();
    let r = call("evil__probe", json!({"action": "panic", "target": ""})).await;
    assert_eq!(r.is_error, Some(true));
    failures.extend(check(probe, &r, "crash").err());
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // A declined approval: the client hears at once that a person must answer, and how;
    // a person declines through the socket; the refusal is an error result as above.
    let shell = tools.iter().find(|t| t.name == "workspace_shell").unwrap().clone();
    let state = s.state.path().to_path_buf();
    let logs = listener.logs.clone();
    let decliner = tokio::spawn(async move {
        for _ in 0..300 {
            let id = logs.lock().unwrap().iter().find_map(|l| l["data"]["approval"].as_str().map(str::to_string));
            if let Some(id) = id {
                let out = util::cheng_in(std::path::Path::new("/tmp"), &state).args(["decline", &id]).output().unwrap();
                return (id, out.status.success());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no log notification told of the waiting approval");
    });
    let r = call("workspace_shell", json!({"command": "true", "purpose": "list"})).await;
    let (id, declined) = decliner.await.unwrap();
    assert!(declined, "cheng decline {id} failed");
    assert_eq!(r.is_error, Some(true), "{:?}", r.content);
    check(&shell, &r, "declined").unwrap();
    let note = listener.logs.lock().unwrap()[0].clone();
    assert_eq!(note["level"], "warning", "{note}");
    let message = note["data"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("approve {id}")) && message.contains("workspace_shell"), "{message}");
    let _ = client.cancel().await;
}

/// `cheng serve` says on stderr, at start, where it works, as whom, and how approvals
/// reach a person.
#[test]
fn serve_says_where_it_works_and_how_approvals_are_answered() {
    let s = setup("");
    let mut child = s
        .cheng()
        .args(["serve"])
        .env("CHENG_LOG", "error")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("serving MCP on stdio") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "serve ended first");
    }
    drop(child.stdin.take());
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    let _ = child.wait();
    let ws = s.ws.path().display().to_string();
    assert!(line.contains("role \"developer\"") && line.contains(&ws), "{line}");
    assert!(line.contains("approvals") && line.contains(&s.state.path().display().to_string()), "{line}");
}
