//! Killing the host in the middle of a write or a multi-file patch, at every point of
//! the write path, over 200 times: each file is afterwards entirely old or entirely new,
//! and no temporary file outlives the next write. And a host bug (a panic) inside the
//! write path, reached through a component's `fs.write-file` import: that call ends as
//! "crashed", and the same host answers the next calls.

use std::process::Stdio;

use crate::util;

const POINTS: [&str; 5] = ["tmpfile", "written", "synced", "linked", "renamed"];

/// Run one call of `tool` with `input` in a child process — this test binary, running
/// [`crash_child`] — whose write path aborts the process at `failpoint`
/// (`<step>[:<n>]`, the n-th time the step is reached); true when the child was killed
/// (rather than finishing). The `cheng` binary itself has no such hook.
fn killed_call(ws: &std::path::Path, tool: &str, input: &serde_json::Value, failpoint: &str) -> bool {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash::crash_child", "--ignored", "--test-threads=1", "--quiet"])
        .env(CHILD_FAILPOINT, failpoint)
        .env("CHENG_TEST_CRASH_TOOL", tool)
        .env("CHENG_TEST_CRASH_INPUT", input_file(ws, input))
        .env("CHENG_TEST_CRASH_WORKSPACE", ws)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    !status.success() && status.code().is_none()
}

/// The input, in a file beside the workspace (it is too large for the environment).
fn input_file(ws: &std::path::Path, input: &serde_json::Value) -> std::path::PathBuf {
    let f = ws.with_extension("input.json");
    std::fs::write(&f, input.to_string()).unwrap();
    f
}

/// Names the child's failpoint; without it `crash_child` is not a child and returns.
const CHILD_FAILPOINT: &str = "CHENG_TEST_CRASH_AT";

/// Abort the process the n-th time the write path reaches the armed step; with
/// `panic:<step>`, panic there (once) instead, as a host bug would.
fn abort_at_armed_step(step: &str) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static HITS: AtomicUsize = AtomicUsize::new(0);
    let armed = std::env::var(CHILD_FAILPOINT).unwrap_or_default();
    if let Some(name) = armed.strip_prefix("panic:") {
        if name == step && HITS.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("the write path's test hook panicked at {step}");
        }
        return;
    }
    let (name, n) = armed.split_once(':').unwrap_or((&armed, "1"));
    if name == step && HITS.fetch_add(1, Ordering::SeqCst) + 1 == n.parse().unwrap_or(1) {
        std::process::abort();
    }
}

/// The child half of the tests below: one call through a host whose write path is
/// hooked. Run by [`killed_call`] only (with `--ignored`); as a test of its own it has
/// nothing to do, so it is not one: a plain run lists it as ignored rather than passed.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "run as a child process by killed_call and a_host_panic_inside_an_import_ends_only_that_call"]
async fn crash_child() {
    if std::env::var_os(CHILD_FAILPOINT).is_none() {
        return;
    }
    cheng_host::testing::on_write_step(abort_at_armed_step);
    let tool = std::env::var("CHENG_TEST_CRASH_TOOL").unwrap();
    let input: serde_json::Value =
        serde_json::from_slice(&std::fs::read(std::env::var("CHENG_TEST_CRASH_INPUT").unwrap()).unwrap()).unwrap();
    let ws = std::env::var("CHENG_TEST_CRASH_WORKSPACE").unwrap();
    let host = util::host("", vec![]).await;
    let cx = cheng_host::Context::new(&ws);
    let r = host.call(&cx, &tool, input.clone()).await;
    if !std::env::var(CHILD_FAILPOINT).unwrap().starts_with("panic:") {
        assert_eq!(r.status, cheng_host::Status::Ok, "{}", r.output);
        return;
    }
    // The panic ended this call, and only this call, as "crashed", naming the fault...
    assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::Crashed), "{}", r.output);
    let message = r.output["error"].as_str().unwrap_or_default();
    assert!(message.contains("host") && message.contains("panicked"), "{message}");
    // ...with its record closed like any other call's...
    assert_eq!(r.status, cheng_host::Status::Error);
    // ...and the same host answers the next calls, the same write included.
    let again = host.call(&cx, &tool, input).await;
    assert_eq!(again.status, cheng_host::Status::Ok, "{}", again.output);
    let read = host.call(&cx, "read_file", serde_json::json!({"path": "data.txt"})).await;
    assert_eq!(read.status, cheng_host::Status::Ok, "{}", read.output);
}

fn temps(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("cheng-tmp"))
        .collect()
}

/// A panic in the host's write path, inside the `fs.write-file` import the edit
/// component calls, is a host bug: the call ends as "crashed" and the host keeps
/// serving (checked in the child, which must exit normally). Control: the hook panics
/// for real, since without the host catching it the child's test fails.
#[test]
fn a_host_panic_inside_an_import_ends_only_that_call() {
    let ws = util::workspace();
    std::fs::write(ws.path().join("data.txt"), "old").unwrap();
    let input = serde_json::json!({"path": "data.txt", "content": "new"});
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash::crash_child", "--ignored", "--test-threads=1", "--nocapture"])
        .env(CHILD_FAILPOINT, "panic:written")
        .env("CHENG_TEST_CRASH_TOOL", "write_file")
        .env("CHENG_TEST_CRASH_INPUT", input_file(ws.path(), &input))
        .env("CHENG_TEST_CRASH_WORKSPACE", ws.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The hook did fire (the panic's message is on the child's stderr).
    assert!(stderr.contains("the write path's test hook panicked at written"), "{stderr}");
    assert_eq!(std::fs::read_to_string(ws.path().join("data.txt")).unwrap(), "new");
}

#[test]
fn killed_writes_leave_old_or_new_never_a_mix() {
    let ws = util::workspace();
    let path = ws.path().join("data.txt");
    let old = "a".repeat(200_000);
    let new = "b".repeat(200_000);
    let mut kills = 0;
    for round in 0..30 {
        for point in POINTS {
            std::fs::write(&path, &old).unwrap();
            let input = serde_json::json!({"path": "data.txt", "content": new});
            assert!(killed_call(ws.path(), "write_file", &input, point), "{point}: the failpoint fired");
            kills += 1;
            let now = std::fs::read_to_string(&path).unwrap();
            assert!(now == old || now == new, "round {round}, {point}: a mixed file of {} bytes", now.len());
            // Before the rename the old file stands; after it, the new one.
            assert_eq!(now == new, point == "renamed", "{point}");
            // Only a kill between staging and renaming can leave the staged name...
            let left = temps(ws.path());
            assert!(left.is_empty() || point == "linked", "{point}: {left:?}");
            // ...and the next write of the same file clears it.
            let input = serde_json::json!({"path": "data.txt", "content": "done"});
            assert!(
                util::cheng(ws.path())
                    .args(["call", "write_file", &input.to_string()])
                    .output()
                    .unwrap()
                    .status
                    .success()
            );
            assert!(temps(ws.path()).is_empty());
        }
    }
    assert!(kills >= 150);
}

#[test]
fn killed_patches_leave_each_file_old_or_new() {
    let ws = util::workspace();
    let names = ["p1.txt", "p2.txt", "p3.txt"];
    let old: Vec<String> = (0..3).map(|i| format!("line {i}\n").repeat(5000)).collect();
    let mut patch = String::new();
    for (i, n) in names.iter().enumerate() {
        patch.push_str(&format!("--- a/{n}\n+++ b/{n}\n@@ -1,2 +1,2 @@\n-line {i}\n+LINE {i}\n line {i}\n"));
    }
    let input = serde_json::json!({"patch": patch});
    let mut kills = 0;
    for round in 0..5 {
        for point in POINTS {
            for nth in 1..=3 {
                for (n, content) in names.iter().zip(&old) {
                    std::fs::write(ws.path().join(n), content).unwrap();
                }
                assert!(killed_call(ws.path(), "apply_patch", &input, &format!("{point}:{nth}")), "{point}:{nth}");
                kills += 1;
                let mut new_files = 0;
                for (i, n) in names.iter().enumerate() {
                    let now = std::fs::read_to_string(ws.path().join(n)).unwrap();
                    let new = old[i].replacen(&format!("line {i}\n"), &format!("LINE {i}\n"), 1);
                    assert!(now == old[i] || now == new, "round {round}, {point}:{nth}: {n} is mixed");
                    new_files += usize::from(now == new);
                }
                // Files are written in order: those before the killed one are new.
                let expect = if point == "renamed" { nth } else { nth - 1 };
                assert_eq!(new_files, expect, "{point}:{nth}");
            }
        }
    }
    assert!(kills >= 75);
}

/// The write path's test seam is not an environment switch: `CHENG_FAILPOINT`, which
/// once aborted any program embedding the host, does nothing to the `cheng` binary.
#[test]
fn the_cli_has_no_fault_injection() {
    let ws = util::workspace();
    for point in POINTS {
        let input = serde_json::json!({"path": "f.txt", "content": point});
        let out = util::cheng(ws.path())
            .args(["call", "write_file", &input.to_string()])
            .env("CHENG_FAILPOINT", point)
            .output()
            .unwrap();
        assert!(out.status.success(), "{point}: {:?}", out.status);
        assert_eq!(std::fs::read_to_string(ws.path().join("f.txt")).unwrap(), point);
    }
}
