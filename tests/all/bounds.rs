//! Calls that must end and say what happened: a FIFO, a device and a sparse 10 GB file
//! in the workspace, a pattern that compiles to gigabytes, a 50 MB argument; exit codes
//! and statuses that match the outcome; log lines with terminal escapes in them; a
//! sanitizer that keeps only checkboxes; git's pathspec magic and a broken HEAD; a
//! rename-only patch; `.git` in the spellings other file systems read as `.git`.

use std::process::Command;
use std::time::Duration;

use cheng_host::{Context, ErrorKind, Host, Status};
use serde_json::{Value, json};

use crate::util;

/// A call that must come back within `secs`, whatever it hits.
async fn bounded(h: &Host, cx: &Context, tool: &str, input: Value, secs: u64) -> cheng_host::ToolResult {
    tokio::time::timeout(Duration::from_secs(secs), h.call(cx, tool, input.clone()))
        .await
        .unwrap_or_else(|_| panic!("{tool} {input} did not return within {secs} s"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fifo_a_device_and_a_sparse_file_are_refused_or_bounded() {
    let ws = util::workspace();
    let w = ws.path();
    assert!(Command::new("mkfifo").arg(w.join("fifo")).status().unwrap().success());
    let h = util::host("", vec![]).await;
    let cx = Context::new(w);
    let patch = "--- a/fifo\n+++ b/fifo\n@@ -1 +1 @@\n-a\n+b\n";
    for (tool, input) in [
        ("read_file", json!({"path": "fifo"})),
        ("read_files", json!({"paths": ["fifo"]})),
        ("edit_file", json!({"path": "fifo", "old_text": "a", "new_text": "b"})),
        ("apply_patch", json!({"patch": patch})),
        ("workspace_markdown", json!({"operation": "outline", "path": "fifo"})),
        ("workspace_preview", json!({"operation": "markdown", "path": "fifo"})),
        ("workspace_preview", json!({"operation": "artifact_summary", "path": "fifo"})),
    ] {
        let r = bounded(&h, &cx, tool, input.clone(), 20).await;
        // read_files reports per file; every other tool fails the call.
        let text = r.output.to_string();
        assert!(text.contains("not a regular file"), "{tool} {input}: {text}");
    }
    // A device node (made here as root), and the control: a regular file is described.
    let dev = w.join("null-device");
    if util::require(
        "mknod (root)",
        Command::new("mknod").arg(&dev).args(["c", "1", "3"]).status().is_ok_and(|s| s.success()),
    ) {
        let r =
            bounded(&h, &cx, "workspace_preview", json!({"operation": "artifact_summary", "path": "null-device"}), 20)
                .await;
        assert!(r.output["error"].as_str().unwrap_or("").contains("not a regular file"), "{}", r.output);
    }
    // A sparse 10 GB file: described from its head, not hashed end to end.
    let sparse = std::fs::File::create(w.join("sparse.bin")).unwrap();
    sparse.set_len(10 << 30).unwrap();
    let started = std::time::Instant::now();
    let r =
        bounded(&h, &cx, "workspace_preview", json!({"operation": "artifact_summary", "path": "sparse.bin"}), 20).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["metadata"]["size"], 10u64 << 30);
    assert!(r.output["metadata"]["sha256"].is_null() && r.output["metadata"]["note"].is_string(), "{}", r.output);
    assert!(started.elapsed() < Duration::from_secs(5));
    // The control: a small file is hashed.
    let r =
        bounded(&h, &cx, "workspace_preview", json!({"operation": "artifact_summary", "path": "inside.txt"}), 20).await;
    assert!(r.output["metadata"]["sha256"].is_string(), "{}", r.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pattern_too_large_to_compile_is_refused_naming_the_limit() {
    let ws = util::workspace();
    let h = util::host("", vec![]).await;
    let cx = Context::new(ws.path());
    let r = bounded(&h, &cx, "search_files", json!({"pattern": "a{1000}{1000}{1000}"}), 30).await;
    assert_eq!(r.error_kind, Some(ErrorKind::TooLarge), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("8 MiB"), "{}", r.output);
    // The control: a modest repetition searches.
    let r = bounded(&h, &cx, "search_files", json!({"pattern": "i{1}n{1}side"}), 30).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_huge_argument_is_refused_and_stored_in_bounds() {
    let ws = util::workspace();
    let state = tempfile::tempdir().unwrap();
    let mut b = cheng_host::HostBuilder::new();
    b.state_dir(state.path()).cache_dir(util::shared_state().join("cache"));
    let h = b.build().await.unwrap();
    let cx = Context::new(ws.path());
    let big = "x".repeat(50 << 20);
    let r = h.call(&cx, "think", json!({"thought": big})).await;
    assert_eq!((r.status, r.error_kind), (Status::Error, Some(ErrorKind::TooLarge)), "{}", r.output.to_string().len());
    // The record keeps head, tail, size and digest: the log stays small.
    let log = std::fs::metadata(state.path().join("audit.jsonl")).unwrap().len();
    assert!(log < 512 << 10, "the audit log grew by {log} bytes");
    let rec = &h.audit_log().unwrap().read(&Default::default()).unwrap()[0];
    assert_eq!(rec.arguments["truncated"], true);
    assert!(rec.arguments["size"].as_u64().unwrap() > 50 << 20);
    // The control: an ordinary argument is stored whole.
    let r = h.call(&cx, "think", json!({"thought": "small"})).await;
    assert_eq!(r.status, Status::Ok);
    let recs = h.audit_log().unwrap().read(&Default::default()).unwrap();
    assert_eq!(recs[1].arguments["thought"], "small");
}

#[test]
fn exit_codes_and_statuses_follow_the_outcome() {
    let ws = util::workspace();
    let state = tempfile::tempdir().unwrap();
    let cfg = ws.path().join("../cheng-exit.toml");
    std::fs::write(&cfg, "[[process.rules]]\nprogram = \"sh\"\nargs = []\ndecision = \"allow\"\n").unwrap();
    let call = |tool: &str, input: Value| {
        let out = util::cheng_in(ws.path(), state.path())
            .arg("--config")
            .arg(&cfg)
            .args(["call", "--approve", "yes", "--record", tool, &input.to_string()])
            .output()
            .unwrap();
        let rec: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.code(), rec["status"].as_str().unwrap_or("").to_string())
    };
    // A command that cannot start, and one that times out: the call failed.
    assert_eq!(call("workspace_shell", json!({"command": "no-such-program-here"})), (Some(1), "error".into()));
    assert_eq!(
        call("workspace_shell", json!({"command": "sh", "args": ["-c", "sleep 5"], "timeout_ms": 200})),
        (Some(1), "error".into())
    );
    // A command's own non-zero exit is a normal result.
    assert_eq!(call("workspace_shell", json!({"command": "sh", "args": ["-c", "exit 3"]})), (Some(0), "ok".into()));
    // A request that cannot run as written is an error, not a denial (one rule for
    // every tool: denied means the host refused a right).
    assert_eq!(call("workspace_shell", json!({"command": "ls", "cwd": "../.."})), (Some(1), "error".into()));
    assert_eq!(call("workspace_shell", json!({"command": "ls", "args": ["a\u{0}b"]})), (Some(1), "error".into()));
    // Input that is not UTF-8, and a configuration that does not parse: usage errors.
    let mut child = util::cheng_in(ws.path(), state.path())
        .args(["call", "think", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"{\"thought\": \"\xff\xfe\"}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&cfg, "[process\n").unwrap();
    let out = util::cheng_in(ws.path(), state.path()).arg("--config").arg(&cfg).arg("tools").output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let _ = std::fs::remove_file(&cfg);
}

#[test]
fn log_lines_carry_no_terminal_escapes() {
    let ws = util::workspace();
    let state = tempfile::tempdir().unwrap();
    let cfg = ws.path().join("../cheng-log.toml");
    std::fs::write(&cfg, "[[process.rules]]\nprogram = \"echo\"\nargs = []\ndecision = \"allow\"\n").unwrap();
    let nasty = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[31mred";
    let out = util::cheng_in(ws.path(), state.path())
        .arg("--config")
        .arg(&cfg)
        .args(["call", "workspace_shell", &json!({"command": "echo", "args": [nasty]}).to_string()])
        .env("CHENG_LOG", "cheng=info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The log line naming the command is there, escaped, and nothing on stderr is an
    // escape sequence (no colours either: stderr is not a terminal).
    assert!(stderr.contains("allowed by an operator rule") && stderr.contains("\\u{1b}]0;pwned"), "{stderr}");
    assert!(!out.stderr.contains(&0x1b), "{stderr:?}");
    // The control: the command's own output still carries its bytes (it is data).
    assert!(String::from_utf8_lossy(&out.stdout).contains("\\u001b]0;pwned"));
    let _ = std::fs::remove_file(&cfg);
}

#[tokio::test(flavor = "multi_thread")]
async fn only_checkboxes_survive_the_sanitizer() {
    let ws = util::workspace();
    let h = util::host("", vec![]).await;
    let md = "- [x] done\n\n<input type=\"text\" name=\"password\"> <input name=\"bare\"> <input type=\"submit\">\n";
    let r =
        h.call(&Context::new(ws.path()), "workspace_preview", json!({"operation": "markdown", "content": md})).await;
    let html = r.output["preview"].as_str().unwrap();
    // Every input is a disabled checkbox: no text box, no button, no name.
    let inputs = html.matches("<input").count();
    assert_eq!(inputs, 4, "{html}");
    assert_eq!(html.matches("type=\"checkbox\"").count(), 4, "{html}");
    assert!(!html.contains("type=\"text\"") && !html.contains("submit") && !html.contains("password"), "{html}");
    // The task list's checked box keeps its state.
    assert!(html.contains("checked"), "{html}");
}

fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let o = util::git(dir).args(args).output().unwrap();
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn pathspec_magic_is_refused_wildcards_match_and_a_broken_head_is_an_error() {
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path();
    git(w, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(w.join("sub")).unwrap();
    std::fs::write(w.join("f.txt"), "1\n").unwrap();
    std::fs::write(w.join("sub/g.txt"), "1\n").unwrap();
    std::fs::write(w.join("sub/h.rs"), "1\n").unwrap();
    git(w, &["add", "-A"]);
    git(w, &["commit", "-q", "-m", "one"]);
    for f in ["f.txt", "sub/g.txt", "sub/h.rs"] {
        std::fs::write(w.join(f), "2\n").unwrap();
    }
    let h = util::host("", vec![]).await;
    let cx = Context::new(w);
    let status = |specs: Value| {
        let h = h.clone();
        let cx = cx.clone();
        async move { h.call(&cx, "workspace_git", json!({"operation": "status", "pathspecs": specs})).await }
    };
    // Magic is refused rather than read as a plain path that matches nothing.
    for spec in [":(top)f.txt", ":(icase)F.TXT", ":!f.txt"] {
        let r = status(json!([spec])).await;
        assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgument), "{spec}: {}", r.output);
        assert!(r.output["error"].as_str().unwrap().contains("magic"), "{}", r.output);
    }
    // Wildcards match as git matches them (`*` crosses `/`): the same lines as git.
    for spec in ["*", "*.txt", "sub/*", "s?b/h.rs"] {
        let r = status(json!([spec])).await;
        let ours = r.output["stdout"].as_str().unwrap().to_string();
        assert_eq!(ours, git(w, &["status", "--porcelain=v1", "-uall", "--", spec]), "{spec}");
        assert!(!ours.is_empty(), "{spec}");
    }
    // A HEAD naming a commit that does not exist is an error, not an empty history.
    std::fs::write(w.join(".git/refs/heads/main"), "1111111111111111111111111111111111111111\n").unwrap();
    let r = h.call(&cx, "workspace_git", json!({"operation": "log"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotFound), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("HEAD is broken"), "{}", r.output);
    // The control: an unborn branch is an empty history, and says so without failing.
    let fresh = tempfile::tempdir().unwrap();
    git(fresh.path(), &["init", "-q", "-b", "main"]);
    let r = h.call(&Context::new(fresh.path()), "workspace_git", json!({"operation": "log"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    // A 70 KB revision is not echoed whole.
    let r = h.call(&cx, "workspace_git", json!({"operation": "show", "revision": "x".repeat(70_000)})).await;
    assert!(r.output["error"].as_str().unwrap().len() < 1000, "{}", r.output["error"].as_str().unwrap().len());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rename_only_patch_renames_as_git_apply_does() {
    let ws = util::workspace();
    let reference = tempfile::tempdir().unwrap();
    for d in [ws.path(), reference.path()] {
        std::fs::write(d.join("old.txt"), "keep me\n").unwrap();
    }
    let patch = "diff --git a/old.txt b/new.txt\nsimilarity index 100%\nrename from old.txt\nrename to new.txt\n";
    let h = util::host("", vec![]).await;
    let r = h.call(&Context::new(ws.path()), "apply_patch", json!({"patch": patch})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["files"][0]["renamed_from"], "old.txt");
    // The reference: git apply on a copy.
    std::fs::write(reference.path().join("p.diff"), patch).unwrap();
    let o = Command::new("git").args(["apply", "p.diff"]).current_dir(reference.path()).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for d in [ws.path(), reference.path()] {
        assert!(!d.join("old.txt").exists());
        assert_eq!(std::fs::read_to_string(d.join("new.txt")).unwrap(), "keep me\n");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn git_directories_in_other_spellings_are_protected() {
    let ws = util::workspace();
    let h = util::host("", vec![]).await;
    let cx = Context::new(ws.path());
    for path in [".GIT/hooks/x", ".git /x", ".git./x", "sub/.Git/config"] {
        let (r, rec) =
            h.call_recorded(&cx, "write_file", json!({"path": path, "content": "x", "create_dirs": true})).await;
        // Refused by the host, and on record as its denial.
        assert_eq!(r.status, Status::Denied, "{path}: {}", r.output);
        assert_eq!(rec.denials.len(), 1, "{path}");
        assert!(!ws.path().join(path).exists(), "{path}");
    }
    // The control: names that only look alike are written.
    for path in [".github/x", ".gitignore", "a.git/x"] {
        let r = h.call(&cx, "write_file", json!({"path": path, "content": "x", "create_dirs": true})).await;
        assert_eq!(r.status, Status::Ok, "{path}: {}", r.output);
    }
}
