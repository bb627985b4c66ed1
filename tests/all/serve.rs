//! `cheng serve` with a real client nobody here wrote — the official MCP Python SDK
//! (PyPI `mcp` 2.x, `tests/python/mcp_client.py`) — over stdio and streamable HTTP, in
//! the handshake revisions (2025-06-18, 2025-11-25) and the stateless one (2026-07-28):
//! tools per role, calls, refusals, a crashed component, a flood of output, cancellation
//! with the process tree gone, progress, approvals through elicitation; and the HTTP
//! gate's refusals, each answered before anything runs and each on record.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util;

/// Whether the Python SDK is here (`.ci/run` installs it).
pub(crate) fn python_sdk() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import mcp, importlib.metadata as m; assert m.version('mcp').startswith('2.')"])
        .status()
        .is_ok_and(|s| s.success());
    util::require("the MCP Python SDK 2.x (pip install 'mcp>=2.3,<3')", ok)
}

/// A workspace, a state dir and a config for one server.
pub(crate) struct Setup {
    pub(crate) ws: tempfile::TempDir,
    pub(crate) state: tempfile::TempDir,
    config: PathBuf,
}

pub(crate) fn setup(extra: &str) -> Setup {
    let ws = util::workspace();
    let state = tempfile::tempdir().unwrap();
    // Components compile once for every test's server: the state's component cache is the
    // shared one (entries are keyed by content and engine, and written atomically).
    let shared = util::shared_state().join("cache");
    std::fs::create_dir_all(&shared).unwrap();
    std::os::unix::fs::symlink(&shared, state.path().join("cache")).unwrap();
    let hostile = util::program_path("hostile");
    let sha = cheng_host::runtime::cache::sha256_hex(&std::fs::read(&hostile).unwrap());
    let config = state.path().join("cheng.toml");
    let text = format!(
        "[roles.tester]\ninherits = \"developer\"\ntools = [\"evil__probe\"]\n\
         [[plugins]]\nid = \"evil\"\npath = {:?}\nsha256 = \"{sha}\"\nfs = \"read\"\n{extra}",
        hostile.display().to_string()
    );
    std::fs::write(&config, text).unwrap();
    Setup { ws, state, config }
}

impl Setup {
    /// The `cheng` command line with this setup's workspace, state and config.
    pub(crate) fn cheng(&self) -> Command {
        let mut c = util::cheng_in(self.ws.path(), self.state.path());
        c.arg("--config").arg(&self.config);
        c
    }

    /// `cheng serve` over stdio, as words for the Python client to launch.
    pub(crate) fn stdio_words(&self, role: &str) -> Vec<String> {
        let mut w = vec![
            env!("CARGO_BIN_EXE_cheng").to_string(),
            "--state-dir".into(),
            self.state.path().display().to_string(),
            "--workspace".into(),
            self.ws.path().display().to_string(),
            "--config".into(),
            self.config.display().to_string(),
            "--role".into(),
            role.into(),
        ];
        w.push("serve".into());
        w
    }

    pub(crate) fn token(&self, role: Option<&str>, name: &str) -> String {
        let mut c = self.cheng();
        c.args(["token", "add", "--name", name]);
        match role {
            Some(r) => c.args(["--role", r]),
            None => c.arg("--operator"),
        };
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["token"].as_str().unwrap().to_string()
    }

    pub(crate) fn http(&self) -> Server {
        Server::start(self.cheng().args(["serve", "--http", "127.0.0.1:0"]))
    }
}

/// A running `cheng serve --http`; stopped with SIGTERM when dropped.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) addr: String,
}

impl Server {
    pub(crate) fn start(cmd: &mut Command) -> Server {
        let mut child = cmd.env("CHENG_LOG", "warn").stderr(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(err.read_line(&mut line).unwrap() > 0, "cheng serve ended before serving");
            if let Some(rest) = line.trim().strip_prefix("cheng: serving MCP over HTTP at http://") {
                break rest.trim_end_matches("/mcp").to_string();
            }
        };
        // Keep draining stderr so the server never blocks on it.
        std::thread::spawn(move || {
            let mut sink = String::new();
            let _ = err.read_to_string(&mut sink);
        });
        Server { child, addr }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn stop(&mut self) -> std::process::ExitStatus {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "cheng serve did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.stop();
        }
    }
}

/// Run the Python client's `scenario` and return its observations.
pub(crate) fn py(scenario: &str, mode: &str, target: Target<'_>, extra: &[&str]) -> Value {
    let script = util::repo().join("tests/python/mcp_client.py");
    let mut c = Command::new("python3");
    c.arg(&script).arg(scenario).args(["--mode", mode]).args(extra);
    match target {
        Target::Stdio(words) => {
            c.arg("--stdio").args(words);
        }
        Target::Http(url, token) => {
            c.args(["--url", url, "--token", token]);
        }
    }
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or("");
    let doc: Value = serde_json::from_str(last)
        .unwrap_or_else(|_| panic!("{scenario}/{mode}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert!(doc.get("exception").is_none(), "{scenario}/{mode}: {doc}\n{}", String::from_utf8_lossy(&out.stderr));
    doc
}

#[derive(Clone, Copy)]
pub(crate) enum Target<'a> {
    Stdio(&'a [String]),
    Http(&'a str, &'a str),
}

const MODES: [(&str, &str); 3] = [("2025-06-18", "2025-06-18"), ("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")];

#[test]
fn each_role_sees_its_tools_in_every_revision_and_transport() {
    if !python_sdk() {
        return;
    }
    let s = setup("");
    let recon_words = s.stdio_words("recon");
    let mut server = s.http();
    let dev = s.token(Some("developer"), "dev");
    let url = server.url();
    let recon: Vec<String> = cheng_host::policy::RECON_TOOLS.iter().map(|t| t.to_string()).collect();
    for (mode, version) in MODES {
        // Over stdio as recon: exactly recon's tools.
        let doc = py("tools", mode, Target::Stdio(&recon_words), &[]);
        assert_eq!(doc["protocol_version"], version, "{doc}");
        let mut want = recon.clone();
        want.sort();
        assert_eq!(doc["tools"], serde_json::json!(want), "{mode}");
        // Over HTTP as developer: the shell and the writers too, but not the plugin
        // tool no role of the token holds.
        let doc = py("tools", mode, Target::Http(&url, &dev), &[]);
        assert_eq!(doc["protocol_version"], version, "{doc}");
        let tools: Vec<&str> = doc["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        assert!(tools.contains(&"workspace_shell") && tools.contains(&"write_file"), "{tools:?}");
        assert!(!tools.contains(&"evil__probe"));
        // Annotations from the grants; schemas without engine-injected fields.
        let a = &doc["annotations"];
        // A hint at the specification's default is left out (destructive: true).
        assert_eq!(a["read_file"]["read_only"], true);
        assert_eq!(a["write_file"]["read_only"], false);
        assert!(a["write_file"]["destructive"].is_null() && a["workspace_shell"]["destructive"].is_null(), "{a}");
        assert_eq!(a["read_file"]["title"], "Read file");
        assert_eq!(a["read_file"]["has_output_schema"], true);
        let shell_props = a["workspace_shell"]["input_properties"].to_string();
        assert!(!shell_props.contains("sandbox_root") && !shell_props.contains("command_whitelist"), "{shell_props}");
    }
    assert!(server.stop().success(), "SIGTERM ends the server with status 0");
}

#[test]
fn calls_refusals_crashes_and_floods_come_back_as_results() {
    if !python_sdk() {
        return;
    }
    let s = setup("");
    let words = s.stdio_words("tester");
    let server = s.http();
    let token = s.token(Some("tester"), "tester");
    let recon_token = s.token(Some("recon"), "recon");
    let url = server.url();
    for (mode, target, refusals) in [
        ("legacy", Target::Stdio(&words), Target::Stdio(&s.stdio_words("recon"))),
        ("2026-07-28", Target::Http(&url, &token), Target::Http(&url, &recon_token)),
        ("2025-06-18", Target::Http(&url, &token), Target::Http(&url, &recon_token)),
    ] {
        let doc = py("read", mode, target, &[]);
        assert_eq!(doc["read"]["is_error"], false, "{doc}");
        assert_eq!(doc["read"]["structured"]["content"], "inside", "{doc}");
        assert!(doc["read"]["text"].as_str().unwrap().contains("\"content\":\"inside\""));
        // As recon: a tool outside the role, bad arguments, an unknown tool.
        let doc = py("refusals", mode, refusals, &[]);
        assert_eq!(doc["denied"]["is_error"], true);
        assert!(
            doc["denied"]["envelope"]["error"].as_str().unwrap().contains("is not granted to role \"recon\""),
            "{doc}"
        );
        assert_eq!(doc["bad_args"]["is_error"], true);
        assert!(doc["bad_args"]["envelope"]["error"].as_str().unwrap().contains("bad arguments"), "{doc}");
        assert!(doc["unknown"].as_str().unwrap().contains("Unknown tool"), "{doc}");
        // A crashed component is a result, and the next call works; so does a flood of
        // 4 MiB on each of the component's stdout and stderr (the protocol stream stays valid).
        let doc = py("crash", mode, target, &[]);
        assert_eq!(doc["crash"]["is_error"], true);
        assert!(doc["crash"]["envelope"]["error"].as_str().unwrap().contains("crashed"), "{doc}");
        assert_eq!(doc["after"]["structured"]["content"], "inside");
        assert_eq!(doc["flood"]["is_error"], false, "{doc}");
        assert_eq!(doc["after_flood"]["structured"]["content"], "inside");
    }
    // Every call is a record, with its run: the stdio process's, the HTTP session's.
    let recs = cheng_host::records::read_log(&s.state.path().join("audit.jsonl"), &Default::default()).unwrap();
    assert!(recs.iter().any(|r| r.tool == "read_file" && r.run.starts_with("mcp-")), "an HTTP session's run");
    assert!(recs.iter().any(|r| r.tool == "evil__probe" && r.status == cheng_host::Status::Error));
    assert!(recs.iter().any(|r| r.tool == "workspace_shell" && r.status == cheng_host::Status::Denied));
}

fn settle(marker: &str) -> usize {
    let deadline = Instant::now() + Duration::from_secs(8);
    while util::alive(marker) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    util::alive(marker)
}

#[test]
fn a_cancelled_call_stops_its_command_and_progress_is_reported() {
    if !python_sdk() {
        return;
    }
    let s = setup("[[process.rules]]\nprogram = \"sleep\"\nargs = []\ndecision = \"allow\"\n");
    let words = s.stdio_words("developer");
    let server = s.http();
    let token = s.token(Some("developer"), "dev");
    let url = server.url();
    for (mode, target) in [
        ("legacy", Target::Stdio(&words)),
        ("2026-07-28", Target::Http(&url, &token)),
        ("legacy", Target::Http(&url, &token)),
    ] {
        // The client gives up after 2 s: the command and its tree are gone soon after.
        let doc = py("cancel", mode, target, &[]);
        assert_eq!(doc["after"]["structured"]["content"], "inside", "{doc}");
        assert_eq!(settle("sleep 100.125"), 0, "{mode}: the cancelled command still runs");
        // A 3 s command with a progress token: a notice at the start and while it runs.
        let doc = py("progress", mode, target, &[]);
        assert_eq!(doc["result"]["is_error"], false, "{doc}");
        assert!(doc["progress"].as_array().unwrap().len() >= 2, "{doc}");
    }
}

#[test]
fn approvals_can_be_answered_through_the_client() {
    if !python_sdk() {
        return;
    }
    let s = setup("[serve]\napprovals_via_client = true\n");
    let words = s.stdio_words("developer");
    // Accepted in the client's form: the command runs.
    let doc = py("approve", "legacy", Target::Stdio(&words), &["--answer", "accept"]);
    assert_eq!(doc["result"]["structured"]["stdout"], "approved\n", "{doc}");
    let card = doc["elicitations"][0].as_str().unwrap();
    assert!(card.contains("echo approved"), "{card}");
    // Declined there: the seed's declined result, and nothing ran.
    let doc = py("approve", "legacy", Target::Stdio(&words), &["--answer", "decline"]);
    assert_eq!(doc["result"]["is_error"], true);
    assert!(doc["result"]["envelope"]["error"].as_str().unwrap().contains("declined"), "{doc}");
    // The same server without the setting does not ask the client: nobody answers (the
    // console and the socket could have), and the wait ends as a refusal.
    let plain = setup("[approvals]\ntimeout_ms = 1000\n");
    let doc = py("approve", "legacy", Target::Stdio(&plain.stdio_words("developer")), &["--answer", "accept"]);
    assert!(doc["elicitations"].as_array().unwrap().is_empty());
    assert_eq!(doc["result"]["is_error"], true);
    // The record tells who answered what.
    let recs = cheng_host::records::read_log(&s.state.path().join("audit.jsonl"), &Default::default()).unwrap();
    let decisions: Vec<String> =
        recs.iter().flat_map(|r| r.approvals.iter().map(|a| a.decision.as_str().to_string())).collect();
    assert_eq!(decisions, ["approved", "declined"]);
}

/// The value of the header `name` in a raw HTTP response's text.
fn header<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim()))
}

/// One raw HTTP request: the status code and the body.
fn raw(addr: &str, head: &str, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!("{head}Content-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    s.write_all(req.as_bytes()).unwrap();
    let _ = s.write_all(body);
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp).into_owned();
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, text)
}

#[test]
fn the_http_gate_refuses_before_anything_runs() {
    let s = setup("");
    let server = s.http();
    let addr = server.addr.clone();
    let agent = s.token(Some("developer"), "agent");
    let operator = s.token(None, "op");
    let revoked = s.token(Some("developer"), "gone");
    assert!(s.cheng().args(["token", "revoke", "gone"]).status().unwrap().success());
    let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let post = |host: &str, auth: Option<&str>, origin: Option<&str>| {
        let mut h = format!(
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        );
        if let Some(a) = auth {
            h.push_str(&format!("Authorization: Bearer {a}\r\n"));
        }
        if let Some(o) = origin {
            h.push_str(&format!("Origin: {o}\r\n"));
        }
        h
    };
    // No token, a wrong one, a revoked one: 401.
    for auth in [None, Some("cheng_nope"), Some(revoked.as_str())] {
        let (code, text) = raw(&addr, &post(&addr, auth, None), init);
        assert_eq!(code, 401, "{auth:?}: {text}");
        assert!(text.contains("WWW-Authenticate") || text.contains("www-authenticate"), "{text}");
    }
    // An operator's token calls no tool: 403.
    assert_eq!(raw(&addr, &post(&addr, Some(&operator), None), init).0, 403);
    // A foreign Origin, and a Host that is not this server (DNS rebinding): 403, even
    // with a good token.
    assert_eq!(raw(&addr, &post(&addr, Some(&agent), Some("http://evil.example")), init).0, 403);
    assert_eq!(raw(&addr, &post("rebind.evil.example", Some(&agent), None), init).0, 403);
    // An oversize body: 413.
    let big = vec![b' '; 17 << 20];
    assert_eq!(raw(&addr, &post(&addr, Some(&agent), None), &big).0, 413);
    // A body declared over the cap is refused from its header, before any of it comes.
    let mut conn = TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let head = post(&addr, Some(&agent), None) + "Content-Length: 1000000000\r\n\r\n";
    conn.write_all(head.as_bytes()).unwrap();
    let mut first = [0u8; 12];
    let started = std::time::Instant::now();
    conn.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 413", "refused from the header");
    assert!(started.elapsed() < Duration::from_secs(3));
    // The controls: the server's own origin and a good token get an answer.
    let own = format!("http://{addr}");
    let (code, text) = raw(&addr, &post(&addr, Some(&agent), Some(&own)), init);
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("\"protocolVersion\""), "{text}");
    // The session belongs to the token that opened it: another agent's token cannot use
    // its id (404), the owner can.
    let sid = header(&text, "mcp-session-id").expect("a session id").to_string();
    let other = s.token(Some("developer"), "other-agent");
    let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let in_session = |auth: &str| {
        let mut h = post(&addr, Some(auth), None);
        h.push_str(&format!("Mcp-Session-Id: {sid}\r\nMcp-Protocol-Version: 2025-11-25\r\n"));
        h
    };
    assert_eq!(raw(&addr, &in_session(&other), note).0, 404);
    assert_eq!(raw(&addr, &in_session(&agent), note).0, 202);
    // A body that is not JSON-RPC: a JSON-RPC parse error.
    let (code, text) = raw(&addr, &in_session(&agent), b"not json{");
    assert_eq!(code, 400, "{text}");
    assert!(text.contains("-32700"), "{text}");
    // The owner ends its session: 200, which clients take without a warning.
    let end = in_session(&agent).replacen("POST /mcp", "DELETE /mcp", 1);
    assert_eq!(raw(&addr, &end, b"").0, 200);
    // Each refusal is on record.
    let access = std::fs::read_to_string(s.state.path().join("access.jsonl")).unwrap();
    // 3 × 401, 3 × 403, 2 × 413 (every refusal, the body caps included), 1 × 404.
    assert_eq!(access.lines().count(), 9, "{access}");
    assert!(access.lines().any(|l| l.contains("\"token\":\"op\"")));
}

#[test]
fn shutdown_ends_event_streams_and_the_audit_log_is_the_operators_alone() {
    let s = setup("");
    // `localhost:PORT` names loopback.
    let mut server = Server::start(s.cheng().args(["serve", "--http", "localhost:0"]));
    assert!(server.addr.starts_with("127.0.0.1:"), "{}", server.addr);
    let op = s.token(None, "op");
    // An operator follows the event stream…
    let mut events = TcpStream::connect(&server.addr).unwrap();
    write!(events, "GET /api/events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {op}\r\n\r\n", server.addr).unwrap();
    let mut first = [0u8; 12];
    events.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    // …and SIGTERM still stops the server at once (the drain does not wait for it).
    let started = Instant::now();
    let status = server.stop();
    assert!(status.success(), "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "shutdown took {:?}", started.elapsed());
    // The audit log holds arguments and results: 0600.
    let s2 = setup("");
    let out = s2.cheng().args(["call", "read_file", r#"{"path":"inside.txt"}"#]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mode = std::fs::metadata(s2.state.path().join("audit.jsonl")).unwrap().permissions();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);
}

#[test]
fn a_remote_bind_needs_allow_remote() {
    let s = setup("");
    let out = s.cheng().args(["serve", "--http", "0.0.0.0:0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--allow-remote"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_busy_port_is_said_once() {
    let s = setup("");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = s.cheng().args(["serve", "--http", &addr]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(stderr.matches("cannot listen on").count(), 1, "{stderr}");
    assert_eq!(stderr.matches("Address already in use").count(), 1, "{stderr}");
}

/// Forward every request to `upstream` with `token` as its bearer token, streaming the
/// response back (the conformance suite has no way to send a token). A Host or Origin that
/// names the proxy itself is rewritten to name the server, as if the client had connected
/// directly; every other header (a foreign Host or Origin included) passes through as sent.
async fn token_proxy(upstream: String, token: String) -> String {
    use axum::body::Body;
    use futures::TryStreamExt as _;
    let client = reqwest::Client::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let me = addr.clone();
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let (client, upstream, token, me) = (client.clone(), upstream.clone(), token.clone(), me.clone());
        async move {
            let (parts, body) = req.into_parts();
            let body = axum::body::to_bytes(body, 64 << 20).await.unwrap_or_default();
            let url = format!("http://{upstream}{}", parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"));
            let mut out = client.request(parts.method.clone(), url).body(body);
            for (k, v) in parts.headers.iter() {
                if k == axum::http::header::AUTHORIZATION || k == axum::http::header::CONTENT_LENGTH {
                    continue;
                }
                let v = v.to_str().unwrap_or_default();
                let v = if k == axum::http::header::HOST && v == me {
                    upstream.clone()
                } else if k == axum::http::header::ORIGIN && v == format!("http://{me}") {
                    format!("http://{upstream}")
                } else {
                    v.to_string()
                };
                out = out.header(k, v);
            }
            out = out.header(axum::http::header::AUTHORIZATION, format!("Bearer {token}"));
            match out.send().await {
                Ok(resp) => {
                    let mut b = axum::http::Response::builder().status(resp.status());
                    for (k, v) in resp.headers() {
                        b = b.header(k, v);
                    }
                    b.body(Body::from_stream(resp.bytes_stream().map_err(std::io::Error::other))).unwrap()
                }
                Err(e) => axum::http::Response::builder().status(502).body(Body::from(e.to_string())).unwrap(),
            }
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test(flavor = "multi_thread")]
async fn the_official_conformance_suite_passes_but_for_what_cheng_does_not_offer() {
    let suite = util::target_dir().join("test-runners/node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let node = util::node24();
    if !util::require(
        "the MCP conformance suite and Node 24 (.ci/run installs both)",
        suite.is_file() && node.is_some(),
    ) {
        return;
    }
    let s = setup("");
    let server = s.http();
    let token = s.token(Some("developer"), "conformance");
    let proxy = token_proxy(server.addr.clone(), token).await;
    for revision in ["2025-11-25", "2026-07-28"] {
        let baseline = util::repo().join(format!("tests/conformance/expected-failures.{revision}.yml"));
        // The suite's per-check results stay for reading after a failure.
        let out_dir = util::target_dir().join("conformance").join(revision);
        let _ = std::fs::remove_dir_all(&out_dir);
        std::fs::create_dir_all(&out_dir).unwrap();
        let out = tokio::process::Command::new(node.as_ref().unwrap())
            .arg(&suite)
            .args(["server", "--url", &format!("http://{proxy}/mcp"), "--requirements", revision])
            .arg("--expected-failures")
            .arg(&baseline)
            .arg("-o")
            .arg(&out_dir)
            .output()
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        // Exit 0: every failure is in the checked-in list (each with its reason), and no
        // listed failure passes now (a stale entry fails the run too).
        assert!(
            out.status.success(),
            "{revision} (details in {}):\n{text}\n{}",
            out_dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A plain call in the stateless revision (2026-07-28) is answered with one JSON body,
/// not an event stream; a call that sends something before its result (progress,
/// asked for with a progress token) still gets the stream, with nothing lost.
#[test]
fn a_plain_stateless_call_is_answered_in_json() {
    let s = setup("[[process.rules]]\nprogram = \"sleep\"\nargs = []\ndecision = \"allow\"\n");
    std::fs::write(s.ws.path().join("plain.txt"), "one\ntwo\n").unwrap();
    let server = s.http();
    let addr = server.addr.clone();
    let agent = s.token(Some("developer"), "agent");
    let call = |tool: &str, args: Value, progress: Option<&str>| {
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nAuthorization: Bearer {agent}\r\n\
             MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\n"
        );
        let mut meta = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        });
        if let Some(p) = progress {
            meta["progressToken"] = p.into();
        }
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": tool, "arguments": args, "_meta": meta}});
        raw(&addr, &head, body.to_string().as_bytes())
    };
    let (code, text) = call("read_file", serde_json::json!({"path": "plain.txt"}), None);
    assert_eq!(code, 200, "{text}");
    assert_eq!(header(&text, "content-type"), Some("application/json"), "{text}");
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    let answer: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("one JSON body ({e}): {text}"));
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["result"]["structuredContent"]["content"], "one\ntwo\n", "{answer}");
    // The control: a call given a progress token is told "started" first, so the answer
    // is a stream holding that notice and then the result.
    let (code, text) = call("workspace_shell", serde_json::json!({"command": "sleep", "args": ["1"]}), Some("p1"));
    assert_eq!(code, 200, "{text}");
    assert_eq!(header(&text, "content-type"), Some("text/event-stream"), "{text}");
    let progress = text.find("notifications/progress").unwrap_or_else(|| panic!("progress first: {text}"));
    let result = text.find("\"structuredContent\"").unwrap_or_else(|| panic!("then the result: {text}"));
    assert!(progress < result, "{text}");
}
