//! Network by host name for commands: a rule (or an answer) naming hosts gives the
//! command its own network namespace whose only way out is the host's proxy, which
//! checks every target as `web_fetch` is checked. Real `curl` and `git clone` (over
//! HTTP) against a loopback server given host names through the host builder's
//! resolver (`HostBuilder::resolver`): the named host works, by plain HTTP and by
//! `CONNECT`; another name, a raw IP, a name that resolves to loopback without `[web]
//! allow_private`, and a connection that ignores the proxy are all refused, and each
//! refusal is recorded as a network denial naming the target.

use std::future::Future;
use std::io::{Read, Write};
use std::net::IpAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use cheng_host::egress::Resolve;
use cheng_host::policy::Config;
use cheng_host::records::CallRecord;
use cheng_host::{Context, Host, HostBuilder, ToolResult};
use serde_json::{Value, json};

use crate::util;

/// Every name ending in `.test` is 127.0.0.1.
struct Loopback;
impl Resolve for Loopback {
    fn resolve<'a>(
        &'a self,
        name: &'a str,
        _port: u16,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'a>> {
        Box::pin(async move {
            match name.ends_with(".test") {
                true => Ok(vec!["127.0.0.1".parse().unwrap()]),
                false => Err(std::io::Error::other("unknown name")),
            }
        })
    }
}

/// A tiny HTTP server on loopback serving the files under `root` (GET, one request
/// per connection), until dropped.
struct Files {
    port: u16,
    _stop: std::sync::mpsc::Sender<()>,
}

fn serve_files(root: &Path) -> Files {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let root = root.to_path_buf();
    std::thread::spawn(move || {
        loop {
            if !matches!(stopped.try_recv(), Err(std::sync::mpsc::TryRecvError::Empty)) {
                return;
            }
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(std::time::Duration::from_millis(5));
                continue;
            };
            let root = root.clone();
            std::thread::spawn(move || {
                let _ = s.set_nonblocking(false);
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).unwrap_or(0) == 1 {
                    head.push(b[0]);
                }
                let line = String::from_utf8_lossy(&head).lines().next().unwrap_or("").to_string();
                let path = line.split(' ').nth(1).unwrap_or("/").split('?').next().unwrap_or("/").to_string();
                let file = root.join(path.trim_start_matches('/'));
                let reply = match std::fs::read(&file) {
                    Ok(body) => {
                        let mut r =
                            format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len())
                                .into_bytes();
                        r.extend(body);
                        r
                    }
                    Err(_) => b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec(),
                };
                let _ = s.write_all(&reply);
            });
        }
    });
    Files { port, _stop: stop }
}

async fn host(config: &str, state: &Path) -> Host {
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(&format!("[process]\nkill_grace_ms = 300\n{config}"), "test.toml").unwrap());
    b.state_dir(state);
    b.cache_dir(util::shared_state().join("cache"));
    b.resolver(Arc::new(Loopback));
    b.build().await.unwrap()
}

async fn run(h: &Host, ws: &Path, input: Value) -> (ToolResult, CallRecord) {
    h.call_recorded(&Context::new(ws), "workspace_shell", input).await
}

fn ready() -> bool {
    util::require("Landlock", cheng_host::confinement().landlock_abi.is_some_and(|v| v >= 4))
        && util::require("user namespaces", cheng_host::confinement().isolated)
        && util::require("curl", std::process::Command::new("curl").arg("--version").output().is_ok())
}

const RULES: &str = r#"
[[process.rules]]
program = "curl"
decision = "allow"
network = ["allowed.test"]

[[process.rules]]
program = "git"
args = ["clone"]
decision = "allow"
network = ["allowed.test"]
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_command_granted_a_host_reaches_it_through_the_proxy_and_nothing_else() {
    if !ready() {
        return;
    }
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("hello.txt"), "hello from allowed.test\n").unwrap();
    let server = serve_files(files.path());
    let port = server.port;
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let h = host(&format!("[web]\nallow_private = [\"127.0.0.1\"]\n{RULES}"), state.path()).await;
    let curl = |args: Vec<String>| json!({"command": "curl", "args": args});
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();

    // The granted host, by plain HTTP and through CONNECT (`-p`).
    let url = format!("http://allowed.test:{port}/hello.txt");
    for args in [s(&["-sS", &url]), s(&["-sS", "-p", &url])] {
        let (r, rec) = run(&h, ws.path(), curl(args.clone())).await;
        assert_eq!(r.output["stdout"], "hello from allowed.test\n", "{args:?}: {}", r.output);
        assert_eq!(rec.unasked[0].hosts, vec!["allowed.test".to_string()]);
        assert!(rec.denials.is_empty(), "{:?}", rec.denials);
    }

    // Another name, a raw IP: refused by the proxy (403), recorded as network denials.
    for (target, why) in
        [(format!("other.test:{port}"), "not among the hosts"), (format!("127.0.0.1:{port}"), "not among the hosts")]
    {
        let (r, rec) = run(&h, ws.path(), curl(s(&["-sS", "-f", &format!("http://{target}/hello.txt")]))).await;
        assert_ne!(r.output["exit_code"], 0, "{target}: {}", r.output);
        assert!(!r.output.to_string().contains("hello from"), "{target}: {}", r.output);
        let d =
            rec.denials.iter().find(|d| d.target == target).unwrap_or_else(|| panic!("{target}: {:?}", rec.denials));
        assert!(d.message.contains(why), "{}", d.message);
    }

    // A connection that ignores the proxy has nowhere to go.
    let (r, _) = run(&h, ws.path(), curl(s(&["-sS", "--noproxy", "*", "--max-time", "5", &url]))).await;
    assert_ne!(r.output["exit_code"], 0, "{}", r.output);
    assert!(!r.output.to_string().contains("hello from"), "{}", r.output);

    // git clone over HTTP (the dumb protocol, served as files) through the proxy.
    let origin = files.path().join("repo.git");
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("README"), "cloned\n").unwrap();
    for args in [&["init", "-q", "-b", "main"][..], &["add", "-A"], &["commit", "-q", "-m", "one"]] {
        assert!(util::git(src.path()).args(args).status().unwrap().success());
    }
    assert!(
        util::git(files.path())
            .args(["clone", "-q", "--bare"])
            .arg(src.path())
            .arg(&origin)
            .status()
            .unwrap()
            .success()
    );
    assert!(util::git(&origin).args(["update-server-info"]).status().unwrap().success());
    let clone_url = format!("http://allowed.test:{port}/repo.git");
    let (r, _) = run(&h, ws.path(), json!({"command": "git", "args": ["clone", "-q", clone_url, "cloned"]})).await;
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    assert_eq!(std::fs::read_to_string(ws.path().join("cloned/README")).unwrap(), "cloned\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_that_resolves_to_loopback_is_refused_without_allow_private() {
    if !ready() {
        return;
    }
    let files = tempfile::tempdir().unwrap();
    std::fs::write(files.path().join("hello.txt"), "hello\n").unwrap();
    let server = serve_files(files.path());
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let h = host(RULES, state.path()).await;
    let url = format!("http://allowed.test:{}/hello.txt", server.port);
    let (r, rec) = run(&h, ws.path(), json!({"command": "curl", "args": ["-sS", "-f", url]})).await;
    assert_ne!(r.output["exit_code"], 0, "{}", r.output);
    let d = &rec.denials[0];
    assert!(d.message.contains("loopback"), "{}", d.message);
    // A rule with `network = true` still reaches it directly, as before.
    let state2 = tempfile::tempdir().unwrap();
    let open =
        host("[[process.rules]]\nprogram = \"curl\"\ndecision = \"allow\"\nnetwork = true\n", state2.path()).await;
    let direct = format!("http://127.0.0.1:{}/hello.txt", server.port);
    let (r, _) = run(&open, ws.path(), json!({"command": "curl", "args": ["-sS", direct]})).await;
    assert_eq!(r.output["stdout"], "hello\n", "{}", r.output);
}
