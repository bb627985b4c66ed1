//! The `cheng` command line as a user runs it: one JSON document on stdout, notices on
//! stderr, and the documented exit codes.

use serde_json::Value;

use crate::util;

fn run(cmd: &mut std::process::Command) -> (i32, Value, String) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let doc: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{stdout}\nstderr:\n{stderr}"));
    (out.status.code().unwrap_or(-1), doc, stderr)
}

#[test]
fn tools_json_lists_the_first_tools_with_schemas() {
    let ws = util::workspace();
    let (code, doc, _) = run(util::cheng(ws.path()).args(["tools", "--json"]));
    assert_eq!(code, 0);
    let tools = doc.as_array().unwrap();
    for name in ["read_file", "list_dir"] {
        let t = tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} listed"));
        assert_eq!(t["input_schema"]["type"], "object", "{t}");
        assert!(t["input_schema"]["properties"].is_object());
        assert_eq!(t["output_schema"]["type"], "object");
        assert!(t["description"].as_str().unwrap().len() > 20);
    }
}

#[test]
fn call_reads_a_file_and_exits_zero() {
    let ws = util::workspace();
    std::fs::write(ws.path().join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    let (code, doc, stderr) =
        run(util::cheng(ws.path()).args(["call", "read_file", r#"{"path":"notes.txt","start_line":2}"#]));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(doc["content"], "two\nthree\n");
    assert_eq!(doc["start_line"], 2);
    assert_eq!(doc["total_lines"], 3);
    // The default role is named on stderr.
    assert!(stderr.contains("role \"developer\""), "{stderr}");
}

#[test]
fn call_reads_its_input_from_stdin() {
    use std::io::Write;
    let ws = util::workspace();
    let mut child = util::cheng(ws.path())
        .args(["call", "list_dir", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(br#"{"path":"docs"}"#).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["entries"][0]["name"], "a.md");
}

#[test]
fn errors_exit_one_with_the_envelope() {
    let ws = util::workspace();
    let (code, doc, _) = run(util::cheng(ws.path()).args(["call", "read_file", r#"{"path":"missing.txt"}"#]));
    assert_eq!(code, 1);
    assert_eq!(doc["success"], false);
    assert_eq!(doc["error_kind"], "LOCAL_EXECUTOR_NOT_FOUND");
    assert_eq!(doc["terminal"], true);
    assert_eq!(doc["error"], "File does not exist: missing.txt");
    // Unknown tools are a different fact.
    let (code, doc, _) = run(util::cheng(ws.path()).args(["call", "no_such_tool", "{}"]));
    assert_eq!(code, 1);
    assert_eq!(doc["error"], "unknown tool \"no_such_tool\"");
}

#[test]
fn denied_calls_exit_two() {
    let ws = util::workspace();
    let cfg = ws.path().join("cheng.toml");
    std::fs::write(&cfg, "[roles.lister]\ntools = [\"list_dir\"]\n").unwrap();
    let (code, doc, _) = run(util::cheng(ws.path()).arg("--config").arg(&cfg).args([
        "--role",
        "lister",
        "call",
        "read_file",
        r#"{"path":"inside.txt"}"#,
    ]));
    assert_eq!(code, 2);
    assert_eq!(
        doc["error"],
        "refused: tool \"read_file\" is not granted to role \"lister\"; granted: list_dir. Continue without it."
    );
}

#[test]
fn usage_errors_exit_64() {
    let ws = util::workspace();
    let out = util::cheng(ws.path()).args(["call", "read_file", "{not json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(out.stdout.is_empty());
    let out = util::cheng(ws.path()).args(["frobnicate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let out = util::cheng(ws.path()).args(["--role", "nobody", "call", "read_file", "{}"]).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
}

#[test]
fn record_prints_the_whole_call_record() {
    let ws = util::workspace();
    let (code, doc, _) = run(util::cheng(ws.path()).args([
        "--run",
        "run-7",
        "call",
        "--record",
        "read_file",
        r#"{"path":"inside.txt"}"#,
    ]));
    assert_eq!(code, 0);
    assert_eq!(doc["status"], "ok");
    assert_eq!(doc["run"], "run-7");
    assert_eq!(doc["tool"], "read_file");
    assert_eq!(doc["arguments"]["path"], "inside.txt");
    assert_eq!(doc["result"]["content"], "inside");
}

#[test]
fn a_bad_config_file_is_refused_with_path_and_line() {
    let ws = util::workspace();
    let cfg = ws.path().join("bad.toml");
    std::fs::write(&cfg, "default_role = \"developer\"\n[roles.x]\ntools = 5\n").unwrap();
    let out = util::cheng(ws.path()).arg("--config").arg(&cfg).args(["tools"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A bad configuration is a usage error.
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr.contains("bad.toml") && stderr.contains("line 3"), "{stderr}");
}

#[test]
fn a_flooding_plugin_leaves_stdout_one_json_document() {
    let ws = util::workspace();
    let wasm = util::program_path("hostile");
    let sha = sha256_of(&wasm);
    let cfg = ws.path().join("cheng.toml");
    std::fs::write(
        &cfg,
        format!(
            "[roles.t]\ntools = [\"evil__probe\"]\n[[plugins]]\nid = \"evil\"\npath = {:?}\nsha256 = \"{sha}\"\nfs = \"read\"\n",
            wasm.display().to_string()
        ),
    )
    .unwrap();
    let (code, doc, _) = run(util::cheng(ws.path()).arg("--config").arg(&cfg).args([
        "--role",
        "t",
        "call",
        "evil__probe",
        r#"{"action":"flood"}"#,
    ]));
    assert_eq!(code, 0);
    assert_eq!(doc["detail"], format!("printed {} bytes to each stream", 100 << 20));
}

fn sha256_of(path: &std::path::Path) -> String {
    let out = std::process::Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
}

/// A config loading the hostile component as `ap`, with a role holding its probe.
fn approval_config(ws: &std::path::Path) -> std::path::PathBuf {
    let wasm = util::program_path("hostile");
    let cfg = ws.join("cheng.toml");
    std::fs::write(
        &cfg,
        format!(
            "default_role = \"t\"\n[roles.t]\ntools = [\"ap__probe\"]\n[[plugins]]\nid = \"ap\"\npath = {:?}\nsha256 = \"{}\"\n",
            wasm.display().to_string(),
            sha256_of(&wasm)
        ),
    )
    .unwrap();
    cfg
}

#[test]
fn approvals_prompt_on_a_terminal() {
    let ws = util::workspace();
    let cfg = approval_config(ws.path());
    let state = tempfile::tempdir().unwrap();
    let (st, w, c) = (state.path().display().to_string(), ws.path().display().to_string(), cfg.display().to_string());
    let args = [
        "--state-dir",
        &st,
        "--workspace",
        &w,
        "--config",
        &c,
        "call",
        "ap__probe",
        r#"{"action":"approval","target":"ls -la"}"#,
    ];
    // `script` gives cheng a pseudo-terminal; what is typed there answers the prompt.
    for (typed, expected) in [("y\n", "Approved"), ("n\n", "Declined")] {
        let screen = util::cheng_at_terminal(&args, state.path(), typed, std::time::Duration::from_millis(300));
        // The card shows the summary and asks; the answer reaches the tool.
        assert!(screen.contains("approval requested"), "{screen}");
        assert!(screen.contains("summary: ls -la"), "{screen}");
        assert!(screen.contains("Approve? [y"), "{screen}");
        assert!(screen.contains(&format!("\"detail\": \"{expected}\"")), "{screen}");
    }
}

#[test]
fn approvals_without_a_terminal_are_refused_at_once() {
    let ws = util::workspace();
    let cfg = approval_config(ws.path());
    let state = tempfile::tempdir().unwrap();
    // Compile the components into this state dir first: the timing below is about the
    // approval, not about a first start.
    let warm = util::cheng_in(ws.path(), state.path()).arg("--config").arg(&cfg).arg("tools").output().unwrap();
    assert!(warm.status.success());
    let started = std::time::Instant::now();
    // setsid: no controlling terminal, no approver.
    let out = std::process::Command::new("setsid")
        .arg(env!("CARGO_BIN_EXE_cheng"))
        .arg("--state-dir")
        .arg(state.path())
        .arg("--workspace")
        .arg(ws.path())
        .arg("--config")
        .arg(&cfg)
        .args(["call", "--record", "ap__probe", r#"{"action":"approval","target":"ls -la"}"#])
        .env("CHENG_LOG", "error")
        .env_remove("CHENG_AUTO_APPROVE")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let rec: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Refused, not after the 10-minute default wait; the record says nobody was asked.
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "{:?}", started.elapsed());
    assert_eq!(rec["result"]["detail"], "Declined");
    assert_eq!(rec["approvals"][0]["decision"], "no_approver");
}

#[test]
fn auto_approve_is_seeded_once_then_settings_rule() {
    let ws = util::workspace();
    let cfg = approval_config(ws.path());
    let state = tempfile::tempdir().unwrap();
    let run = |auto: Option<&str>| {
        let mut c = std::process::Command::new("setsid");
        c.arg(env!("CARGO_BIN_EXE_cheng"))
            .arg("--state-dir")
            .arg(state.path())
            .arg("--workspace")
            .arg(ws.path())
            .arg("--config")
            .arg(&cfg)
            .args(["call", "ap__probe", r#"{"action":"approval","target":"ls"}"#])
            .env("CHENG_LOG", "error")
            .stdin(std::process::Stdio::null());
        match auto {
            Some(v) => c.env("CHENG_AUTO_APPROVE", v),
            None => c.env_remove("CHENG_AUTO_APPROVE"),
        };
        let out = c.output().unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        (doc["detail"].as_str().unwrap().to_string(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    // Only the exact value "true" counts; "1" at first boot saves auto-approve off.
    let (d, _) = run(Some("1"));
    assert_eq!(d, "Declined");
    // Now the saved settings rule: the variable no longer turns it on.
    let (d, _) = run(Some("true"));
    assert_eq!(d, "Declined");
    // `cheng settings set` turns it on; each skipped approval is announced on stderr.
    let out =
        util::cheng_in(ws.path(), state.path()).args(["settings", "set", "auto_approve", "true"]).output().unwrap();
    assert!(out.status.success());
    let (d, stderr) = run(None);
    assert_eq!(d, "Approved");
    assert!(stderr.contains("approved without asking"), "{stderr}");
    // And `cheng settings` shows it.
    let out = util::cheng_in(ws.path(), state.path()).args(["settings"]).output().unwrap();
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["auto_approve"], true);
}
