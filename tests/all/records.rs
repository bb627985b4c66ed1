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

// The audit chain anchored at both ends, as an operator meets it: logs written by
// `cheng call` processes alone, checked by `cheng records verify` (and `--expect`, a
// head kept outside the state directory), each kind of tampering done to the files.

/// A state directory and workspace for `cheng` runs whose log is synced by nothing but
/// a process's way out (a commit window of a minute: no background commit happens
/// during a call), with role `lister`, which is refused `read_file`.
struct CliLog {
    ws: tempfile::TempDir,
    state: tempfile::TempDir,
    cfg: std::path::PathBuf,
}

impl CliLog {
    fn new(extra: &str) -> CliLog {
        let ws = util::workspace();
        let state = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(util::shared_state().join("cache"), state.path().join("cache")).unwrap();
        let cfg = state.path().join("cheng.toml");
        std::fs::write(
            &cfg,
            format!("[records]\ncommit_window_ms = 60000\n{extra}\n[roles.lister]\ntools = [\"list_dir\"]\n"),
        )
        .unwrap();
        CliLog { ws, state, cfg }
    }

    fn cheng(&self, state: &std::path::Path) -> Command {
        let mut c = util::cheng_in(self.ws.path(), state);
        c.arg("--config").arg(&self.cfg);
        c
    }

    /// `cheng ARGS` on this state directory: exit code and stdout.
    fn run(&self, args: &[&str]) -> (Option<i32>, String) {
        let out = self.cheng(self.state.path()).args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn log(&self) -> std::path::PathBuf {
        self.state.path().join("audit.jsonl")
    }

    /// A copy of the log's files (audit.*) in a fresh state directory, to tamper with.
    fn copy(&self) -> tempfile::TempDir {
        let copy = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(self.state.path()).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with("audit.") {
                std::fs::copy(e.path(), copy.path().join(e.file_name())).unwrap();
            }
        }
        copy
    }

    /// `cheng records verify ARGS` on `state`: exit code and the JSON it printed.
    fn verify(&self, state: &std::path::Path, args: &[&str]) -> (Option<i32>, Value) {
        let out = self.cheng(state).args(["records", "verify"]).args(args).output().unwrap();
        let v = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| json!({"stderr": String::from_utf8_lossy(&out.stderr)}));
        (out.status.code(), v)
    }
}

/// The last line of the log's current file as a link: its seq, the SHA-256 of its bytes.
fn last_link(log: &std::path::Path) -> (u64, String) {
    let text = std::fs::read(log).unwrap();
    let line = text.strip_suffix(b"\n").unwrap().rsplit(|&b| b == b'\n').next().unwrap();
    let seq = serde_json::from_slice::<Value>(line).unwrap()["seq"].as_u64().unwrap();
    (seq, hex::encode(<sha2::Sha256 as sha2::Digest>::digest(line)))
}

/// What `audit.head` holds (Null when it holds nothing).
fn head_file(state: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(state.join("audit.head")).unwrap_or_default()).unwrap_or(Value::Null)
}

fn lines_of(p: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(p).unwrap().lines().map(str::to_string).collect()
}

fn write_lines(p: &std::path::Path, lines: &[String]) {
    std::fs::write(p, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
}

#[test]
fn cli_calls_leave_the_head_at_their_last_record_and_a_cut_tail_is_caught() {
    let t = CliLog::new("");
    // Every way a call ends: ok, an error, a denial. After each process, the head file
    // holds the log's last line, first link and all.
    for (args, code) in [
        (vec!["call", "read_file", r#"{"path":"inside.txt"}"#], 0),
        (vec!["call", "read_file", r#"{"path":"nope"}"#], 1),
        (vec!["--role", "lister", "call", "read_file", r#"{"path":"inside.txt"}"#], 2),
    ] {
        assert_eq!(t.run(&args).0, Some(code), "{args:?}");
        let (seq, sha) = last_link(&t.log());
        let head = head_file(t.state.path());
        assert_eq!((&head["seq"], &head["sha256"]), (&json!(seq), &json!(sha)), "after {args:?}: {head}");
        assert_eq!((&head["version"], &head["first"]["seq"]), (&json!(2), &json!(1)), "{head}");
    }
    let (code, v) = t.verify(t.state.path(), &[]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!((&v["head_seq"], &v["head"]["version"]), (&v["last_seq"], &json!(2)), "{v}");
    // The head kept elsewhere, as `--head` prints it: both ends.
    let kept = tempfile::tempdir().unwrap();
    let saved = kept.path().join("head.json");
    let (code, head) = t.verify(t.state.path(), &["--head"]);
    assert_eq!(code, Some(0));
    assert_eq!((&head["seq"], &head["first"]["seq"], &head["version"]), (&v["last_seq"], &json!(1), &json!(2)));
    std::fs::write(&saved, head.to_string()).unwrap();
    let expect = ["--expect", saved.to_str().unwrap()];
    assert_eq!(t.verify(t.state.path(), &expect).0, Some(0), "control: the untouched log holds against it");

    // The tail cut (the denial's final line): caught against the head file, and the
    // kept head.
    let last = v["last_seq"].as_u64().unwrap();
    let copy = t.copy();
    let mut l = lines_of(&copy.path().join("audit.jsonl"));
    l.pop();
    write_lines(&copy.path().join("audit.jsonl"), &l);
    for args in [&[][..], &expect[..]] {
        let (code, v) = t.verify(copy.path(), args);
        assert_eq!(code, Some(1), "{v}");
        assert_eq!((&v["problem"]["kind"], &v["problem"]["seq"]), (&json!("truncated"), &json!(last)), "{v}");
    }
    // The head file rewritten to match the cut log: only the kept head catches it.
    let forged = t.verify(copy.path(), &["--head"]).1;
    std::fs::write(copy.path().join("audit.head"), forged.to_string()).unwrap();
    assert_eq!(t.verify(copy.path(), &[]).0, Some(0), "the log's own head was rewritten with it");
    let (code, v) = t.verify(copy.path(), &expect);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!((&v["problem"]["kind"], &v["problem"]["seq"]), (&json!("truncated"), &json!(last)), "{v}");
    assert!(v["problem"]["message"].as_str().unwrap().contains("head.json"), "{v}");
    // A kept head that is no head is a usage error, named.
    std::fs::write(kept.path().join("junk"), "not a head").unwrap();
    let out =
        t.cheng(t.state.path()).args(["records", "verify", "--expect"]).arg(kept.path().join("junk")).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds no head"));
}

#[test]
fn removing_the_start_of_the_log_is_caught() {
    // Rotation every KiB: each call's two lines fill most of a file.
    let t = CliLog::new("max_bytes = 1024");
    for i in 0..8 {
        let thought = format!("thought {i} {}", "x".repeat(300));
        assert_eq!(t.run(&["call", "think", &json!({"thought": thought}).to_string()]).0, Some(0));
    }
    // Control: the whole log verifies from record 1, across its files.
    let (code, v) = t.verify(t.state.path(), &[]);
    assert_eq!(code, Some(0), "{v}");
    assert!(v["files"].as_array().unwrap().len() >= 4, "{v}");
    assert_eq!(v["first_seq"], 1);
    let kept = tempfile::tempdir().unwrap();
    let saved = kept.path().join("head.json");
    std::fs::write(&saved, t.verify(t.state.path(), &["--head"]).1.to_string()).unwrap();
    let expect = ["--expect", saved.to_str().unwrap()];
    assert_eq!(t.verify(t.state.path(), &expect).0, Some(0));

    let removed = |copy: &tempfile::TempDir, what: &str| {
        for args in [&[][..], &expect[..]] {
            let (code, v) = t.verify(copy.path(), args);
            assert_eq!(code, Some(1), "{what}: {v}");
            assert_eq!((&v["problem"]["kind"], &v["problem"]["seq"]), (&json!("removed"), &json!(1)), "{what}: {v}");
        }
    };
    // The first lines of the oldest file removed.
    let copy = t.copy();
    let oldest = copy.path().join("audit.1.jsonl");
    let mut l = lines_of(&oldest);
    l.drain(..2);
    write_lines(&oldest, &l);
    removed(&copy, "first lines removed");
    // The oldest rotated file removed.
    let copy = t.copy();
    std::fs::remove_file(copy.path().join("audit.1.jsonl")).unwrap();
    removed(&copy, "first rotated file removed");
    // The oldest files removed, the rest renumbered from 1, the head file deleted: the
    // chain still does not start at record 1.
    let copy = t.copy();
    std::fs::remove_file(copy.path().join("audit.1.jsonl")).unwrap();
    std::fs::remove_file(copy.path().join("audit.head")).unwrap();
    let mut n = 2;
    while copy.path().join(format!("audit.{n}.jsonl")).exists() {
        std::fs::rename(
            copy.path().join(format!("audit.{n}.jsonl")),
            copy.path().join(format!("audit.{}.jsonl", n - 1)),
        )
        .unwrap();
        n += 1;
    }
    let (code, v) = t.verify(copy.path(), &[]);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!((&v["problem"]["kind"], &v["problem"]["seq"]), (&json!("removed"), &json!(1)), "{v}");
}

#[test]
fn whitespace_added_to_the_log_is_caught() {
    let t = CliLog::new("");
    for i in 0..3 {
        assert_eq!(t.run(&["call", "think", &json!({"thought": format!("t{i}")}).to_string()]).0, Some(0));
    }
    let (code, v) = t.verify(t.state.path(), &[]);
    assert_eq!(code, Some(0), "control: {v}");
    let n = v["last_seq"].as_u64().unwrap();
    assert_eq!(n, 6, "a running and a final line per call: {v}");
    // Each edit adds only whitespace; each is named with its kind and record.
    type Edit = fn(&mut Vec<String>);
    let edits: [(&str, Edit, &str, u64); 6] = [
        ("a space after record 2", |l| l[1].push(' '), "edited", 2),
        ("spaces before record 1", |l| l[0].insert_str(0, "  "), "edited", 1),
        ("a tab after the last record", |l| l[5].push('\t'), "edited", 6),
        ("CRLF line ends", |l| l.iter_mut().for_each(|x| x.push('\r')), "edited", 1),
        ("a blank line after record 3", |l| l.insert(3, String::new()), "inserted", 4),
        ("a line of spaces after record 4", |l| l.insert(4, "    ".into()), "inserted", 5),
    ];
    for (what, edit, kind, seq) in edits {
        let copy = t.copy();
        let log = copy.path().join("audit.jsonl");
        let mut l = lines_of(&log);
        edit(&mut l);
        write_lines(&log, &l);
        let (code, v) = t.verify(copy.path(), &[]);
        assert_eq!(code, Some(1), "{what}: {v}");
        assert_eq!((&v["problem"]["kind"], &v["problem"]["seq"]), (&json!(kind), &json!(seq)), "{what}: {v}");
    }
    // Blank lines at the end of the file, after the last newline's.
    let copy = t.copy();
    let log = copy.path().join("audit.jsonl");
    let mut text = std::fs::read(&log).unwrap();
    text.extend_from_slice(b"\n\n");
    std::fs::write(&log, text).unwrap();
    let (code, v) = t.verify(copy.path(), &[]);
    assert_eq!((code, &v["problem"]["kind"]), (Some(1), &json!("inserted")), "{v}");
}

/// `cheng call` of a command that sleeps, stopped by `signal` once its `running` line is
/// in the log.
fn cancel_a_cli_call(signal: i32) {
    let t = CliLog::new("");
    let mut child = t
        .cheng(t.state.path())
        .args(["call", "--approve", "yes", "workspace_shell", r#"{"command":"sleep","args":["30"]}"#])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !std::fs::read_to_string(t.log()).unwrap_or_default().contains(r#""status":"running""#) {
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "the call never started");
        assert!(child.try_wait().unwrap().is_none(), "the call ended before it was stopped");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(head_file(t.state.path()), Value::Null, "nothing synced the head before the signal");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(20), "the call did not stop on signal {signal}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    // The call's final record is the log's last line, and the head file holds it.
    let recs = read_log(&t.log(), &Filter::default()).unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!((recs[0].status, recs[0].error_kind.as_deref()), (Status::Error, Some("LOCAL_EXECUTOR_CANCELLED")));
    let (seq, sha) = last_link(&t.log());
    assert_eq!(seq, 2);
    let head = head_file(t.state.path());
    assert_eq!((&head["seq"], &head["sha256"], &head["first"]["seq"]), (&json!(seq), &json!(sha), &json!(1)), "{head}");
    // Checked against a copy kept elsewhere, and on its own.
    let kept = tempfile::tempdir().unwrap();
    std::fs::copy(t.state.path().join("audit.head"), kept.path().join("head")).unwrap();
    let (code, v) = t.verify(t.state.path(), &["--expect", kept.path().join("head").to_str().unwrap()]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!((&v["head_seq"], &v["expected"]["seq"], &v["last_seq"]), (&json!(2), &json!(2), &json!(2)), "{v}");
}

#[test]
fn a_cli_call_stopped_by_sigint_leaves_the_head_at_its_last_record() {
    cancel_a_cli_call(libc::SIGINT);
}

#[test]
fn a_cli_call_stopped_by_sigterm_leaves_the_head_at_its_last_record() {
    cancel_a_cli_call(libc::SIGTERM);
}
