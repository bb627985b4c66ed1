//! workspace_git_write against the git CLI: every operation done through Cheng on one
//! copy of a repository and with the git CLI on another, the results compared (status
//! porcelain v2, `log --all --format=raw`, every ref, `fsck --strict`); the attacks — a
//! repository whose hooks, filters, fsmonitor, hooks path, outside include and alias
//! would run a program, each with a marker file that must never appear and a positive
//! control showing plain git does run it; the refusals of bad paths, names and network
//! operations; a declined approval that changes nothing, byte for byte; the operator's
//! rules; a `.git` file pointing outside; a held `index.lock`; a cancelled operation.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cheng_host::approvals::{ApprovalRequest, ApproveAll, Approver, Decision, RefuseAll};
use cheng_host::{Context, ErrorKind, Host, Status, ToolResult};
use serde_json::{Value, json};

use crate::util;

/// The identity both sides commit with.
const IDENTITY: &str = "[git]\nuser_name = \"Ada Lovelace\"\nuser_email = \"ada@example.com\"\n";

/// Records every card and answers with a fixed decision.
struct Recorder {
    cards: Mutex<Vec<ApprovalRequest>>,
    answer: Decision,
}
impl Approver for Recorder {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        self.cards.lock().unwrap().push(r.clone());
        let a = self.answer;
        Box::pin(async move { a })
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = util::git(dir).args(args).output().unwrap();
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn write(dir: &Path, path: &str, text: &str) {
    let p = dir.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn commit_at(dir: &Path, msg: &str, date: &str) {
    let o = util::git(dir)
        .env("GIT_AUTHOR_DATE", date)
        .env("GIT_COMMITTER_DATE", date)
        .args(["commit", "-q", "-m", msg])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A repository inside a workspace: `main` with three commits, a merged `feature`, an
/// unmerged `topic`, a staged new file, a modified file (the same on every branch, so
/// switching carries it) and an untracked one.
fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    git(p, &["init", "-q", "-b", "main"]);
    write(p, "a.txt", "one\n");
    write(p, "src/lib.rs", "fn f() {}\n");
    write(p, "keep.txt", "keep\n");
    git(p, &["add", "-A"]);
    commit_at(p, "First commit\n\nWith a body.", "1767000000 +0100");
    git(p, &["branch", "feature"]);
    write(p, "a.txt", "one\ntwo\n");
    git(p, &["add", "a.txt"]);
    commit_at(p, "Second", "1767000100 +0100");
    git(p, &["switch", "-q", "-c", "topic"]);
    write(p, "topic.txt", "only on topic\n");
    git(p, &["add", "topic.txt"]);
    commit_at(p, "Topic work", "1767000200 +0100");
    git(p, &["switch", "-q", "main"]);
    write(p, "src/lib.rs", "fn f() {}\nfn g() {}\n");
    git(p, &["add", "src/lib.rs"]);
    commit_at(p, "Third", "1767000300 +0100");
    // Working-tree state.
    write(p, "staged.txt", "staged\n");
    git(p, &["add", "staged.txt"]);
    write(p, "keep.txt", "keep\nmore\n");
    write(p, "new dir/n.txt", "untracked\n");
    d
}

/// A copy of `src` (as `cp -a` makes it).
fn copy(src: &Path) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let o = Command::new("cp").arg("-a").arg(format!("{}/.", src.display())).arg(d.path()).output().unwrap();
    assert!(o.status.success());
    d
}

/// The author and committer dates of `rev` in `dir` (git's raw form), to replay an
/// operation with the git CLI in the same second.
fn dates(dir: &Path, rev: &str) -> (String, String) {
    let out = git(dir, &["log", "-1", "--format=%ad%n%cd", "--date=raw", rev]);
    let mut l = out.lines();
    (l.next().unwrap().to_string(), l.next().unwrap().to_string())
}

/// Everything compared between the two copies.
fn state(dir: &Path) -> String {
    let fsck = util::git(dir).args(["fsck", "--strict", "--no-progress"]).output().unwrap();
    assert!(fsck.status.success(), "fsck in {}: {}", dir.display(), String::from_utf8_lossy(&fsck.stderr));
    [
        git(dir, &["status", "--porcelain=v2", "--branch", "--untracked-files=all"]),
        git(dir, &["log", "--all", "--format=raw"]),
        git(dir, &["for-each-ref", "--format=%(refname) %(objectname) %(*objectname)"]),
        git(dir, &["stash", "list"]),
        git(dir, &["ls-files", "--stage"]),
    ]
    .join("\n--\n")
}

async fn write_tool(h: &Host, ws: &Path, input: Value) -> ToolResult {
    h.call(&Context::new(ws), "workspace_git_write", input).await
}

async fn yes_host(extra: &str) -> Host {
    util::host_with(&format!("{IDENTITY}{extra}"), Arc::new(ApproveAll)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn each_operation_matches_the_git_cli() {
    let h = yes_host("").await;
    let base = repo();
    // (tool input, the git CLI's arguments, the revision whose dates the CLI replays).
    let stashed = copy(base.path());
    git(stashed.path(), &["stash", "push", "-q", "--include-untracked", "-m", "parked"]);
    let cases: Vec<(&Path, Value, Vec<&str>, Option<&str>)> = vec![
        (
            base.path(),
            json!({"operation": "add", "pathspecs": ["keep.txt", "new dir"]}),
            vec!["add", "--", "keep.txt", "new dir"],
            None,
        ),
        (base.path(), json!({"operation": "add", "pathspecs": ["."]}), vec!["add", "--", "."], None),
        (base.path(), json!({"operation": "add", "pathspecs": ["*.txt"]}), vec!["add", "--", "*.txt"], None),
        (
            base.path(),
            json!({"operation": "unstage", "pathspecs": ["staged.txt"]}),
            vec!["restore", "--staged", "--", "staged.txt"],
            None,
        ),
        (
            base.path(),
            json!({"operation": "restore", "pathspecs": ["keep.txt"]}),
            vec!["restore", "--", "keep.txt"],
            None,
        ),
        (
            base.path(),
            json!({"operation": "commit", "message": "Add staged\n\nBody line."}),
            vec!["commit", "-q", "-m", "Add staged\n\nBody line."],
            Some("HEAD"),
        ),
        (
            base.path(),
            json!({"operation": "commit", "message": "Reworded", "amend": true}),
            vec!["commit", "-q", "--amend", "-m", "Reworded"],
            Some("HEAD"),
        ),
        (
            base.path(),
            json!({"operation": "commit", "message": "Empty", "allow_empty": true}),
            vec!["commit", "-q", "--allow-empty", "-m", "Empty"],
            Some("HEAD"),
        ),
        (base.path(), json!({"operation": "switch", "branch": "feature"}), vec!["switch", "-q", "feature"], None),
        (
            base.path(),
            json!({"operation": "switch", "branch": "agent/new", "create": true}),
            vec!["switch", "-q", "-c", "agent/new"],
            None,
        ),
        (
            base.path(),
            json!({"operation": "branch_delete", "branch": "feature"}),
            vec!["branch", "-q", "-d", "feature"],
            None,
        ),
        (
            base.path(),
            json!({"operation": "branch_delete", "branch": "topic", "force": true}),
            vec!["branch", "-q", "-D", "topic"],
            None,
        ),
        (
            base.path(),
            json!({"operation": "stash_push", "message": "wip", "include_untracked": true}),
            vec!["stash", "push", "-q", "-m", "wip", "--include-untracked"],
            Some("refs/stash"),
        ),
        (
            base.path(),
            json!({"operation": "stash_push", "pathspecs": ["keep.txt"]}),
            vec!["stash", "push", "-q", "--", "keep.txt"],
            Some("refs/stash"),
        ),
        (stashed.path(), json!({"operation": "stash_pop"}), vec!["stash", "pop", "-q"], None),
        (base.path(), json!({"operation": "tag", "name": "v1"}), vec!["tag", "v1"], None),
        (
            base.path(),
            json!({"operation": "tag", "name": "v2", "target": "feature", "message": "Release 2"}),
            vec!["tag", "-a", "-m", "Release 2", "v2", "feature"],
            Some("HEAD"),
        ),
    ];
    for (from, input, cli, replay) in cases {
        let (ours, theirs) = (copy(from), copy(from));
        let r = write_tool(&h, ours.path(), input.clone()).await;
        assert_eq!(r.status, Status::Ok, "{input}: {}", r.output);
        assert_eq!(r.output["success"], true, "{input}: {}", r.output);
        let mut c = util::git(theirs.path());
        if let Some(rev) = replay {
            // The dates of what Cheng made: of the tag object for a tag, else of `rev`.
            let (ad, cd) = if input["operation"] == "tag" {
                let t = git(ours.path(), &["for-each-ref", "--format=%(taggerdate:raw)", "refs/tags/v2"]);
                (t.trim().to_string(), t.trim().to_string())
            } else {
                dates(ours.path(), rev)
            };
            c.env("GIT_AUTHOR_DATE", ad).env("GIT_COMMITTER_DATE", cd);
        }
        let o = c.args(&cli).output().unwrap();
        assert!(o.status.success(), "git {cli:?}: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(state(ours.path()), state(theirs.path()), "{input} vs git {cli:?}");
        // The answer names the branch and commit afterwards.
        let head = git(ours.path(), &["rev-parse", "HEAD"]);
        assert_eq!(r.output["head"], head.trim(), "{input}");
        let branch = git(ours.path(), &["branch", "--show-current"]);
        assert_eq!(r.output["current_branch"], branch.trim(), "{input}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn what_git_refuses_is_reported_like_the_cli_and_changes_nothing() {
    let h = yes_host("").await;
    let base = repo();
    // An unmerged branch without force: git says why, exit 1, and both copies agree.
    for (input, cli) in [
        (json!({"operation": "branch_delete", "branch": "topic"}), vec!["branch", "-d", "topic"]),
        (json!({"operation": "restore", "pathspecs": ["no-such-file"]}), vec!["restore", "--", "no-such-file"]),
    ] {
        let (ours, theirs) = (copy(base.path()), copy(base.path()));
        let r = write_tool(&h, ours.path(), input.clone()).await;
        assert_eq!(r.status, Status::Ok, "{}", r.output);
        assert_eq!(r.output["success"], false, "{}", r.output);
        let o = util::git(theirs.path()).args(&cli).output().unwrap();
        assert_eq!(r.output["exit_code"], o.status.code().unwrap(), "{input}");
        // The same complaint (git's hints are switched off under Cheng).
        let theirs_err = String::from_utf8_lossy(&o.stderr);
        let ours_err = r.output["stderr"].as_str().unwrap();
        assert_eq!(ours_err.lines().next(), theirs_err.lines().next(), "{input}");
        assert!(r.output["summary"].as_str().unwrap().contains("error:"), "{}", r.output);
        assert_eq!(state(ours.path()), state(theirs.path()));
    }
    // Refusals the host makes before git: the current branch, a missing one, an existing one.
    for (input, kind, needle) in [
        (json!({"operation": "branch_delete", "branch": "main"}), ErrorKind::InvalidArgument, "is the current branch"),
        (json!({"operation": "switch", "branch": "nope"}), ErrorKind::NotFound, "no branch \"nope\""),
        (
            json!({"operation": "switch", "branch": "topic", "create": true}),
            ErrorKind::InvalidArgument,
            "already exists",
        ),
        (json!({"operation": "commit", "message": "  "}), ErrorKind::InvalidArgument, "non-empty `message`"),
        (json!({"operation": "add"}), ErrorKind::InvalidArgument, "at least one path"),
        (
            json!({"operation": "add", "pathspecs": ["a"], "amend": true}),
            ErrorKind::InvalidArgument,
            "does not apply to add",
        ),
        (json!({"operation": "rebase"}), ErrorKind::InvalidArgument, "unknown operation"),
    ] {
        let before = snapshot(base.path());
        let r = write_tool(&h, base.path(), input.clone()).await;
        assert_eq!(r.error_kind, Some(kind), "{input}: {}", r.output);
        assert!(r.output["error"].as_str().unwrap().contains(needle), "{input}: {}", r.output);
        assert_unchanged(&before, &snapshot(base.path()), &input.to_string());
    }
}

/// The paths whose bytes differ between two snapshots.
fn changed(a: &BTreeMap<PathBuf, Vec<u8>>, b: &BTreeMap<PathBuf, Vec<u8>>) -> Vec<PathBuf> {
    a.keys().chain(b.keys()).filter(|k| a.get(*k) != b.get(*k)).cloned().collect()
}

fn assert_unchanged(a: &BTreeMap<PathBuf, Vec<u8>>, b: &BTreeMap<PathBuf, Vec<u8>>, what: &str) {
    let c = changed(a, b);
    assert!(c.is_empty(), "{what}: changed {c:?}");
}

/// Every file under `dir` (`.git` included) with its bytes; symbolic links by target.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let t = e.file_type().unwrap();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            if t.is_symlink() {
                out.insert(rel, std::fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes());
            } else if t.is_dir() {
                out.insert(rel, b"<dir>".to_vec());
                stack.push(p);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// A repository whose configuration tries to run `touch <marker>`, set up by `arm`, and
/// the operation that would trigger it. Plain git in a copy runs it (the control);
/// Cheng's operation succeeds and the marker never appears.
async fn attack(name: &str, arm: impl Fn(&Path, &Path), input: Value, cli: &[&str]) {
    let h = yes_host("").await;
    let outside = tempfile::tempdir().unwrap();
    let marker = outside.path().join(format!("{name}-ran"));
    // Control: the same repository under plain git runs the program.
    let control = repo();
    arm(control.path(), &marker);
    let o = util::git(control.path()).args(cli).output().unwrap();
    assert!(marker.exists(), "{name}: plain git did not run the program ({})", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_file(&marker).unwrap();
    // Through Cheng.
    let ws = repo();
    arm(ws.path(), &marker);
    let r = write_tool(&h, ws.path(), input).await;
    assert_eq!(r.output["success"], true, "{name}: {}", r.output);
    // Checked at once, as the control was: plain git had run the program by the time it
    // returned, so under Cheng it would have too.
    assert!(!marker.exists(), "{name}: the repository's program ran under workspace_git_write");
}

fn hook(dir: &Path, name: &str, marker: &Path) {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn set(dir: &Path, key: &str, value: &str) {
    git(dir, &["config", key, value]);
}

#[tokio::test(flavor = "multi_thread")]
async fn hooks_filters_fsmonitor_hooks_path_includes_and_aliases_never_run() {
    let commit = json!({"operation": "commit", "message": "c"});
    attack("pre-commit", |d, m| hook(d, ".git/hooks/pre-commit", m), commit.clone(), &["commit", "-q", "-m", "c"])
        .await;
    attack(
        "post-checkout",
        |d, m| hook(d, ".git/hooks/post-checkout", m),
        json!({"operation": "switch", "branch": "feature"}),
        &["switch", "-q", "feature"],
    )
    .await;
    attack(
        "clean-filter",
        |d, m| {
            write(d, ".git/info/attributes", "*.txt filter=x\n");
            set(d, "filter.x.clean", &format!("sh -c 'touch {}; cat'", m.display()));
            set(d, "filter.x.required", "true");
        },
        json!({"operation": "add", "pathspecs": ["keep.txt"]}),
        &["add", "--", "keep.txt"],
    )
    .await;
    attack(
        "fsmonitor",
        |d, m| set(d, "core.fsmonitor", &format!("touch {}", m.display())),
        json!({"operation": "add", "pathspecs": ["keep.txt"]}),
        &["add", "--", "keep.txt"],
    )
    .await;
    attack(
        "hooks-path",
        |d, m| {
            hook(d, "tools/hooks/pre-commit", m);
            set(d, "core.hooksPath", "tools/hooks");
        },
        commit.clone(),
        &["commit", "-q", "-m", "c"],
    )
    .await;
    attack(
        "alias",
        |d, m| set(d, "alias.unstage", &format!("!touch {}", m.display())),
        json!({"operation": "unstage", "pathspecs": ["staged.txt"]}),
        &["unstage"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_configuration_including_an_outside_file_is_refused() {
    let h = yes_host("").await;
    let outside = tempfile::tempdir().unwrap();
    let marker = outside.path().join("include-ran");
    hook(outside.path(), "hooks/pre-commit", &marker);
    let included = outside.path().join("evil.cfg");
    std::fs::write(&included, format!("[core]\n\thooksPath = {}\n", outside.path().join("hooks").display())).unwrap();
    let arm = |d: &Path| {
        let cfg = d.join(".git/config");
        let mut text = std::fs::read_to_string(&cfg).unwrap();
        text.push_str(&format!("[includeIf \"gitdir:/\"]\n\tpath = {}\n", included.display()));
        std::fs::write(cfg, text).unwrap();
    };
    // Control: plain git follows the include and runs the hook.
    let control = repo();
    arm(control.path());
    util::git(control.path()).args(["commit", "-q", "-m", "c"]).output().unwrap();
    assert!(marker.exists(), "plain git did not follow the include");
    std::fs::remove_file(&marker).unwrap();
    // Cheng refuses to run git there, records the denial, and changes nothing.
    let ws = repo();
    arm(ws.path());
    let before = snapshot(ws.path());
    let (r, rec) = h
        .call_recorded(&Context::new(ws.path()), "workspace_git_write", json!({"operation": "commit", "message": "c"}))
        .await;
    assert_eq!(r.status, Status::Denied, "{}", r.output);
    assert_eq!(r.error_kind, Some(ErrorKind::CommandNotAllowed));
    assert!(r.output["error"].as_str().unwrap().contains("includes another file"), "{}", r.output);
    assert_eq!(rec.status, Status::Denied);
    assert!(!marker.exists());
    assert_unchanged(&before, &snapshot(ws.path()), "");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_paths_names_and_network_operations_are_refused_and_change_nothing() {
    let h = yes_host("").await;
    let ws = repo();
    let before = snapshot(ws.path());
    let outside = format!("{}/x", std::env::temp_dir().display());
    let mut cases: Vec<(Value, ErrorKind)> = Vec::new();
    for p in [
        outside.as_str(),
        "../../.kube/config",
        "src/../../x",
        ":(top)a.txt",
        ":/a.txt",
        ":!a.txt",
        ".git/config",
        "-A",
        "--all",
        "~/x",
        "a\u{0}b",
        "",
    ] {
        let kind = if p.starts_with('/') || p.contains("..") || p.contains(".git") || p.starts_with('~') {
            ErrorKind::PathRefused
        } else {
            ErrorKind::InvalidArgument
        };
        for op in ["add", "unstage", "restore"] {
            cases.push((json!({"operation": op, "pathspecs": [p]}), kind));
        }
        cases.push((json!({"operation": "stash_push", "pathspecs": [p]}), kind));
    }
    for b in [
        "-b",
        "--force",
        "a..b",
        "a b",
        "a~1",
        "a^2",
        "a:b",
        "HEAD",
        "@",
        "x@{1}",
        "x.lock",
        "/x",
        "x/",
        "a//b",
        ".x",
        "refs/heads/main",
        "a*",
        "a\\b",
    ] {
        cases.push((json!({"operation": "switch", "branch": b, "create": true}), ErrorKind::InvalidArgument));
        cases.push((json!({"operation": "branch_delete", "branch": b}), ErrorKind::InvalidArgument));
        cases.push((json!({"operation": "tag", "name": b}), ErrorKind::InvalidArgument));
    }
    for t in ["HEAD~1", "main^{tree}", "@{-1}", "--delete", ":/Second"] {
        cases.push((json!({"operation": "tag", "name": "ok", "target": t}), ErrorKind::InvalidArgument));
    }
    for op in ["push", "fetch", "pull", "clone", "submodule", "submodule_update", "remote"] {
        cases.push((json!({"operation": op}), ErrorKind::CommandNotAllowed));
    }
    cases.push((json!({"operation": "add", "pathspecs": ["a.txt"], "cwd": "../"}), ErrorKind::PathRefused));
    cases.push((json!({"operation": "add", "pathspecs": ["a.txt"], "cwd": ".git"}), ErrorKind::PathRefused));
    for (input, kind) in cases {
        let r = write_tool(&h, ws.path(), input.clone()).await;
        assert_eq!(r.error_kind, Some(kind), "{input}: {}", r.output);
        assert!(r.terminal, "{input}");
        if kind == ErrorKind::CommandNotAllowed {
            assert!(r.output["error"].as_str().unwrap().contains("no network operations"), "{}", r.output);
        }
    }
    assert_unchanged(&before, &snapshot(ws.path()), "");
    // The control: a good request in the same repository goes through.
    let r = write_tool(&h, ws.path(), json!({"operation": "add", "pathspecs": ["keep.txt"]})).await;
    assert_eq!(r.output["success"], true, "{}", r.output);
    assert!(!changed(&before, &snapshot(ws.path())).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_declined_approval_changes_nothing_and_the_card_says_what_would_run() {
    let rec = Arc::new(Recorder { cards: Mutex::default(), answer: Decision::Declined });
    let h = util::host_with(IDENTITY, rec.clone()).await;
    let ws = repo();
    let before = snapshot(ws.path());
    let inputs = [
        json!({"operation": "commit", "message": "Ship it\n\nDetails here.", "amend": true, "purpose": "finish"}),
        json!({"operation": "restore", "pathspecs": ["a.txt", "src/lib.rs"]}),
        json!({"operation": "add", "pathspecs": ["."]}),
        json!({"operation": "switch", "branch": "topic"}),
        json!({"operation": "branch_delete", "branch": "topic", "force": true}),
        json!({"operation": "stash_push", "include_untracked": true}),
        json!({"operation": "tag", "name": "v9", "message": "Nine"}),
    ];
    for input in &inputs {
        let (r, record) = h.call_recorded(&Context::new(ws.path()), "workspace_git_write", input.clone()).await;
        assert_eq!(r.status, Status::Denied, "{input}: {}", r.output);
        assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied));
        assert_eq!(record.approvals.len(), 1);
        assert_unchanged(&before, &snapshot(ws.path()), &input.to_string());
    }
    let cards = rec.cards.lock().unwrap().clone();
    let dir = ws.path().canonicalize().unwrap().display().to_string();
    let c = &cards[0];
    assert!(c.summary.contains("git commit") && c.summary.contains(&dir), "{}", c.summary);
    for needle in ["operation: commit", "branch: main", "message: Ship it  (+1 more line)", "AMEND", &dir] {
        assert!(c.detail.contains(needle), "{needle}: {}", c.detail);
    }
    assert!(!c.detail.contains("Details here"), "only the first line: {}", c.detail);
    assert_eq!(c.purpose, "finish");
    assert!(cards[1].detail.contains("paths: a.txt, src/lib.rs") && cards[1].detail.contains("DESTRUCTIVE"));
    assert!(cards[3].detail.contains("to branch: topic"));
    assert!(cards[4].detail.contains("FORCE"));
    assert!(cards[6].detail.contains("tag: v9 at HEAD") && cards[6].detail.contains("message: Nine"));
}

#[tokio::test(flavor = "multi_thread")]
async fn rules_allow_some_operations_on_some_branches_and_forbid_others() {
    let rules = "[[git.rules]]\noperations = [\"add\", \"commit\"]\nbranches = [\"agent/*\"]\ndecision = \"allow\"\n\
                 [[git.rules]]\noperations = [\"branch_delete\"]\ndecision = \"forbid\"\n";
    // Nobody can be asked: only what a rule allows runs.
    let h = util::host_with(&format!("{IDENTITY}{rules}"), Arc::new(RefuseAll)).await;
    let ws = repo();
    git(ws.path(), &["switch", "-q", "-c", "agent/fix"]);
    for input in [json!({"operation": "add", "pathspecs": ["a.txt"]}), json!({"operation": "commit", "message": "fix"})]
    {
        let (r, rec) = h.call_recorded(&Context::new(ws.path()), "workspace_git_write", input.clone()).await;
        assert_eq!(r.output["success"], true, "{input}: {}", r.output);
        assert!(rec.approvals.is_empty(), "allowed without asking");
    }
    assert_eq!(git(ws.path(), &["log", "-1", "--format=%s%n%an <%ae>"]), "fix\nAda Lovelace <ada@example.com>\n");
    // Not covered by the rule: it asks, and nobody can answer.
    let r = write_tool(&h, ws.path(), json!({"operation": "restore", "pathspecs": ["src/lib.rs"]})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{}", r.output);
    // The same operations on main ask too.
    git(ws.path(), &["switch", "-q", "main"]);
    let r = write_tool(&h, ws.path(), json!({"operation": "add", "pathspecs": ["a.txt"]})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{}", r.output);
    // Forbidden: refused before anyone is asked, recorded as a denial.
    let (r, rec) = h
        .call_recorded(
            &Context::new(ws.path()),
            "workspace_git_write",
            json!({"operation": "branch_delete", "branch": "topic", "force": true}),
        )
        .await;
    assert_eq!(r.error_kind, Some(ErrorKind::CommandNotAllowed), "{}", r.output);
    assert_eq!(rec.status, Status::Denied);
    assert!(rec.approvals.is_empty());
    assert!(git(ws.path(), &["branch", "--list", "topic"]).contains("topic"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_repository_identity_is_used_and_none_is_refused() {
    let h = util::host_with("", Arc::new(ApproveAll)).await;
    let ws = repo();
    // No [git] identity and none in the repository: refused before git runs.
    let r = write_tool(&h, ws.path(), json!({"operation": "commit", "message": "x"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgument), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("[git] user_name"), "{}", r.output);
    // The repository's own identity.
    set(ws.path(), "user.name", "Repo Person");
    set(ws.path(), "user.email", "repo@example.com");
    let r = write_tool(&h, ws.path(), json!({"operation": "commit", "message": "x"})).await;
    assert_eq!(r.output["success"], true, "{}", r.output);
    assert_eq!(
        git(ws.path(), &["log", "-1", "--format=%an <%ae>|%cn <%ce>"]),
        "Repo Person <repo@example.com>|Repo Person <repo@example.com>\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn roles_other_than_developer_do_not_have_the_tool() {
    let h = yes_host("").await;
    let ws = repo();
    for role in ["recon", "writer"] {
        let r = h
            .call(
                &Context::new(ws.path()).role(role),
                "workspace_git_write",
                json!({"operation": "add", "pathspecs": ["a.txt"]}),
            )
            .await;
        assert_eq!(r.error_kind, Some(ErrorKind::NotGranted), "{role}: {}", r.output);
    }
    let r = h
        .call(
            &Context::new(ws.path()).role("developer"),
            "workspace_git_write",
            json!({"operation": "add", "pathspecs": ["a.txt"]}),
        )
        .await;
    assert_eq!(r.output["success"], true, "{}", r.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_git_file_pointing_outside_and_a_held_index_lock_are_refused() {
    let h = yes_host("").await;
    // A work tree whose .git file points at a repository outside the workspace.
    let outside = repo();
    let ws = util::workspace();
    let wt = ws.path().join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    write(&wt, "a.txt", "x\n");
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", outside.path().join(".git").display())).unwrap();
    let before = snapshot(outside.path());
    let r = write_tool(&h, ws.path(), json!({"operation": "add", "pathspecs": ["a.txt"], "cwd": "wt"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("outside the workspace"), "{}", r.output);
    assert_unchanged(&before, &snapshot(outside.path()), "");
    // A .git that is a symbolic link out of the workspace, likewise.
    let ws2 = util::workspace();
    std::os::unix::fs::symlink(outside.path().join(".git"), ws2.path().join(".git")).unwrap();
    let r = write_tool(&h, ws2.path(), json!({"operation": "add", "pathspecs": ["a.txt"]})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{}", r.output);
    assert_unchanged(&before, &snapshot(outside.path()), "");
    // A linked worktree inside the workspace works (the control).
    let inner = repo();
    git(inner.path(), &["worktree", "add", "-q", "linked", "feature"]);
    write(&inner.path().join("linked"), "w.txt", "w\n");
    let r = write_tool(&h, inner.path(), json!({"operation": "add", "pathspecs": ["w.txt"], "cwd": "linked"})).await;
    assert_eq!(r.output["success"], true, "{}", r.output);
    assert_eq!(r.output["repository"], "linked");
    assert!(git(&inner.path().join("linked"), &["status", "--porcelain"]).contains("A  w.txt"));

    // Another git holds the index: a clear error, the index untouched.
    let ws = repo();
    let lock = ws.path().join(".git/index.lock");
    std::fs::write(&lock, b"").unwrap();
    let index = std::fs::read(ws.path().join(".git/index")).unwrap();
    let r = write_tool(&h, ws.path(), json!({"operation": "add", "pathspecs": ["a.txt"]})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Io), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("another git process"), "{}", r.output);
    assert_eq!(index, std::fs::read(ws.path().join(".git/index")).unwrap());
    std::fs::remove_file(&lock).unwrap();
    let r = write_tool(&h, ws.path(), json!({"operation": "add", "pathspecs": ["a.txt"]})).await;
    assert_eq!(r.output["success"], true, "{}", r.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_operation_leaves_the_repository_as_git_would() {
    let h = yes_host("").await;
    let ws = repo();
    // Enough incompressible data that hashing and compressing it takes seconds.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for i in 0..24 {
        let mut data = vec![0u8; 4 << 20];
        for chunk in data.chunks_mut(8) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            chunk.copy_from_slice(&seed.to_le_bytes()[..chunk.len()]);
        }
        std::fs::write(ws.path().join(format!("big{i}.bin")), data).unwrap();
    }
    let token = tokio_util::sync::CancellationToken::new();
    let cx = Context::new(ws.path()).cancel_with(token.clone());
    let h2 = h.clone();
    let call = tokio::spawn(async move {
        h2.call(&cx, "workspace_git_write", json!({"operation": "add", "pathspecs": ["."]})).await
    });
    // Cancelled mid-operation: once git holds the index lock, hashing the files.
    let lock = ws.path().join(".git/index.lock");
    util::wait_until_async("git add to take the index lock", Duration::from_secs(30), || lock.exists()).await;
    token.cancel();
    let r = call.await.unwrap();
    assert_eq!(r.output["termination"], "cancelled", "{}", r.output);
    // git was stopped with SIGTERM and removed its lock; the repository checks clean.
    assert!(!ws.path().join(".git/index.lock").exists());
    let fsck = util::git(ws.path()).args(["fsck", "--strict", "--no-progress"]).output().unwrap();
    assert!(fsck.status.success(), "{}", String::from_utf8_lossy(&fsck.stderr));
    // And the next operation works.
    let r = write_tool(&h, ws.path(), json!({"operation": "add", "pathspecs": ["a.txt"]})).await;
    assert_eq!(r.output["success"], true, "{}", r.output);
}
