//! web_fetch and web_search against HTTP servers the tests open on loopback (opened to
//! the guard with `[web] allow_private` for these hosts only), the rebinding attack with
//! an injected resolver, and plugins granted `net`. No other address is contacted.

use std::future::Future;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cheng_host::egress::Resolve;
use cheng_host::grant::Grant;
use cheng_host::policy::Config;
use cheng_host::{Context, ErrorKind, Host, HostBuilder, Status};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::util;

/// What a test server saw.
#[derive(Default)]
struct Seen {
    /// `Host` header and path of every request, in order.
    requests: Mutex<Vec<(String, String)>>,
    /// Body bytes written by the endless routes.
    sent: AtomicU64,
}

/// A server on `ip` (port 0 = any) answering the routes below; one request per
/// connection.
struct Server {
    addr: SocketAddr,
    seen: Arc<Seen>,
}

impl Server {
    async fn start(ip: &str, port: u16) -> Server {
        let listener = TcpListener::bind((ip, port)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Seen::default());
        let s = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = listener.accept().await else { break };
                tokio::spawn(serve(conn, s.clone(), addr));
            }
        });
        Server { addr, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn paths(&self) -> Vec<String> {
        self.seen.requests.lock().unwrap().iter().map(|(_, p)| p.clone()).collect()
    }
}

const PAGE: &str = "<!doctype html><html><head><title>The Test Page</title>\
    <style>body { color: red } .secret-style {}</style><script>var leaked = 'SCRIPT-TEXT';</script></head>\
    <body><h1>Welcome</h1><p>First paragraph with <b>bold</b> text &amp; an entity.</p>\
    <noscript>NOSCRIPT-TEXT</noscript><p>Second paragraph.</p></body></html>";

const RESULTS_PAGE: &str = r#"<!DOCTYPE html><html><head><title>q at a search engine</title></head><body>
<div id="links" class="results">
  <div class="result results_links result--ad"><a class="result__a" href="https://ads.example/buy">Sponsored thing</a></div>
  <div class="result results_links web-result">
    <h2 class="result__title"><a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust%2Dlang.org%2Flearn&amp;rut=abc">Learn <b>Rust</b></a></h2>
    <a class="result__snippet" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fwww.rust%2Dlang.org%2Flearn">Get started with Rust: the book, examples and courses.</a>
  </div>
  <div class="result results_links web-result">
    <h2 class="result__title"><a rel="nofollow" class="result__a" href="https://doc.rust-lang.org/std/">std - Rust</a></h2>
    <a class="result__snippet">The Rust Standard Library.</a>
  </div>
</div></body></html>"#;

const CHANGED_PAGE: &str = r#"<!DOCTYPE html><html><body><main><ol class="serp">
  <li class="hit"><a href="https://www.rust-lang.org/">Rust</a><p>A language.</p></li>
</ol></main></body></html>"#;

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

async fn serve(mut conn: TcpStream, seen: Arc<Seen>, me: SocketAddr) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
    let host = text
        .lines()
        .find_map(|l| l.strip_prefix("host: ").or_else(|| l.strip_prefix("Host: ")))
        .unwrap_or("")
        .to_string();
    seen.requests.lock().unwrap().push((host, path.clone()));
    let reply = |status: &str, ctype: &str, extra: &str, body: &[u8]| {
        let mut r = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    };
    let redirect = |to: String| {
        format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").into_bytes()
    };
    let (route, query) = path.split_once('?').unwrap_or((&path, ""));
    let out: Vec<u8> = match route {
        "/page.html" => reply("200 OK", "text/html; charset=utf-8", "", PAGE.as_bytes()),
        "/data.json" => reply("200 OK", "application/json", "", br#"{"answer": 42, "list": [1, 2]}"#),
        "/image.png" => reply("200 OK", "image/png", "", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR binary"),
        "/missing" => reply("404 Not Found", "text/html", "", b"<html><title>Nope</title><p>No such page.</p></html>"),
        "/gz" => reply("200 OK", "text/html", "Content-Encoding: gzip\r\n", &gzip(PAGE.as_bytes())),
        "/html/" => {
            if query.contains("q=nothing") {
                reply(
                    "200 OK",
                    "text/html",
                    "",
                    b"<html><body><div class=\"no-results\">No results.</div></body></html>",
                )
            } else {
                reply("200 OK", "text/html", "", RESULTS_PAGE.as_bytes())
            }
        }
        "/changed/" => reply("200 OK", "text/html", "", CHANGED_PAGE.as_bytes()),
        "/search" => {
            let body = json!({"query": "q", "results": [
                {"title": "SearXNG <b>one</b>", "url": "https://one.example/", "content": "First result."},
                {"title": "Two", "url": "https://two.example/", "content": "Second."}
            ]});
            reply("200 OK", "application/json", "", body.to_string().as_bytes())
        }
        "/to-meta" => redirect("http://169.254.169.254/latest/meta-data/".into()),
        "/to-file" => redirect("file:///etc/passwd".into()),
        "/huge" => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000000000\r\nConnection: close\r\n\r\n";
            if conn.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![b'a'; 64 << 10];
            let mut sent = 0u64;
            while sent < 1_000_000_000 {
                if conn.write_all(&chunk).await.is_err() {
                    break;
                }
                sent += chunk.len() as u64;
                seen.sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
            return;
        }
        "/trickle" => {
            let head =
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000000\r\nConnection: close\r\n\r\n";
            if conn.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            loop {
                if conn.write_all(b"x").await.is_err() {
                    return;
                }
                seen.sent.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        r if r.starts_with("/r/") => {
            let n: u32 = r[3..].parse().unwrap_or(0);
            if n == 0 { redirect("/page.html".into()) } else { redirect(format!("/r/{}", n - 1)) }
        }
        r if r.starts_with("/abs/") => {
            // An absolute redirect to this same server.
            redirect(format!("http://{me}/page.html"))
        }
        _ => reply("404 Not Found", "text/plain", "", b"not found"),
    };
    let _ = conn.write_all(&out).await;
    let _ = conn.shutdown().await;
}

/// A host with `[web]` opened for 127.0.0.1 (plus `extra` config), its own audit log,
/// the shared component cache, and optionally a resolver.
async fn web_host(extra: &str, resolver: Option<Arc<dyn Resolve>>) -> (Host, tempfile::TempDir) {
    let state = tempfile::tempdir().unwrap();
    let mut b = HostBuilder::new();
    let config = format!("[web]\nallow_private = [\"127.0.0.1\"]\ntimeout_ms = 3000\nmax_bytes = 1000000\n{extra}");
    b.config(Config::from_toml_str(&config, "web.toml").unwrap());
    b.state_dir(state.path()).cache_dir(util::shared_state().join("cache"));
    if let Some(r) = resolver {
        b.resolver(r);
    }
    (b.build().await.unwrap(), state)
}

fn records(state: &tempfile::TempDir) -> Vec<cheng_host::records::CallRecord> {
    cheng_host::records::read_log(&state.path().join("audit.jsonl"), &Default::default()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn fetch_reads_pages_as_text_and_shows_status_and_type() {
    let srv = Server::start("127.0.0.1", 0).await;
    let (h, state) = web_host("", None).await;
    let ws = util::workspace();
    let cx = Context::new(ws.path());

    let r = h.call(&cx, "web_fetch", json!({"url": srv.url("/page.html")})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    let o = &r.output;
    assert_eq!(o["title"], "The Test Page");
    assert_eq!(o["status"], 200);
    assert_eq!(o["final_url"], srv.url("/page.html"));
    let text = o["text"].as_str().unwrap();
    assert!(text.contains("Welcome") && text.contains("First paragraph with bold text & an entity."), "{text}");
    for hidden in ["SCRIPT-TEXT", "color: red", "NOSCRIPT-TEXT", "<p>", "<b>"] {
        assert!(!text.contains(hidden), "{hidden} leaked into {text}");
    }
    assert!(o["summary"].as_str().unwrap().starts_with("HTTP 200 OK from"), "{o}");
    assert_eq!(o["truncated"], false);
    assert_eq!(o["bytes"], PAGE.len());

    // JSON passed through; a binary type described, not dumped.
    let r = h.call(&cx, "web_fetch", json!({"url": srv.url("/data.json")})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    let v: serde_json::Value = serde_json::from_str(r.output["text"].as_str().unwrap()).unwrap();
    assert_eq!(v["answer"], 42);
    let r = h.call(&cx, "web_fetch", json!({"url": srv.url("/image.png")})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    let t = r.output["text"].as_str().unwrap();
    assert!(t.contains("image/png") && t.contains("not shown") && !t.contains("IHDR"), "{t}");

    // A 404 is a response: its status is visible, its page read.
    let r = h.call(&cx, "web_fetch", json!({"url": srv.url("/missing")})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["status"], 404);
    assert!(r.output["summary"].as_str().unwrap().starts_with("HTTP 404 Not Found"), "{}", r.output);
    assert_eq!(r.output["title"], "Nope");

    // gzip is decoded.
    let r = h.call(&cx, "web_fetch", json!({"url": srv.url("/gz")})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["title"], "The Test Page");
    assert!(r.output["bytes"].as_u64().unwrap() < PAGE.len() as u64, "the wire carried the compressed body");

    // The text cap keeps head and tail.
    let r = h.call(&cx, "web_fetch", json!({"url": srv.url("/page.html"), "max_bytes": 60})).await;
    assert_eq!(r.output["truncated"], true, "{}", r.output);
    let t = r.output["text"].as_str().unwrap();
    assert!(t.starts_with("Welcome") && t.ends_with("paragraph.\n") && t.contains("bytes omitted"), "{t}");

    // Every request is in the call's record.
    drop(h);
    let recs = records(&state);
    let fetches: Vec<_> = recs.iter().filter(|r| r.tool == "web_fetch").collect();
    assert_eq!(fetches.len(), 6);
    let first = &fetches[0].requests;
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].method, "GET");
    assert_eq!(first[0].url, srv.url("/page.html"));
    assert_eq!(first[0].status, Some(200));
    assert_eq!(first[0].bytes, PAGE.len() as u64);
    assert!(!first[0].refused);
    assert_eq!(fetches[3].requests[0].status, Some(404));
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_are_followed_checked_at_every_hop_and_capped() {
    let srv = Server::start("127.0.0.1", 0).await;
    let (h, state) = web_host("", None).await;
    let ws = util::workspace();
    let cx = Context::new(ws.path());

    // A chain of three: the final URL and the chain are reported.
    let r = h.call(&cx, "web_fetch", json!({"url": srv.url("/r/2")})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["final_url"], srv.url("/page.html"));
    assert_eq!(r.output["redirects"].as_array().unwrap().len(), 3);
    assert_eq!(r.output["title"], "The Test Page");

    // To a metadata address: refused at that hop, by the host, nothing fetched there.
    let before = srv.paths().len();
    let r = h.call(&cx, "web_fetch", json!({"url": srv.url("/to-meta")})).await;
    assert_eq!(r.status, Status::Denied, "{}", r.output);
    assert_eq!(r.error_kind, Some(ErrorKind::NotGranted));
    let msg = r.output["error"].as_str().unwrap();
    assert!(msg.contains("refused: 169.254.169.254 is a cloud metadata address"), "{msg}");
    assert_eq!(srv.paths()[before..], ["/to-meta".to_string()], "only the first hop reached a server");

    // To file://: refused at that hop.
    let r = h.call(&cx, "web_fetch", json!({"url": srv.url("/to-file")})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotGranted), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("only http and https"), "{}", r.output);

    // Ten redirects: stopped after five.
    let before = srv.paths().len();
    let r = h.call(&cx, "web_fetch", json!({"url": srv.url("/r/9")})).await;
    assert_eq!(r.status, Status::Error, "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("stopped after 5 redirects"), "{}", r.output);
    assert_eq!(srv.paths().len() - before, 6, "the first request and five redirects, then nothing");

    // The refused hop is in the record, marked refused, with the denial.
    drop(h);
    let recs = records(&state);
    let meta = recs.iter().find(|r| r.requests.iter().any(|q| q.url.contains("169.254.169.254"))).unwrap();
    let hop = meta.requests.iter().find(|q| q.url.contains("169.254.169.254")).unwrap();
    assert!(hop.refused && hop.status.is_none() && hop.bytes == 0, "{hop:?}");
    assert!(meta.denials.iter().any(|d| d.right == cheng_host::capability::Right::Network));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_guard_refuses_private_addresses_in_every_spelling_without_connecting() {
    // No allow_private here: loopback is refused however it is written.
    let state = tempfile::tempdir().unwrap();
    let mut b = HostBuilder::new();
    b.state_dir(state.path()).cache_dir(util::shared_state().join("cache"));
    let h = b.build().await.unwrap();
    let srv = Server::start("127.0.0.1", 0).await;
    let ws = util::workspace();
    let cx = Context::new(ws.path());
    let port = srv.addr.port();
    for host in ["127.0.0.1", "localhost", "2130706433", "0177.0.0.1", "0x7f.1", "127.1", "[::ffff:127.0.0.1]"] {
        let r = h.call(&cx, "web_fetch", json!({"url": format!("http://{host}:{port}/page.html")})).await;
        assert_eq!(r.status, Status::Denied, "{host}: {}", r.output);
        let msg = r.output["error"].as_str().unwrap();
        assert!(msg.contains("loopback"), "{host}: {msg}");
    }
    assert!(srv.paths().is_empty(), "nothing reached the server: {:?}", srv.paths());
    // Control: the same server answers the test's own client.
    let mut c = TcpStream::connect(srv.addr).await.unwrap();
    c.write_all(b"GET /page.html HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut got = String::new();
    c.read_to_string(&mut got).await.unwrap();
    assert!(got.contains("The Test Page"));
}

#[tokio::test(flavor = "multi_thread")]
async fn huge_and_trickling_bodies_are_cut() {
    let srv = Server::start("127.0.0.1", 0).await;
    let (h, _state) = web_host("", None).await;
    let ws = util::workspace();
    let cx = Context::new(ws.path());
    let rss = || -> u64 {
        let s = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap().to_string();
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
    };
    let before = rss();
    let r = h.call(&cx, "web_fetch", json!({"url": srv.url("/huge")})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output["summary"]);
    assert_eq!(r.output["truncated"], true);
    assert_eq!(r.output["bytes"], 1_000_000, "exactly the cap from the wire");
    assert!(r.output["summary"].as_str().unwrap().contains("cut at 1000000 bytes"), "{}", r.output["summary"]);
    // The server could not push its gigabyte: the connection closed at the cap (plus
    // what the socket buffers held).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = srv.seen.sent.load(Ordering::Relaxed);
    assert!(sent < 64 << 20, "the server sent {sent} bytes");
    let grew = rss().saturating_sub(before);
    assert!(grew < 256 << 20, "memory grew by {grew} bytes");

    // A server that trickles a byte every 100 ms is cut at the 3 s deadline.
    let t = std::time::Instant::now();
    let r = h.call(&cx, "web_fetch", json!({"url": srv.url("/trickle")})).await;
    let took = t.elapsed();
    assert_eq!(r.status, Status::Ok, "{}", r.output["summary"]);
    assert_eq!(r.output["truncated"], true);
    assert!(r.output["summary"].as_str().unwrap().contains("time limit"), "{}", r.output["summary"]);
    assert!(took >= Duration::from_millis(2900) && took < Duration::from_secs(10), "{took:?}");
    let got = r.output["bytes"].as_u64().unwrap();
    assert!((10..=40).contains(&got), "{got} bytes in 3 s");
}

/// Answers `first` on the first lookup of a name and `later` on every other.
struct Rebinder {
    first: IpAddr,
    later: IpAddr,
    lookups: AtomicUsize,
}

impl Resolve for Rebinder {
    fn resolve<'a>(
        &'a self,
        _name: &'a str,
        _port: u16,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'a>> {
        let n = self.lookups.fetch_add(1, Ordering::SeqCst);
        let ip = if n == 0 { self.first } else { self.later };
        Box::pin(async move { Ok(vec![ip]) })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_dns_answer_cannot_move_the_connection() {
    // Two servers on one port: the checked address and the one a rebinding answer names.
    let good = Server::start("127.0.0.1", 0).await;
    let port = good.addr.port();
    let evil = Server::start("127.0.0.2", port).await;
    let resolver = Arc::new(Rebinder {
        first: "127.0.0.1".parse().unwrap(),
        later: "127.0.0.2".parse().unwrap(),
        lookups: AtomicUsize::new(0),
    });
    // Both addresses are open to the guard, so only the connect path decides.
    let (h, _state) = {
        let state = tempfile::tempdir().unwrap();
        let mut b = HostBuilder::new();
        let config = "[web]\nallow_private = [\"127.0.0.1\", \"127.0.0.2\"]\ntimeout_ms = 3000\n";
        b.config(Config::from_toml_str(config, "web.toml").unwrap());
        b.state_dir(state.path()).cache_dir(util::shared_state().join("cache"));
        b.resolver(resolver.clone());
        (b.build().await.unwrap(), state)
    };
    let ws = util::workspace();
    let cx = Context::new(ws.path());
    let r = h.call(&cx, "web_fetch", json!({"url": format!("http://rebind.test:{port}/page.html")})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["title"], "The Test Page");
    assert_eq!(resolver.lookups.load(Ordering::SeqCst), 1, "one lookup for one hop");
    assert_eq!(good.paths(), ["/page.html"]);
    assert!(evil.paths().is_empty(), "the rebinding answer was never used");
    // The name stays in the Host header.
    assert_eq!(good.seen.requests.lock().unwrap()[0].0, format!("rebind.test:{port}"));
    // A redirect chain: one lookup per hop, each hop to the address its own lookup gave.
    let r = h.call(&cx, "web_fetch", json!({"url": format!("http://rebind.test:{port}/r/1")})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(resolver.lookups.load(Ordering::SeqCst), 4, "three more hops, three more lookups");
    assert_eq!(evil.paths(), ["/r/1", "/r/0", "/page.html"]);

    // Each hop is checked with its own lookup: the first answer passes, the second (for
    // the redirect's hop) is a metadata address, refused at that hop.
    let resolver = Arc::new(Rebinder {
        first: "127.0.0.1".parse().unwrap(),
        later: "169.254.169.254".parse().unwrap(),
        lookups: AtomicUsize::new(0),
    });
    let (h, _state) = web_host("", Some(resolver.clone())).await;
    let before = good.paths().len();
    let r = h.call(&cx, "web_fetch", json!({"url": format!("http://rebind.test:{port}/r/0")})).await;
    assert_eq!(r.status, Status::Denied, "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("rebind.test resolves to 169.254.169.254"), "{}", r.output);
    assert_eq!(resolver.lookups.load(Ordering::SeqCst), 2);
    assert_eq!(good.paths()[before..], ["/r/0".to_string()]);
}

#[tokio::test(flavor = "multi_thread")]
async fn search_reads_results_pages_and_apis_and_says_when_it_cannot() {
    let srv = Server::start("127.0.0.1", 0).await;
    let ws = util::workspace();
    let cx = Context::new(ws.path());

    // The default provider's HTML results page (a fixture written here).
    let (h, _s) = web_host(&format!("[web.search]\nurl = \"{}\"\n", srv.url("/html/")), None).await;
    let r = h.call(&cx, "web_search", json!({"query": "learn rust"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["provider"], "duckduckgo");
    let results = r.output["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "the ad is skipped: {results:?}");
    assert_eq!(results[0]["title"], "Learn Rust");
    assert_eq!(results[0]["url"], "https://www.rust-lang.org/learn");
    assert_eq!(results[0]["snippet"], "Get started with Rust: the book, examples and courses.");
    assert_eq!(results[1]["url"], "https://doc.rust-lang.org/std/");
    assert!(srv.paths().iter().any(|p| p == "/html/?q=learn+rust"), "{:?}", srv.paths());
    let r = h.call(&cx, "web_search", json!({"query": "learn rust", "max_results": 1})).await;
    assert_eq!(r.output["results"].as_array().unwrap().len(), 1);
    // No results is an answer, not a failure.
    let r = h.call(&cx, "web_search", json!({"query": "nothing"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert!(r.output["results"].as_array().unwrap().is_empty());
    assert!(r.output["summary"].as_str().unwrap().starts_with("no results"));

    // Markup the parser does not know: the plain message, not an empty list.
    let (h, _s) = web_host(&format!("[web.search]\nurl = \"{}\"\n", srv.url("/changed/")), None).await;
    let r = h.call(&cx, "web_search", json!({"query": "rust"})).await;
    assert_eq!(r.status, Status::Error, "{}", r.output);
    assert!(
        r.output["error"]
            .as_str()
            .unwrap()
            .contains("the results page could not be read; rewording the query will not help"),
        "{}",
        r.output
    );
    assert_eq!(r.output["terminal"], true);

    // SearXNG's JSON API.
    let (h, _s) = web_host(&format!("[web.search]\nprovider = \"searxng\"\nurl = \"{}\"\n", srv.url("/")), None).await;
    let r = h.call(&cx, "web_search", json!({"query": "two words"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["provider"], "searxng");
    assert_eq!(r.output["results"][0]["title"], "SearXNG one");
    assert_eq!(r.output["results"][1]["snippet"], "Second.");
    assert!(srv.paths().iter().any(|p| p == "/search?q=two+words&format=json"), "{:?}", srv.paths());

    // Brave without its key: said plainly, nothing sent.
    let before = srv.paths().len();
    let (h, _s) = web_host(
        &format!(
            "[web.search]\nprovider = \"brave\"\nurl = \"{}\"\napi_key_env = \"CHENG_TEST_NO_SUCH_KEY\"\n",
            srv.url("/brave")
        ),
        None,
    )
    .await;
    let r = h.call(&cx, "web_search", json!({"query": "x"})).await;
    assert_eq!(r.status, Status::Error, "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("CHENG_TEST_NO_SUCH_KEY"), "{}", r.output);
    assert_eq!(srv.paths().len(), before);

    // No network (nothing listens there): the model is told to say so, not to invent.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (h, _s) = web_host(&format!("[web.search]\nurl = \"http://{closed}/html/\"\n"), None).await;
    let r = h.call(&cx, "web_search", json!({"query": "rust"})).await;
    assert_eq!(r.status, Status::Error, "{}", r.output);
    assert_eq!(r.error_kind, Some(ErrorKind::Io));
    let msg = r.output["error"].as_str().unwrap();
    assert!(msg.contains("could not reach") && msg.contains("do not guess or invent"), "{msg}");
}

/// A header the host adds (the Brave key) reaches the server; the component never
/// holds it.
#[tokio::test(flavor = "multi_thread")]
async fn the_search_key_is_added_by_the_host() {
    // A server that records the whole request head.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::<String>::new()));
    let h2 = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = listener.accept().await {
            let mut buf = vec![0u8; 8192];
            let n = c.read(&mut buf).await.unwrap_or(0);
            h2.lock().unwrap().push(String::from_utf8_lossy(&buf[..n]).to_string());
            let body = r#"{"type":"search","web":{"results":[{"title":"Brave <strong>hit</strong>","url":"https://hit.example/","description":"It <strong>works</strong>."}]}}"#;
            let _ = c
                .write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await;
        }
    });
    // SAFETY: set before the host reads it, in a variable no other test uses.
    unsafe { std::env::set_var("CHENG_TEST_BRAVE_KEY", "sekrit-key-123") };
    let (h, state) = web_host(
        &format!(
            "[web.search]\nprovider = \"brave\"\nurl = \"http://{addr}/res/v1/web/search\"\napi_key_env = \"CHENG_TEST_BRAVE_KEY\"\n"
        ),
        None,
    )
    .await;
    let ws = util::workspace();
    let r = h.call(&Context::new(ws.path()), "web_search", json!({"query": "q"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["results"][0]["title"], "Brave hit");
    assert_eq!(r.output["results"][0]["snippet"], "It works.");
    let head = heads.lock().unwrap()[0].to_ascii_lowercase();
    assert!(head.contains("x-subscription-token: sekrit-key-123"), "{head}");
    assert!(head.starts_with("get /res/v1/web/search?q=q&count=8 "), "{head}");
    // The key is not in the record.
    drop(h);
    let log = std::fs::read_to_string(state.path().join("audit.jsonl")).unwrap();
    assert!(!log.contains("sekrit"), "{log}");
    // A plugin granted the same host does not get the key added to its requests.
    let pstate = tempfile::tempdir().unwrap();
    let mut b = HostBuilder::new();
    let config = format!(
        "[web]\nallow_private = [\"127.0.0.1\"]\n[web.search]\nprovider = \"brave\"\n\
         url = \"http://{addr}/res/v1/web/search\"\napi_key_env = \"CHENG_TEST_BRAVE_KEY\"\n\
         [roles.t]\ntools = [\"p__get\"]\n"
    );
    b.config(Config::from_toml_str(&config, "web.toml").unwrap());
    b.state_dir(pstate.path()).cache_dir(util::shared_state().join("cache"));
    b.plugin(util::plugin("p", "httpprobe", Grant { net: vec![addr.to_string()], ..Grant::none() }));
    let h = b.build().await.unwrap();
    let r = h
        .call(
            &Context::new(ws.path()).role("t"),
            "p__get",
            json!({"scheme": "http", "authority": addr.to_string(), "path": "/res/v1/web/search?q=x"}),
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    let head = heads.lock().unwrap()[1].to_ascii_lowercase();
    assert!(!head.contains("x-subscription-token") && !head.contains("sekrit"), "{head}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_reaches_only_its_granted_hosts() {
    let srv = Server::start("127.0.0.1", 0).await;
    let port = srv.addr.port();
    let state = tempfile::tempdir().unwrap();
    let mut b = HostBuilder::new();
    let config = "[web]\nallow_private = [\"127.0.0.1\", \"127.0.0.2\"]\ntimeout_ms = 3000\n\
        [roles.t]\ntools = [\"net__get\", \"nonet__get\"]\n";
    b.config(Config::from_toml_str(config, "web.toml").unwrap());
    b.state_dir(state.path()).cache_dir(util::shared_state().join("cache"));
    b.plugin(util::plugin("net", "httpprobe", Grant { net: vec![format!("127.0.0.1:{port}")], ..Grant::none() }));
    b.plugin(util::plugin("nonet", "httpprobe", Grant::none()));
    let h = b.build().await.unwrap();
    // Without a grant it cannot load, by name.
    let errors = h.load_errors().join("\n");
    assert!(errors.contains("plugin \"nonet\"") && errors.contains("grants no `net` hosts"), "{errors}");
    let ws = util::workspace();
    let cx = Context::new(ws.path()).role("t");
    let get = |authority: String, path: &str| json!({"scheme": "http", "authority": authority, "path": path});
    // Control: its granted host answers.
    let r = h.call(&cx, "net__get", get(format!("127.0.0.1:{port}"), "/data.json")).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert!(r.output["body"].as_str().unwrap().contains("42"));
    // Another port, another loopback address, a name, another scheme: refused by the host.
    let srv2 = Server::start("127.0.0.2", port).await;
    for (scheme, authority) in [
        ("http", format!("127.0.0.1:{}", port.wrapping_add(1).max(1))),
        ("http", format!("127.0.0.2:{port}")),
        ("http", format!("localhost:{port}")),
    ] {
        let r = h.call(&cx, "net__get", json!({"scheme": scheme, "authority": authority, "path": "/data.json"})).await;
        assert_eq!(r.status, Status::Denied, "{authority}: {}", r.output);
        assert!(
            r.output["error"].as_str().unwrap().contains("not among the hosts this plugin is granted"),
            "{}",
            r.output
        );
    }
    let r =
        h.call(&cx, "net__get", json!({"scheme": "ftp", "authority": format!("127.0.0.1:{port}"), "path": "/"})).await;
    assert_eq!(r.status, Status::Denied, "{}", r.output);
    // The host reads the authority itself: a decimal spelling of the granted address is
    // that address (and reaches it); another address in hex is not granted.
    let r = h.call(&cx, "net__get", get(format!("2130706433:{port}"), "/data.json")).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert!(r.output["body"].as_str().unwrap().contains("42"), "{}", r.output);
    let r = h.call(&cx, "net__get", get(format!("0x7f.0.0.2:{port}"), "/data.json")).await;
    assert_eq!(r.status, Status::Denied, "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("127.0.0.2 is not among the hosts"), "{}", r.output);
    assert!(srv2.paths().is_empty());
    assert_eq!(
        srv.paths(),
        ["/data.json", "/data.json"],
        "only the granted requests reached a server: {:?} {:?}",
        srv.seen.requests.lock().unwrap(),
        srv2.seen.requests.lock().unwrap()
    );
    // The audit log has the scheme refusal as a network denial.
    drop(h);
    let recs = records(&state);
    assert!(recs.iter().any(|r| r.denials.iter().any(|d| d.message.contains("only http and https"))));
}

/// `[web] proxy`: the target is checked before the proxy is asked, and the proxy is asked
/// for the checked address, never the name (so it cannot resolve it again).
#[tokio::test(flavor = "multi_thread")]
async fn the_proxy_is_asked_for_the_checked_address() {
    let srv = Server::start("127.0.0.1", 0).await;
    let port = srv.addr.port();
    // A CONNECT proxy: it records what it is asked and tunnels to it.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = listener.local_addr().unwrap();
    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    let a2 = asked.clone();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = listener.accept().await {
            let asked = a2.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if c.read(&mut b).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(b[0]);
                }
                let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string();
                asked.lock().unwrap().push(line.clone());
                let target = line.split_whitespace().nth(1).unwrap_or_default().to_string();
                let Ok(mut up) = TcpStream::connect(&target).await else { return };
                c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut c, &mut up).await;
            });
        }
    });
    let resolver = Arc::new(Rebinder {
        first: "127.0.0.1".parse().unwrap(),
        later: "127.0.0.1".parse().unwrap(),
        lookups: AtomicUsize::new(0),
    });
    let (h, _state) = web_host(&format!("proxy = \"http://{proxy}\"\n"), Some(resolver)).await;
    let ws = util::workspace();
    let cx = Context::new(ws.path());
    let r = h.call(&cx, "web_fetch", json!({"url": format!("http://named.test:{port}/page.html")})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["title"], "The Test Page");
    assert_eq!(*asked.lock().unwrap(), [format!("CONNECT 127.0.0.1:{port} HTTP/1.1")]);
    assert_eq!(srv.seen.requests.lock().unwrap()[0].0, format!("named.test:{port}"), "the name is in the Host header");
    // A refused target never reaches the proxy.
    let r = h.call(&cx, "web_fetch", json!({"url": "http://169.254.169.254/latest/meta-data/"})).await;
    assert_eq!(r.status, Status::Denied, "{}", r.output);
    assert_eq!(asked.lock().unwrap().len(), 1);
}

/// https: the certificate is checked against the name the URL gave (sent as SNI), not
/// against the address connected to; `[web] ca_file` adds an authority.
#[tokio::test(flavor = "multi_thread")]
async fn https_checks_the_certificate_against_the_name() {
    use tokio_rustls::rustls;
    let cert = rcgen::generate_simple_self_signed(vec!["secure.test".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, cert.cert.pem()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let names = Arc::new(Mutex::new(Vec::<Option<String>>::new()));
    let n2 = names.clone();
    tokio::spawn(async move {
        while let Ok((c, _)) = listener.accept().await {
            let (acceptor, names) = (acceptor.clone(), n2.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(c).await else { return };
                names.lock().unwrap().push(tls.get_ref().1.server_name().map(str::to_string));
                let mut buf = vec![0u8; 4096];
                let _ = tls.read(&mut buf).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
                    PAGE.len()
                );
                let _ = tls.write_all(reply.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    let resolver = || {
        Arc::new(Rebinder {
            first: "127.0.0.1".parse().unwrap(),
            later: "127.0.0.1".parse().unwrap(),
            lookups: AtomicUsize::new(0),
        })
    };
    let ws = util::workspace();
    let cx = Context::new(ws.path());
    let (h, _s) = web_host(&format!("ca_file = {:?}\n", ca.display().to_string()), Some(resolver())).await;
    let r = h.call(&cx, "web_fetch", json!({"url": format!("https://secure.test:{port}/page.html")})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["title"], "The Test Page");
    assert_eq!(names.lock().unwrap().as_slice(), [Some("secure.test".to_string())], "the name went as SNI");
    // The same address under a name the certificate does not carry: refused by TLS.
    let r = h.call(&cx, "web_fetch", json!({"url": format!("https://other.test:{port}/page.html")})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Io), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("TLS"), "{}", r.output);
    // Control: without the authority, the certificate is not trusted.
    let (h, _s) = web_host("", Some(resolver())).await;
    let r = h.call(&cx, "web_fetch", json!({"url": format!("https://secure.test:{port}/page.html")})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Io), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("TLS"), "{}", r.output);
}
