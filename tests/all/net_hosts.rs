//! Network by host name for commands: a rule (or an answer) naming hosts gives the
//! command its own network namespace whose only way out is the host's proxy, which
//! checks every target as `web_fetch` is checked. Real `curl` and `git clone` (over
//! HTTP), `pip download` from a static package index and `npm install` from a static
//! registry, against a loopback server given host names through the host builder's
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
                let mut file = root.join(path.trim_start_matches('/'));
                // A directory answers with its index (a package index's page, a
                // registry's package document).
                if file.is_dir() {
                    file =
                        ["index.html", "index.json"].iter().map(|i| file.join(i)).find(|f| f.is_file()).unwrap_or(file);
                }
                let kind = match file.extension().and_then(|e| e.to_str()) {
                    Some("html") => "text/html",
                    Some("json") => "application/json",
                    _ => "application/octet-stream",
                };
                let reply = match std::fs::read(&file) {
                    Ok(body) => {
                        let mut r = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                            body.len()
                        )
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

/// A static package index (PyPI's simple form) and a static npm registry under
/// `root`, both holding one package `hello-cheng`, the registry's tarball at `port`
/// under `registry.test`.
fn package_indexes(root: &Path, port: u16) {
    let simple = root.join("simple/hello-cheng");
    std::fs::create_dir_all(&simple).unwrap();
    let wheel = "hello_cheng-1.0-py3-none-any.whl";
    // A wheel is a zip archive: Python's own zipfile writes it.
    let script = "import sys, zipfile\n\
        z = zipfile.ZipFile(sys.argv[1], 'w')\n\
        z.writestr('hello_cheng/__init__.py', 'X = 1\\n')\n\
        z.writestr('hello_cheng-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: hello-cheng\\nVersion: 1.0\\n')\n\
        z.writestr('hello_cheng-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
        z.writestr('hello_cheng-1.0.dist-info/RECORD', '')\n\
        z.close()\n";
    let ok =
        std::process::Command::new("/usr/bin/python3").arg("-c").arg(script).arg(simple.join(wheel)).status().unwrap();
    assert!(ok.success());
    std::fs::write(simple.join("index.html"), format!("<html><body><a href=\"{wheel}\">{wheel}</a></body></html>"))
        .unwrap();

    let pkg = root.join("npm-src/package");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("package.json"), r#"{"name":"hello-cheng","version":"1.0.0","main":"index.js"}"#).unwrap();
    std::fs::write(pkg.join("index.js"), "module.exports = 'hello from registry.test';\n").unwrap();
    let tarballs = root.join("hello-cheng/-");
    std::fs::create_dir_all(&tarballs).unwrap();
    let tgz = tarballs.join("hello-cheng-1.0.0.tgz");
    let ok = std::process::Command::new("tar")
        .arg("czf")
        .arg(&tgz)
        .arg("-C")
        .arg(root.join("npm-src"))
        .arg("package")
        .status()
        .unwrap();
    assert!(ok.success());
    let doc = json!({"name": "hello-cheng", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": {
        "name": "hello-cheng", "version": "1.0.0", "main": "index.js",
        "dist": {"tarball": format!("http://registry.test:{port}/hello-cheng/-/hello-cheng-1.0.0.tgz")}}}});
    std::fs::write(root.join("hello-cheng/index.json"), doc.to_string()).unwrap();
}

/// `pip download` and `npm install` granted their index's host: they fetch through the
/// proxy; granted another host, they get nothing and the refusal names the target.
#[tokio::test(flavor = "multi_thread")]
async fn pip_and_npm_reach_their_granted_index_and_nothing_else() {
    let python = Path::new("/usr/bin/python3");
    let pip = python.is_file()
        && std::process::Command::new(python)
            .args(["-m", "pip", "--version"])
            .output()
            .is_ok_and(|o| o.status.success());
    let npm = std::process::Command::new("npm").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ready() || !util::require("/usr/bin/python3 -m pip", pip) || !util::require("npm", npm) {
        return;
    }
    let files = tempfile::tempdir().unwrap();
    let server = serve_files(files.path());
    let port = server.port;
    package_indexes(files.path(), port);
    let rules = |pip_host: &str, npm_host: &str| {
        format!(
            "[web]\nallow_private = [\"127.0.0.1\"]\n\
             [[process.rules]]\nprogram = \"/usr/bin/python3\"\nargs = [\"-m\", \"pip\", \"download\"]\ndecision = \"allow\"\nnetwork = [\"{pip_host}\"]\n\
             [[process.rules]]\nprogram = \"npm\"\nargs = [\"install\"]\ndecision = \"allow\"\nnetwork = [\"{npm_host}\"]\n"
        )
    };
    let pip_args = json!({"command": "/usr/bin/python3", "args": ["-m", "pip", "download", "--no-deps",
        "--disable-pip-version-check", "--retries", "0", "--timeout", "10",
        "--index-url", format!("http://pypi.test:{port}/simple/"), "--trusted-host", "pypi.test",
        "-d", "dl", "hello-cheng"]});
    let npm_args = json!({"command": "npm", "args": ["install", "hello-cheng", "--registry",
        format!("http://registry.test:{port}/"), "--no-audit", "--no-fund", "--ignore-scripts",
        "--fetch-retries", "0"]});

    // Granted: both fetch through the proxy.
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let h = host(&rules("pypi.test", "registry.test"), state.path()).await;
    let (r, rec) = run(&h, ws.path(), pip_args.clone()).await;
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    assert!(ws.path().join("dl/hello_cheng-1.0-py3-none-any.whl").is_file(), "{}", r.output);
    assert_eq!(rec.unasked[0].hosts, vec!["pypi.test".to_string()]);
    let (r, rec) = run(&h, ws.path(), npm_args.clone()).await;
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    let installed = std::fs::read_to_string(ws.path().join("node_modules/hello-cheng/index.js")).unwrap();
    assert!(installed.contains("hello from registry.test"), "{installed}");
    assert!(rec.denials.is_empty(), "{:?}", rec.denials);

    // Granted another host: nothing fetched, each refusal recorded with its target.
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let h = host(&rules("files.pythonhosted.org", "registry.npmjs.org"), state.path()).await;
    for (args, target) in [(pip_args, format!("pypi.test:{port}")), (npm_args, format!("registry.test:{port}"))] {
        let (r, rec) = run(&h, ws.path(), args).await;
        assert_ne!(r.output["exit_code"], 0, "{}", r.output);
        assert!(
            rec.denials.iter().any(|d| d.target == target && d.message.contains("not among the hosts")),
            "{target}: {:?}",
            rec.denials
        );
    }
    assert!(!ws.path().join("dl/hello_cheng-1.0-py3-none-any.whl").exists());
    assert!(!ws.path().join("node_modules/hello-cheng").exists());
}
