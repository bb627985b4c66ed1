//! Call records and the audit log: every call recorded with its status, readable with
//! `cheng records`, durable when the host is killed, and the run call budget.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use cheng_host::policy::Config;
use cheng_host::records::{Filter, Status, read_log};
use cheng_host::{Context, HostBuilder};
use serde_json::{Value, json};

use crate::util;

#[tokio::test(flavor = "multi_thread")]
async fn every_call_is_recorded_with_its_status() {
    let state = tempfile::tempdir().unwrap();
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str("[roles.lister]\ntools = [\"list_dir\"]\n", "t.toml").unwrap());
    b.state_dir(state.path()).cache_dir(util::shared_state().join("cache"));
    let h = b.build().await.unwrap();
    let ws = util::workspace();
    let cx = Context::new(ws.path()).run("mixed");
    h.call(&cx, "read_file", json!({"path": "inside.txt"})).await;
    h.call(&cx, "read_file", json!({"path": "missing.txt"})).await;
    h.call(&cx.clone().role("lister"), "read_file", json!({"path": "inside.txt"})).await;
    h.call(&cx, "nope", json!({})).await;
    let recs = read_log(&state.path().join("audit.jsonl"), &Filter::default()).unwrap();
    let got: Vec<(&str, Status)> = recs.iter().map(|r| (r.tool.as_str(), r.status)).collect();
    // One record per call, final statuses, in order.
    assert_eq!(
        got,
        [
            ("read_file", Status::Ok),
            ("read_file", Status::Error),
            ("read_file", Status::Denied),
            ("nope", Status::Error)
        ]
    );
    // Arguments exactly as sent, a preview, the result, the error kind.
    assert_eq!(recs[0].arguments, json!({"path": "inside.txt"}));
    assert_eq!(recs[0].result["content"], "inside");
    assert!(recs[0].preview.starts_with("Read all 1 lines"));
    assert_eq!(recs[1].error_kind.as_deref(), Some("LOCAL_EXECUTOR_NOT_FOUND"));
    assert_eq!(recs[2].role, "lister");
    // The log holds a running line for each call that ran (queued; flushed at the
    // latest when the host is dropped), and its final line.
    drop(h);
    let raw = std::fs::read_to_string(state.path().join("audit.jsonl")).unwrap();
    assert_eq!(raw.matches("\"status\":\"running\"").count(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_past_its_call_budget_is_refused() {
    let state = tempfile::tempdir().unwrap();
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str("[runs]\nmax_calls = 2\n", "t.toml").unwrap());
    b.state_dir(state.path()).cache_dir(util::shared_state().join("cache"));
    let h = b.build().await.unwrap();
    let ws = util::workspace();
    let cx = Context::new(ws.path()).run("budget");
    for _ in 0..2 {
        assert_eq!(h.call(&cx, "read_file", json!({"path": "inside.txt"})).await.status, cheng_host::Status::Ok);
    }
    let r = h.call(&cx, "read_file", json!({"path": "inside.txt"})).await;
    assert_eq!(r.status, cheng_host::Status::Denied);
    assert!(r.output["error"].as_str().unwrap().contains("budget of 2 tool calls"), "{}", r.output);
    // Another run has its own budget.
    let r = h.call(&Context::new(ws.path()).run("other"), "read_file", json!({"path": "inside.txt"})).await;
    assert_eq!(r.status, cheng_host::Status::Ok);
}

/// Helper process for `a_killed_host_keeps_its_finished_calls`: makes one call, prints
/// its id, then waits to be killed.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "run as a child process by a_killed_host_keeps_its_finished_calls"]
async fn child_host() {
    let Ok(state) = std::env::var("CHENG_TEST_CHILD_STATE") else { return };
    let ws = util::workspace();
    let mut b = HostBuilder::new();
    // A long commit window: durability must not depend on the fsync having happened.
    b.config(Config::from_toml_str("[records]\ncommit_window_ms = 60000\n", "t.toml").unwrap());
    b.state_dir(&state).cache_dir(util::shared_state().join("cache"));
    let h = b.build().await.unwrap();
    let r = h.call(&Context::new(ws.path()), "read_file", json!({"path": "inside.txt"})).await;
    println!("CALLED {}", r.call_id);
    std::thread::sleep(std::time::Duration::from_secs(60));
}

#[test]
fn a_killed_host_keeps_its_finished_calls() {
    let state = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "records::child_host", "--nocapture", "--test-threads=1"])
        .env("CHENG_TEST_CHILD_STATE", state.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let id = loop {
        let line = lines.next().expect("the child reports its call").unwrap();
        // The harness prints "test records::child_host ... " on the same line.
        if let Some(id) = line.split("CALLED ").nth(1) {
            break id.trim().to_string();
        }
    };
    // SIGKILL right after the call returned.
    child.kill().unwrap();
    child.wait().unwrap();
    let recs = read_log(&state.path().join("audit.jsonl"), &Filter::default()).unwrap();
    let rec = recs.iter().find(|r| r.id == id).expect("the finished call is in the log");
    assert_eq!(rec.status, Status::Ok);
}

#[test]
fn cheng_records_lists_and_filters() {
    let ws = util::workspace();
    let state = tempfile::tempdir().unwrap();
    let cfg = ws.path().join("cheng.toml");
    std::fs::write(&cfg, "[roles.lister]\ntools = [\"list_dir\"]\n").unwrap();
    let cheng = |args: &[&str]| {
        let out = util::cheng_in(ws.path(), state.path()).arg("--config").arg(&cfg).args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    // A mixed run: ok, denied, error.
    assert_eq!(cheng(&["--run", "r1", "call", "read_file", r#"{"path":"inside.txt"}"#]).0, Some(0));
    assert_eq!(cheng(&["--run", "r1", "--role", "lister", "call", "read_file", r#"{"path":"inside.txt"}"#]).0, Some(2));
    assert_eq!(cheng(&["--run", "r2", "call", "read_file", r#"{"path":"nope"}"#]).0, Some(1));
    let list = |args: &[&str]| -> Vec<Value> { serde_json::from_str(&cheng(args).1).unwrap() };
    assert_eq!(list(&["records"]).len(), 3);
    let denied = list(&["records", "--status", "denied"]);
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["role"], "lister");
    assert_eq!(list(&["records", "--status", "ok"])[0]["result"]["content"], "inside");
    assert_eq!(list(&["records", "--run", "r2"])[0]["status"], "error");
    assert_eq!(list(&["records", "--tool", "read_file", "--last", "1"])[0]["run"], "r2");
}

/// The audit chain under load: 200 `cheng call` processes and one in-process host with
/// 300 calls in flight, all on one state directory whose log rotates every 64 KiB. The
/// chain verifies across every file (`cheng records verify`), and every call has
/// exactly one final record. Then one record is edited, and the same command names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_chain_holds_under_many_writers_and_names_an_edit() {
    let state = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(util::shared_state().join("cache"), state.path().join("cache")).unwrap();
    let ws = util::workspace();
    // A short commit window: the sync thread writes the head file often, beside the appends.
    let toml = "[records]\nmax_bytes = 65536\ncommit_window_ms = 5\n";
    let cfg_file = state.path().join("cheng.toml");
    std::fs::write(&cfg_file, toml).unwrap();

    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(toml, "t.toml").unwrap());
    b.state_dir(state.path()).cache_dir(util::shared_state().join("cache"));
    let h = std::sync::Arc::new(b.build().await.unwrap());

    // The processes, 25 at a time, on threads of their own...
    let (ws_path, state_path) = (ws.path().to_path_buf(), state.path().to_path_buf());
    let procs = std::thread::spawn(move || {
        let mut failed = 0;
        for wave in 0..8 {
            let children: Vec<_> = (0..25)
                .map(|i| {
                    util::cheng_in(&ws_path, &state_path)
                        .arg("--config")
                        .arg(&cfg_file)
                        .args(["call", "think", &json!({"thought": format!("process {wave}-{i}")}).to_string()])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect();
            for mut c in children {
                failed += usize::from(!c.wait().unwrap().success());
            }
        }
        failed
    });
    // ...while the host runs 300 calls at once.
    let cx = Context::new(ws.path()).run("load");
    let calls = (0..300).map(|i| {
        let (h, cx) = (h.clone(), cx.clone());
        tokio::spawn(async move { h.call(&cx, "think", json!({"thought": format!("host {i}")})).await.status })
    });
    for c in futures::future::join_all(calls).await {
        assert_eq!(c.unwrap(), Status::Ok);
    }
    assert_eq!(tokio::task::spawn_blocking(move || procs.join().unwrap()).await.unwrap(), 0, "every process call ran");
    drop(h);

    let log = state.path().join("audit.jsonl");
    let out = util::cheng_in(ws.path(), state.path()).args(["records", "verify"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(out.status.success() && v["ok"] == true, "{v}");
    let files = v["files"].as_array().unwrap().len();
    assert!(files >= 3, "the log rotated under load: {v}");
    // Every call once: a final line per id, 500 ids.
    let mut finals = std::collections::HashMap::<String, usize>::new();
    for f in v["files"].as_array().unwrap() {
        for line in std::fs::read_to_string(f.as_str().unwrap()).unwrap().lines() {
            let r: Value = serde_json::from_str(line).unwrap();
            if r["status"].is_string() && r["status"] != "running" {
                *finals.entry(r["id"].as_str().unwrap().to_string()).or_default() += 1;
            }
        }
    }
    assert_eq!(finals.len(), 500);
    assert!(finals.values().all(|&n| n == 1), "a call with more than one final record");
    assert_eq!(read_log(&log, &Filter::default()).unwrap().len(), 500);
    // --head prints the last link, as the walk found it.
    let out = util::cheng_in(ws.path(), state.path()).args(["records", "verify", "--head"]).output().unwrap();
    let head: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&head["seq"], &head["sha256"]), (&v["last_seq"], &v["last_sha256"]));

    // One record of a rotated file edited (its thought changed): named by its seq.
    let first = v["files"][0].as_str().unwrap().to_string();
    let text = std::fs::read_to_string(&first).unwrap();
    let line = text.lines().find(|l| l.contains("\"thought\"")).unwrap();
    let seq = serde_json::from_str::<Value>(line).unwrap()["seq"].clone();
    std::fs::write(&first, text.replacen(line, &line.replacen("\"thought\":\"", "\"thought\":\"forged ", 1), 1))
        .unwrap();
    let out = util::cheng_in(ws.path(), state.path()).args(["records", "verify"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!((&v["problem"]["kind"], &v["problem"]["seq"]), (&json!("edited"), &seq), "{v}");
}
