//! OpenTelemetry export against a collector the test runs on loopback
//! (`tests/fixtures/otlp/collector.py`), which decodes what it receives with the official
//! protobuf definitions (PyPI `opentelemetry-proto`): calls as spans with the caller's
//! trace as parent, the trace carried on to web pages and MCP servers, counters as OTLP
//! metrics, arguments and results (and what is derived from them: error messages,
//! denials' targets) only when asked for, checked on the raw bodies; a collector that
//! is down or stuck costs spans (counted), never calls; `cheng call` and `cheng serve`
//! continue the trace they are given.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use cheng_host::{Context, Host};
use serde_json::{Value, json};

use crate::util;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

fn traceparent() -> String {
    format!("00-{TRACE}-{PARENT}-01")
}

/// The collector process; killed when dropped.
struct Collector {
    child: Child,
    port: u16,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

impl Collector {
    fn start(mode: &str) -> Option<Collector> {
        let python = util::python_with(
            "opentelemetry.proto.collector.trace.v1.trace_service_pb2",
            "opentelemetry-proto from PyPI; .ci/run installs it",
        )?;
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("seen.jsonl");
        let mut child = std::process::Command::new(python)
            .arg(util::repo().join("tests/fixtures/otlp/collector.py"))
            .arg(&out)
            .args(["--mode", mode])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| panic!("the collector did not start: {line:?}"));
        Some(Collector { child, port, out, _dir: dir })
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    fn raw(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Every OTLP request body as it arrived, concatenated (protobuf, undecoded).
    fn bodies(&self) -> Vec<u8> {
        std::fs::read(self.out.with_extension("jsonl.raw")).unwrap_or_default()
    }

    /// What was seen once `done` holds (20 s at most).
    fn wait_for(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let seen = self.seen();
            if done(&seen) {
                return seen;
            }
            assert!(Instant::now() < deadline, "the collector never saw it; it saw:\n{}", self.raw());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spans(seen: &[Value]) -> Vec<&Value> {
    seen.iter().filter(|l| l["signal"] == "span").collect()
}

fn span_of<'a>(seen: &'a [Value], run: &str, tool: &str) -> &'a Value {
    spans(seen)
        .into_iter()
        .find(|s| s["attributes"]["cheng.run"] == run && s["attributes"]["gen_ai.tool.name"] == tool)
        .unwrap_or_else(|| panic!("no span of {tool} in run {run}"))
}

/// `name`'s count in `/metrics` for `outcome` (0 when absent).
fn counted(host: &Host, outcome: &str) -> u64 {
    let text = host.observer().metrics_text(0);
    let key = format!("cheng_telemetry_spans_total{{outcome=\"{outcome}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&key)).map(|v| v.trim().parse().unwrap()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_are_spans_in_the_callers_trace_and_the_trace_goes_on() {
    let Some(c) = Collector::start("ok") else { return };
    let config = format!(
        "[telemetry]\nendpoint = \"{}\"\nheaders = {{ \"x-api-key\" = \"k1\" }}\n\
         [web]\nallow_private = [\"127.0.0.1/32\"]\n\
         [[mcp_servers]]\nid = \"traced\"\nurl = \"{}/mcp\"\napprove = \"never\"\n\
         [roles.agent]\ntools = [\"read_file\", \"web_fetch\", \"traced__whoami\"]\n\
         [roles.reader]\ntools = [\"read_file\"]\n",
        c.endpoint(),
        c.endpoint()
    );
    let state = tempfile::tempdir().unwrap();
    let host = util::host_in(&config, state.path()).await;
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    let ws = util::workspace();
    std::fs::write(ws.path().join("marker-7f3a.txt"), "payload-c0ffee\n").unwrap();
    let agent = Context::new(ws.path()).role("agent").run("traced-run").traceparent(&traceparent(), Some("rojo=1"));
    let r = host.call(&agent, "read_file", json!({"path": "marker-7f3a.txt"})).await;
    assert_eq!(r.status, cheng_host::Status::Ok, "{}", r.output);
    let page = format!("{}/page", c.endpoint());
    let r = host.call(&agent, "web_fetch", json!({"url": page})).await;
    assert_eq!(r.status, cheng_host::Status::Ok, "{}", r.output);
    let r = host.call(&agent, "traced__whoami", json!({})).await;
    assert_eq!(r.status, cheng_host::Status::Ok, "{}", r.output);
    let reader = Context::new(ws.path()).role("reader").run("denied-run").traceparent(&traceparent(), None);
    let r = host.call(&reader, "web_fetch", json!({"url": page})).await;
    assert_eq!(r.status, cheng_host::Status::Denied, "{}", r.output);
    host.flush_telemetry();
    let seen = c.wait_for(|s| spans(s).len() >= 4 && s.iter().any(|l| l["signal"] == "metric"));
    assert!(!seen.iter().any(|l| l["signal"] == "rejected"), "every export is protobuf: {}", c.raw());

    // Every call is a span of the caller's trace, its child, with who, where and how.
    for s in spans(&seen) {
        assert_eq!((s["trace_id"].as_str(), s["parent_span_id"].as_str()), (Some(TRACE), Some(PARENT)), "{s}");
        assert_eq!(s["resource"]["service.name"], "cheng", "{s}");
        assert_eq!(s["headers"]["x-api-key"], "k1", "the configured headers go with every export");
        assert_eq!(s["kind"], 2, "a server span: {s}");
    }
    let read = span_of(&seen, "traced-run", "read_file");
    // Called by an embedder, not through MCP: named for what it is.
    assert_eq!(read["name"], "execute_tool read_file");
    let a = &read["attributes"];
    assert_eq!((a["cheng.role"].as_str(), a["cheng.status"].as_str()), (Some("agent"), Some("ok")), "{read}");
    assert_eq!(a["cheng.workspace"], ws.path().display().to_string());
    assert!(a.get("mcp.method.name").is_none(), "{read}");
    assert!(a.get("cheng.arguments").is_none() && a.get("cheng.result").is_none(), "{read}");
    // Neither the arguments nor the result left the host.
    let raw = c.raw();
    assert!(!raw.contains("marker-7f3a") && !raw.contains("payload-c0ffee"), "{raw}");

    // The page was fetched inside the web_fetch span's context, tracestate kept.
    let fetch = span_of(&seen, "traced-run", "web_fetch");
    let get = seen.iter().find(|l| l["signal"] == "get").unwrap();
    let expected = format!("00-{TRACE}-{}-01", fetch["span_id"].as_str().unwrap());
    assert_eq!(get["headers"]["traceparent"], expected.as_str(), "{get}");
    assert_eq!(get["headers"]["tracestate"], "rojo=1", "{get}");
    assert_eq!(fetch["attributes"]["cheng.requests"], 1);

    // The MCP server got the whoami span's context in `_meta` and as headers.
    let whoami = span_of(&seen, "traced-run", "traced__whoami");
    let mcp = seen.iter().find(|l| l["signal"] == "mcp").unwrap();
    let expected = format!("00-{TRACE}-{}-01", whoami["span_id"].as_str().unwrap());
    assert_eq!(mcp["meta"]["traceparent"], expected.as_str(), "{mcp}");
    assert_eq!(mcp["headers"]["traceparent"], expected.as_str(), "{mcp}");

    // A denial: the status, the kind, the right, an event, an error status.
    let denied = span_of(&seen, "denied-run", "web_fetch");
    let a = &denied["attributes"];
    assert_eq!(a["cheng.status"], "denied", "{denied}");
    assert!(a["error.type"].as_str().is_some_and(|k| k.starts_with("LOCAL_EXECUTOR_")), "{denied}");
    assert_eq!(a["cheng.denials"], 1);
    assert_eq!(a["cheng.denied_rights"], json!(["tool"]));
    assert_eq!(denied["events"][0]["name"], "cheng.denial");
    assert_eq!(denied["status"]["code"], 2, "{denied}");

    // The counters: calls by tool and status, durations.
    let metric = |name: &str, tool: &str| {
        seen.iter()
            .filter(|l| l["signal"] == "metric" && l["name"] == name && l["attributes"]["tool"] == tool)
            .cloned()
            .collect::<Vec<_>>()
    };
    let calls = metric("cheng.calls", "read_file");
    assert!(calls.iter().any(|m| m["attributes"]["status"] == "ok" && m["value"] == 1), "{calls:?}");
    let denials = metric("cheng.calls", "web_fetch");
    assert!(denials.iter().any(|m| m["attributes"]["status"] == "denied" && m["value"] == 1), "{denials:?}");
    assert!(metric("cheng.call.duration", "traced__whoami").iter().any(|m| m["count"] == 1));
    assert_eq!(counted(&host, "exported"), 4);
    assert_eq!(counted(&host, "dropped_queue_full") + counted(&host, "dropped_export_failed"), 0);

    // With the operator's opt-in, arguments and results go too.
    let config =
        format!("[telemetry]\nendpoint = \"{}\"\nexport_arguments = true\nexport_results = true\n", c.endpoint());
    let state = tempfile::tempdir().unwrap();
    let host = util::host_in(&config, state.path()).await;
    let cx = Context::new(ws.path()).run("open-run");
    let r = host.call(&cx, "read_file", json!({"path": "marker-7f3a.txt"})).await;
    assert_eq!(r.status, cheng_host::Status::Ok, "{}", r.output);
    host.flush_telemetry();
    let seen = c.wait_for(|s| spans(s).iter().any(|s| s["attributes"]["cheng.run"] == "open-run"));
    let open = span_of(&seen, "open-run", "read_file");
    assert!(open["attributes"]["cheng.arguments"].as_str().unwrap().contains("marker-7f3a"), "{open}");
    assert!(open["attributes"]["cheng.result"].as_str().unwrap().contains("payload-c0ffee"), "{open}");
    // Without a parent, a call starts its own trace.
    assert_eq!(open["parent_span_id"], "", "{open}");
    assert_ne!(open["trace_id"], TRACE);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collector_down_or_stuck_costs_spans_never_calls() {
    let ws = util::workspace();
    std::fs::write(ws.path().join("a.txt"), "a\n").unwrap();
    let cx = Context::new(ws.path());

    // Down: nothing listens. Every call answers; every span is counted as lost.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = format!("[telemetry]\nendpoint = \"http://127.0.0.1:{closed}\"\nqueue = 4\ntimeout_ms = 1000\n");
    let state = tempfile::tempdir().unwrap();
    let host = util::host_in(&config, state.path()).await;
    for _ in 0..20 {
        let r = host.call(&cx, "read_file", json!({"path": "a.txt"})).await;
        assert_eq!(r.status, cheng_host::Status::Ok, "{}", r.output);
    }
    host.flush_telemetry();
    let lost = counted(&host, "dropped_queue_full") + counted(&host, "dropped_export_failed");
    assert_eq!((counted(&host, "exported"), lost), (0, 20), "{}", host.observer().metrics_text(0));
    assert!(counted(&host, "dropped_export_failed") >= 1);
    let text = host.observer().metrics_text(0);
    assert!(text.contains("cheng_telemetry_metric_exports_total{outcome=\"failed\"}"), "{text}");
    drop(host);

    // Stuck: the collector takes the request and never answers. Once the exporter is
    // stuck in a send, a full queue drops spans; the calls do not wait for it.
    let Some(c) = Collector::start("hang") else { return };
    let config = format!("[telemetry]\nendpoint = \"{}\"\nqueue = 8\ntimeout_ms = 8000\n", c.endpoint());
    let state = tempfile::tempdir().unwrap();
    let host = util::host_in(&config, state.path()).await;
    let r = host.call(&cx, "read_file", json!({"path": "a.txt"})).await;
    assert_eq!(r.status, cheng_host::Status::Ok, "{}", r.output);
    c.wait_for(|s| s.iter().any(|l| l["signal"] == "hung" && l["path"] == "/v1/traces"));
    let t = Instant::now();
    let mut calls = Vec::new();
    for _ in 0..100 {
        let (host, cx) = (host.clone(), cx.clone());
        calls.push(tokio::spawn(async move { host.call(&cx, "read_file", json!({"path": "a.txt"})).await }));
    }
    for call in calls {
        let r = call.await.unwrap();
        assert_eq!(r.status, cheng_host::Status::Ok, "{}", r.output);
    }
    // The calls ended while the export was still stuck (well inside its timeout).
    assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
    assert!(counted(&host, "dropped_queue_full") >= 1, "{}", host.observer().metrics_text(0));
    assert_eq!(counted(&host, "exported"), 0);
    assert!(spans(&c.seen()).is_empty());
}

/// A caller's trace through the binary: `TRACEPARENT` for `cheng call`, `_meta` for a
/// `tools/call` to `cheng serve`; both spans leave before the process ends.
#[test]
fn the_command_line_and_the_server_continue_the_trace_they_are_given() {
    let Some(c) = Collector::start("ok") else { return };
    let ws = util::workspace();
    std::fs::write(ws.path().join("notes.txt"), "one\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let cfg = state.path().join("cheng.toml");
    std::fs::write(&cfg, format!("[telemetry]\nendpoint = \"{}\"\n", c.endpoint())).unwrap();
    let out = util::cheng_in(ws.path(), state.path())
        .arg("--config")
        .arg(&cfg)
        .args(["--run", "cli-run", "call", "read_file", r#"{"path":"notes.txt"}"#])
        .env("TRACEPARENT", traceparent())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The span was sent before the process exited.
    let cli = spans(&c.seen()).into_iter().find(|s| s["attributes"]["cheng.run"] == "cli-run").cloned();
    let cli = cli.unwrap_or_else(|| panic!("no span from cheng call: {}", c.raw()));
    assert_eq!((cli["trace_id"].as_str(), cli["parent_span_id"].as_str()), (Some(TRACE), Some(PARENT)));
    assert_eq!(cli["name"], "execute_tool read_file", "{cli}");

    // `cheng serve --stdio`: the parent in the request's `_meta`.
    let mut child = util::cheng_in(ws.path(), state.path())
        .arg("--config")
        .arg(&cfg)
        .args(["--role", "developer", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let other = "0af7651916cd43dd8448eb211c80319c";
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "trace-test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_file",
            "arguments": {"path": "notes.txt"}, "_meta": {"traceparent": format!("00-{other}-b7ad6b7169203331-01")}}}),
    ];
    for l in &lines {
        writeln!(stdin, "{l}").unwrap();
    }
    let mut answers = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(answers.read_line(&mut line).unwrap() > 0, "the server ended before answering");
        let doc: Value = serde_json::from_str(&line).unwrap();
        if doc["id"] == 2 {
            assert_eq!(doc["result"]["isError"], false, "{doc}");
            break;
        }
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let seen = c.wait_for(|s| spans(s).iter().any(|s| s["trace_id"] == other));
    let served = spans(&seen).into_iter().find(|s| s["trace_id"] == other).unwrap();
    assert_eq!(served["parent_span_id"], "b7ad6b7169203331", "{served}");
    // Through MCP, the span is the server's `tools/call`, as MCP's conventions name it.
    assert_eq!(served["name"], "tools/call read_file", "{served}");
    assert_eq!(served["attributes"]["mcp.method.name"], "tools/call", "{served}");
    assert_eq!(served["attributes"]["gen_ai.tool.name"], "read_file");
}

/// Whether `needle` occurs in `hay`, byte for byte.
fn holds(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Without `export_arguments` and `export_results`, nothing derived from either reaches
/// the collector: not the arguments, not the result, not an error message quoting a
/// path, not a denial's target. Checked on the request bodies as they arrived, for an
/// ok, an error and a denied call; with both on, the same markers are there (the
/// control: the search finds what is sent).
#[tokio::test(flavor = "multi_thread")]
async fn without_opt_in_nothing_from_arguments_or_results_reaches_the_collector() {
    let Some(c) = Collector::start("ok") else { return };
    let ws = util::workspace();
    let (arg, res) = ("argmark-5d1e", "resmark-9b2c");
    std::fs::write(ws.path().join(format!("{arg}-ok.txt")), format!("{res}\n")).unwrap();
    // A loopback address the egress guard refuses (no `allow_private`): a network denial
    // whose target is the URL the model asked for.
    let refused = format!("http://127.0.0.1:9/{arg}-denied");
    let calls = |run: &'static str, config: String| {
        let (ws, refused) = (ws.path().to_path_buf(), refused.clone());
        async move {
            let state = tempfile::tempdir().unwrap();
            let host = util::host_in(&config, state.path()).await;
            assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
            let cx = Context::new(ws.clone()).role("agent").run(run);
            let r = host.call(&cx, "read_file", json!({"path": format!("{arg}-ok.txt")})).await;
            assert_eq!(r.status, cheng_host::Status::Ok, "{}", r.output);
            let r = host.call(&cx, "read_file", json!({"path": format!("{arg}-missing.txt")})).await;
            assert_eq!(r.status, cheng_host::Status::Error, "{}", r.output);
            assert!(r.output.to_string().contains(arg), "the message quotes the path: {}", r.output);
            let r = host.call(&cx, "web_fetch", json!({"url": refused})).await;
            assert_eq!(r.status, cheng_host::Status::Denied, "{}", r.output);
            host.flush_telemetry();
        }
    };
    let roles = "[roles.agent]\ntools = [\"read_file\", \"web_fetch\"]\n";
    calls("closed-run", format!("[telemetry]\nendpoint = \"{}\"\n{roles}", c.endpoint())).await;
    let seen = c.wait_for(|s| spans(s).iter().filter(|s| s["attributes"]["cheng.run"] == "closed-run").count() >= 3);
    let bodies = c.bodies();
    // The bodies are the spans as sent: the run and the error kinds are in them.
    assert!(holds(&bodies, "closed-run") && holds(&bodies, "LOCAL_EXECUTOR_NOT_FOUND"), "{}", c.raw());
    for marker in [arg, res] {
        assert!(!holds(&bodies, marker), "{marker} left the host: {}", String::from_utf8_lossy(&bodies));
    }
    // The failed span's status is its kind; the denial event names the right and kind.
    let error = spans(&seen)
        .into_iter()
        .find(|s| s["attributes"]["cheng.run"] == "closed-run" && s["attributes"]["cheng.status"] == "error")
        .unwrap();
    assert_eq!(error["status"], json!({"code": 2, "message": "LOCAL_EXECUTOR_NOT_FOUND"}), "{error}");
    let denied = span_of(&seen, "closed-run", "web_fetch");
    assert_eq!(denied["attributes"]["cheng.status"], "denied", "{denied}");
    assert_eq!(denied["status"]["message"], "LOCAL_EXECUTOR_NOT_GRANTED", "{denied}");
    let event = &denied["events"][0];
    assert_eq!(event["name"], "cheng.denial");
    assert_eq!(event["attributes"], json!({"cheng.right": "network", "cheng.kind": "LOCAL_EXECUTOR_NOT_GRANTED"}));

    // Opted in: the arguments, the result and the denial's target go.
    let open = format!(
        "[telemetry]\nendpoint = \"{}\"\nexport_arguments = true\nexport_results = true\n{roles}",
        c.endpoint()
    );
    calls("open-run", open).await;
    let seen = c.wait_for(|s| spans(s).iter().filter(|s| s["attributes"]["cheng.run"] == "open-run").count() >= 3);
    let bodies = c.bodies();
    assert!(holds(&bodies, arg) && holds(&bodies, res), "{}", c.raw());
    let denied = span_of(&seen, "open-run", "web_fetch");
    let target = denied["events"][0]["attributes"]["cheng.target"].as_str().unwrap_or_default();
    assert!(target.contains(arg), "{denied}");
    // The status stays the kind even then: the message is in the result, when asked for.
    assert_eq!(denied["status"]["message"], "LOCAL_EXECUTOR_NOT_GRANTED", "{denied}");
}
