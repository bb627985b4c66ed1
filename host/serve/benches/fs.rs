//! Guest filesystem speed: the file tools against ripgrep and native reads on one
//! generated tree, each ratio measured in the same run.
//!
//! Run: `cargo bench --bench all -- fs` (needs `rg` on PATH; add `-- --quick` for fewer rounds).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cheng_host::{Context, HostBuilder, Status};
use serde_json::json;

use super::common;
use common::{ms, p50};

/// `dirs` directories of `per_dir` ~2 KB files, with ignore files at several levels.
fn tree(root: &Path, dirs: usize, per_dir: usize) {
    std::fs::create_dir_all(root.join(".git/info")).unwrap();
    std::fs::write(root.join(".gitignore"), "*.tmp\nbuild/\n").unwrap();
    std::fs::write(root.join(".git/info/exclude"), "secret*\n").unwrap();
    let line = "the quick brown fox jumps over the lazy dog 0123456789 abcdefghij\n";
    for d in 0..dirs {
        let dir = root.join(format!("d{:02}/s{:03}", d % 40, d));
        std::fs::create_dir_all(&dir).unwrap();
        if d % 100 == 0 {
            std::fs::write(dir.join(".gitignore"), "*.gen\n").unwrap();
        }
        for f in 0..per_dir {
            let mut body = line.repeat(30);
            if (d * per_dir + f).is_multiple_of(97) {
                body.push_str("needle_literal here\n");
            }
            let ext = match f % 10 {
                0 => "tmp",
                1 => "gen",
                _ => "txt",
            };
            std::fs::write(dir.join(format!("f{f:03}.{ext}")), body).unwrap();
        }
    }
}

fn timed(mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// The benchmark (`cargo bench --bench all -- fs`).
pub async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 3 } else { 9 };
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    // 1,500 directories x 6 files = 9,000 files (find_files returns at most 10,000).
    tree(ws.path(), 1500, 6);
    let big: String = (0..(1 << 20) / 64).map(|i| format!("{i:063}\n")).collect();
    std::fs::write(ws.path().join("big.txt"), &big).unwrap();
    let medium: Vec<String> = (0..50).map(|i| format!("m{i:02}.txt")).collect();
    for m in &medium {
        std::fs::write(ws.path().join(m), "x".repeat(20 * 1024 - 1) + "\n").unwrap();
    }
    std::fs::write(ws.path().join("small.txt"), "y".repeat(1023) + "\n").unwrap();

    let mut b = HostBuilder::new();
    b.state_dir(state.path());
    let host = b.build().await.unwrap();
    let cx = Context::new(ws.path()).run("bench");
    let call = |tool: &'static str, input: serde_json::Value| {
        let host = host.clone();
        let cx = cx.clone();
        async move {
            let r = host.call(&cx, tool, input).await;
            assert_eq!(r.status, Status::Ok, "{}", r.output);
            r
        }
    };
    // Warm up (compile, caches).
    let r = call("find_files", json!({"pattern": "**/*", "max_results": 10000})).await;
    let found = r.output["paths"].as_array().unwrap().len();

    let rg = |args: &[&str]| {
        let out = Command::new("rg").args(args).current_dir(ws.path()).output().expect("rg on PATH");
        assert!(out.status.success() || out.status.code() == Some(1));
        out.stdout.len()
    };
    println!("## tree: {found} files listed by find_files (ignore rules applied)");

    let mut rows = Vec::new();
    // find_files vs rg --files -j1.
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        call("find_files", json!({"pattern": "**/*", "max_results": 10000})).await;
        ours.push(t.elapsed());
        theirs.push(timed(|| {
            rg(&["--files", "-j1", "--no-ignore-global"]);
        }));
    }
    rows.push(("find_files **/* vs rg --files -j1", p50(ours), p50(theirs)));
    // search_files literal and regex vs rg -j1.
    for (label, input, args) in [
        (
            "search_files literal vs rg -j1 -F",
            json!({"pattern": "needle_literal", "literal": true, "max_matches": 2000}),
            vec!["-j1", "--no-ignore-global", "-n", "-F", "needle_literal"],
        ),
        (
            "search_files regex vs rg -j1",
            json!({"pattern": r"needle_\w+ here", "max_matches": 2000}),
            vec!["-j1", "--no-ignore-global", "-n", r"needle_\w+ here"],
        ),
        // Where search's time goes: the walk alone (a glob no file matches, so nothing
        // is read), then the walk, the reads and a scan that finds nothing.
        (
            "search_files, walk only (no file matches the glob) vs rg --files -j1",
            json!({"pattern": "needle_literal", "literal": true, "glob": "*.none"}),
            vec!["--files", "-j1", "--no-ignore-global"],
        ),
        (
            "search_files literal, no match vs rg -j1 -F",
            json!({"pattern": "no_such_text_anywhere", "literal": true}),
            vec!["-j1", "--no-ignore-global", "-n", "-F", "no_such_text_anywhere"],
        ),
    ] {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let t = Instant::now();
            call("search_files", input.clone()).await;
            ours.push(t.elapsed());
            theirs.push(timed(|| {
                rg(&args);
            }));
        }
        rows.push((label, p50(ours), p50(theirs)));
    }
    // read_file 1 MiB vs std::fs::read (+ UTF-8 check).
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..rounds * 5 {
        let t = Instant::now();
        call("read_file", json!({"path": "big.txt", "max_bytes": 1_048_576})).await;
        ours.push(t.elapsed());
        theirs.push(timed(|| {
            let b = std::fs::read(ws.path().join("big.txt")).unwrap();
            std::hint::black_box(std::str::from_utf8(&b).is_ok());
        }));
    }
    rows.push(("read_file 1 MiB vs std::fs::read", p50(ours), p50(theirs)));
    // read_files 50 x 20 KB vs native reads.
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..rounds * 5 {
        let t = Instant::now();
        call("read_files", json!({"paths": medium, "max_bytes_per_file": 1_048_576, "max_total_bytes": 1_048_576}))
            .await;
        ours.push(t.elapsed());
        theirs.push(timed(|| {
            for m in &medium {
                let b = std::fs::read(ws.path().join(m)).unwrap();
                std::hint::black_box(std::str::from_utf8(&b).is_ok());
            }
        }));
    }
    rows.push(("read_files 50 x 20 KB vs native reads", p50(ours), p50(theirs)));
    // Files larger than what a search batch reads of each (64 KiB): each is read again on
    // its own. 300 files of 200 KB in another workspace.
    let mid = tempfile::tempdir().unwrap();
    for i in 0..300 {
        let body = format!("{}needle_literal at the end {i}\n", "some text of a larger file\n".repeat(200_000 / 27));
        std::fs::write(mid.path().join(format!("m{i:03}.txt")), body).unwrap();
    }
    let mid_cx = Context::new(mid.path()).run("bench");
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let input = json!({"pattern": "needle_literal", "literal": true, "max_matches": 2000});
        let t = Instant::now();
        let r = host.call(&mid_cx, "search_files", input).await;
        ours.push(t.elapsed());
        assert_eq!(r.output["matches"].as_array().map(Vec::len), Some(300), "{}", r.output);
        theirs.push(timed(|| {
            let out = Command::new("rg")
                .args(["-j1", "--no-ignore-global", "-n", "-F", "needle_literal"])
                .current_dir(mid.path())
                .output()
                .expect("rg on PATH");
            assert!(out.status.success());
        }));
    }
    rows.push(("search_files literal, 300 files of 200 KB, vs rg -j1 -F", p50(ours), p50(theirs)));
    println!("| measure | cheng (in process) | baseline | ratio |");
    println!("|---|---|---|---|");
    for (label, a, b) in rows {
        println!("| {label} | {:.2} ms | {:.2} ms | {:.2}x |", ms(a), ms(b), a.as_secs_f64() / b.as_secs_f64());
    }
    // Whole process: `cheng call` (start, the cached components, the call, its record,
    // exit) against rg's whole process, on the same tree with the same patterns.
    let cfg = state.path().join("empty.toml");
    std::fs::write(&cfg, "").unwrap();
    let whole_state = tempfile::tempdir().unwrap();
    let cheng_call = |tool: &str, input: &serde_json::Value| {
        let out = Command::new(env!("CARGO_BIN_EXE_cheng"))
            .arg("--config")
            .arg(&cfg)
            .arg("--state-dir")
            .arg(whole_state.path())
            .arg("--workspace")
            .arg(ws.path())
            .args(["--role", "developer", "call", tool, &input.to_string()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    let mut rows = Vec::new();
    for (label, tool, input, args) in [
        (
            "find_files **/* vs rg --files -j1",
            "find_files",
            json!({"pattern": "**/*", "max_results": 10000}),
            vec!["--files", "-j1", "--no-ignore-global"],
        ),
        (
            "search_files literal vs rg -j1 -F",
            "search_files",
            json!({"pattern": "needle_literal", "literal": true, "max_matches": 2000}),
            vec!["-j1", "--no-ignore-global", "-n", "-F", "needle_literal"],
        ),
        (
            "search_files regex vs rg -j1",
            "search_files",
            json!({"pattern": r"needle_\w+ here", "max_matches": 2000}),
            vec!["-j1", "--no-ignore-global", "-n", r"needle_\w+ here"],
        ),
    ] {
        // The first run compiles the components into the state directory.
        cheng_call(tool, &input);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..rounds * 2 {
            ours.push(timed(|| cheng_call(tool, &input)));
            theirs.push(timed(|| {
                rg(&args);
            }));
        }
        rows.push((label, p50(ours), p50(theirs)));
    }
    println!("| measure | cheng call (whole process) | rg (whole process) | ratio |");
    println!("|---|---|---|---|");
    for (label, a, b) in rows {
        println!("| {label} | {:.2} ms | {:.2} ms | {:.2}x |", ms(a), ms(b), a.as_secs_f64() / b.as_secs_f64());
    }
    // Whole-call latency of read_file on a 1 KB file, records on.
    let mut v = Vec::new();
    for _ in 0..(if quick { 2000 } else { 20000 }) {
        let t = Instant::now();
        host.call(&cx, "read_file", json!({"path": "small.txt"})).await;
        v.push(t.elapsed());
    }
    println!("read_file 1 KB whole call, records on: p50 {:.1} us", p50(v).as_secs_f64() * 1e6);
}
