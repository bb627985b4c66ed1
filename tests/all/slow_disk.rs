//! A slow disk holds up no other call: the `fs` imports' long blocking work (a write's
//! syncs) runs on the runtime's blocking threads, not on the async worker that runs the
//! call. On a runtime with one worker, a write whose sync takes two seconds (the write
//! path's test hook sleeps there) must not keep a concurrent `think` from finishing; the
//! control, with the old way switched back on (`blocking_fs_on_workers`), shows the
//! same `think` waiting for the write.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::util;

/// Names the child's mode (`off-workers`, `on-workers`); without it
/// [`slow_write_child`] is not a child and returns.
const CHILD_MODE: &str = "CHENG_TEST_SLOW_WRITE";

/// How long the one slowed sync takes.
const SLOW: Duration = Duration::from_secs(2);

static ARMED: AtomicBool = AtomicBool::new(false);
static ENTERED: AtomicBool = AtomicBool::new(false);

/// The write path's hook: once armed, the next write's sync (its `synced` step) takes
/// [`SLOW`], as on a slow disk, blocking the thread it runs on.
fn slow_sync(step: &str) {
    if step == "synced" && ARMED.swap(false, Ordering::SeqCst) {
        ENTERED.store(true, Ordering::SeqCst);
        std::thread::sleep(SLOW);
    }
}

/// The child half of the tests below, on a current-thread runtime (one worker for
/// everything): a slowed `write_file` and a `think` started while the write is in its
/// sync; prints when each finished. Run by [`child`] only (with `--ignored`); as a test
/// of its own it has nothing to do, so it is not one.
#[tokio::test]
#[ignore = "run as a child process by the two tests below"]
async fn slow_write_child() {
    let Ok(mode) = std::env::var(CHILD_MODE) else {
        return;
    };
    cheng_host::testing::on_write_step(slow_sync);
    let ws = util::workspace();
    let mut b = cheng_host::HostBuilder::new();
    b.state_dir(util::shared_state()).blocking_fs_on_workers(mode == "on-workers");
    let host = b.build().await.unwrap();
    let cx = cheng_host::Context::new(ws.path());
    // Both components instantiated once (and compiled, if they were not cached).
    let warm = host.call(&cx, "think", json!({"thought": "warm"})).await;
    assert_eq!(warm.status, cheng_host::Status::Ok, "{}", warm.output);
    let warm = host.call(&cx, "write_file", json!({"path": "warm.txt", "content": "warm"})).await;
    assert_eq!(warm.status, cheng_host::Status::Ok, "{}", warm.output);
    ARMED.store(true, Ordering::SeqCst);
    let t0 = Instant::now();
    let write = async {
        let r = host.call(&cx, "write_file", json!({"path": "slow.txt", "content": "slow"})).await;
        (r, t0.elapsed())
    };
    let think = async {
        // Started once the write is in its slow sync (at once, if the sync holds no worker).
        while !ENTERED.load(Ordering::SeqCst) {
            assert!(t0.elapsed() < Duration::from_secs(60), "the write never reached its sync");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let r = host.call(&cx, "think", json!({"thought": "while the disk is slow"})).await;
        (r, t0.elapsed())
    };
    let ((w, write_done), (t, think_done)) = tokio::join!(write, think);
    let line = json!({
        "write_ok": w.status == cheng_host::Status::Ok,
        "think_ok": t.status == cheng_host::Status::Ok,
        "written": std::fs::read_to_string(ws.path().join("slow.txt")).unwrap_or_default(),
        "write_done_ms": write_done.as_millis() as u64,
        "think_done_ms": think_done.as_millis() as u64,
    });
    println!("SLOW-WRITE {line}");
}

/// Run [`slow_write_child`] in `mode` in a child process (its hook stays out of this
/// process's other tests); what it printed.
fn child(mode: &str) -> serde_json::Value {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "slow_disk::slow_write_child", "--ignored", "--test-threads=1", "--nocapture"])
        .env(CHILD_MODE, mode)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let line = stdout.lines().find_map(|l| l.split_once("SLOW-WRITE ")).unwrap_or_else(|| panic!("{stdout}")).1;
    println!("{mode}: {line}");
    serde_json::from_str(line).unwrap()
}

/// The write's sync blocks its thread for two seconds; the `think` started meanwhile on
/// the same one-worker runtime finishes long before the write does.
#[test]
fn a_slow_sync_holds_up_no_other_call() {
    let r = child("off-workers");
    assert_eq!((r["write_ok"].as_bool(), r["think_ok"].as_bool()), (Some(true), Some(true)), "{r}");
    assert_eq!(r["written"], "slow", "{r}");
    let (write, think) = (r["write_done_ms"].as_u64().unwrap(), r["think_done_ms"].as_u64().unwrap());
    assert!(write >= SLOW.as_millis() as u64, "the sync was not slowed: {r}");
    assert!(think < SLOW.as_millis() as u64 / 2, "think waited for the slow sync: {r}");
}

/// Control: with the sync on the worker, as before, the same `think` waits for it —
/// so the test above can tell the two apart.
#[test]
fn control_a_slow_sync_on_the_worker_holds_up_the_other_call() {
    let r = child("on-workers");
    assert_eq!((r["write_ok"].as_bool(), r["think_ok"].as_bool()), (Some(true), Some(true)), "{r}");
    let (write, think) = (r["write_done_ms"].as_u64().unwrap(), r["think_done_ms"].as_u64().unwrap());
    assert!(write >= SLOW.as_millis() as u64, "the sync was not slowed: {r}");
    // Held up by the blocked worker: it ends with the slow sync (the two stamps may differ
    // by a millisecond either way), never in the time it takes on its own.
    assert!(think >= SLOW.as_millis() as u64 / 2, "think did not wait although the worker was blocked: {r}");
}
