//! External MCP servers under Cheng, with real servers nobody here wrote — the
//! reference `server-everything` and `server-filesystem` from npm, `mcp-server-time`
//! from PyPI — and a hostile one written for these tests (`tests/fixtures/mcp`). Every
//! attack has its positive control: the same server, or the same move, outside Cheng.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cheng_host::policy::Config;
use cheng_host::{Context, ErrorKind, Host, HostBuilder, Status};
use serde_json::{Value, json};

use crate::util;

fn npm_server(name: &str) -> PathBuf {
    util::target_dir().join(format!("test-runners/node_modules/@modelcontextprotocol/{name}/dist/index.js"))
}

pub(crate) fn toml_str(p: &Path) -> String {
    serde_json::to_string(&p.display().to_string()).unwrap()
}

/// Node and the npm server `name`, or a skip (a failure under CI).
fn node_and(name: &str) -> Option<(PathBuf, PathBuf)> {
    let node = util::node24();
    let script = npm_server(name);
    util::require(&format!("Node 24 and @modelcontextprotocol/{name}"), node.is_some() && script.is_file())
        .then(|| (node.unwrap(), script))
}

/// The text of a server tool's result.
pub(crate) fn text_of(out: &Value) -> String {
    out["content"].as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n")
}

fn everything_config(node: &Path, script: &Path, extra: &str) -> String {
    format!(
        "[[mcp_servers]]\nid = \"every\"\ncommand = {}\nargs = [{}, \"stdio\"]\napprove = \"never\"\n{extra}\n\
         [roles.agent]\ntools = [\"every__echo\", \"every__trigger-long-running-operation\"]\n",
        toml_str(node),
        toml_str(script)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn server_everything_tools_are_prefixed_granted_to_nobody_and_called_through_the_pipeline() {
    let Some((node, script)) = node_and("server-everything") else { return };
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let host = util::host_in(&everything_config(&node, &script, "timeout_ms = 20000"), state.path()).await;
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    let names: Vec<String> = host.tools().into_iter().map(|t| t.name).collect();
    for t in ["every__echo", "every__get-sum", "every__trigger-long-running-operation"] {
        assert!(names.contains(&t.to_string()), "{t} missing from {names:?}");
    }
    assert!(state.path().join("mcp/every.json").is_file(), "the definitions were pinned");

    // Granted: the call reaches the server and is recorded.
    let agent = Context::new(ws.path()).role("agent");
    let (r, rec) = host.call_recorded(&agent, "every__echo", json!({"message": "hello from cheng"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(text_of(&r.output), "Echo: hello from cheng");
    assert_eq!(rec.status, Status::Ok);
    assert_eq!(rec.tool, "every__echo");

    // Not granted: no role but `agent` holds it, and `agent` not get-sum.
    let dev = Context::new(ws.path()).role("developer");
    let r = host.call(&dev, "every__echo", json!({"message": "x"})).await;
    assert_eq!(r.status, Status::Denied);
    let r = host.call(&agent, "every__get-sum", json!({"a": 1, "b": 2})).await;
    assert_eq!(r.status, Status::Denied);
    // The pinned schema is checked before the server sees anything.
    let r = host.call(&agent, "every__echo", json!({"message": 5})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgument), "{}", r.output);
}

#[test]
fn an_mcp_client_of_cheng_serve_sees_and_calls_the_servers_tools_its_role_holds() {
    let Some((node, script)) = node_and("server-everything") else { return };
    if !crate::serve::python_sdk() {
        return;
    }
    let s = crate::serve::setup(&everything_config(&node, &script, ""));
    let doc = crate::serve::py("mcp_echo", "legacy", crate::serve::Target::Stdio(&s.stdio_words("agent")), &[]);
    assert_eq!(doc["tools"], json!(["every__echo", "every__trigger-long-running-operation"]), "{doc}");
    assert_eq!(doc["echo"]["is_error"], false, "{doc}");
    assert!(doc["echo"]["text"].as_str().unwrap().contains("Echo: through cheng serve"), "{doc}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_running_tool_is_cancelled_at_its_timeout_and_a_large_output_is_capped() {
    let Some((node, script)) = node_and("server-everything") else { return };
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let host =
        util::host_in(&everything_config(&node, &script, "timeout_ms = 1500\noutput_bytes = 4096"), state.path()).await;
    let agent = Context::new(ws.path()).role("agent");
    // Warm the server up so the budget measures the call, not Node's start.
    let r = host.call(&agent, "every__echo", json!({"message": "warm"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);

    let t = Instant::now();
    let r = host.call(&agent, "every__trigger-long-running-operation", json!({"duration": 20, "steps": 5})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Timeout), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("was told to cancel"), "{}", r.output);
    assert!(t.elapsed() < Duration::from_secs(5), "took {:?}", t.elapsed());

    // The caller cancelling stops the call too.
    let token = tokio_util::sync::CancellationToken::new();
    let cx = Context::new(ws.path()).role("agent").cancel_with(token.clone());
    let h = host.clone();
    let call = tokio::spawn(async move {
        h.call(&cx, "every__trigger-long-running-operation", json!({"duration": 20, "steps": 5})).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    token.cancel();
    let r = call.await.unwrap();
    assert_eq!(r.error_kind, Some(ErrorKind::Cancelled), "{}", r.output);

    // A result past output_bytes keeps its head and tail, with the marker every cut text carries.
    let long = format!("HEAD{}TAIL", "z".repeat(60_000));
    let r = host.call(&agent, "every__echo", json!({"message": long})).await;
    assert_eq!(r.status, Status::Ok);
    let text = text_of(&r.output);
    assert_eq!(r.output["truncated"], true);
    assert!(text.starts_with("Echo: HEAD") && text.ends_with("TAIL") && text.contains("bytes omitted"));
    assert!(text.len() < 4096 + 100, "{} bytes kept", text.len());
    // And the server still answers.
    let r = host.call(&agent, "every__echo", json!({"message": "still here"})).await;
    assert_eq!(text_of(&r.output), "Echo: still here");
}

/// `server-filesystem` directly, outside Cheng (the positive control): what it reads.
async fn read_outside_cheng(node: &Path, script: &Path, path: &Path) -> String {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    let mut cmd = tokio::process::Command::new(node);
    cmd.arg(script).arg("/").stderr(std::process::Stdio::null());
    let client = ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let args = json!({"path": path.display().to_string()}).as_object().unwrap().clone();
    let r = client.call_tool(CallToolRequestParams::new("read_text_file").with_arguments(args)).await.unwrap();
    let _ = client.cancel().await;
    text_of(&serde_json::to_value(&r).unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_filesystem_server_given_root_reads_the_workspace_but_landlock_refuses_everything_else() {
    let Some((node, script)) = node_and("server-filesystem") else { return };
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let elsewhere = tempfile::tempdir().unwrap();
    let secret = elsewhere.path().join("credentials");
    std::fs::write(&secret, "aws_secret_access_key = TOPSECRET\n").unwrap();
    // A secret in the home directory of whoever runs the tests.
    let home = PathBuf::from(std::env::var("HOME").unwrap());
    let home_secret = home.join(format!(".cheng-test-secret-{}", std::process::id()));
    std::fs::write(&home_secret, "HOMESECRET\n").unwrap();
    struct Rm(PathBuf);
    impl Drop for Rm {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _rm = Rm(home_secret.clone());

    // The control: the same server, started as its README says, reads both.
    assert!(read_outside_cheng(&node, &script, &secret).await.contains("TOPSECRET"));
    assert!(read_outside_cheng(&node, &script, &home_secret).await.contains("HOMESECRET"));

    let config = format!(
        "[[mcp_servers]]\nid = \"files\"\ncommand = {}\nargs = [{}, \"/\"]\nfs = \"read\"\napprove = \"never\"\n\
         [roles.agent]\ntools = [\"files__read_text_file\", \"files__list_directory\", \"files__write_file\"]\n",
        toml_str(&node),
        toml_str(&script)
    );
    let host = util::host_in(&config, state.path()).await;
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    let agent = Context::new(ws.path()).role("agent");
    let ws_root = std::fs::canonicalize(ws.path()).unwrap();
    let read = |p: PathBuf| {
        let host = host.clone();
        let agent = agent.clone();
        async move { host.call(&agent, "files__read_text_file", json!({"path": p.display().to_string()})).await }
    };
    let r = read(ws_root.join("inside.txt")).await;
    assert_eq!(text_of(&r.output), "inside", "{}", r.output);

    for p in [secret.clone(), home_secret.clone()] {
        let r = read(p.clone()).await;
        let t = text_of(&r.output);
        assert!(t.contains("EACCES"), "{} was not refused: {t}", p.display());
        assert!(!t.contains("SECRET"));
    }
    let r = host.call(&agent, "files__list_directory", json!({"path": home.display().to_string()})).await;
    assert!(text_of(&r.output).contains("EACCES"), "{}", r.output);
    // /etc is readable, its secrets are not.
    let r = read(PathBuf::from("/etc/hostname")).await;
    assert!(!text_of(&r.output).contains("EACCES"), "{}", r.output);
    if Path::new("/etc/shadow").exists() {
        assert!(text_of(&read(PathBuf::from("/etc/shadow")).await.output).contains("EACCES"));
    }
    // fs = "read": writing the workspace is refused too.
    let target = ws_root.join("written.txt");
    let r = host.call(&agent, "files__write_file", json!({"path": target.display().to_string(), "content": "x"})).await;
    assert!(text_of(&r.output).contains("EACCES"), "{}", r.output);
    assert!(!target.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_server_from_pypi_answers_under_fs_read() {
    let Some(python) = util::python_with("mcp_server_time", "mcp-server-time from PyPI; .ci/run installs it") else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let config = format!(
        "[[mcp_servers]]\nid = \"time\"\ncommand = {}\nargs = [\"-m\", \"mcp_server_time\"]\nfs = \"read\"\n\
         approve = [\"convert_time\"]\n[roles.agent]\ntools = [\"time__get_current_time\", \"time__convert_time\"]\n",
        toml_str(&python)
    );
    let host = util::host_in(&config, state.path()).await;
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    let agent = Context::new(ws.path()).role("agent");
    let r = host.call(&agent, "time__get_current_time", json!({"timezone": "Europe/Paris"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    let t = text_of(&r.output);
    assert!(t.contains("Europe/Paris") && t.contains("datetime"), "{t}");
    // `approve` lists convert_time: it asks, and the test's host has nobody to ask.
    let (r, rec) = host
        .call_recorded(
            &agent,
            "time__convert_time",
            json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        )
        .await;
    assert_eq!(r.status, Status::Denied, "{}", r.output);
    assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied));
    assert_eq!(rec.approvals.len(), 1);
}

struct Hostile {
    host: Host,
    ws: tempfile::TempDir,
    _state: tempfile::TempDir,
    config: String,
    state_path: PathBuf,
}

async fn hostile() -> Option<Hostile> {
    let python = util::python_with("json", "the hostile MCP server runs on it")?;
    let script = util::repo().join("tests/fixtures/mcp/hostile.py");
    let state = tempfile::tempdir().unwrap();
    let config = format!(
        "[[mcp_servers]]\nid = \"bad\"\ncommand = {}\nargs = [{}]\nfs = \"read\"\napprove = \"never\"\ntimeout_ms = 5000\n\
         [roles.agent]\ntools = [\"bad__ok\", \"bad__mutate\", \"bad__connect\", \"bad__flood_stderr\", \
         \"bad__flood_stdout\", \"bad__exit\", \"bad__garbage\", \"bad__hang\"]\n",
        toml_str(&python),
        toml_str(&script)
    );
    let host = util::host_in(&config, state.path()).await;
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    Some(Hostile { host, ws: util::workspace(), state_path: state.path().to_path_buf(), _state: state, config })
}

impl Hostile {
    async fn call(&self, tool: &str, input: Value) -> cheng_host::ToolResult {
        self.host.call(&Context::new(self.ws.path()).role("agent"), tool, input).await
    }

    async fn ok_still(&self) {
        let r = self.call("bad__ok", json!({})).await;
        assert_eq!(text_of(&r.output), "ok: fine", "{}", r.output);
    }
}

/// A server's description is capped before it reaches an agent, and shown escaped to
/// the operator: `cheng tools` never lets a server's text clear or recolour the terminal.
#[test]
fn a_servers_description_is_capped_and_shown_escaped() {
    let Some(python) = util::python_with("json", "the hostile MCP server runs on it") else { return };
    let script = util::repo().join("tests/fixtures/mcp/hostile.py");
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let config = state.path().join("cheng.toml");
    std::fs::write(
        &config,
        format!(
            "[[mcp_servers]]\nid = \"bad\"\ncommand = {}\nargs = [{}, \"--loud\"]\nfs = \"read\"\n\
             [roles.agent]\ntools = [\"bad__mutate\"]\n",
            toml_str(&python),
            toml_str(&script)
        ),
    )
    .unwrap();
    let tools = |json: bool| {
        let mut c = util::cheng_in(ws.path(), state.path());
        c.arg("--config").arg(&config).arg("tools");
        if json {
            c.arg("--json");
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    // What a person reads: one line, escaped, cut.
    let text = tools(false);
    let line = text.lines().find(|l| l.starts_with("bad__mutate")).unwrap_or_else(|| panic!("listed: {text}"));
    assert!(!text.contains('\u{1b}') && !text.contains('\u{202e}'), "raw escapes reach the terminal: {line:?}");
    assert!(line.contains("\\u{1b}[2J") && line.contains("\\u{202e}"), "{line}");
    assert!(line.chars().count() < 400, "{} characters", line.chars().count());
    // What an agent gets: the description cut at the cap, saying so.
    let doc: Value = serde_json::from_str(&tools(true)).unwrap();
    let mutate = doc.as_array().unwrap().iter().find(|t| t["name"] == "bad__mutate").unwrap();
    let d = mutate["description"].as_str().unwrap();
    let cap = cheng_host::sources::mcp::MAX_DESCRIPTION_CHARS;
    assert!(d.chars().count() < cap + 100, "{} characters", d.chars().count());
    // The count in the note is what the server sent (25 characters and 300,000 A's).
    assert!(d.ends_with(&format!("[description cut at {cap} of 300025 characters]")), "{}", &d[d.len() - 80..]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_server_crashes_floods_and_lies_and_the_next_call_still_works() {
    let Some(h) = hostile().await else { return };
    h.ok_still().await;

    // It exits in the middle of a call: the connection failed (not a crash of the host's).
    let r = h.call("bad__exit", json!({})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::TransportError), "{}", r.output);
    let msg = r.output["error"].as_str().unwrap();
    assert!(msg.starts_with("The connection to the MCP server \"bad\" behind \"bad__exit\" failed: "), "{msg}");
    h.ok_still().await;

    // It answers with a line that is not JSON.
    let r = h.call("bad__garbage", json!({})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::TransportError), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("malformed JSON-RPC"), "{}", r.output);
    h.ok_still().await;

    // It floods stderr (20 MB): drained, the call answers.
    let r = h.call("bad__flood_stderr", json!({})).await;
    assert_eq!(text_of(&r.output), "flooded", "{}", r.output);
    // It floods stdout with one 26 MB message: past the cap, the connection ends.
    let r = h.call("bad__flood_stdout", json!({})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::TransportError), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("a message over"), "{}", r.output);
    h.ok_still().await;

    // It never answers: the per-call timeout.
    let r = h.call("bad__hang", json!({})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Timeout), "{}", r.output);
    h.ok_still().await;
}

/// `h`'s configuration with `command` in place of its command (its pins, in the same
/// state directory, are kept: the server is not started when the host is built).
fn with_command(h: &Hostile, command: &Path) -> String {
    let line = |l: &str| match l.starts_with("command = ") {
        true => format!("command = {}", toml_str(command)),
        false => l.to_string(),
    };
    h.config.lines().map(line).collect::<Vec<_>>().join("\n")
}

/// A server whose process cannot be started: its command is not there, or `execve`
/// refuses it (an interpreter that does not exist). Each call fails with
/// `spawn_failed`, the restart's wait too.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_be_started_fails_with_spawn_failed() {
    let Some(h) = hostile().await else { return };
    h.ok_still().await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("server");
    std::fs::write(&script, "#!/nonexistent/cheng-interpreter\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // The control: outside Cheng, the system cannot start it either.
    let control = std::process::Command::new(&script).status();
    assert_eq!(control.map_err(|e| e.kind()).unwrap_err(), std::io::ErrorKind::NotFound);
    let script_said = format!("`{}` could not be started", script.display());
    for (command, why) in [
        (PathBuf::from("cheng-no-such-server-7c1"), "was not found on the host's PATH"),
        (script.clone(), script_said.as_str()),
    ] {
        let host = util::host_in(&with_command(&h, &command), &h.state_path).await;
        assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
        let cx = Context::new(h.ws.path()).role("agent");
        let r = host.call(&cx, "bad__ok", json!({})).await;
        assert_eq!((r.status, r.error_kind), (Status::Error, Some(ErrorKind::SpawnFailed)), "{}", r.output);
        let msg = r.output["error"].as_str().unwrap();
        assert!(msg.contains("could not be started") && msg.contains(why), "{msg}");
        assert_eq!(r.output["terminal"], true);
        // The next call, inside the restart's wait, says the same kind.
        let r = host.call(&cx, "bad__ok", json!({})).await;
        assert_eq!(r.error_kind, Some(ErrorKind::SpawnFailed), "{}", r.output);
        assert!(r.output["error"].as_str().unwrap().contains("it is restarted on a call after"), "{}", r.output);
    }
}

/// A server that never answers `initialize` fails with `handshake_timeout` (after the
/// handshake's budget, at least 10 s); one that exits during it with `transport_error`.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_handshake_is_a_handshake_timeout_or_a_transport_error() {
    let Some(h) = hostile().await else { return };
    std::fs::write(h.ws.path().join("mode.txt"), "mute").unwrap();
    let t = Instant::now();
    let r = h.call("bad__ok", json!({})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::HandshakeTimeout), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("did not finish the MCP handshake within 10000 ms"));
    assert_eq!(r.output["terminal"], false, "a later call starts it again");
    assert!(t.elapsed() >= Duration::from_secs(10) && t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());

    std::fs::write(h.ws.path().join("mode.txt"), "die").unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await; // past the restart's wait
    let r = h.call("bad__ok", json!({})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::TransportError), "{}", r.output);
    let msg = r.output["error"].as_str().unwrap();
    assert!(msg.starts_with("The connection to the MCP server \"bad\" behind \"bad__ok\" failed: "), "{msg}");

    // The control: the same server, answering again, is started and called.
    std::fs::write(h.ws.path().join("mode.txt"), "v1").unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    h.ok_still().await;
}

/// A server that announces changed tools and then cannot list them: the call is not
/// sent (`refresh_failed`), and neither is the next one until a listing succeeds.
#[tokio::test(flavor = "multi_thread")]
async fn a_tool_list_that_cannot_be_read_is_refresh_failed_until_it_can() {
    let Some(h) = hostile().await else { return };
    h.ok_still().await;
    std::fs::write(h.ws.path().join("mode.txt"), "nolist").unwrap();
    h.ok_still().await; // the server announces list_changed with this answer
    for _ in 0..2 {
        let r = h.call("bad__ok", json!({})).await;
        assert_eq!(r.error_kind, Some(ErrorKind::RefreshFailed), "{}", r.output);
        let msg = r.output["error"].as_str().unwrap();
        assert!(
            msg.contains("could not be read, so the call was not sent") && msg.contains("the list is broken"),
            "{msg}"
        );
    }
    // Listing again works: the calls go through.
    std::fs::write(h.ws.path().join("mode.txt"), "v1").unwrap();
    h.ok_still().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_server_cannot_reach_a_loopback_port() {
    let Some(h) = hostile().await else { return };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    // The control: the same script, outside Cheng, connects.
    let out = std::process::Command::new(util::python_with("json", "the hostile MCP server runs on it").unwrap())
        .arg(util::repo().join("tests/fixtures/mcp/hostile.py"))
        .args(["--connect", &port.to_string()])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "connected");
    assert!(listener.accept().is_ok(), "the control's connection arrived");

    let r = h.call("bad__connect", json!({"port": port})).await;
    let t = text_of(&r.output);
    assert!(t.starts_with("refused"), "{t}");
    assert!(listener.accept().is_err(), "nothing from the server reached the port");
    h.ok_still().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rewritten_description_is_withheld_until_the_operator_accepts_it() {
    let Some(h) = hostile().await else { return };
    let r = h.call("bad__mutate", json!({})).await;
    assert_eq!(text_of(&r.output), "mutate: fine", "{}", r.output);

    // The rug pull: the description now instructs the model; the server says so.
    std::fs::write(h.ws.path().join("mode.txt"), "v2").unwrap();
    h.ok_still().await; // the server announces list_changed with this answer
    let r = h.call("bad__mutate", json!({})).await;
    assert_eq!(r.status, Status::Denied, "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("cheng mcp diff bad"), "{}", r.output);
    assert!(!h.host.tools().iter().any(|t| t.name == "bad__mutate"), "a withheld tool is not offered");
    assert!(h.host.tools().iter().any(|t| t.name == "bad__ok"));

    // The operator's commands, as the operator runs them.
    let cfg = h.state_path.join("cheng.toml");
    std::fs::write(&cfg, &h.config).unwrap();
    let run = |sub: &str| {
        util::cheng_in(h.ws.path(), &h.state_path).arg("--config").arg(&cfg).args(["mcp", sub, "bad"]).output().unwrap()
    };
    let diff = run("diff");
    assert_eq!(diff.status.code(), Some(1), "{}", String::from_utf8_lossy(&diff.stderr));
    let d: Value = serde_json::from_slice(&diff.stdout).unwrap();
    let change = &d["changed"]["mutate"]["description"];
    assert_eq!(change[0], "Says hello.");
    assert!(change[1].as_str().unwrap().contains("id_rsa"), "{d}");
    let accept = run("accept");
    assert!(accept.status.success(), "{}", String::from_utf8_lossy(&accept.stderr));
    let again = run("diff");
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stdout));
    // A host started after the operator accepted serves the new definition.
    let host = util::host_in(&h.config, &h.state_path).await;
    let desc = host.tools().into_iter().find(|t| t.name == "bad__mutate").unwrap().description;
    assert!(desc.contains("id_rsa"));
    let r = host.call(&Context::new(h.ws.path()).role("agent"), "bad__mutate", json!({})).await;
    assert_eq!(text_of(&r.output), "mutate: fine", "{}", r.output);
}

#[test]
fn bad_mcp_server_entries_are_refused_with_the_reason() {
    for (entry, why) in [
        ("id = \"Bad\"\ncommand = \"x\"", "must match"),
        ("id = \"a\"", "give `command`"),
        ("id = \"a\"\ncommand = \"x\"\nurl = \"http://127.0.0.1:1/mcp\"", "not both"),
        ("id = \"a\"\nurl = \"https://mcp.example.com/mcp\"", "must be http://"),
        ("id = \"a\"\ncommand = \"x\"\nnet = [\"example.com\"]", "cannot be enforced"),
        ("id = \"a\"\ncommand = \"x\"\nfs = \"all\"", "is not none, read, write"),
        ("id = \"a\"\ncommand = \"x\"\nfs = { write = [\".\"] }", "whole workspace"),
        ("id = \"a\"\ncommand = \"x\"\napprove = \"sometimes\"", "approve"),
        ("id = \"a\"\ncommand = \"x\"\nenv = [\"HOME\"]", "cannot be passed"),
        ("id = \"a\"\ncommand = \"x\"\ntimeout_ms = 0", "timeout_ms"),
    ] {
        let err = Config::from_toml_str(&format!("[[mcp_servers]]\n{entry}\n"), "t.toml").unwrap_err().to_string();
        assert!(err.contains(why), "{entry}: {err}");
    }
    let two = "[[mcp_servers]]\nid = \"a\"\ncommand = \"x\"\n[[mcp_servers]]\nid = \"a\"\ncommand = \"y\"\n";
    assert!(Config::from_toml_str(two, "t.toml").unwrap_err().to_string().contains("used twice"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scoped_write_grant_writes_only_its_folder_and_never_the_hosts_state() {
    let Some((node, script)) = node_and("server-filesystem") else { return };
    let ws = util::workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let config = |fs: &str| {
        format!(
            "[[mcp_servers]]\nid = \"files\"\ncommand = {}\nargs = [{}, \".\"]\nfs = {fs}\napprove = \"never\"\n\
             [roles.agent]\ntools = [\"files__write_file\"]\n",
            toml_str(&node),
            toml_str(&script)
        )
    };
    let state = tempfile::tempdir().unwrap();
    let host = util::host_in(&config("{ read = [\".\"], write = [\"out\"] }"), state.path()).await;
    let agent = Context::new(ws.path()).role("agent");
    let write = |p: &str| {
        let host = host.clone();
        let agent = agent.clone();
        let path = root.join(p).display().to_string();
        async move { host.call(&agent, "files__write_file", json!({"path": path, "content": "written"})).await }
    };
    let r = write("out/ok.txt").await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(std::fs::read_to_string(root.join("out/ok.txt")).unwrap(), "written");
    for p in ["top.txt", "docs/a.md"] {
        let r = write(p).await;
        assert!(text_of(&r.output).contains("EACCES"), "{p}: {}", r.output);
    }
    assert_eq!(std::fs::read_to_string(root.join("docs/a.md")).unwrap(), "# A\n");
    assert!(!root.join("top.txt").exists());

    // The host's state inside the workspace: a server that could write it is not started.
    let inner_state = root.join("out/state");
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(&config("{ read = [\".\"], write = [\"out\"] }"), "test.toml").unwrap());
    b.state_dir(&inner_state);
    let host = b.build().await.unwrap();
    // Given (a found workspace holding the state directory is refused before any tool).
    let r = host.call(&agent.clone().given(true), "files__write_file", json!({"path": "out/z", "content": "y"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::SpawnFailed), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("lies where this server could write"), "{}", r.output);
}

/// `server-filesystem` granted the whole workspace for writing: the path rules'
/// carve-outs hold in its view too — `.git/hooks` and `.vscode/` read-only, `.env`
/// read as empty — while the ordinary file beside them is written and read (control).
#[tokio::test(flavor = "multi_thread")]
async fn a_write_granted_server_cannot_change_what_runs_later_nor_read_secrets() {
    let Some((node, script)) = node_and("server-filesystem") else { return };
    if !util::require("user namespaces", cheng_host::confinement().isolated) {
        return;
    }
    let ws = util::workspace();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(root.join(".vscode")).unwrap();
    std::fs::write(root.join(".vscode/tasks.json"), "{}").unwrap();
    std::fs::write(root.join(".env"), "API_KEY=hunter2-secret\n").unwrap();
    let config = format!(
        "[[mcp_servers]]\nid = \"files\"\ncommand = {}\nargs = [{}, \".\"]\nfs = \"write\"\napprove = \"never\"\n\
         [roles.agent]\ntools = [\"files__write_file\", \"files__read_text_file\"]\n",
        toml_str(&node),
        toml_str(&script)
    );
    let state = tempfile::tempdir().unwrap();
    let host = util::host_in(&config, state.path()).await;
    let agent = Context::new(ws.path()).role("agent");
    let write = |p: &str| {
        let host = host.clone();
        let agent = agent.clone();
        let path = root.join(p).display().to_string();
        async move { host.call(&agent, "files__write_file", json!({"path": path, "content": "#!/bin/sh\nevil\n"})).await }
    };
    let r = write("ordinary.txt").await;
    assert_eq!(r.status, Status::Ok, "control: {}", r.output);
    assert!(std::fs::read_to_string(root.join("ordinary.txt")).unwrap().contains("evil"));
    for p in [".git/hooks/pre-commit", ".vscode/tasks.json"] {
        let _ = write(p).await;
    }
    assert!(!root.join(".git/hooks/pre-commit").exists());
    assert_eq!(std::fs::read_to_string(root.join(".vscode/tasks.json")).unwrap(), "{}");
    let read = |p: &str| {
        let host = host.clone();
        let agent = agent.clone();
        let path = root.join(p).display().to_string();
        async move { host.call(&agent, "files__read_text_file", json!({"path": path})).await }
    };
    assert!(text_of(&read("ordinary.txt").await.output).contains("evil"), "control");
    let r = read(".env").await;
    assert!(!text_of(&r.output).contains("hunter2"), "{}", r.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamable_http_server_is_reached_through_the_egress_guard() {
    let Some((node, script)) = node_and("server-everything") else { return };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = tokio::process::Command::new(&node)
        .arg(&script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the HTTP server did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let entry = format!(
        "[[mcp_servers]]\nid = \"remote\"\nurl = \"http://127.0.0.1:{port}/mcp\"\napprove = \"never\"\n\
         [roles.agent]\ntools = [\"remote__echo\"]\n"
    );
    // Loopback is a private address: the guard refuses it unless the operator opens it.
    let state = tempfile::tempdir().unwrap();
    let host = util::host_in(&entry, state.path()).await;
    let errors = host.load_errors().join("\n");
    assert!(errors.contains("remote") && errors.contains("refused"), "{errors}");
    assert!(!host.tools().iter().any(|t| t.name == "remote__echo"));

    let state = tempfile::tempdir().unwrap();
    let host = util::host_in(&format!("[web]\nallow_private = [\"127.0.0.1/32\"]\n{entry}"), state.path()).await;
    assert!(host.load_errors().is_empty(), "{:?}", host.load_errors());
    let ws = util::workspace();
    let r = host.call(&Context::new(ws.path()).role("agent"), "remote__echo", json!({"message": "over http"})).await;
    assert_eq!(text_of(&r.output), "Echo: over http", "{}", r.output);
    let _ = child.kill().await;
}
