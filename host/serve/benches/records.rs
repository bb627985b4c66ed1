//! The audit chain's cost: appending a call's record to the chained log (`seq`, `prev`,
//! the head file's lock, a rotation check) against what the log did before the chain:
//! the same record serialized and written in one `write` to an `O_APPEND` file. A call
//! writes two lines (its `running` line and its final line), so the added cost per call
//! is twice the difference per line. Both in the same run, batches of 1,000 appends.
//!
//! Run: `cargo bench --bench all -- records` (add `--quick` for fewer batches).

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cheng_host::records::{AuditLog, CallRecord, Status};

fn record(i: usize) -> CallRecord {
    CallRecord {
        id: format!("0d7c6a5e-8f7d-4f3c-9c1b-{i:012}"),
        run: "bench-run".into(),
        role: "developer".into(),
        workspace: "/home/someone/project".into(),
        tool: "think".into(),
        arguments: serde_json::json!({"thought": "the next step is to read the failing test"}),
        status: Status::Ok,
        preview: "Noted.".into(),
        duration_ms: 0.05,
        result: serde_json::json!({"summary": "Noted."}),
        error_kind: None,
        approvals: Vec::new(),
        denials: Vec::new(),
        requests: Vec::new(),
        unasked: Vec::new(),
        started_at_ms: 1_764_000_000_000,
    }
}

const BATCH: usize = 1000;

pub async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let batches = if quick { 10 } else { 40 };
    let dir = tempfile::tempdir().unwrap();
    let chained_path = dir.path().join("chained").join("audit.jsonl");
    // A long commit window: the sync thread's work is not what is measured.
    let log = AuditLog::open_rotating(&chained_path, Duration::from_secs(3600), 0).unwrap();
    let plain = Mutex::new(
        std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(dir.path().join("plain.jsonl")).unwrap(),
    );
    let records: Vec<CallRecord> = (0..BATCH).map(record).collect();
    let (mut chained, mut unchained) = (Vec::new(), Vec::new());
    for _ in 0..batches {
        let t = Instant::now();
        for r in &records {
            log.append(r).unwrap();
        }
        chained.push(t.elapsed() / BATCH as u32);
        let t = Instant::now();
        for r in &records {
            let mut line = Vec::with_capacity(256);
            serde_json::to_writer(&mut line, r).unwrap();
            line.push(b'\n');
            plain.lock().unwrap().write_all(&line).unwrap();
        }
        unchained.push(t.elapsed() / BATCH as u32);
    }
    let spread = |mut v: Vec<Duration>| {
        v.sort();
        (v[0], v[v.len() / 2], v[v.len() - 1])
    };
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let (c0, c50, c1) = spread(chained);
    let (u0, u50, u1) = spread(unchained);
    println!(
        "chained append: p50 {:.2} µs/line (min {:.2}, max {:.2}); unchained write: p50 {:.2} µs/line (min {:.2}, max {:.2})",
        us(c50),
        us(c0),
        us(c1),
        us(u50),
        us(u0),
        us(u1)
    );
    println!(
        "added by the chain: {:.2} µs per line, {:.2} µs per call (two lines); goal ≤ 2 µs per call",
        us(c50) - us(u50),
        2.0 * (us(c50) - us(u50))
    );
    log.flush().unwrap();
    let v = cheng_host::records::verify(&chained_path).unwrap();
    assert!(v.ok, "the benchmark's own log verifies");
}
