//! `cheng serve` against the reference MCP server, with the same lean client (rmcp's)
//! in the same run:
//!
//! - `tools/call` round trip reading a 1 KB file, p50 and p99, over stdio and over HTTP,
//!   against `@modelcontextprotocol/server-filesystem`'s `read_text_file` over stdio;
//! - the same over HTTP in the stateless revision (2026-07-28), whose plain answers are
//!   one JSON body rather than an event stream;
//! - throughput over HTTP with 64 concurrent clients calling `think`, in both revisions;
//! - the server's RSS with 1,000 idle HTTP sessions open;
//! - `think`'s p50 and p99 over HTTP, one session calling it in turn, while 64 other
//!   sessions write 1 MiB files without pause: against `cheng serve` itself, then against
//!   this binary serving the same host (as `cheng serve` does) twice, with the `fs`
//!   imports' blocking work (a write's syncs) on the async workers as before
//!   (`HostBuilder::blocking_fs_on_workers`), and on the blocking threads as now;
//! - each of the round trips and rates above again against the transport floor
//!   (`floor.rs`: an rmcp server alone, no sandbox, the file read natively), so each goal
//!   can be set against what the transport itself takes.
//!
//! Run: `cargo bench --bench all -- serve` (add `--quick` for fewer calls). The reference
//! server is installed with
//! `npm install --prefix target/bench-peers @modelcontextprotocol/server-filesystem@2026.8.31`;
//! without it that comparison is left out and says so.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, RoleClient, RunningService, serve_client_with_lifecycle};
use rmcp::transport::TokioChildProcess;
use rmcp::transport::streamable_http_client::{StreamableHttpClientTransport, StreamableHttpClientTransportConfig};
use tokio::io::AsyncBufReadExt;

use super::common;
use common::{ms, p50};

type Client = RunningService<RoleClient, ()>;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn cheng(state: &Path, ws: &Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_cheng"));
    c.arg("--state-dir").arg(state).arg("--workspace").arg(ws).env("CHENG_LOG", "error").env_remove("CHENG_CONFIG");
    c.env("XDG_CONFIG_HOME", state.join("no-config"));
    c
}

/// This binary as the transport floor's server (`floor.rs`): rmcp alone, no sandbox.
fn floor(kind: &str) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(std::env::current_exe().expect("the bench binary's path"));
    c.env("CHENG_BENCH_FLOOR", kind).kill_on_drop(true);
    c
}

fn p99(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[(v.len() * 99 / 100).min(v.len() - 1)]
}

async fn timed(client: &Client, tool: &str, args: serde_json::Value, n: usize) -> Vec<Duration> {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().cloned().unwrap());
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = client.call_tool(params.clone()).await.expect("the call returns");
        out.push(t.elapsed());
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    out
}

/// An HTTP client in the handshake revision (a session, every answer an event stream).
async fn http_client(url: &str, token: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(token.to_string());
    ().serve(StreamableHttpClientTransport::from_config(config)).await.expect("the HTTP session starts")
}

/// An HTTP client in the stateless revision (2026-07-28): no session, each call a
/// self-contained request, a plain answer one JSON body.
async fn stateless_client(url: &str, token: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string()).auth_header(token.to_string());
    let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    serve_client_with_lifecycle((), StreamableHttpClientTransport::from_config(config), lifecycle)
        .await
        .expect("the stateless client discovers the server")
}

/// `think` as fast as `clients` can call it for `seconds`: calls per second.
async fn think_rate(clients: Vec<Client>, seconds: u64) -> f64 {
    let clients: Vec<Arc<Client>> = clients.into_iter().map(Arc::new).collect();
    let done = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for c in &clients {
        let (c, done) = (c.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let p = CallToolRequestParams::new("think")
                .with_arguments(serde_json::json!({"thought": "x"}).as_object().cloned().unwrap());
            while Instant::now() < until {
                if c.call_tool(p.clone()).await.is_ok() {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    done.load(Ordering::Relaxed) as f64 / seconds as f64
}

fn report(name: &str, v: Vec<Duration>) -> Duration {
    let (a, b) = (p50(v.clone()), p99(v));
    println!("{name}: p50 {:.3} ms, p99 {:.3} ms", ms(a), ms(b));
    a
}

/// CPU time (user + system) a process has used so far, in seconds.
fn cpu_s(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's name (which ends at the last ')'): utime is the 12th.
    let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// This binary as a `cheng serve --http` of the same host, its `fs` imports' blocking work
/// on the async workers (`mode` "on-workers", the old way) or off them ("off-workers"):
/// so that both are measured in one run. Started by [`bench_server`].
pub async fn serve_host(mode: &str) {
    let var = |k: &str| PathBuf::from(std::env::var_os(k).expect("set by bench_server"));
    let (state, ws) = (var("CHENG_BENCH_STATE"), var("CHENG_BENCH_WORKSPACE"));
    let mut b = cheng_host::HostBuilder::new();
    b.state_dir(&state).blocking_fs_on_workers(mode == "on-workers");
    let host = b.build().await.expect("the host starts");
    let opts = cheng_serve::ServeOptions {
        stdio: false,
        http: Some("127.0.0.1:0".parse().unwrap()),
        allow_remote: false,
        workspace: cheng_serve::workspace::WorkspaceChoice::Given(ws),
        role: "developer".into(),
        state_dir: state,
    };
    cheng_serve::serve(host, opts, None, tokio_util::sync::CancellationToken::new()).await.expect("serving");
}

/// A bearer token for the `developer` role in the state directory `state`.
async fn add_token(state: &Path, ws: &Path) -> String {
    let out = cheng(state, ws).args(["token", "add", "--name", "bench", "--role", "developer"]).output().await.unwrap();
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["token"].as_str().unwrap().to_string()
}

/// Start [`serve_host`] in `mode` as a child process, on a state directory of its own
/// (the compiled components shared through `cache`); the child, its URL and a token.
async fn bench_server(
    mode: &str,
    cache: &Path,
    ws: &Path,
) -> (tokio::process::Child, String, String, tempfile::TempDir) {
    let state = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(cache, state.path().join("cache")).unwrap();
    let token = add_token(state.path(), ws).await;
    let mut child = tokio::process::Command::new(std::env::current_exe().expect("the bench binary's path"))
        .env("CHENG_BENCH_SERVE", mode)
        .env("CHENG_BENCH_STATE", state.path())
        .env("CHENG_BENCH_WORKSPACE", ws)
        .env("CHENG_LOG", "warn")
        // As the `cheng` binary sets it for itself.
        .env("RUST_LIB_BACKTRACE", "0")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = server_url(&mut child).await;
    (child, url, token, state)
}

/// The URL a server started with `--http 127.0.0.1:0` says it serves at; its further
/// output is read and dropped.
async fn server_url(server: &mut tokio::process::Child) -> String {
    let mut lines = tokio::io::BufReader::new(server.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next_line().await.unwrap().expect("the server starts");
        if let Some(rest) = line.strip_prefix("cheng: serving MCP over HTTP at http://") {
            break rest.trim_end_matches("/mcp").to_string();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    format!("http://{addr}/mcp")
}

/// `think` called in turn by one session, unloaded (200 calls), then for `seconds` while
/// `writers` other sessions each write a 1 MiB file (its own, replaced each time) without
/// pause. Prints p50 / p99 of both and the writes' rate.
async fn think_under_writes(name: &str, url: &str, token: &str, writers: usize, seconds: u64) {
    let think = serde_json::json!({"thought": "x"});
    let probe = http_client(url, token).await;
    timed(&probe, "think", think.clone(), 50).await;
    let idle = timed(&probe, "think", think.clone(), 200).await;
    let mut clients = Vec::new();
    for _ in 0..writers {
        clients.push(Arc::new(http_client(url, token).await));
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let content = "x".repeat(1 << 20);
    let mut tasks = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let (c, stop, ok, failed) = (c.clone(), stop.clone(), ok.clone(), failed.clone());
        let args = serde_json::json!({"path": format!("load/w{i}.txt"), "content": content, "create_dirs": true});
        let p = CallToolRequestParams::new("write_file").with_arguments(args.as_object().cloned().unwrap());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match c.call_tool(p.clone()).await {
                    Ok(r) if r.is_error != Some(true) => ok.fetch_add(1, Ordering::Relaxed),
                    _ => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    // Every writer under way before anything is measured.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (ok0, failed0) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    let params = CallToolRequestParams::new("think").with_arguments(think.as_object().cloned().unwrap());
    let started = Instant::now();
    let mut loaded = Vec::new();
    while started.elapsed() < Duration::from_secs(seconds) {
        let t = Instant::now();
        let r = probe.call_tool(params.clone()).await.expect("the call returns");
        loaded.push(t.elapsed());
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    let took = started.elapsed().as_secs_f64();
    let (writes, errors) = (ok.load(Ordering::Relaxed) - ok0, failed.load(Ordering::Relaxed) - failed0);
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    for c in clients {
        if let Ok(c) = Arc::try_unwrap(c) {
            let _ = c.cancel().await;
        }
    }
    let _ = probe.cancel().await;
    println!(
        "{name}: think p50 {:.3} / p99 {:.3} ms unloaded; while {writers} sessions write 1 MiB files: \
         p50 {:.3} / p99 {:.3} ms ({} calls), {:.0} writes/s, {errors} failed",
        ms(p50(idle.clone())),
        ms(p99(idle)),
        ms(p50(loaded.clone())),
        ms(p99(loaded.clone())),
        loaded.len(),
        writes as f64 / took
    );
}

/// The benchmark (`cargo bench --bench all -- serve`).
pub async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 300 } else { 2000 };
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("one-k.txt"), "x".repeat(1023) + "\n").unwrap();
    let read = serde_json::json!({"path": "one-k.txt"});
    // The compiled components are kept between runs; a first run waits for the
    // server's background compilation, so that nothing is measured beside it.
    let cache = repo().join("target/bench-state/cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::os::unix::fs::symlink(&cache, state.path().join("cache")).unwrap();

    // Over stdio.
    let mut cmd = cheng(state.path(), ws.path());
    cmd.arg("serve");
    let child = TokioChildProcess::new(cmd).unwrap();
    let stdio: Client = ().serve(child).await.unwrap();
    // Every built-in of this build has its check file (written after the component).
    let compiled = || {
        let names: Vec<String> = std::fs::read_dir(&cache)
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        cheng_host::builtin::BUILTINS
            .iter()
            .all(|(_, _, sha)| names.iter().any(|n| n.starts_with(*sha) && n.ends_with(".check")))
    };
    let until = Instant::now() + Duration::from_secs(600);
    while !compiled() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    timed(&stdio, "read_file", read.clone(), 50).await;
    let ours_stdio = report("cheng serve (stdio) read_file 1 KB", timed(&stdio, "read_file", read.clone(), n).await);
    // The transport floor over stdio, same client, same file (read natively).
    let floor_read = serde_json::json!({"path": ws.path().join("one-k.txt")});
    let floor_stdio: Client = ().serve(TokioChildProcess::new(floor("stdio")).unwrap()).await.unwrap();
    timed(&floor_stdio, "read_file", floor_read.clone(), 50).await;
    let bare_stdio = report(
        "floor: rmcp alone (stdio) read_file 1 KB",
        timed(&floor_stdio, "read_file", floor_read.clone(), n).await,
    );
    let _ = floor_stdio.cancel().await;

    // Over HTTP.
    let token = add_token(state.path(), ws.path()).await;
    let mut server = cheng(state.path(), ws.path())
        .env("CHENG_LOG", "warn")
        .args(["serve", "--http", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = server_url(&mut server).await;
    let http = http_client(&url, &token).await;
    timed(&http, "read_file", read.clone(), 50).await;
    let ours_http = report("cheng serve (HTTP) read_file 1 KB", timed(&http, "read_file", read.clone(), n).await);
    let plain = stateless_client(&url, &token).await;
    timed(&plain, "read_file", read.clone(), 50).await;
    let ours_plain =
        report("cheng serve (HTTP, 2026-07-28) read_file 1 KB", timed(&plain, "read_file", read.clone(), n).await);
    let _ = plain.cancel().await;
    // The transport floor over HTTP, in both revisions.
    let mut floor_server = floor("http").stdout(Stdio::piped()).spawn().unwrap();
    let mut floor_lines = tokio::io::BufReader::new(floor_server.stdout.take().unwrap()).lines();
    let floor_url = loop {
        let line = floor_lines.next_line().await.unwrap().expect("the floor server starts");
        if let Some(addr) = line.strip_prefix("listening ") {
            break format!("http://{addr}/mcp");
        }
    };
    let floor_http = http_client(&floor_url, "none").await;
    timed(&floor_http, "read_file", floor_read.clone(), 50).await;
    let bare_http =
        report("floor: rmcp alone (HTTP) read_file 1 KB", timed(&floor_http, "read_file", floor_read.clone(), n).await);
    let floor_plain = stateless_client(&floor_url, "none").await;
    timed(&floor_plain, "read_file", floor_read.clone(), 50).await;
    let bare_plain = report(
        "floor: rmcp alone (HTTP, 2026-07-28) read_file 1 KB",
        timed(&floor_plain, "read_file", floor_read.clone(), n).await,
    );
    let _ = floor_plain.cancel().await;
    let _ = floor_http.cancel().await;

    // The reference server, same client, same file.
    let reference =
        repo().join("target/bench-peers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    if reference.is_file() {
        let mut cmd = tokio::process::Command::new("node");
        cmd.arg(&reference).arg(ws.path()).stderr(Stdio::null());
        let theirs: Client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
        let file = serde_json::json!({"path": ws.path().join("one-k.txt")});
        timed(&theirs, "read_text_file", file.clone(), 50).await;
        let base =
            report("server-filesystem (stdio) read_text_file 1 KB", timed(&theirs, "read_text_file", file, n).await);
        println!(
            "ratio to the reference: stdio {:.2}x (goal <= 0.3x), HTTP {:.2}x, HTTP 2026-07-28 {:.2}x (goal <= 0.6x)",
            ours_stdio.as_secs_f64() / base.as_secs_f64(),
            ours_http.as_secs_f64() / base.as_secs_f64(),
            ours_plain.as_secs_f64() / base.as_secs_f64()
        );
        println!(
            "the floor's ratio to the reference: stdio {:.2}x, HTTP {:.2}x, HTTP 2026-07-28 {:.2}x",
            bare_stdio.as_secs_f64() / base.as_secs_f64(),
            bare_http.as_secs_f64() / base.as_secs_f64(),
            bare_plain.as_secs_f64() / base.as_secs_f64()
        );
        let _ = theirs.cancel().await;
    } else {
        println!("reference server not installed ({}): comparison left out", reference.display());
    }

    // Throughput: 64 clients calling `think` as fast as they can, in each revision.
    let sessions = 64;
    let seconds = if quick { 3 } else { 10 };
    let mut clients = Vec::new();
    for _ in 0..sessions {
        clients.push(http_client(&url, &token).await);
    }
    let pid = server.id().unwrap();
    let (server_cpu, client_cpu) = (cpu_s(&pid.to_string()), cpu_s("self"));
    let rate = think_rate(clients, seconds).await;
    println!("think over HTTP, {sessions} sessions: {rate:.0} calls/s (goal >= 8000)");
    // Where the two cores went: the server's CPU per call, and the client's (this process).
    let calls = rate * seconds as f64;
    println!(
        "  CPU per call: server {:.0} us, client {:.0} us",
        (cpu_s(&pid.to_string()) - server_cpu) / calls * 1e6,
        (cpu_s("self") - client_cpu) / calls * 1e6
    );
    let mut clients = Vec::new();
    for _ in 0..sessions {
        clients.push(stateless_client(&url, &token).await);
    }
    let rate = think_rate(clients, seconds).await;
    println!("think over HTTP 2026-07-28, {sessions} clients: {rate:.0} calls/s (goal >= 8000)");
    // The same load on the transport floor.
    let mut clients = Vec::new();
    for _ in 0..sessions {
        clients.push(http_client(&floor_url, "none").await);
    }
    let floor_pid = floor_server.id().unwrap().to_string();
    let (server_cpu, client_cpu) = (cpu_s(&floor_pid), cpu_s("self"));
    let rate = think_rate(clients, seconds).await;
    let calls = rate * seconds as f64;
    println!(
        "floor: rmcp alone, think over HTTP, {sessions} sessions: {rate:.0} calls/s; CPU per call: server {:.0} us, client {:.0} us",
        (cpu_s(&floor_pid) - server_cpu) / calls * 1e6,
        (cpu_s("self") - client_cpu) / calls * 1e6
    );
    let mut clients = Vec::new();
    for _ in 0..sessions {
        clients.push(stateless_client(&floor_url, "none").await);
    }
    let rate = think_rate(clients, seconds).await;
    println!("floor: rmcp alone, think over HTTP 2026-07-28, {sessions} clients: {rate:.0} calls/s");
    let _ = floor_server.kill().await;

    // RSS with 1,000 idle sessions.
    let before = rss_kb(pid);
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(http_client(&url, &token).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kb(pid);
    println!("server RSS: {} MB before, {} MB with 1000 idle sessions (goal <= 200 MB)", before / 1024, after / 1024);
    drop(idle);

    // `think` while 64 sessions write 1 MiB files: `cheng serve` itself, then the same
    // host served by this binary with the fs imports' blocking work on the async workers
    // (before) and off them (now), one server at a time.
    let writers = 64;
    let seconds = if quick { 5 } else { 15 };
    think_under_writes("cheng serve", &url, &token, writers, seconds).await;
    let _ = stdio.cancel().await;
    let _ = http.cancel().await;
    let _ = server.kill().await;
    for mode in ["on-workers", "off-workers"] {
        let (mut child, url, token, _state) = bench_server(mode, &cache, ws.path()).await;
        think_under_writes(&format!("this host, blocking fs work {mode}"), &url, &token, writers, seconds).await;
        let _ = child.kill().await;
    }
}
