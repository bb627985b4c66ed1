//! Hostile components, contained. Each escape attempt is paired with a positive control
//! (the same probe where access is granted), and each is followed by an ordinary call
//! that shows the host still serves.

use std::os::unix::fs::symlink;

use cheng_host::grant::{FsGrant, Grant};
use cheng_host::{Context, ErrorKind, Host, Status};
use serde_json::json;

use crate::util;

const ROLE: &str = r#"
[roles.tester]
tools = ["read_file", "evil__probe", "evil__probe_read", "evilw__probe", "tight__probe", "spawner__probe"]
"#;

struct Fixture {
    host: Host,
    cx: Context,
    ws: tempfile::TempDir,
    outside: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let ws = util::workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "TOPSECRET").unwrap();
    symlink(outside.path().join("secret.txt"), ws.path().join("link_out")).unwrap();
    symlink("inside.txt", ws.path().join("link_in")).unwrap();
    let read = Grant { fs: FsGrant::Read, spawn: false, memory_mb: None, cpu_ms: None, net: vec![] };
    let write_out = Grant { fs: FsGrant::Scoped { read: vec![], write: vec!["out".into()] }, ..read.clone() };
    let tight = Grant { fs: FsGrant::Read, spawn: false, memory_mb: Some(32), cpu_ms: Some(400), net: vec![] };
    let spawner = Grant { spawn: true, ..read.clone() };
    let host = util::host(
        ROLE,
        vec![
            util::plugin("evil", "hostile", read),
            util::plugin("evilw", "hostile", write_out),
            util::plugin("tight", "hostile", tight),
            util::plugin("spawner", "hostile", spawner),
        ],
    )
    .await;
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    let cx = Context::new(ws.path()).role("tester");
    Fixture { host, cx, ws, outside }
}

impl Fixture {
    async fn probe(&self, tool: &str, input: serde_json::Value) -> cheng_host::ToolResult {
        self.host.call(&self.cx, tool, input).await
    }

    /// The host still answers an ordinary call.
    async fn alive(&self) {
        let r = self.host.call(&self.cx, "read_file", json!({"path": "inside.txt"})).await;
        assert_eq!(r.status, Status::Ok, "{}", r.output);
        assert_eq!(r.output["content"], "inside");
    }
}

fn detail(r: &cheng_host::ToolResult) -> String {
    r.output["detail"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn reading_etc_passwd_is_contained() {
    let f = fixture().await;
    // Escape: an absolute host path.
    let r = f.probe("evil__probe", json!({"action": "read", "target": "/etc/passwd"})).await;
    assert_eq!(r.status, Status::Error);
    assert!(!r.output.to_string().contains("root:"), "{}", r.output);
    // Control: the same probe on the granted workspace.
    let r = f.probe("evil__probe", json!({"action": "read", "target": "/workspace/inside.txt"})).await;
    assert_eq!(detail(&r), "inside", "{}", r.output);
    f.alive().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn parent_directory_above_the_preopen_is_contained() {
    let f = fixture().await;
    let name = f.outside.path().file_name().unwrap().to_str().unwrap().to_string();
    // Escape: `..` above the mount, relative and absolute.
    for target in [format!("../{name}/secret.txt"), format!("/workspace/../{name}/secret.txt")] {
        let r = f.probe("evil__probe", json!({"action": "read", "target": target})).await;
        assert_eq!(r.status, Status::Error, "{target}: {}", r.output);
        assert!(!r.output.to_string().contains("TOPSECRET"));
    }
    // Escape: listing the parent.
    let r = f.probe("evil__probe", json!({"action": "list", "target": "/workspace/.."})).await;
    assert!(r.status == Status::Error || !detail(&r).contains(&name), "{}", r.output);
    // Control: a `..` that stays inside works.
    let r = f.probe("evil__probe", json!({"action": "read", "target": "/workspace/docs/../inside.txt"})).await;
    assert_eq!(detail(&r), "inside", "{}", r.output);
    f.alive().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_symlink_pointing_out_is_not_followed() {
    let f = fixture().await;
    // Escape: a link planted in the workspace pointing at a file outside.
    let r = f.probe("evil__probe", json!({"action": "read", "target": "/workspace/link_out"})).await;
    assert_eq!(r.status, Status::Error, "{}", r.output);
    assert!(!r.output.to_string().contains("TOPSECRET"));
    // Control: a link pointing inside is followed by the sandbox.
    let r = f.probe("evil__probe", json!({"action": "read", "target": "/workspace/link_in"})).await;
    assert_eq!(detail(&r), "inside", "{}", r.output);
    f.alive().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn writing_through_a_read_only_grant_is_refused() {
    let f = fixture().await;
    // Escape: write with a read-only grant.
    let r = f.probe("evil__probe", json!({"action": "write", "target": "/workspace/inside.txt"})).await;
    assert_eq!(r.status, Status::Error, "{}", r.output);
    assert_eq!(std::fs::read_to_string(f.ws.path().join("inside.txt")).unwrap(), "inside");
    // Escape: write outside the granted write folder.
    let r = f.probe("evilw__probe", json!({"action": "write", "target": "/workspace/inside.txt"})).await;
    assert_eq!(r.status, Status::Error, "{}", r.output);
    assert_eq!(std::fs::read_to_string(f.ws.path().join("inside.txt")).unwrap(), "inside");
    // Control: the write grant on out/ works.
    let r = f.probe("evilw__probe", json!({"action": "write", "target": "/workspace/out/new.txt"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(std::fs::read_to_string(f.ws.path().join("out/new.txt")).unwrap(), "pwned");
    f.alive().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_component_that_asks_for_the_network_is_refused_at_load() {
    use std::net::ToSocketAddrs;
    // A component whose TCP, HTTP-over-TCP and name-lookup code imports wasi:sockets.
    let wasm = util::program("netprobe");
    let ws = util::workspace();
    let report = cheng_host::inspect(&wasm, "netprobe").await.unwrap();
    let sockets: Vec<&String> = report.imports.iter().filter(|i| i.starts_with("wasi:sockets/")).collect();
    assert!(
        sockets.iter().any(|i| i.starts_with("wasi:sockets/tcp"))
            && sockets.iter().any(|i| i.starts_with("wasi:sockets/ip-name-lookup")),
        "{:?}",
        report.imports
    );
    // Control: it is a well-formed tool component (inspect reads its tools).
    assert_eq!(report.tools[0].name, "probe");
    // Refused at load, by name; the host and the other plugins keep working.
    let host = util::host(
        "[roles.t]\ntools = [\"read_file\", \"net__probe\", \"ok__probe\"]\n",
        vec![util::plugin("net", "netprobe", Grant::none()), util::plugin("ok", "hostile", Grant::none())],
    )
    .await;
    let errors = host.load_errors().join("\n");
    assert!(
        errors.contains("plugin \"net\"")
            && errors.contains("wasi:sockets/tcp")
            && errors.contains("never raw sockets"),
        "{errors}"
    );
    let cx = Context::new(ws.path()).role("t");
    let r = host.call(&cx, "net__probe", json!({"action": "tcp", "target": "127.0.0.1:9"})).await;
    assert_eq!(r.status, Status::Error);
    assert!(r.output["error"].as_str().unwrap().contains("unknown tool"), "{}", r.output);
    let r = host.call(&cx, "ok__probe", json!({"action": "env"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    // Control: the network it wanted is there for the host's own process.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    assert!(std::net::TcpStream::connect(listener.local_addr().unwrap()).is_ok());
    assert!(("localhost", 80).to_socket_addrs().is_ok());
    // And the hostile probe, which has no networking code, imports no sockets.
    let hostile = cheng_host::inspect(&util::program("hostile"), "hostile").await.unwrap();
    assert!(!hostile.imports.iter().any(|i| i.starts_with("wasi:sockets/")), "{:?}", hostile.imports);
}

#[tokio::test(flavor = "multi_thread")]
async fn environment_and_arguments_are_empty() {
    let f = fixture().await;
    // Control: the host process has an environment (PATH at least).
    assert!(std::env::var_os("PATH").is_some());
    // The guest sees none of it, and no arguments.
    let r = f.probe("evil__probe", json!({"action": "env"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(detail(&r), "vars=[] args=[]");
    f.alive().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_loop_hits_the_cpu_deadline() {
    let f = fixture().await;
    // Control: a bounded loop finishes.
    let r = f.probe("tight__probe", json!({"action": "loop", "n": 1000})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    // Escape: loop forever under a 400 ms budget.
    let started = std::time::Instant::now();
    let r = f.probe("tight__probe", json!({"action": "loop"})).await;
    assert_eq!(r.status, Status::Error);
    assert_eq!(r.error_kind, Some(ErrorKind::Timeout), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("timed out"), "{}", r.output);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    f.alive().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unbounded_memory_hits_the_memory_limit() {
    let f = fixture().await;
    // Control: 4 MiB under a 32 MiB limit.
    let r = f.probe("tight__probe", json!({"action": "memory", "n": 4})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    // Escape: grow without bound.
    let r = f.probe("tight__probe", json!({"action": "memory"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Crashed), "{}", r.output);
    let msg = r.output["error"].as_str().unwrap();
    assert!(msg.starts_with("The tool \"tight__probe\" crashed: it exceeded its memory limit of 32 MiB"), "{msg}");
    f.alive().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unbounded_recursion_is_a_crash_not_a_host_overflow() {
    let f = fixture().await;
    // Control: bounded recursion.
    let r = f.probe("evil__probe", json!({"action": "recurse", "n": 100})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    // Escape: recurse without bound.
    let r = f.probe("evil__probe", json!({"action": "recurse"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Crashed), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("stack"), "{}", r.output);
    f.alive().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn traps_and_panics_are_crashes_with_their_reason() {
    let f = fixture().await;
    // Control: the probe without its trap.
    let r = f.probe("evil__probe", json!({"action": "trap", "n": 0})).await;
    assert_eq!(detail(&r), "no trap");
    // A trap.
    let r = f.probe("evil__probe", json!({"action": "trap"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Crashed), "{}", r.output);
    assert!(r.terminal);
    assert!(r.output["error"].as_str().unwrap().contains("unreachable"), "{}", r.output);
    // A panic: its message reaches the caller.
    let r = f.probe("evil__probe", json!({"action": "panic"})).await;
    assert!(r.output["error"].as_str().unwrap().contains("panicked on purpose"), "{}", r.output);
    f.alive().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn flooding_stdout_and_stderr_is_bounded() {
    let f = fixture().await;
    // Control: a little output.
    let r = f.probe("evil__probe", json!({"action": "flood", "n": 10})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    // 100 MB to each stream: the call completes and its result is small.
    let r = f.probe("evil__probe", json!({"action": "flood"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert!(r.output.to_string().len() < 1000);
    f.alive().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn spawning_without_a_grant_is_refused() {
    let f = fixture().await;
    // Escape: ask the host for a process without a spawn grant.
    let r = f.probe("evil__probe", json!({"action": "spawn"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotGranted), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("not granted process spawning"));
    // Control: with the grant, the request gets past the grant check.
    let r = f.probe("spawner__probe", json!({"action": "spawn"})).await;
    assert_ne!(r.error_kind, Some(ErrorKind::NotGranted), "{}", r.output);
    f.alive().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_host_filesystem_interface_keeps_the_same_walls() {
    let f = fixture().await;
    let name = f.outside.path().file_name().unwrap().to_str().unwrap().to_string();
    // Escapes through the host's read and list calls: `..`, absolute, a symlink out.
    for target in [format!("../{name}/secret.txt"), "/etc/passwd".to_string(), "link_out".to_string()] {
        let r = f.probe("evil__probe", json!({"action": "host_read", "target": target})).await;
        assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{target}: {}", r.output);
        assert!(!r.output.to_string().contains("TOPSECRET"));
    }
    let r = f.probe("evil__probe", json!({"action": "host_list", "target": ".."})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{}", r.output);
    // The listing with stats: no way up or out through a link to a directory, and a link
    // to a file outside is described by its own lstat, not the secret's.
    std::os::unix::fs::symlink(f.outside.path(), f.ws.path().join("dirlink_out")).unwrap();
    for target in ["..", "/etc", "dirlink_out"] {
        let r = f.probe("evil__probe", json!({"action": "host_stat", "target": target})).await;
        assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{target}: {}", r.output);
        assert!(!r.output.to_string().contains("secret.txt"), "{}", r.output);
    }
    let r = f.probe("evil__probe", json!({"action": "host_stat", "target": "."})).await;
    let link_len = f.outside.path().join("secret.txt").as_os_str().len();
    assert!(detail(&r).split(',').any(|e| e == format!("link_out:Symlink:{link_len}")), "{}", r.output);
    assert!(detail(&r).split(',').any(|e| e == "inside.txt:File:6"), "{}", r.output);
    std::fs::remove_file(f.ws.path().join("dirlink_out")).unwrap();
    // A symlink pointing inside is refused too (the tools' policy), unlike plain WASI.
    let r = f.probe("evil__probe", json!({"action": "host_read", "target": "link_in"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{}", r.output);
    // Writes through the host need a write grant: refused with read only, and outside
    // the granted folder.
    let r = f.probe("evil__probe", json!({"action": "host_write", "target": "x.txt"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotGranted), "{}", r.output);
    let r = f.probe("evilw__probe", json!({"action": "host_write", "target": "docs/x.txt"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotGranted), "{}", r.output);
    assert!(!f.ws.path().join("x.txt").exists() && !f.ws.path().join("docs/x.txt").exists());
    // Controls: a granted read, list and write through the same calls work.
    let r = f.probe("evil__probe", json!({"action": "host_read", "target": "inside.txt"})).await;
    assert_eq!(detail(&r), "inside", "{}", r.output);
    let r = f.probe("evil__probe", json!({"action": "host_list", "target": "docs"})).await;
    assert_eq!(detail(&r), "a.md");
    let r = f.probe("evilw__probe", json!({"action": "host_write", "target": "out/y.txt"})).await;
    assert_eq!(detail(&r), "written", "{}", r.output);
    f.alive().await;
}
