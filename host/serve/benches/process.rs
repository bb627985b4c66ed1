//! Process-spawning overhead: `workspace_shell` running `true` end to end (auto-approved,
//! call record written) against spawning `true` directly with piped output, measured
//! interleaved in the same run. Variants show what Landlock and the containment
//! mechanism cost.
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
}
