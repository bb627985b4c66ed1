//! `web_fetch` of a 100 KB HTML page from a local server, against the baselines, measured
//! interleaved in the same run:
//!
//! - in process: `Host::call("web_fetch")` (the guard, the component, HTML to text, the
//!   record) against a native reqwest GET of the same URL (body read, nothing parsed);
//! - whole process: `cheng call web_fetch` against `curl -s -o /dev/null` of the URL.
//!
//! The server closes every connection after one response, so every request of every
//! contender opens a new connection.
//!
//! Run: `cargo bench --bench all -- web` (add `--quick` for fewer iterations).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Instant;

use cheng_host::policy::Config;
use cheng_host::{Context, HostBuilder, Status};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::common;
use common::{ms, p50, report};

const CONFIG: &str = "[web]\nallow_private = [\"127.0.0.1\"]\n[limits]\ncpu_ms = 60000\n";

/// A page of about 100 KB: headings, paragraphs, links, a script and a style.
fn page() -> String {
    let mut s = String::from(
        "<!doctype html><html><head><title>Bench page</title><style>p { margin: 0 }</style>\
         <script>var x = 1;</script></head><body>",
    );
    let mut i = 0;
    while s.len() < 100_000 {
        s.push_str(&format!(
            "<h2>Section {i}</h2><p>Paragraph {i} with <a href=\"/p/{i}\">a link</a>, <b>bold</b> and \
             <i>italic</i> words, and enough text to look like an article about nothing in particular.</p>"
        ));
        i += 1;
    }
    s.push_str("</body></html>");
    s
}

async fn server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let body = page();
    let reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let reply: &'static [u8] = Box::leak(reply.into_bytes().into_boxed_slice());
    let text = "a line of plain text, the same size as the page\n".repeat(body.len() / 48 + 1);
    let plain = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let plain: &'static [u8] = Box::leak(plain.into_bytes().into_boxed_slice());
    tokio::spawn(async move {
        while let Ok((mut c, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let is_text = head.starts_with(b"GET /page.txt");
                let _ = c.write_all(if is_text { plain } else { reply }).await;
                let _ = c.shutdown().await;
            });
        }
    });
    addr
}

fn cheng(state: &Path, ws: &Path, config: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_cheng"));
    c.arg("--state-dir").arg(state).arg("--workspace").arg(ws).arg("--config").arg(config);
    c.env("CHENG_LOG", "error").env_remove("CHENG_CONFIG");
    c
}

/// The benchmark (`cargo bench --bench all -- web`).
pub async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (n, procs) = if quick { (100, 20) } else { (500, 60) };
    let addr = server().await;
    let url = format!("http://{addr}/page.html");
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(CONFIG, "bench.toml").unwrap());
    b.state_dir(state.path());
    let h = b.build().await.unwrap();
    let cx = Context::new(ws.path());
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();

    let via_tool = || async {
        let t = Instant::now();
        let r = h.call(&cx, "web_fetch", json!({"url": url})).await;
        let d = t.elapsed();
        assert!(r.status == Status::Ok && r.output["status"] == 200, "{}", r.output["summary"]);
        d
    };
    let native = || async {
        let t = Instant::now();
        let body = client.get(&url).send().await.unwrap().bytes().await.unwrap();
        let d = t.elapsed();
        assert!(body.len() > 100_000);
        d
    };
    for _ in 0..20 {
        via_tool().await;
        native().await;
    }
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        a.push(via_tool().await);
        b.push(native().await);
    }
    report("web_fetch 100 KB page, in process", "reqwest GET", a, b);
    // The same size of plain text: the transport, the guard, the component and the
    // record without the HTML step.
    let text_url = format!("http://{addr}/page.txt");
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let t = Instant::now();
        let r = h.call(&cx, "web_fetch", json!({"url": text_url})).await;
        a.push(t.elapsed());
        assert!(r.status == Status::Ok && r.output["status"] == 200, "{}", r.output["summary"]);
        let t = Instant::now();
        let body = client.get(&text_url).send().await.unwrap().bytes().await.unwrap();
        b.push(t.elapsed());
        assert!(body.len() > 100_000);
    }
    report("web_fetch 100 KB text/plain, in process", "reqwest GET", a, b);
    // Where the time goes: the same page turned into text by workspace_preview (the same
    // HTML code, no network), and a call that does nothing (think).
    let content = page();
    let (mut p, mut t) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let s = Instant::now();
        let r = h.call(&cx, "workspace_preview", json!({"operation": "html", "content": content})).await;
        p.push(s.elapsed());
        assert_eq!(r.status, Status::Ok);
        let s = Instant::now();
        let r = h.call(&cx, "think", json!({"thought": "x"})).await;
        t.push(s.elapsed());
        assert_eq!(r.status, Status::Ok);
    }
    println!(
        "  of which: the same page to text by workspace_preview p50 {:.3} ms; an empty call (think) p50 {:.3} ms",
        ms(p50(p)),
        ms(p50(t))
    );
    drop(h);

    // Whole processes: the CLI (a fresh host each time, components from the cache)
    // against curl.
    let config = state.path().join("bench.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let input = json!({"url": url}).to_string();
    let run_cheng = || {
        let t = Instant::now();
        let out = cheng(state.path(), ws.path(), &config).args(["call", "web_fetch", &input]).output().unwrap();
        let d = t.elapsed();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        d
    };
    let run_curl = || {
        let t = Instant::now();
        let out = std::process::Command::new("curl").args(["-s", "-o", "/dev/null", &url]).output().unwrap();
        let d = t.elapsed();
        assert!(out.status.success());
        d
    };
    for _ in 0..3 {
        run_cheng();
        run_curl();
    }
    let (mut a, mut b) = (Vec::with_capacity(procs), Vec::with_capacity(procs));
    for _ in 0..procs {
        a.push(run_cheng());
        b.push(run_curl());
    }
    report("`cheng call web_fetch`, whole process", "`curl`", a, b);
}
