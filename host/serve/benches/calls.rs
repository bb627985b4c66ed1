//! Call-path benchmarks for the foundation: per-call overhead, whole-process `cheng
//! call` against `cat`, a 1 MiB read against `std::fs::read`, first-compile time, and
//! throughput and memory with many calls in flight. Each ratio is measured against its
//! baseline in the same run.
//!
//! Run: `cargo bench --bench all -- calls` (add `--quick` for fewer iterations).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cheng_host::grant::{FsGrant, Grant};
use cheng_host::policy::Config;
use cheng_host::{Context, Host, HostBuilder, PluginSpec, Status};
use serde_json::json;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summarize(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (pct(&v, 0.5), pct(&v, 0.99))
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn status_kb(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

async fn host(state: &Path, noop: &[u8], records: bool) -> Host {
    let mut b = HostBuilder::new();
    if !records {
        b.without_audit_log();
    }
    b.config(
        Config::from_toml_str(
            "[roles.bench]\ntools = [\"noop__noop\", \"noop__noop_read\", \"noop__noop_wait\", \"read_file\"]\n",
            "bench.toml",
        )
        .unwrap(),
    );
    b.state_dir(state);
    b.plugin(PluginSpec {
        id: "noop".into(),
        wasm: noop.to_vec(),
        origin: "noop".into(),
        grant: Grant { fs: FsGrant::Read, spawn: false, memory_mb: None, cpu_ms: None, net: vec![] },
    });
    b.build().await.unwrap()
}

/// The benchmark (`cargo bench --bench all -- calls`).
pub async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let iters = if quick { 2_000 } else { 20_000 };
    let target = repo().join("target");
    let guests = cheng_guest_build::GuestBuild::at(repo().join("tests/programs"))
        .compile(&target.join("guests"))
        .expect("test programs build");
    let noop_wasm = std::fs::read(&guests.iter().find(|g| g.package == "noop").unwrap().wasm).unwrap();
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("small.txt"), "hello\n".repeat(170)).unwrap();
    let big: String = (0..(1 << 20) / 64).map(|i| format!("{i:063}\n")).collect();
    std::fs::write(ws.path().join("big.txt"), &big).unwrap();

    // First call of a never-compiled component: the compile time.
    let t = Instant::now();
    let h = host(state.path(), &noop_wasm, true).await;
    let cold_build = t.elapsed();
    let cx = Context::new(ws.path()).role("bench").run("bench");
    let t = Instant::now();
    let r = h.call(&cx, "read_file", json!({"path": "small.txt"})).await;
    assert_eq!(r.status, Status::Ok);
    let first_fs_call = t.elapsed();
    println!("## first use (empty cache)");
    println!("host build incl. compiling noop + fs describe: {:.1} ms", cold_build.as_secs_f64() * 1e3);
    println!("first read_file call incl. loading fs: {:.1} ms", first_fs_call.as_secs_f64() * 1e3);

    // In-process trivial calls, with call records (the audit log) on, then off.
    let h_off = host(state.path(), &noop_wasm, false).await;
    for (label, h) in [("records on", &h), ("records off", &h_off)] {
        for tool in ["noop__noop", "noop__noop_read", "read_file"] {
            let input = if tool == "read_file" { json!({"path": "small.txt"}) } else { json!({}) };
            for _ in 0..200 {
                h.call(&cx, tool, input.clone()).await;
            }
            let mut v = Vec::with_capacity(iters);
            for _ in 0..iters {
                let t = Instant::now();
                let r = h.call(&cx, tool, input.clone()).await;
                v.push(t.elapsed());
                debug_assert_eq!(r.status, Status::Ok);
            }
            let (p50, p99) = summarize(v);
            println!("in-process {tool} ({label}): p50 {:.1} us, p99 {:.1} us ({iters} calls)", us(p50), us(p99));
        }
    }

    // read_file at its maximum (1 MiB) vs std::fs::read of the same file.
    let n = if quick { 50 } else { 300 };
    let mut native = Vec::new();
    let mut guest = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        let b = std::fs::read(ws.path().join("big.txt")).unwrap();
        std::hint::black_box(String::from_utf8_lossy(&b).len());
        native.push(t.elapsed());
        let t = Instant::now();
        let r = h.call(&cx, "read_file", json!({"path": "big.txt", "max_bytes": 1_048_576})).await;
        guest.push(t.elapsed());
        assert_eq!(r.output["truncated"], false);
    }
    let (np, _) = summarize(native);
    let (gp, _) = summarize(guest);
    println!("## read_file 1 MiB");
    println!(
        "std::fs::read p50 {:.0} us; read_file p50 {:.0} us; ratio {:.2}x",
        us(np),
        us(gp),
        gp.as_secs_f64() / np.as_secs_f64()
    );
    // Where the time goes beyond the read: the same call without the call record, and
    // the host's parse of the guest's JSON answer (timed natively on the same text).
    let mut off = Vec::new();
    let mut parse = Vec::new();
    let mut text = String::new();
    for _ in 0..n {
        let t = Instant::now();
        let r = h_off.call(&cx, "read_file", json!({"path": "big.txt", "max_bytes": 1_048_576})).await;
        off.push(t.elapsed());
        text = r.output.to_string();
        let t = Instant::now();
        std::hint::black_box(serde_json::from_str::<serde_json::Value>(&text).unwrap());
        parse.push(t.elapsed());
    }
    let (op, _) = summarize(off);
    let (pp, _) = summarize(parse);
    println!(
        "read_file 1 MiB with records off p50 {:.0} us (records cost {:.0} us); host parse of the {} KB answer p50 {:.0} us",
        us(op),
        us(gp) - us(op),
        text.len() / 1024,
        us(pp)
    );

    // Concurrency: trivial calls per second with 64 in flight.
    let total = if quick { 5_000 } else { 50_000 };
    let sem = Arc::new(tokio::sync::Semaphore::new(64));
    let t = Instant::now();
    let mut tasks = Vec::with_capacity(total);
    for _ in 0..total {
        let permit = sem.clone().acquire_owned().await.unwrap();
        let h = h.clone();
        let cx = cx.clone();
        tasks.push(tokio::spawn(async move {
            let r = h.call(&cx, "noop__noop", json!({})).await;
            drop(permit);
            r.status
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), Status::Ok);
    }
    let el = t.elapsed();
    println!("## concurrency");
    println!(
        "noop calls with 64 in flight: {:.0} calls/s ({total} calls in {:.2} s)",
        total as f64 / el.as_secs_f64(),
        el.as_secs_f64()
    );

    // Memory with 100 calls in flight (each guest sleeping 300 ms in the host).
    let rss_before = status_kb("VmRSS:");
    let vm_before = status_kb("VmSize:");
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let h = h.clone();
        let cx = cx.clone();
        tasks.push(tokio::spawn(async move { h.call(&cx, "noop__noop_wait", json!({"ms": 300})).await }));
    }
    let mut peak_rss = 0;
    let mut peak_vm = 0;
    while !tasks.iter().all(|t| t.is_finished()) {
        peak_rss = peak_rss.max(status_kb("VmRSS:"));
        peak_vm = peak_vm.max(status_kb("VmSize:"));
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().status, Status::Ok);
    }
    println!("100 calls of 300 ms each finished in {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    println!(
        "RSS before {} MB, peak during 100 in flight {} MB; virtual size before {} MB, peak {} MB",
        rss_before / 1024,
        peak_rss / 1024,
        vm_before / 1024,
        peak_vm / 1024
    );
    println!("process peak RSS (VmHWM) {} MB", status_kb("VmHWM:") / 1024);

    // Whole process: `cheng call read_file` (warm cache) vs `cat`.
    let cheng = target.join("release/cheng");
    if cheng.exists() {
        let n = if quick { 20 } else { 100 };
        let cfg = state.path().join("empty.toml");
        std::fs::write(&cfg, "").unwrap();
        let run = |cmd: &mut Command| {
            let t = Instant::now();
            let out = cmd.output().unwrap();
            assert!(out.status.success());
            t.elapsed()
        };
        let mut cat = Vec::new();
        let mut ch = Vec::new();
        for _ in 0..n {
            cat.push(run(Command::new("cat").arg(ws.path().join("small.txt"))));
            ch.push(run(Command::new(&cheng)
                .arg("--config")
                .arg(&cfg)
                .arg("--state-dir")
                .arg(state.path())
                .arg("--workspace")
                .arg(ws.path())
                .args(["--role", "developer", "call", "read_file", r#"{"path":"small.txt"}"#])));
        }
        let (cp, _) = summarize(cat);
        let (chp, _) = summarize(ch);
        println!("## whole process");
        println!(
            "cat p50 {:.2} ms; cheng call read_file p50 {:.2} ms; ratio {:.1}x",
            cp.as_secs_f64() * 1e3,
            chp.as_secs_f64() * 1e3,
            chp.as_secs_f64() / cp.as_secs_f64()
        );
    } else {
        println!("(skipping the whole-process comparison: build target/release/cheng first)");
    }
}
