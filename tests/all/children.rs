//! Nothing the host starts can approve, read or outlive it. Each attack is made for
//! real by a process Cheng starts — a command run unasked (an allow rule for an
//! interpreter), a command a person approved (auto-approve), and an external MCP server
//! (the hostile one, under `fs = "read"`) — with `tests/fixtures/mcp/escape.py`, and the
//! same script run by the test itself, outside Cheng, is the positive control: it does
//! answer the approval, find the host's secrets, and leave a daemon behind.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::mcp::{text_of, toml_str};
use crate::util;

const ESCAPE: &str = include_str!("../fixtures/mcp/escape.py");

/// The interpreter a rule allows unasked: the system's, whose files Landlock lets an
/// unasked command read (a version manager's shim would not be).
fn system_python() -> Option<PathBuf> {
    let p = PathBuf::from("/usr/bin/python3");
    util::require("/usr/bin/python3", p.is_file()).then_some(p)
}

/// The config: python3 allowed unasked, the hostile MCP server, a role holding both.
fn config(python: &Path, server_python: &Path) -> String {
    let hostile = util::repo().join("tests/fixtures/mcp/hostile.py");
    format!(
        "[approvals]\ntimeout_ms = 30000\n\
         [[process.rules]]\nprogram = {py}\nargs = []\ndecision = \"allow\"\n\
         [[mcp_servers]]\nid = \"bad\"\ncommand = {sp}\nargs = [{h}]\nfs = \"read\"\napprove = \"never\"\ntimeout_ms = 10000\n\
         [roles.agent]\ninherits = \"developer\"\ntools = [\"bad__escape\"]\n",
        py = toml_str(python),
        sp = toml_str(server_python),
        h = toml_str(&hostile),
    )
}

/// The JSON line a run of escape.py printed.
fn printed(text: &str) -> Value {
    let line = text.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or("");
    serde_json::from_str(line).unwrap_or_else(|_| panic!("escape.py printed no JSON: {text}"))
}

/// escape.py run by the test itself: the positive control.
fn outside(python: &Path, args: &[&str]) -> Value {
    let out = std::process::Command::new(python).arg("-c").arg(ESCAPE).args(args).output().unwrap();
    printed(&String::from_utf8_lossy(&out.stdout))
}

/// What `cheng approvals` (run by the test: a person's process) lists as pending.
fn pending(state: &Path) -> Vec<Value> {
    let out = util::cheng_in(Path::new("/tmp"), state).arg("approvals").output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    doc["pending"].as_array().cloned().unwrap_or_default()
}

/// Wait for a pending card whose summary holds `needle`; its id.
async fn card(state: &Path, needle: &str) -> String {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let hit = pending(state).into_iter().find(|p| p["request"]["summary"].as_str().unwrap_or("").contains(needle));
        if let Some(p) = hit {
            return p["request"]["id"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < until, "no card for {needle} appeared");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn no_command_or_server_the_host_starts_can_answer_an_approval() {
    let Some(python) = system_python() else { return };
    let Some(server_python) = util::python_with("json", "the hostile MCP server runs on it") else { return };
    let (ws, state) = (util::workspace(), tempfile::tempdir().unwrap());
    let (client, mut child) =
        serve_with_marker(&python, &server_python, "approvals-test", ws.path(), state.path(), false).await;
    // Where an attacker would find it: `<state>/approvals/<server pid>.sock`.
    let socket = state.path().join("approvals").join(format!("{}.sock", child.id().unwrap()));
    let path = socket.display().to_string();
    let py = python.display().to_string();
    let peer = client.peer().clone();
    let ask = |tool: &'static str, args: Value| {
        let peer = peer.clone();
        tokio::spawn(async move {
            let req = CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone());
            peer.call_tool(req).await.unwrap()
        })
    };

    // The agent's own command, waiting for a person.
    let waiting = ask("workspace_shell", json!({"command": "touch", "args": ["pwned"]}));
    card(state.path(), "touch").await;
    // The card says who asks and where.
    let shown = pending(state.path())[0]["request"].clone();
    let ws_name = ws.path().file_name().unwrap().to_string_lossy().to_string();
    assert!(shown["workspace"].as_str().unwrap().ends_with(&ws_name), "{shown}");
    assert!(shown["asked_by"].as_str().unwrap().starts_with("the stdio client via "), "{shown}");
    assert!(shown["requested_at_ms"].as_u64().unwrap() > 0, "{shown}");
    let refused = |who: &str, seen: &Value| {
        assert_eq!(seen["sockets"], 1, "{who}: {seen}");
        assert_eq!((seen["listed"].as_u64(), seen["applied"].as_u64()), (Some(0), Some(0)), "{who}: {seen}");
        // Closed unanswered: no reply, or a broken pipe when the refusal came first.
        let first = &seen["replies"][0];
        assert!(first.get("closed").is_some() || first.get("error").is_some(), "{who}: it was answered: {seen}");
    };

    // A command run unasked, by an allow rule for the interpreter.
    let out = call(&client, "workspace_shell", json!({"command": &py, "args": ["-c", ESCAPE, "approve", &path]})).await;
    refused("an unasked command", &printed(out["stdout"].as_str().unwrap_or("")));

    // A command a person approved (no rule allows `env`): the person answers its card.
    let approved = ask("workspace_shell", json!({"command": "env", "args": [&py, "-c", ESCAPE, "approve", &path]}));
    let id = card(state.path(), "env").await;
    let ok = util::cheng_in(Path::new("/tmp"), state.path()).args(["approve", &id]).status().unwrap();
    assert!(ok.success(), "the person's approval went through");
    let r = approved.await.unwrap();
    let stdout = r.structured_content.as_ref().and_then(|s| s["stdout"].as_str()).unwrap_or("").to_string();
    refused("an approved command", &printed(&stdout));

    // An external MCP server.
    let out = call(&client, "bad__escape", json!({"argv": ["approve", &path]})).await;
    refused("an MCP server", &printed(out["text"].as_str().unwrap_or("")));
    assert_eq!(pending(state.path()).len(), 1, "the request is still waiting");
    assert!(!ws.path().join("pwned").exists());

    // The refusals are on record.
    let access = std::fs::read_to_string(state.path().join("access.jsonl")).unwrap_or_default();
    let refusals = access.lines().filter(|l| l.contains("approvals socket")).count();
    assert!(refusals >= 3, "the refusals were not recorded: {access}");

    // The control: the same script, run by a person's process, lists and approves.
    let seen = outside(&python, &["approve", &path]);
    assert_eq!((seen["listed"].as_u64(), seen["applied"].as_u64()), (Some(1), Some(1)), "{seen}");
    let r = tokio::time::timeout(Duration::from_secs(20), waiting).await.unwrap().unwrap();
    assert_eq!(r.structured_content.as_ref().map(|s| s["exit_code"].clone()), Some(json!(0)), "{r:?}");
    assert!(ws.path().join("pwned").exists(), "the approved command ran");
    drop(client);
    let _ = child.wait().await;
}

/// `cheng serve` over stdio with a marker in its environment and on its command line,
/// and an rmcp client on its stdin and stdout (dropping the client closes its stdin).
/// With `auto_approve`, a command no rule allows is approved without asking.
async fn serve_with_marker(
    python: &Path,
    server_python: &Path,
    marker: &str,
    ws: &Path,
    state: &Path,
    auto_approve: bool,
) -> (rmcp::service::RunningService<RoleClient, ()>, tokio::process::Child) {
    let config_file = state.join("cheng.toml");
    std::fs::write(&config_file, config(python, server_python)).unwrap();
    let shared = util::shared_state().join("cache");
    std::fs::create_dir_all(&shared).unwrap();
    std::os::unix::fs::symlink(&shared, state.join("cache")).unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_cheng"));
    cmd.arg("--state-dir").arg(state).arg("--workspace").arg(ws).arg("--config").arg(&config_file);
    cmd.args(["--role", "agent", "--run", marker, "serve"]);
    cmd.env("CHENG_TEST_SECRET", marker).env("CHENG_AUTO_APPROVE", auto_approve.to_string()).env("CHENG_LOG", "error");
    cmd.env("XDG_CONFIG_HOME", state.join("no-config"));
    cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve((stdout, stdin)).await.unwrap();
    (client, child)
}

/// A tool's result: its structured content (a built-in's) with `text`, every text block
/// joined (an MCP server's tool answers in text).
async fn call(client: &rmcp::service::RunningService<RoleClient, ()>, tool: &str, args: Value) -> Value {
    let req = CallToolRequestParams::new(tool.to_string()).with_arguments(args.as_object().unwrap().clone());
    let r = client.call_tool(req).await.unwrap();
    let mut out = r.structured_content.unwrap_or_else(|| json!({}));
    // An MCP server's tool: its own text blocks are inside the structured envelope.
    let text = match out["content"].is_array() {
        true => text_of(&out),
        false => r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect(),
    };
    if let Some(o) = out.as_object_mut() {
        o.insert("text".into(), json!(text));
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_the_host_starts_reads_its_environment_or_command_line() {
    let Some(python) = system_python() else { return };
    let Some(server_python) = util::python_with("json", "the hostile MCP server runs on it") else { return };
    let marker = format!("cheng-secret-{}", std::process::id());
    let (ws, state) = (util::workspace(), tempfile::tempdir().unwrap());
    let (client, mut child) = serve_with_marker(&python, &server_python, &marker, ws.path(), state.path(), true).await;
    let pid = child.id().unwrap();

    // The control: from outside, the host's command line holds the marker, and so does
    // its environment for a reader allowed to trace it (root here; a same-user reader
    // is refused because the host is not dumpable).
    let seen = outside(&python, &["host", &marker]);
    assert!(seen["cmdline"].as_array().unwrap().contains(&json!(pid)), "control: {seen}");
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } == 0 {
        assert!(seen["environ"].as_array().unwrap().contains(&json!(pid)), "control: {seen}");
    } else {
        assert!(!seen["environ"].as_array().unwrap().contains(&json!(pid)), "non-dumpable: {seen}");
    }

    let py = python.display().to_string();
    // Unasked (the rule), approved (through `env`, which no rule allows: auto-approved),
    // and the MCP server.
    let unasked =
        call(&client, "workspace_shell", json!({"command": py, "args": ["-c", ESCAPE, "host", &marker]})).await;
    let approved =
        call(&client, "workspace_shell", json!({"command": "env", "args": [&py, "-c", ESCAPE, "host", &marker]})).await;
    let server = call(&client, "bad__escape", json!({"argv": ["host", &marker]})).await;
    for (who, out, text) in [
        ("an unasked command", &unasked, unasked["stdout"].as_str().unwrap_or("").to_string()),
        ("an approved command", &approved, approved["stdout"].as_str().unwrap_or("").to_string()),
        ("an MCP server", &server, server["text"].as_str().unwrap_or("").to_string()),
    ] {
        let seen = printed(&text);
        assert!(seen["environ"].as_array().unwrap().is_empty(), "{who} read the host's environment: {seen}\n{out}");
        assert!(seen["cmdline"].as_array().unwrap().is_empty(), "{who} read the host's command line: {seen}\n{out}");
        // Its parent is its namespace's init, not the host.
        assert_eq!(seen["ppid"], 1, "{who} is not in a pid namespace of its own: {seen}");
    }
    // The commands did read their /proc (their own namespace's).
    let listed = printed(unasked["stdout"].as_str().unwrap());
    assert!(listed.get("listing").is_none(), "the unasked command could not list its /proc: {listed}");
    drop(client);
    let _ = child.wait().await;
}

/// The live temporary directories of MCP servers started by host `pid`.
fn server_temp_dirs(pid: u32) -> Vec<PathBuf> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("cheng-mcp-{pid}-")))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mcp_servers_daemon_ends_with_the_host_on_every_exit() {
    let Some(python) = system_python() else { return };
    let Some(server_python) = util::python_with("json", "the hostile MCP server runs on it") else { return };

    // The control: outside Cheng, the daemon outlives the script that left it.
    let control = format!("2001.{}", std::process::id());
    let seen = outside(&python, &["daemon", &control]);
    assert_eq!(seen["detached"], control.as_str());
    // The script has exited (its output ended with it): a daemon seen now outlived it.
    util::wait_until("control: the daemon runs on", Duration::from_secs(10), || util::alive(&control) == 1);
    let _ = std::process::Command::new("pkill").args(["-f", &control]).status();

    for (how, signal) in [("kill -9", Some(libc::SIGKILL)), ("SIGTERM", Some(libc::SIGTERM)), ("EOF", None)] {
        // The daemon's marker; the host's own command line holds another.
        let marker = format!("2002.{}{}", std::process::id(), how.len());
        let (ws, state) = (util::workspace(), tempfile::tempdir().unwrap());
        let run = format!("daemon-test-{}", how.len());
        let (client, mut child) = serve_with_marker(&python, &server_python, &run, ws.path(), state.path(), true).await;
        let pid = child.id().unwrap();
        let out = call(&client, "bad__escape", json!({"argv": ["daemon", &marker]})).await;
        assert!(out["text"].as_str().unwrap_or("").contains("detached"), "{how}: {out}");
        let until = Instant::now() + Duration::from_secs(5);
        while util::alive(&marker) == 0 {
            assert!(Instant::now() < until, "{how}: the daemon never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        let dirs = server_temp_dirs(pid);
        assert_eq!(dirs.len(), 1, "{how}: one server, one temp dir: {dirs:?}");
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&dirs[0]).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o700, "{how}: the server's temp dir is the operator's alone");
        match signal {
            // SAFETY: a signal to the server process this test started.
            Some(sig) => unsafe {
                libc::kill(pid as i32, sig);
            },
            None => drop(client),
        }
        let until = Instant::now() + Duration::from_secs(10);
        while util::alive(&marker) > 0 || (signal != Some(libc::SIGKILL) && !server_temp_dirs(pid).is_empty()) {
            assert!(
                Instant::now() < until,
                "{how}: left behind: {} daemon(s), temp dirs {:?}",
                util::alive(&marker),
                server_temp_dirs(pid)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.wait().await;
        if signal == Some(libc::SIGKILL) {
            // What a host killed outright leaves, the next host to start removes.
            let next = util::cheng_in(ws.path(), state.path()).args(["tools"]).output().unwrap();
            assert!(next.status.success(), "{}", String::from_utf8_lossy(&next.stderr));
            assert!(server_temp_dirs(pid).is_empty(), "{how}: the dead host's temp dir is still there");
        }
    }
}

/// A host that is not root isolates its commands all the same. Run as `nobody` (through
/// `setpriv`, when the tests run as root; otherwise every test here already runs a host
/// that is not root). The control: two ordinary `nobody` processes, one reads the
/// other's environment. The attack: a command the same `nobody` host runs looks for its
/// secret in every `/proc/*/environ` and `cmdline` it can see, and finds neither the host
/// nor the control process.
#[test]
fn a_host_that_is_not_root_isolates_its_commands_too() {
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("the tests run as a user that is not root: every host test here is the non-root case");
        return;
    }
    if !util::require("setpriv (util-linux)", std::path::Path::new("/usr/bin/setpriv").exists()) {
        return;
    }
    use std::os::unix::fs::PermissionsExt as _;
    let marker = format!("cheng-nonroot-{}", std::process::id());
    let home = tempfile::tempdir().unwrap();
    for d in ["", "ws", "state", "cfg"] {
        let p = home.path().join(d);
        std::fs::create_dir_all(&p).unwrap();
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let nobody = |program: &str| {
        let mut c = std::process::Command::new("/usr/bin/setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).arg(program);
        c.env_clear().env("PATH", "/usr/bin:/bin").env("HOME", home.path()).env("CHENG_TEST_SECRET", &marker);
        c.current_dir(home.path());
        c
    };
    let look = "grep -l \"$0\" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; echo ppid=$PPID";
    // The control: an ordinary process of the same user is readable.
    let mut sleeper = nobody("/bin/sleep").arg("30").spawn().unwrap();
    // Until `setpriv` has dropped to `nobody` and become `sleep`, its /proc files are
    // root's: wait for that before looking (under load it can take a while).
    let cmdline = format!("/proc/{}/cmdline", sleeper.id());
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read(&cmdline).is_ok_and(|c| c.starts_with(b"/bin/sleep\0")) && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = nobody("/bin/sh").args(["-c", look, &marker]).output().unwrap();
    let seen = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(seen.contains(&format!("/proc/{}/environ", sleeper.id())), "control: {seen}");
    // The attack, from a command the host approved (auto-approve) and ran.
    let input = json!({"command": "/bin/sh", "args": ["-c", look, &marker]}).to_string();
    let out = nobody(env!("CARGO_BIN_EXE_cheng"))
        .env("XDG_CONFIG_HOME", home.path().join("cfg"))
        .env("CHENG_AUTO_APPROVE", "true")
        .env("CHENG_LOG", "error")
        .arg("--state-dir")
        .arg(home.path().join("state"))
        .arg("--workspace")
        .arg(home.path().join("ws"))
        .args(["--run", &marker, "call", "workspace_shell", &input])
        .output()
        .unwrap();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    let stdout = doc["stdout"].as_str().unwrap_or_default();
    assert_eq!(doc["exit_code"], 0, "{doc}");
    assert!(stdout.contains("ppid=1"), "not in a pid namespace of its own: {doc}");
    // Only its own processes' files, which hold the marker as an argument: the shell
    // (pid 2 in its namespace) and its grep.
    let found: Vec<&str> = stdout.lines().filter(|l| l.starts_with("/proc/")).collect();
    assert!(found.iter().all(|l| l.ends_with("/cmdline")), "a command read another process's environment: {found:?}");
    assert!(!found.contains(&format!("/proc/{}/cmdline", sleeper.id()).as_str()), "it saw the control: {found:?}");
    assert!(found.len() <= 3, "it saw processes outside its namespace: {found:?}");
}
