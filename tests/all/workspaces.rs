//! The workspace is chosen, never stumbled into: `cheng serve` without `--workspace`
//! works in the client's root (one; of several the one holding the server's current
//! directory; re-read after `roots/list_changed`), else the current directory — never
//! `/` or the home directory unless given. Over HTTP only roots within `[serve]
//! workspaces` count, and a token may be pinned to one. Driven by the official Python
//! SDK declaring roots (one, several, none, changed, outside the allowed globs).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::serve::{Target, py, python_sdk, setup};
use crate::util;

/// Candidate workspaces, each with a `which.txt` naming it.
struct Places {
    _dir: tempfile::TempDir,
    base: PathBuf,
}

impl Places {
    fn new(names: &[&str]) -> Places {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        for n in names {
            std::fs::create_dir_all(base.join(n).join("sub")).unwrap();
            std::fs::write(base.join(n).join("which.txt"), n).unwrap();
        }
        Places { _dir: dir, base }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.base.join(name)
    }

    fn uri(&self, name: &str) -> String {
        format!("file://{}", self.path(name).display())
    }
}

/// `cheng serve` over stdio with no `--workspace`, as words for the Python client.
fn words(state: &Path, config: &Path) -> Vec<String> {
    [env!("CARGO_BIN_EXE_cheng"), "--state-dir", &state.display().to_string()]
        .into_iter()
        .map(str::to_string)
        .chain(["--config".to_string(), config.display().to_string(), "serve".to_string()])
        .collect()
}

/// The Python client started in `cwd` (so is the server it launches), with `home` as
/// the home directory.
fn roots_call(cwd: &Path, home: &Path, w: &[String], roots: Option<&str>, then: Option<&str>) -> Value {
    let script = util::repo().join("tests/python/mcp_client.py");
    let mut c = Command::new("python3");
    c.current_dir(cwd).env("HOME", home).arg(&script).args(["roots", "--mode", "legacy", "--path", "which.txt"]);
    if let Some(r) = roots {
        c.arg(format!("--roots={r}"));
    }
    if let Some(t) = then {
        c.arg(format!("--then-roots={t}"));
    }
    c.arg("--stdio").args(w).env("CHENG_LOG", "error");
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|_| panic!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr)))
}

fn read_text(r: &Value) -> String {
    if r["is_error"] == true {
        format!("ERROR: {}", r["envelope"]["error"])
    } else {
        r["structured"]["content"].as_str().unwrap_or("").to_string()
    }
}

#[test]
fn a_stdio_session_works_in_its_root_or_where_it_was_started_but_never_in_the_home() {
    if !python_sdk() {
        return;
    }
    let s = setup("");
    let config = s.state.path().join("cheng.toml");
    let w = words(s.state.path(), &config);
    let p = Places::new(&["home", "home/proj", "other"]);
    let home = p.path("home");
    let (proj, other) = (p.path("home/proj"), p.path("other"));

    // One root: that one, wherever the server was started.
    let doc = roots_call(&other, &home, &w, Some(&p.uri("home/proj")), None);
    assert_eq!(read_text(&doc["first"]), "home/proj", "{doc}");
    assert_eq!(doc["roots_asked"], 1, "{doc}");
    // Several: the one holding the current directory.
    let both = format!("{},{}", p.uri("other"), p.uri("home/proj"));
    let doc = roots_call(&proj.join("sub"), &home, &w, Some(&both), None);
    assert_eq!(read_text(&doc["first"]), "home/proj", "{doc}");
    // Several, none holding it: refused, with the list.
    let doc = roots_call(&p.base, &home, &w, Some(&both), None);
    let e = read_text(&doc["first"]);
    assert!(e.starts_with("ERROR") && e.contains("2 roots") && e.contains(&other.display().to_string()), "{e}");
    // Changed: the next call asks again and works in the new root.
    let doc = roots_call(&other, &home, &w, Some(&p.uri("other")), Some(&p.uri("home/proj")));
    assert_eq!(read_text(&doc["first"]), "other", "{doc}");
    assert_eq!(read_text(&doc["second"]), "home/proj", "{doc}");
    assert_eq!(doc["roots_asked"], 2, "{doc}");
    // No roots capability: the current directory.
    let doc = roots_call(&other, &home, &w, None, None);
    assert_eq!(read_text(&doc["first"]), "other", "{doc}");

    // Started from the home directory or from `/`, no roots: refused, saying how.
    for start in [home.clone(), PathBuf::from("/")] {
        let doc = roots_call(&start, &home, &w, None, None);
        let e = read_text(&doc["first"]);
        assert!(e.starts_with("ERROR") && e.contains("--workspace"), "from {}: {e}", start.display());
        assert_eq!(doc["first"]["envelope"]["error_kind"], "LOCAL_EXECUTOR_PATH_REFUSED", "{doc}");
    }
    // A root that is the home, or holds it: refused too.
    let doc = roots_call(&other, &home, &w, Some(&format!("file://{}", p.base.display())), None);
    assert!(read_text(&doc["first"]).contains("holds"), "{doc}");
    // The positive control: the home given explicitly is served.
    let mut given = w.clone();
    given.splice(1..1, ["--workspace".to_string(), home.display().to_string()]);
    std::fs::write(home.join("which.txt"), "home").unwrap();
    let doc = roots_call(&p.base, &home, &given, Some(&p.uri("other")), None);
    assert_eq!(read_text(&doc["first"]), "home", "{doc}");
    assert!(doc.get("roots_asked").is_none(), "a given workspace asks no roots: {doc}");

    // `cheng call` from the home directory is refused the same way.
    let out = Command::new(env!("CARGO_BIN_EXE_cheng"))
        .current_dir(&home)
        .env("HOME", &home)
        .args(["--state-dir", &s.state.path().display().to_string(), "call", "list_dir"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--workspace"));
}

#[test]
fn over_http_a_root_must_be_allowed_and_a_pinned_token_wins() {
    if !python_sdk() {
        return;
    }
    let p = Places::new(&["work/a", "work/b", "elsewhere"]);
    let s = setup(&format!("[serve]\nworkspaces = [\"{}/work/*\"]\n", p.base.display()));
    // Without --workspace nor [serve] workspaces, --http refuses to start.
    let bare = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cheng"))
        .args(["--state-dir", &bare.path().display().to_string(), "serve", "--http", "127.0.0.1:0"])
        .env("XDG_CONFIG_HOME", bare.path())
        .env_remove("CHENG_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[serve] workspaces"));

    // Tokens made without --workspace are not pinned; with it, they are.
    let token_add = |name: &str, pin: Option<&Path>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cheng"));
        c.args(["--state-dir", &s.state.path().display().to_string()]);
        if let Some(w) = pin {
            c.arg("--workspace").arg(w);
        }
        let out = c.args(["token", "add", "--role", "developer", "--name", name]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["token"].as_str().unwrap().to_string()
    };
    let token = token_add("roots", None);
    let pinned = token_add("pinned", Some(&p.path("work/b")));
    let mut c = Command::new(env!("CARGO_BIN_EXE_cheng"));
    c.args(["--state-dir", &s.state.path().display().to_string()])
        .args(["--config", &s.state.path().join("cheng.toml").display().to_string()]);
    let server = crate::serve::Server::start(c.args(["serve", "--http", "127.0.0.1:0"]));
    let url = format!("http://{}/mcp", server.addr);
    let call = |token: &str, roots: Option<String>| {
        let mut extra = vec!["--path".to_string(), "which.txt".to_string()];
        if let Some(r) = roots {
            extra.push(format!("--roots={r}"));
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        py("roots", "legacy", Target::Http(&url, token), &extra)
    };
    assert_eq!(read_text(&call(&token, Some(p.uri("work/a")))["first"]), "work/a");
    let e = read_text(&call(&token, Some(p.uri("elsewhere")))["first"]);
    assert!(e.contains("not among the workspaces"), "{e}");
    let e = read_text(&call(&token, None)["first"]);
    assert!(e.contains("no workspace"), "{e}");
    // The pinned token works in its workspace whatever its roots say, and asks none.
    let doc = call(&pinned, Some(p.uri("work/a")));
    assert_eq!(read_text(&doc["first"]), "work/b", "{doc}");
    // Every record names its workspace.
    let recs = s.cheng().args(["records", "--tool", "read_file"]).output().unwrap();
    let recs: Value = serde_json::from_slice(&recs.stdout).unwrap();
    let places: Vec<&str> = recs.as_array().unwrap().iter().filter_map(|r| r["workspace"].as_str()).collect();
    assert!(places.contains(&p.path("work/a").to_str().unwrap()), "{places:?}");
    assert!(places.contains(&p.path("work/b").to_str().unwrap()), "{places:?}");
}

/// A workspace given relative (`--workspace tb/ws`), through a symbolic link or with `..`
/// in it is recorded as the absolute, resolved directory, by `cheng call` and by `cheng
/// serve`: a record names the same place whatever directory the command ran in.
#[tokio::test(flavor = "multi_thread")]
async fn a_relative_or_linked_workspace_is_recorded_absolute_and_resolved() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(base.join("tb/ws")).unwrap();
    std::fs::write(base.join("tb/ws/which.txt"), "ws").unwrap();
    std::os::unix::fs::symlink(base.join("tb"), base.join("link")).unwrap();
    let state = tempfile::tempdir().unwrap();
    // Components compile once: the shared cache (entries keyed by content and engine).
    let shared = util::shared_state().join("cache");
    std::fs::create_dir_all(&shared).unwrap();
    std::os::unix::fs::symlink(&shared, state.path().join("cache")).unwrap();
    let read = serde_json::json!({"path": "which.txt"}).to_string();
    for given in ["tb/ws", "link/ws", "./tb/../link/ws"] {
        let out = util::cheng_in(Path::new(given), state.path())
            .current_dir(&base)
            .args(["call", "read_file", &read])
            .output()
            .unwrap();
        assert!(out.status.success(), "{given}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // `cheng serve` over stdio, started in `base` with a relative, linked workspace.
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_cheng"));
    cmd.arg("--state-dir").arg(state.path()).args(["--workspace", "link/ws", "serve"]);
    cmd.current_dir(&base).env_remove("CHENG_CONFIG").env_remove("CHENG_AUTO_APPROVE").env("CHENG_LOG", "error");
    cmd.env("XDG_CONFIG_HOME", util::shared_state().join("no-config"));
    let (server, _) =
        rmcp::transport::TokioChildProcess::builder(cmd).stderr(std::process::Stdio::null()).spawn().unwrap();
    let client = ().serve(server).await.unwrap();
    let args = serde_json::json!({"path": "which.txt"}).as_object().unwrap().clone();
    let r = client.call_tool(CallToolRequestParams::new("read_file").with_arguments(args)).await.unwrap();
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let _ = client.cancel().await;

    let places = || {
        let out = util::cheng_in(&base, state.path()).args(["records", "--tool", "read_file"]).output().unwrap();
        let recs: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let places: Vec<String> = recs
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| r["workspace"].as_str().unwrap_or("(none)").to_string())
            .collect();
        places
    };
    util::wait_until("the four calls' records", std::time::Duration::from_secs(30), || places().len() >= 4);
    let ws = base.join("tb/ws").display().to_string();
    assert_eq!(places(), vec![ws; 4], "every record names the resolved workspace");
}

/// The host's own rule, for every caller (an embedder's `Host::call` here): a workspace
/// that was found rather than given is refused when it is `/` or holds the host's state
/// directory, with a denial on the record saying how to give it; given explicitly
/// (`Context::given`), the same directory is served (the positive control), and an
/// ordinary project directory is served either way.
#[tokio::test(flavor = "multi_thread")]
async fn the_host_refuses_a_found_workspace_that_is_root_or_holds_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let state = base.join("state");
    std::fs::create_dir_all(base.join("project")).unwrap();
    std::fs::write(base.join("project/a.txt"), "a").unwrap();
    let mut b = cheng_host::HostBuilder::new();
    b.cache_dir(util::shared_state().join("cache"));
    b.state_dir(&state);
    let h = b.build().await.unwrap();
    for (ws, what) in
        [(base.clone(), "holds the host's state directory"), (PathBuf::from("/"), "the file system's root")]
    {
        let (r, rec) = h.call_recorded(&cheng_host::Context::new(&ws), "list_dir", serde_json::json!({})).await;
        assert_eq!(r.status, cheng_host::Status::Denied, "{}", r.output);
        assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::PathRefused));
        let e = r.output["error"].as_str().unwrap();
        assert!(e.contains(what) && e.contains("--workspace") && e.contains("Context::given"), "{e}");
        assert!(rec.denials.iter().any(|d| d.target == ws.display().to_string()), "{:?}", rec.denials);
        // Given explicitly, it is served.
        let r = h.call(&cheng_host::Context::new(&ws).given(true), "list_dir", serde_json::json!({})).await;
        assert_eq!(r.status, cheng_host::Status::Ok, "{}", r.output);
    }
    let r = h.call(&cheng_host::Context::new(base.join("project")), "list_dir", serde_json::json!({})).await;
    assert_eq!(r.status, cheng_host::Status::Ok, "{}", r.output);
}
