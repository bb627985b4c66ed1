//! Process-spawning overhead: `workspace_shell` running `true` end to end (auto-approved,
//! call record written) against spawning `true` directly with piped output, measured
//! interleaved in the same run. Variants show what Landlock and the containment
//! mechanism cost, and what a workspace holding files the path rules protect costs
//! (their carve-outs from each command's view).
//!
//! Run: `cargo bench --bench all -- process` (add `--quick` for fewer iterations).

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cheng_host::approvals::ApproveAll;
use cheng_host::policy::Config;
use cheng_host::{Context, Host, HostBuilder, Status};
use serde_json::json;

use super::common;
use common::report;

async fn host(state: &Path, process: &str) -> Host {
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(&format!("[process]\n{process}"), "bench.toml").unwrap());
    b.state_dir(state);
    b.approver(Arc::new(ApproveAll));
    b.build().await.unwrap()
}

/// The baseline: `std::process::Command` (posix_spawn) with piped output, waited for.
async fn direct() -> Duration {
    let t = Instant::now();
    let out = std::process::Command::new("/usr/bin/true")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(out.status.success());
    t.elapsed()
}

async fn via_tool(h: &Host, ws: &Path) -> Duration {
    let t = Instant::now();
    let r = h.call(&Context::new(ws), "workspace_shell", json!({"command": "true"})).await;
    let d = t.elapsed();
    assert!(r.status == Status::Ok && r.output["success"] == true, "{}", r.output);
    d
}

/// The benchmark (`cargo bench --bench all -- process`).
pub async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 100 } else { 500 };
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    println!("containment here: {}", cheng_host::confinement().containment);
    println!("landlock ABI: {:?}", cheng_host::confinement().landlock_abi);
    for (name, cfg) in [
        ("default (landlock + containment auto)", ""),
        ("landlock off", "landlock = false\n"),
        ("containment walk", "containment = \"walk\"\n"),
    ] {
        let h = host(state.path(), cfg).await;
        for _ in 0..20 {
            via_tool(&h, ws.path()).await;
            direct().await;
        }
        let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            a.push(via_tool(&h, ws.path()).await);
            b.push(direct().await);
        }
        report(&format!("workspace_shell `true` [{name}]"), "direct spawn", a, b);
    }
    // A workspace like a real project's: a repository, editor and CI settings, secrets
    // and a thousand ordinary files (the files the path rules protect, and where they
    // apply, what is carved out of each command's view).
    let project = tempfile::tempdir().unwrap();
    protected_project(project.path());
    let h = host(state.path(), "").await;
    for _ in 0..20 {
        via_tool(&h, project.path()).await;
        direct().await;
    }
    let (mut a, mut b, mut c) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        a.push(via_tool(&h, project.path()).await);
        b.push(direct().await);
        c.push(via_tool(&h, ws.path()).await);
    }
    report("workspace_shell `true` [default, a project with protected files]", "direct spawn", a.clone(), b);
    // The path rules' own cost, against the same host's command in an empty workspace,
    // interleaved call by call (so the machine's drift falls on both alike).
    report("the same, against an empty workspace interleaved", "empty workspace", a, c);
}

/// A repository with `.git/hooks`, `.vscode/`, `.github/workflows/`, `.idea/`, `.env`,
/// `.envrc`, `.npmrc`, a key, and 1,000 ordinary files in 20 folders.
fn protected_project(root: &Path) {
    for d in [".git/hooks", ".git/info", ".git/objects", ".git/refs/heads", ".vscode", ".github/workflows", ".idea"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for (f, text) in [
        (".git/HEAD", "ref: refs/heads/main\n"),
        (".git/config", "[core]\n\tbare = false\n"),
        (".git/info/exclude", ""),
        (".vscode/tasks.json", "{}"),
        (".vscode/settings.json", "{}"),
        (".github/workflows/ci.yml", "on: push\n"),
        (".idea/workspace.xml", "<x/>"),
        (".env", "KEY=secret\n"),
        (".env.local", "KEY=secret\n"),
        (".envrc", "export A=1\n"),
        (".npmrc", "//registry/:_authToken=x\n"),
        ("server.pem", "-----BEGIN KEY-----\n"),
    ] {
        std::fs::write(root.join(f), text).unwrap();
    }
    for d in 0..20 {
        let dir = root.join(format!("src/m{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..50 {
            std::fs::write(dir.join(format!("f{f}.rs")), "fn main() {}\n").unwrap();
        }
    }
}
