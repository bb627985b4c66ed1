//! Start-up: how long `cheng serve` over stdio takes from its start to answering
//! `initialize` and then `tools/list` — with a fresh state directory (nothing compiled,
//! nothing cached: what a new user's first session sees; goal: within 1 s) against a
//! warm one (the same directory's second start, every component cached) as the baseline,
//! in the same run. The release binary is measured as a whole process:
//! `cargo build --release && cargo bench --bench all -- startup`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{ms, p50};

/// `cheng serve` over stdio in `state`, its stdin a pipe.
fn serve(cheng: &std::path::Path, state: &std::path::Path, ws: &std::path::Path, stdout: Stdio) -> std::process::Child {
    Command::new(cheng)
        .arg("--state-dir")
        .arg(state)
        .arg("--workspace")
        .arg(ws)
        .arg("serve")
        .env("CHENG_LOG", "error")
        .env_remove("CHENG_CONFIG")
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .expect("target/release/cheng runs (cargo build --release first)")
}

/// Start the server in `state`, ask `initialize` and `tools/list`, and time the answers
/// (both measured from the process's start). Returns (initialize, tools/list, tools).
fn session(cheng: &std::path::Path, state: &std::path::Path, ws: &std::path::Path) -> (Duration, Duration, usize) {
    let t0 = Instant::now();
    let mut child = serve(cheng, state, ws, Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut answer = |stdin: &mut std::process::ChildStdin, msg: &str, id: u64| -> serde_json::Value {
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
        loop {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "the server ended");
            let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if v["id"] == id {
                return v;
            }
        }
    };
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
    answer(&mut stdin, init, 1);
    let t_init = t0.elapsed();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#).unwrap();
    let list = answer(&mut stdin, r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#, 2);
    let t_list = t0.elapsed();
    let tools = list["result"]["tools"].as_array().map_or(0, Vec::len);
    let _ = child.kill();
    let _ = child.wait();
    (t_init, t_list, tools)
}

/// Keep a server running in `state` until its cache holds every built-in's code.
fn warm(cheng: &std::path::Path, state: &std::path::Path, ws: &std::path::Path) {
    let mut child = serve(cheng, state, ws, Stdio::null());
    let compiled = || {
        std::fs::read_dir(state.join("cache"))
            .map(|d| d.flatten().filter(|e| e.path().extension().is_some_and(|x| x == "cwasm")).count())
            .unwrap_or(0)
    };
    let until = Instant::now() + Duration::from_secs(300);
    while compiled() < cheng_host::builtin::BUILTINS.len() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

pub async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 3 } else { 7 };
    let cheng = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/release/cheng");
    let ws = tempfile::tempdir().unwrap();
    let (mut fresh_init, mut fresh_list, mut warm_list) = (Vec::new(), Vec::new(), Vec::new());
    let mut tools = 0;
    for _ in 0..n {
        // Fresh: a new state directory every time.
        let state = tempfile::tempdir().unwrap();
        let (i, l, t) = session(&cheng, state.path(), ws.path());
        fresh_init.push(i);
        fresh_list.push(l);
        tools = t;
        // Warm: the same directory once a server has compiled every built-in (in the
        // background of its start) into the component cache.
        warm(&cheng, state.path(), ws.path());
        let (_, l, _) = session(&cheng, state.path(), ws.path());
        warm_list.push(l);
    }
    println!(
        "cheng serve, fresh state dir: initialize p50 {:.1} ms, tools/list ({tools} tools) p50 {:.1} ms; \
         warm state dir tools/list p50 {:.1} ms ({:.2}x); goal: fresh tools/list within 1000 ms",
        ms(p50(fresh_init)),
        ms(p50(fresh_list.clone())),
        ms(p50(warm_list.clone())),
        ms(p50(fresh_list)) / ms(p50(warm_list)),
    );
}
