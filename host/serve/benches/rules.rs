//! Remembered answers and named hosts:
//! - matching a command against 1,000 learned rules (the matcher on its own, as every
//!   command that would ask runs it): a command one of them admits, and one none does;
//! - a 1 MiB download from a loopback HTTP server by real `curl` through the proxy of a
//!   command granted a named host, against the same `curl` with `network = true`
//!   (a direct connection), measured interleaved in the same run; and the two tiers
//!   running `curl --version` (no download), which splits the overhead into the
//!   tier's fixed cost per command (its network namespace, the proxy's start) and the
//!   proxy's own cost on the transfer.
//!
//! Run: `cargo bench --bench all -- rules` (add `--quick` for fewer iterations).

use std::future::Future;
use std::io::{Read, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cheng_host::egress::Resolve;
use cheng_host::learned::{Index, LearnedRule, Probe};
use cheng_host::policy::Config;
use cheng_host::{Context, Host, HostBuilder};
use serde_json::json;

use super::common;

fn rule(i: usize) -> LearnedRule {
    // 1,000 rules over 100 programs, 10 prefixes each, in 20 workspaces.
    LearnedRule {
        id: format!("rule-{i}"),
        program: PathBuf::from(format!("/usr/bin/prog{}", i % 100)),
        words: vec![format!("prog{}", i % 100), format!("sub{}", i / 100), "--flag".into()],
        cwd: ".".into(),
        workspace: Some(PathBuf::from(format!("/work/ws{}", i % 20))),
        env: Vec::new(),
        hosts: Vec::new(),
        text: String::new(),
        command: String::new(),
        saved_by: "operator:bench".into(),
        card: "card".into(),
        run: "run".into(),
        saved_at_ms: 0,
        expires_at_ms: None,
        matches: 0,
        last_match_ms: None,
    }
}

fn matcher(n: usize) {
    let index = Index::new((0..1000).map(rule).collect());
    let hit: Vec<String> = ["prog7", "sub0", "--flag", "more", "args"].iter().map(|s| s.to_string()).collect();
    let miss: Vec<String> = ["prog7", "sub3", "--other"].iter().map(|s| s.to_string()).collect();
    let program = PathBuf::from("/usr/bin/prog7");
    for (what, words, ws) in [("admitted", &hit, "/work/ws7"), ("not admitted", &miss, "/work/ws7")] {
        let probe = Probe { program: &program, words, cwd: ".", workspace: Path::new(ws), env: &[], now_ms: 1 };
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let mut found = false;
            for _ in 0..100 {
                found = std::hint::black_box(index.find(std::hint::black_box(&probe))).is_some();
            }
            times.push(t.elapsed() / 100);
            assert_eq!(found, what == "admitted");
        }
        let p50 = common::p50(times);
        println!(
            "learned rules: a command {what} among 1,000 rules: p50 {:.3} µs (goal ≤ 5 µs)",
            p50.as_secs_f64() * 1e6
        );
    }
}

/// Every name is 127.0.0.1.
struct Loopback;
impl Resolve for Loopback {
    fn resolve<'a>(
        &'a self,
        _name: &'a str,
        _port: u16,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'a>> {
        Box::pin(async { Ok(vec!["127.0.0.1".parse().unwrap()]) })
    }
}

/// A loopback server answering every request with `body`.
fn server(body: Arc<Vec<u8>>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            let body = body.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).unwrap_or(0) == 1 {
                    head.push(b[0]);
                }
                let _ = s.write_all(
                    format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len())
                        .as_bytes(),
                );
                let _ = s.write_all(&body);
            });
        }
    });
    port
}

async fn host(state: &Path, network: &str) -> Host {
    let config = format!(
        "[web]\nallow_private = [\"127.0.0.1\"]\n[[process.rules]]\nprogram = \"curl\"\ndecision = \"allow\"\nnetwork = {network}\n"
    );
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(&config, "bench.toml").unwrap());
    b.state_dir(state);
    b.resolver(Arc::new(Loopback));
    b.build().await.unwrap()
}

async fn download(h: &Host, ws: &Path, url: &str) -> Duration {
    let t = Instant::now();
    let r = h
        .call(&Context::new(ws), "workspace_shell", json!({"command": "curl", "args": ["-sS", "-o", "got", url]}))
        .await;
    let d = t.elapsed();
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    assert_eq!(std::fs::metadata(ws.join("got")).unwrap().len(), 1 << 20);
    d
}

/// The same tiers running `curl --version`: no network used, so what is left is each
/// tier's fixed cost per command (for the named host: its own network namespace and
/// the proxy's start).
async fn no_download(h: &Host, ws: &Path) -> Duration {
    let t = Instant::now();
    let r = h.call(&Context::new(ws), "workspace_shell", json!({"command": "curl", "args": ["--version"]})).await;
    let d = t.elapsed();
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    d
}

async fn proxy(n: usize) {
    if !cheng_host::confinement().isolated || std::process::Command::new("curl").arg("--version").output().is_err() {
        println!("proxy: skipped (needs user namespaces and curl)");
        return;
    }
    let port = server(Arc::new(vec![b'x'; 1 << 20]));
    let (s1, s2, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let named = host(s1.path(), "[\"files.bench\"]").await;
    let direct = host(s2.path(), "true").await;
    let (via, plain) = (format!("http://files.bench:{port}/f"), format!("http://127.0.0.1:{port}/f"));
    let _ = download(&named, ws.path(), &via).await;
    let _ = download(&direct, ws.path(), &plain).await;
    let (mut a, mut b, mut c, mut d) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        a.push(download(&named, ws.path(), &via).await);
        b.push(download(&direct, ws.path(), &plain).await);
        c.push(no_download(&named, ws.path()).await);
        d.push(no_download(&direct, ws.path()).await);
    }
    let (a50, b50, c50, d50) =
        (common::p50(a.clone()), common::p50(b.clone()), common::p50(c.clone()), common::p50(d.clone()));
    common::report("curl, 1 MiB through the proxy (named host)", "direct (network = true)", a, b);
    common::report("curl --version, named-host tier (no download)", "network = true", c, d);
    let ms = |x: Duration| x.as_secs_f64() * 1e3;
    println!(
        "the proxy's own cost on the 1 MiB download (whole overhead less the tier's fixed cost): {:.3} ms",
        (ms(a50) - ms(b50)) - (ms(c50) - ms(d50))
    );
}

/// The benchmark (`cargo bench --bench all -- rules`).
pub async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    matcher(if quick { 200 } else { 2000 });
    proxy(if quick { 10 } else { 40 }).await;
}
