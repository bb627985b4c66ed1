//! The embedder API: the order of checks, bad arguments, cancellation, concurrency.

use std::time::Duration;

use cheng_host::grant::{FsGrant, Grant};
use cheng_host::{Context, ErrorKind, Status};
use serde_json::json;

use crate::util;

#[tokio::test(flavor = "multi_thread")]
async fn unknown_denied_and_bad_arguments_are_distinct() {
    let h = util::host("[roles.lister]\ntools = [\"list_dir\"]\n", vec![]).await;
    let ws = util::workspace();
    // Unknown tool.
    let r = h.call(&Context::new(ws.path()), "nope", json!({})).await;
    assert_eq!(r.status, Status::Error);
    assert_eq!(r.output["error"], "unknown tool \"nope\"");
    // Not granted: denied, with what the role holds.
    let r = h.call(&Context::new(ws.path()).role("lister"), "read_file", json!({"path": "x"})).await;
    assert_eq!(r.status, Status::Denied);
    assert_eq!(r.error_kind, Some(ErrorKind::NotGranted));
    assert!(r.output["error"].as_str().unwrap().contains("granted: list_dir"));
    // Bad arguments name the field: wrong type, unknown field, missing field.
    let cx = Context::new(ws.path());
    let r = h.call(&cx, "read_file", json!({"path": 5})).await;
    assert!(r.output["error"].as_str().unwrap().contains("field `path`"), "{}", r.output);
    let r = h.call(&cx, "read_file", json!({"path": "x", "sandbox_root": "/"})).await;
    assert!(r.output["error"].as_str().unwrap().contains("sandbox_root"), "{}", r.output);
    let r = h.call(&cx, "read_file", json!({})).await;
    assert!(r.output["error"].as_str().unwrap().contains("path"), "{}", r.output);
    assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgument));
    // Not an object at all.
    let r = h.call(&cx, "read_file", json!([1, 2])).await;
    assert!(r.output["error"].as_str().unwrap().contains("JSON object"));
}

#[tokio::test(flavor = "multi_thread")]
async fn cancellation_by_token_and_by_drop() {
    let grant = Grant { fs: FsGrant::None, spawn: false, memory_mb: None, cpu_ms: Some(60_000), net: vec![] };
    let h = util::host(
        "[roles.t]\ntools = [\"slow__probe\", \"read_file\"]\n",
        vec![util::plugin("slow", "hostile", grant)],
    )
    .await;
    let ws = util::workspace();
    // A token cancelled mid-call ends it with CANCELLED, promptly.
    let cx = Context::new(ws.path()).role("t");
    let token = cx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        token.cancel();
    });
    let started = std::time::Instant::now();
    let r = h.call(&cx, "slow__probe", json!({"action": "loop"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Cancelled), "{}", r.output);
    assert!(!r.terminal);
    assert!(started.elapsed() < Duration::from_secs(5));
    // Dropping the future (here by a timeout) stops it too, and the host keeps serving.
    let cx = Context::new(ws.path()).role("t");
    let dropped =
        tokio::time::timeout(Duration::from_millis(200), h.call(&cx, "slow__probe", json!({"action": "loop"}))).await;
    assert!(dropped.is_err());
    let r = h.call(&cx, "read_file", json!({"path": "inside.txt"})).await;
    assert_eq!(r.status, Status::Ok);
}

#[tokio::test(flavor = "multi_thread")]
async fn many_workspaces_concurrently() {
    let h = util::host("", vec![]).await;
    let spaces: Vec<_> = (0..8).map(|_| util::workspace()).collect();
    for (i, ws) in spaces.iter().enumerate() {
        std::fs::write(ws.path().join("id.txt"), format!("{i}")).unwrap();
    }
    let mut tasks = Vec::new();
    for round in 0..4 {
        for (i, ws) in spaces.iter().enumerate() {
            let h = h.clone();
            let path = ws.path().to_path_buf();
            tasks.push(tokio::spawn(async move {
                let r = h.call(&Context::new(path), "read_file", json!({"path": "id.txt"})).await;
                (i, round, r)
            }));
        }
    }
    for t in tasks {
        let (i, _, r) = t.await.unwrap();
        // Every call saw its own workspace.
        assert_eq!(r.output["content"], format!("{i}"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_workspace_is_an_error_not_a_crash() {
    let h = util::host("", vec![]).await;
    let r = h.call(&Context::new("/definitely/not/here"), "read_file", json!({"path": "x"})).await;
    assert_eq!(r.status, Status::Error);
    assert!(r.output["error"].as_str().unwrap().contains("/definitely/not/here"));
}
