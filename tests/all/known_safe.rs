//! The known-safe list: read-only commands (`ls`, `cat`, `git status`, …) run with
//! nobody asked, in the confined tier, and say so in the call's record — and what
//! would write or run something still asks: `find -delete`, `git diff --output`, a
//! workspace's own `./ls`, an `ls` that is another program, one reached through a
//! launcher, one the operator's rules speak of, one in a workspace holding the host's
//! own files, and every command once `known_safe = false`. Each with its control.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use cheng_host::approvals::{ApprovalRequest, Approver, Decision};
use cheng_host::policy::Config;
use cheng_host::records::CallRecord;
use cheng_host::{Context, ErrorKind, Host, HostBuilder, Status, ToolResult};
use serde_json::{Value, json};

use crate::util;

/// Keeps each card it is shown and answers with a fixed decision.
struct Cards(Mutex<Vec<ApprovalRequest>>, Decision);
impl Approver for Cards {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        self.0.lock().unwrap().push(r.clone());
        let d = self.1;
        Box::pin(async move { d })
    }
}

impl Cards {
    fn new(d: Decision) -> Arc<Cards> {
        Arc::new(Cards(Mutex::default(), d))
    }
    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

fn landlock() -> bool {
    util::require("Landlock", cheng_host::confinement().landlock_abi.is_some_and(|v| v >= 4))
}

async fn run(h: &Host, ws: &Path, input: Value) -> (ToolResult, CallRecord) {
    h.call_recorded(&Context::new(ws), "workspace_shell", input).await
}

/// The record says the command ran unasked, confined, admitted by `entry`.
fn known_safe_in(rec: &CallRecord, entry: &str) {
    assert!(rec.approvals.is_empty(), "{:?}", rec.approvals);
    assert_eq!(rec.unasked.len(), 1, "{:?}", rec.unasked);
    let u = &rec.unasked[0];
    assert_eq!((u.by.as_str(), u.entry.as_deref(), u.tier.as_str()), ("known_safe", Some(entry), "confined"));
}

/// A repository with one commit, in the workspace.
fn repo(ws: &Path) {
    for args in [&["init", "-q", "-b", "main"][..], &["add", "-A"], &["commit", "-q", "-m", "one"]] {
        assert!(util::git(ws).args(args).status().unwrap().success());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_commands_run_with_nobody_asked_and_are_recorded_as_known_safe() {
    if !landlock() {
        return;
    }
    let ws = util::workspace();
    let w = ws.path();
    repo(w);
    std::fs::write(w.join("inside.txt"), "inside, changed").unwrap();
    // Whoever is asked says no: what runs, ran unasked.
    let cards = Cards::new(Decision::Declined);
    let h = util::host_with("", cards.clone()).await;
    let index = std::fs::read(w.join(".git/index")).unwrap();
    for (input, entry, says) in [
        (json!({"command": "ls", "args": ["-la"]}), "ls", "inside.txt"),
        (json!({"command": "cat", "args": ["inside.txt"]}), "cat", "inside, changed"),
        (json!({"command": "git", "args": ["status", "--short"]}), "git status", " M inside.txt"),
        (json!({"command": "git", "args": ["log", "--oneline", "-n", "1"]}), "git log", "one"),
        (json!({"command": "git", "args": ["diff", "--stat"]}), "git diff", "inside.txt"),
        (json!({"command": "head", "args": ["-c", "6", "inside.txt"]}), "head", "inside"),
        (json!({"command": "grep", "args": ["-rn", "#", "docs"]}), "grep", "docs/a.md:1:# A"),
        (json!({"command": "find", "args": [".", "-name", "*.md"]}), "find", "./docs/a.md"),
        (json!({"command": "wc", "args": ["-c", "inside.txt"]}), "wc", "15 inside.txt"),
        (json!({"shell_string": "ls docs"}), "ls", "a.md"),
    ] {
        let (r, rec) = run(&h, w, input.clone()).await;
        assert_eq!(r.status, Status::Ok, "{input}: {}", r.output);
        assert_eq!(r.output["exit_code"], 0, "{input}: {}", r.output);
        assert!(r.output["stdout"].as_str().unwrap().contains(says), "{input}: {}", r.output);
        known_safe_in(&rec, entry);
    }
    assert_eq!(cards.count(), 0, "a person was asked");
    // git wrote nothing: the index is as it was.
    assert_eq!(std::fs::read(w.join(".git/index")).unwrap(), index);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_known_safe_command_reads_only_what_an_unasked_one_may() {
    if !landlock() {
        return;
    }
    let ws = util::workspace();
    // A secret in a temporary directory, and one in the home directory (not among the
    // readable toolchains).
    let tmp = tempfile::tempdir().unwrap();
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from).unwrap();
    let in_home = tempfile::Builder::new().prefix(".cheng-known-safe-").tempdir_in(&home).unwrap();
    let nobody = Cards::new(Decision::Declined);
    let h = util::host_with("", nobody.clone()).await;
    let person = util::host_with("known_safe = false\n", Arc::new(util::FullAccess)).await;
    for dir in [tmp.path(), in_home.path()] {
        let secret = dir.join("secret.txt");
        std::fs::write(&secret, "TOPSECRET").unwrap();
        let input = json!({"command": "cat", "args": [secret]});
        let (r, rec) = run(&h, ws.path(), input.clone()).await;
        assert_ne!(r.output["exit_code"], 0, "{}", r.output);
        assert!(r.output["stderr"].as_str().unwrap().contains("Permission denied"), "{}", r.output);
        assert!(!r.output.to_string().contains("TOPSECRET"));
        known_safe_in(&rec, "cat");
        // The control: approved by a person with full access, the same command reads it.
        let (r, _) = run(&person, ws.path(), input).await;
        assert_eq!(r.output["stdout"], "TOPSECRET", "{}", r.output);
    }
    assert_eq!(nobody.count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_known_safe_command_writes_nothing_and_executes_nothing_else() {
    if !landlock() {
        return;
    }
    let ws = util::workspace();
    let w = ws.path();
    // The operator's own entries, mistaken on purpose: `touch`, and `find` with `-exec`.
    let config = "[[process.known_safe_rules]]\nprogram = \"touch\"\n\
                  [[process.known_safe_rules]]\nprogram = \"find\"\nflags = [\"-exec\", \"-print\"]\n\
                  value_options = [\"-maxdepth\"]\n";
    let cards = Cards::new(Decision::Declined);
    let h = util::host_with(config, cards.clone()).await;
    let (r, rec) = run(&h, w, json!({"command": "touch", "args": ["made"]})).await;
    known_safe_in(&rec, "touch");
    assert_ne!(r.output["exit_code"], 0, "{}", r.output);
    assert!(!w.join("made").exists(), "a known-safe command wrote the workspace");
    let exec = json!({"command": "find", "args": [".", "-maxdepth", "0", "-exec", "true", ";", "-print"]});
    let (r, rec) = run(&h, w, exec.clone()).await;
    known_safe_in(&rec, "find");
    assert_eq!(r.output["stdout"], "", "find started `true`: {}", r.output);
    assert_eq!(cards.count(), 0);
    // The controls: an allow rule's unasked tier writes the workspace, and a person's
    // approval lets find start `true` (so `-print` prints).
    let rule = util::host_with("[[process.rules]]\nprogram = \"touch\"\ndecision = \"allow\"\n", cards.clone()).await;
    let (r, rec) = run(&rule, w, json!({"command": "touch", "args": ["made"]})).await;
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    assert!(w.join("made").exists());
    assert_eq!((rec.unasked[0].by.as_str(), rec.unasked[0].entry.as_deref()), ("rule", None));
    let person = util::host_with("known_safe = false\n", Arc::new(util::FullAccess)).await;
    let (r, _) = run(&person, w, exec).await;
    assert_eq!(r.output["stdout"], ".\n", "{}", r.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn what_would_write_or_run_something_still_asks() {
    if !landlock() {
        return;
    }
    let ws = util::workspace();
    let w = ws.path();
    repo(w);
    std::fs::write(w.join("inside.txt"), "changed").unwrap();
    let cards = Cards::new(Decision::Declined);
    let h = util::host_with("", cards.clone()).await;
    for (input, left) in [
        (json!({"command": "find", "args": ["docs", "-delete"]}), "docs/a.md"),
        (json!({"command": "find", "args": ["--", "docs", "-delete"]}), "docs/a.md"),
        (json!({"command": "git", "args": ["diff", "--stat", "--output=diff.txt"]}), "inside.txt"),
        (json!({"command": "sort", "args": ["-o", "sorted", "inside.txt"]}), "inside.txt"),
        (json!({"command": "rg", "args": ["--pre", "touch", "x"]}), "inside.txt"),
    ] {
        let before = cards.count();
        let (r, rec) = run(&h, w, input.clone()).await;
        assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{input}: {}", r.output);
        assert_eq!(cards.count(), before + 1, "{input}: nobody was asked");
        assert!(rec.unasked.is_empty(), "{input}");
        assert!(w.join(left).exists(), "{input}");
    }
    assert!(!w.join("diff.txt").exists() && !w.join("sorted").exists());
    // The controls: a person's yes runs them (the file is written, the tree deleted).
    let person = util::host_with("", Cards::new(Decision::Approved)).await;
    // (`--stat`: the host's git runs no external diff, and an empty one fails a patch.)
    let (r, _) = run(&person, w, json!({"command": "git", "args": ["diff", "--stat", "--output=diff.txt"]})).await;
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    assert!(std::fs::read_to_string(w.join("diff.txt")).unwrap().contains("inside.txt"));
    let (r, _) = run(&person, w, json!({"command": "find", "args": ["docs", "-delete"]})).await;
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    assert!(!w.join("docs").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_hosts_own_program_started_directly_qualifies() {
    if !landlock() {
        return;
    }
    let ws = util::workspace();
    let w = ws.path();
    // A workspace program named `ls`.
    std::fs::write(w.join("ls"), "#!/bin/sh\ntouch PLANTED\n").unwrap();
    std::fs::set_permissions(w.join("ls"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let cards = Cards::new(Decision::Declined);
    let h = util::host_with("env = [\"FOO\"]\n", cards.clone()).await;
    for input in [
        json!({"command": "./ls"}),
        json!({"command": "env", "args": ["ls"]}),
        json!({"command": "nice", "args": ["ls"]}),
        json!({"command": "timeout", "args": ["5", "ls"]}),
        json!({"command": "sh", "args": ["-c", "ls"]}),
        json!({"command": "xargs", "args": ["ls"]}),
        json!({"command": "/usr/bin/env", "args": ["ls"]}),
        // A variable the operator lets through, set by the request.
        json!({"command": "ls", "env": {"FOO": "1"}}),
    ] {
        let before = cards.count();
        let (r, rec) = run(&h, w, input.clone()).await;
        assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{input}: {}", r.output);
        assert_eq!(cards.count(), before + 1, "{input}");
        assert!(rec.unasked.is_empty(), "{input}");
    }
    assert!(!w.join("PLANTED").exists());
    // The control: the host's own `ls`, by its bare name, with a locale.
    let (r, rec) = run(&h, w, json!({"command": "ls", "env": {"LANG": "C"}})).await;
    assert!(r.output["stdout"].as_str().unwrap().contains("inside.txt"), "{}", r.output);
    assert!(!r.output["stdout"].as_str().unwrap().contains("PLANTED"));
    known_safe_in(&rec, "ls");
}

#[test]
fn an_ls_found_elsewhere_on_the_path_qualifies_only_when_it_is_ls_where_commands_cannot_write() {
    if !landlock() {
        return;
    }
    let ws = util::workspace();
    let state = tempfile::tempdir().unwrap();
    let real_ls = std::fs::canonicalize(which("ls")).unwrap();
    // Three PATH directories, each first on the PATH in turn, each with an `ls`:
    // - a link named `ls` to `touch` (another program under the name),
    // - a copy of the real ls under `~/.cache`, where commands may write,
    // - the control: a copy of the real ls under the build's target directory.
    let lab = tempfile::Builder::new().prefix("known-safe-").tempdir_in(util::target_dir()).unwrap();
    let disguised = lab.path().join("disguised");
    std::fs::create_dir_all(&disguised).unwrap();
    std::os::unix::fs::symlink(which("touch"), disguised.join("ls")).unwrap();
    let home = std::path::PathBuf::from(std::env::var_os("HOME").unwrap());
    std::fs::create_dir_all(home.join(".cache")).unwrap();
    let cache = tempfile::Builder::new().prefix("cheng-known-safe-").tempdir_in(home.join(".cache")).unwrap();
    std::fs::copy(&real_ls, cache.path().join("ls")).unwrap();
    let fine = lab.path().join("fine");
    std::fs::create_dir_all(&fine).unwrap();
    std::fs::copy(&real_ls, fine.join("ls")).unwrap();
    // The host's temporary directory is a place commands write; a checkout under /tmp
    // puts the control there too, so the host gets a temporary directory of its own
    // beside the control instead of above it.
    let tmp = lab.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    assert!(!fine.starts_with(std::fs::canonicalize(&tmp).unwrap()));
    let call = |dir: &Path| {
        let out = util::cheng_in(ws.path(), state.path())
            .args(["call", "--approve", "deny", "workspace_shell", r#"{"command":"ls","args":["x"]}"#])
            .env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", dir.display()))
            .env("TMPDIR", &tmp)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    for dir in [disguised.as_path(), cache.path()] {
        let (code, out) = call(dir);
        assert_eq!(code, Some(2), "{}: {out}", dir.display());
        assert!(out.contains("LOCAL_EXECUTOR_APPROVAL_DENIED"), "{}: {out}", dir.display());
    }
    assert!(!ws.path().join("x").exists(), "the disguised touch ran");
    // The control: ran unasked (and found no `x`, which it says).
    let (code, out) = call(&fine);
    assert!(out.contains("No such file or directory"), "{code:?}: {out}");
    assert!(!out.contains("APPROVAL_DENIED"), "{out}");
}

fn which(name: &str) -> std::path::PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is not installed"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_operator_turns_it_off_edits_it_and_outranks_it() {
    if !landlock() {
        return;
    }
    let ws = util::workspace();
    let asks = |config: &'static str, input: Value| asked(ws.path().to_path_buf(), config, input);
    let ls = json!({"command": "ls"});
    let cat = json!({"command": "cat", "args": ["inside.txt"]});
    // Off: ls asks again.
    let (n, r, _) = asks("known_safe = false\n", ls.clone()).await;
    assert_eq!((n, r.error_kind), (1, Some(ErrorKind::ApprovalDenied)), "{}", r.output);
    // One entry removed: it asks, the others do not.
    let (n, _, _) = asks("known_safe_remove = [\"ls\"]\n", ls.clone()).await;
    assert_eq!(n, 1);
    let (n, r, rec) = asks("known_safe_remove = [\"ls\"]\n", cat.clone()).await;
    assert_eq!((n, r.output["stdout"].as_str()), (0, Some("inside")), "{}", r.output);
    known_safe_in(&rec, "cat");
    // An entry replaced by the operator's narrower one.
    let narrow = "[[process.known_safe_rules]]\nprogram = \"ls\"\nflags = [\"-1\"]\noperands = false\n";
    let (n, _, rec) = asks(narrow, json!({"command": "ls", "args": ["-1"]})).await;
    assert_eq!(n, 0);
    known_safe_in(&rec, "ls");
    let (n, _, _) = asks(narrow, json!({"command": "ls", "args": ["-la"]})).await;
    assert_eq!(n, 1);
    // An entry added: `git rev-parse`.
    let added = "[[process.known_safe_rules]]\nprogram = \"git\"\nsubcommand = \"rev-parse\"\nflags = [\"--is-inside-work-tree\"]\n";
    let (n, _, rec) = asks(added, json!({"command": "git", "args": ["rev-parse", "--is-inside-work-tree"]})).await;
    assert_eq!(n, 0);
    known_safe_in(&rec, "git rev-parse");
    // The operator's rules win: a prompt rule asks, a forbid rule forbids.
    let (n, _, _) = asks("[[process.rules]]\nprogram = \"ls\"\ndecision = \"prompt\"\n", ls.clone()).await;
    assert_eq!(n, 1);
    let (n, r, _) = asks("[[process.rules]]\nprogram = \"cat\"\ndecision = \"forbid\"\n", cat.clone()).await;
    assert_eq!((n, r.error_kind), (0, Some(ErrorKind::CommandNotAllowed)), "{}", r.output);
    // A whitelist without ls refuses it.
    let (n, r, _) = asks("command_whitelist = [\"cat\"]\n", ls.clone()).await;
    assert_eq!((n, r.error_kind), (0, Some(ErrorKind::CommandNotAllowed)), "{}", r.output);
    // An unknown name to remove is refused when the configuration is read.
    let e = Config::from_toml_str("[process]\nknown_safe_remove = [\"lss\"]\n", "t.toml");
    assert!(e.is_err_and(|e| e.to_string().contains("not a built-in known-safe entry")));
    // The control: by default, both run unasked.
    for input in [ls, cat] {
        let (n, r, _) = asks("", input).await;
        assert_eq!((n, r.status), (0, Status::Ok), "{}", r.output);
    }
}

/// How many cards a host with `config` showed for `input` (answering no), its result
/// and record.
async fn asked(ws: std::path::PathBuf, config: &str, input: Value) -> (usize, ToolResult, CallRecord) {
    let cards = Cards::new(Decision::Declined);
    let h = util::host_with(config, cards.clone()).await;
    let (r, rec) = run(&h, &ws, input).await;
    (cards.count(), r, rec)
}

#[tokio::test(flavor = "multi_thread")]
async fn in_a_workspace_holding_the_hosts_own_files_every_command_asks() {
    if !landlock() {
        return;
    }
    let ws = util::workspace();
    let other = util::workspace();
    let cards = Cards::new(Decision::Declined);
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str("", "t.toml").unwrap());
    b.state_dir(util::shared_state()).approver(cards.clone());
    b.protect(ws.path().join("cheng.toml"));
    let h = b.build().await.unwrap();
    let (r, rec) = run(&h, ws.path(), json!({"command": "ls"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{}", r.output);
    assert_eq!(cards.count(), 1);
    assert!(rec.unasked.is_empty());
    // The control: the same host, in another workspace.
    let (r, rec) = run(&h, other.path(), json!({"command": "ls"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    known_safe_in(&rec, "ls");
    assert_eq!(cards.count(), 1);
}
