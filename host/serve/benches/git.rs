//! workspace_git against the git CLI on a repository of 2,000 files and 1,000 commits:
//! `status` (nothing staged, then one file staged) and `log` (100 commits), whole call
//! (in-process `Host::call`, gix inside the guest) against the whole `git` process,
//! interleaved in the same run; then workspace_git_write's `add` + `commit` of 10
//! changed files (allowed by a rule, so no approval) against `git add` + `git commit`
//! on a copy of the same repository.
//!
//! Run: `cargo bench --bench all -- git` (add `--quick` for fewer iterations, `--large`
//! for 20,000 files).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use cheng_host::policy::Config;
use cheng_host::{Context, HostBuilder, Status};
use serde_json::json;

use super::common;
use common::{ms, p50};

fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir).env("GIT_CONFIG_NOSYSTEM", "1").env("HOME", dir);
    c
}

/// `files` files over `files / 50` directories in the first commit, then 999 commits
/// each changing one file, written with `git fast-import`; then a checkout and a few
/// edits.
fn make_repo(dir: &Path, files: usize) {
    let dirs = files / 50;
    assert!(git(dir).args(["init", "-q", "-b", "main"]).status().unwrap().success());
    let mut fi = git(dir).args(["fast-import", "--quiet"]).stdin(Stdio::piped()).spawn().unwrap();
    let mut s = String::new();
    let mut mark = 1;
    for c in 0..1000 {
        s.push_str(&format!(
            "commit refs/heads/main\nmark :{}\ncommitter Ada <ada@example.com> {} +0000\ndata <<EOT\ncommit {c}\nEOT\n",
            100_000 + c,
            1_700_000_000 + c * 60
        ));
        if c > 0 {
            s.push_str(&format!("from :{}\n", 100_000 + c - 1));
        }
        let changed: Vec<usize> = if c == 0 { (0..files).collect() } else { vec![c % files] };
        for f in changed {
            let body = format!("file {f} version {c}\n{}\n", "x".repeat(200));
            s.push_str(&format!("M 100644 inline d{}/f{}.txt\ndata {}\n{}\n", f % dirs, f, body.len(), body));
            mark += 1;
        }
    }
    let _ = mark;
    fi.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
    assert!(fi.wait().unwrap().success());
    assert!(git(dir).args(["checkout", "-q", "-f", "main"]).status().unwrap().success());
    for f in [3, 700, files - 1] {
        std::fs::write(dir.join(format!("d{}/f{f}.txt", f % dirs)), "edited\n").unwrap();
    }
    std::fs::write(dir.join("untracked.txt"), "new\n").unwrap();
}

/// The benchmark (`cargo bench --bench all -- git`).
pub async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // `--large`: 20,000 files in 400 directories instead of 2,000 in 40.
    let files = if std::env::args().any(|a| a == "--large") { 20_000 } else { 2_000 };
    let n = if quick { 5 } else { 20 };
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let t = Instant::now();
    make_repo(ws.path(), files);
    println!("repository: {files} files, 1,000 commits (made in {:.1} s)", t.elapsed().as_secs_f64());
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str("", "bench.toml").unwrap()).state_dir(state.path());
    let host = b.build().await.unwrap();
    let cx = Context::new(ws.path()).role("recon");
    let cases: [(&str, serde_json::Value, Vec<&str>); 3] = [
        ("status", json!({"operation": "status"}), vec!["status", "--porcelain=v1", "-uall"]),
        ("log (100 commits)", json!({"operation": "log", "max_count": 100}), vec!["log", "-n", "100"]),
        // With a change staged, the index's cached tree no longer matches HEAD: the two
        // are compared tree against index.
        ("status, one file staged", json!({"operation": "status"}), vec!["status", "--porcelain=v1", "-uall"]),
    ];
    for (name, input, args) in cases {
        if name.contains("staged") {
            assert!(git(ws.path()).args(["add", "d3/f3.txt"]).status().unwrap().success());
        }
        // Warm both (the component compile, git's and the OS's caches).
        let r = host.call(&cx, "workspace_git", input.clone()).await;
        assert_eq!(r.status, Status::Ok, "{}", r.output);
        let theirs = git(ws.path()).args(&args).output().unwrap().stdout;
        assert_eq!(r.output["stdout"].as_str().unwrap().as_bytes(), &theirs[..], "{name}: same output as git");
        let (mut a, mut g) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let t = Instant::now();
            let r = host.call(&cx, "workspace_git", input.clone()).await;
            a.push(t.elapsed());
            assert_eq!(r.status, Status::Ok);
            let t = Instant::now();
            let o = git(ws.path()).args(&args).output().unwrap();
            g.push(t.elapsed());
            assert!(o.status.success());
        }
        let (a, g) = (p50(a), p50(g));
        println!("{name}: workspace_git p50 {:.2} ms; git p50 {:.2} ms; ratio {:.2}x", ms(a), ms(g), ms(a) / ms(g));
    }
    write_bench(&ws, files, n).await;
}

/// `add` + `commit` of 10 changed files: workspace_git_write through `Host::call`
/// against the git CLI on a copy, interleaved.
async fn write_bench(ws: &tempfile::TempDir, files: usize, n: usize) {
    let theirs = tempfile::tempdir().unwrap();
    let ok = Command::new("cp").arg("-a").arg(format!("{}/.", ws.path().display())).arg(theirs.path()).status();
    assert!(ok.unwrap().success());
    let state = tempfile::tempdir().unwrap();
    let config = "[git]\nuser_name = \"Ada\"\nuser_email = \"ada@example.com\"\n\
                  [[git.rules]]\noperations = [\"add\", \"commit\"]\ndecision = \"allow\"\n";
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(config, "bench.toml").unwrap()).state_dir(state.path());
    let host = b.build().await.unwrap();
    let cx = Context::new(ws.path()).role("developer");
    let dirs = files / 50;
    let paths: Vec<String> = (0..10).map(|i| format!("d{}/f{}.txt", (i * 37) % dirs, i * 37)).collect();
    let (mut a, mut g) = (Vec::new(), Vec::new());
    for round in 0..=n {
        for dir in [ws.path(), theirs.path()] {
            for p in &paths {
                std::fs::write(dir.join(p), format!("round {round}\n")).unwrap();
            }
        }
        let t = Instant::now();
        let r = host.call(&cx, "workspace_git_write", json!({"operation": "add", "pathspecs": paths})).await;
        assert_eq!(r.output["success"], true, "{}", r.output);
        let msg = format!("round {round}");
        let r = host.call(&cx, "workspace_git_write", json!({"operation": "commit", "message": msg})).await;
        assert_eq!(r.output["success"], true, "{}", r.output);
        let ours = t.elapsed();
        let t = Instant::now();
        let o = git(theirs.path()).arg("add").arg("--").args(&paths).output().unwrap();
        assert!(o.status.success());
        let o = git(theirs.path())
            .args(["-c", "user.name=Ada", "-c", "user.email=ada@example.com", "commit", "-q", "-m", &msg])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let cli = t.elapsed();
        // The first round warms the component, git and the caches.
        if round > 0 {
            a.push(ours);
            g.push(cli);
        }
    }
    let (a, g) = (p50(a), p50(g));
    println!(
        "add + commit of 10 files: workspace_git_write p50 {:.2} ms; git add + git commit p50 {:.2} ms; ratio {:.2}x",
        ms(a),
        ms(g),
        ms(a) / ms(g)
    );
}
