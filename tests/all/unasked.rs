//! Commands that run without a person's answer, and commands that try to outlive or
//! attack the host — each attack real, each with a positive control showing the same
//! thing succeeds where it should (outside Cheng, or with a person's approval):
//! a repository's configured programs, a `HOME` pointed at the workspace, a directory
//! dressed as a repository, a `PATH` entry linked into the workspace, a config planted
//! where the host looks for one, reads and network from an unasked command, `/dev/shm`,
//! a command killing its host, and what a dead host left behind.

use std::future::Future;
use std::net::TcpListener;
use std::path::Path;
use std::pin::Pin;
use std::process::Command;
use std::sync::{Arc, Mutex};

use cheng_host::approvals::{ApprovalRequest, Approver, Decision, RefuseAll};
use cheng_host::policy::Config;
use cheng_host::{Context, ErrorKind, Host, HostBuilder, Status, ToolResult};
use serde_json::{Value, json};

use crate::util;

/// Records each card and answers with a fixed decision.
struct Answer(Mutex<Vec<ApprovalRequest>>, Decision);
impl Approver for Answer {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        self.0.lock().unwrap().push(r.clone());
        let d = self.1;
        Box::pin(async move { d })
    }
}

async fn host(config: &str, approver: Arc<dyn Approver>) -> Host {
    util::host_with(config, approver).await
}

async fn shell(h: &Host, ws: &Path, input: Value) -> ToolResult {
    h.call(&Context::new(ws), "workspace_shell", input).await
}

fn allow(program: &str) -> String {
    format!("[[process.rules]]\nprogram = \"{program}\"\nargs = []\ndecision = \"allow\"\n")
}

fn landlock() -> bool {
    util::require("Landlock", cheng_host::confinement().landlock_abi.is_some_and(|v| v >= 4))
}

/// `git` as a user runs it in `dir` (the positive controls).
fn plain_git(dir: &Path, args: &[&str]) -> std::process::Output {
    util::git(dir).args(args).output().unwrap()
}

fn repo_with_a_commit(dir: &Path) {
    for args in [&["init", "-q", "-b", "main"][..], &["add", "-A"], &["commit", "-q", "-m", "one"]] {
        std::fs::write(dir.join("f.txt"), "one\n").unwrap();
        assert!(plain_git(dir, args).status.success());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn git_allowed_by_a_rule_runs_nothing_the_repository_configures() {
    let ws = util::workspace();
    let w = ws.path();
    repo_with_a_commit(w);
    let h =
        host("[[process.rules]]\nprogram = \"git\"\nargs = [\"status\"]\ndecision = \"allow\"\n", Arc::new(RefuseAll))
            .await;
    // 1. A `.gitconfig` in the workspace, reached by pointing HOME at it: HOME is the host's.
    std::fs::write(w.join(".gitconfig"), "[core]\n\tfsmonitor = \"touch HOME_MARKER; false\"\n").unwrap();
    let r = shell(&h, w, json!({"command": "git", "args": ["status"], "env": {"HOME": w}})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::CommandNotAllowed), "{}", r.output);
    assert!(!w.join("HOME_MARKER").exists());
    // The control: git with that HOME runs it.
    plain_git(w, &["status"]);
    assert!(w.join("HOME_MARKER").exists(), "the HOME control did not run it");
    std::fs::remove_file(w.join(".gitconfig")).unwrap();
    // 2. The repository's own configuration, as a command could have written it.
    let cfg = std::fs::read_to_string(w.join(".git/config")).unwrap();
    std::fs::write(
        w.join(".git/config"),
        format!("{cfg}[core]\n\tfsmonitor = \"touch REPO_MARKER; false\"\n[filter \"x\"]\n\tclean = \"touch FILTER_MARKER; cat\"\n"),
    )
    .unwrap();
    std::fs::write(w.join(".gitattributes"), "*.txt filter=x\n").unwrap();
    std::fs::write(w.join("f.txt"), "two\n").unwrap();
    let r = shell(&h, w, json!({"command": "git", "args": ["status"]})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert!(r.output["stdout"].as_str().unwrap().contains("f.txt"), "{}", r.output);
    for m in ["REPO_MARKER", "FILTER_MARKER"] {
        assert!(!w.join(m).exists(), "{m}: a configured program ran");
    }
    // The controls: plain git, as a user runs it, runs each of them.
    plain_git(w, &["status"]);
    for m in ["REPO_MARKER", "FILTER_MARKER"] {
        assert!(w.join(m).exists(), "{m}: the control did not run it");
    }
    // 3. A directory dressed as a repository (a copy of one, under another name) whose
    // configuration points its worktree back up, under a rule allowing any git command.
    let fake = w.join("fakegit");
    assert!(Command::new("cp").arg("-r").arg(w.join(".git")).arg(&fake).status().unwrap().success());
    std::fs::write(
        fake.join("config"),
        "[core]\n\tbare = false\n\tworktree = ..\n\tfsmonitor = \"touch FAKE_MARKER; false\"\n",
    )
    .unwrap();
    let any = host(&allow("git"), Arc::new(RefuseAll)).await;
    let _ = shell(&any, w, json!({"command": "git", "args": ["status"], "cwd": "fakegit"})).await;
    let r = shell(&any, w, json!({"command": "git", "args": ["--git-dir=fakegit", "status"]})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert!(
        !w.join("FAKE_MARKER").exists() && !fake.join("FAKE_MARKER").exists(),
        "the fake repository's fsmonitor ran"
    );
    // The control: plain git with that directory runs it.
    plain_git(w, &["--git-dir=fakegit", "status"]);
    assert!(w.join("FAKE_MARKER").exists(), "the fake repository's control did not run it");
}

#[test]
fn a_path_entry_linked_into_the_workspace_is_the_workspace() {
    let lab = tempfile::tempdir().unwrap();
    let ws = lab.path().join("workspace");
    std::fs::create_dir_all(ws.join(".venv/bin")).unwrap();
    std::os::unix::fs::symlink(&ws, lab.path().join("pwlink")).unwrap();
    let tool = ws.join(".venv/bin/mytool");
    std::fs::write(&tool, "#!/bin/sh\ntouch \"$PWD/PLANTED\"\n").unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(&mut std::fs::metadata(&tool).unwrap().permissions(), 0o755);
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let outside_bin = lab.path().join("bin");
    std::fs::create_dir_all(&outside_bin).unwrap();
    std::fs::copy(&tool, outside_bin.join("mytool")).unwrap();
    let cfg = lab.path().join("cheng.toml");
    std::fs::write(&cfg, allow("mytool")).unwrap();
    let state = tempfile::tempdir().unwrap();
    let run = |path: &str| {
        util::cheng_in(&ws, state.path())
            .args(["--config"])
            .arg(&cfg)
            .args(["call", "--approve", "deny", "workspace_shell", r#"{"command":"mytool"}"#])
            .env("PATH", path)
            .output()
            .unwrap()
    };
    // The PATH entry reaches the workspace through a link: passed over, so the planted
    // program is not found, and nothing ran.
    let linked = format!("/usr/local/bin:/usr/bin:/bin:{}", lab.path().join("pwlink/.venv/bin").display());
    let out = run(&linked);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("not found on the host's PATH"));
    assert!(!ws.join("PLANTED").exists());
    // The control: the same program in a PATH directory outside the workspace runs.
    let out = run(&format!("/usr/local/bin:/usr/bin:/bin:{}", outside_bin.display()));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(ws.join("PLANTED").exists());
}

#[test]
fn every_place_a_config_is_looked_up_is_protected() {
    // The workspace is the home directory and no configuration exists yet.
    let home = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let write = |path: &str| {
        util::cheng_in(home.path(), state.path())
            .args([
                "call",
                "write_file",
                &json!({"path": path, "content": "[[process.rules]]\n", "create_dirs": true}).to_string(),
            ])
            .env("HOME", home.path())
            .env_remove("XDG_CONFIG_HOME")
            .output()
            .unwrap()
    };
    // Where the host would look for its configuration: refused, nothing written.
    let out = write(".config/cheng/cheng.toml");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(!home.path().join(".config/cheng/cheng.toml").exists());
    // The control: a file beside it is written.
    assert_eq!(write(".config/other.toml").status.code(), Some(0));
    assert!(home.path().join(".config/other.toml").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_absolute_command_inside_the_workspace_is_refused() {
    let ws = util::workspace();
    let planted = ws.path().join("ls");
    std::fs::write(&planted, "#!/bin/sh\ntouch PLANTED\n").unwrap();
    std::fs::set_permissions(&planted, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let yes = Arc::new(Answer(Mutex::default(), Decision::Approved));
    let h = host("", yes).await;
    let r = shell(&h, ws.path(), json!({"command": planted})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("relative path"), "{}", r.output);
    assert!(!ws.path().join("PLANTED").exists());
    // The control: by its relative path, through the guard, it runs (a person approved).
    let r = shell(&h, ws.path(), json!({"command": "./ls"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert!(ws.path().join("PLANTED").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_card_shows_every_environment_entry() {
    let ws = util::workspace();
    let rec = Arc::new(Answer(Mutex::default(), Decision::Declined));
    let h = host("env = [\"RUST_LOG\", \"FOO\"]\n", rec.clone()).await;
    let _ = shell(&h, ws.path(), json!({"command": "true", "env": {"RUST_LOG": "debug", "FOO": "a b"}})).await;
    let card = rec.0.lock().unwrap()[0].clone();
    assert!(card.detail.contains("RUST_LOG=debug") && card.detail.contains("FOO=a b"), "{}", card.detail);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unasked_command_reads_only_the_system_and_the_workspace_and_reaches_no_network() {
    if !landlock() {
        return;
    }
    let ws = util::workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "TOPSECRET").unwrap();
    let secret = outside.path().join("secret.txt").display().to_string();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect =
        format!("import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')");
    let rules = format!("{}{}", allow("cat"), allow("python3"));
    // Nobody is asked: the rules alone let these run, confined.
    let unasked = host(&rules, Arc::new(RefuseAll)).await;
    let r = shell(&unasked, ws.path(), json!({"command": "cat", "args": [secret]})).await;
    assert_ne!(r.output["exit_code"], 0, "{}", r.output);
    assert!(r.output["stderr"].as_str().unwrap().contains("Permission denied"), "{}", r.output);
    let r = shell(&unasked, ws.path(), json!({"command": "cat", "args": ["inside.txt"]})).await;
    assert_eq!(r.output["stdout"], "inside", "{}", r.output);
    let r = shell(&unasked, ws.path(), json!({"command": "python3", "args": ["-c", connect]})).await;
    assert_ne!(r.output["exit_code"], 0, "{}", r.output);
    assert!(r.output["stderr"].as_str().unwrap().contains("PermissionError"), "{}", r.output);
    // Auto-approve is no person either (`cat` known-safe would run unasked anyway).
    let auto = host("known_safe = false\n", Arc::new(cheng_host::approvals::ApproveAll)).await;
    let r = shell(&auto, ws.path(), json!({"command": "cat", "args": [secret]})).await;
    assert!(r.output["stderr"].as_str().unwrap().contains("Permission denied"), "{}", r.output);
    // A rule that grants the network lifts only that.
    let net = host(
        &allow("python3").replace("decision = \"allow\"\n", "decision = \"allow\"\nnetwork = true\n"),
        Arc::new(RefuseAll),
    )
    .await;
    let r = shell(&net, ws.path(), json!({"command": "python3", "args": ["-c", connect]})).await;
    assert_eq!(r.output["stdout"], "connected\n", "{}", r.output);
    // The control: a person's full-access approval lifts the read and network confinement
    // (a plain yes would not: it is confined too).
    let person = host("known_safe = false\n", Arc::new(util::FullAccess)).await;
    let plain = host("known_safe = false\n", Arc::new(Answer(Mutex::default(), Decision::Approved))).await;
    let r = shell(&plain, ws.path(), json!({"command": "cat", "args": [secret.clone()]})).await;
    assert!(r.output["stderr"].as_str().unwrap().contains("Permission denied"), "{}", r.output);
    let r = shell(&person, ws.path(), json!({"command": "cat", "args": [secret]})).await;
    assert_eq!(r.output["stdout"], "TOPSECRET", "{}", r.output);
    let r = shell(&person, ws.path(), json!({"command": "python3", "args": ["-c", connect]})).await;
    assert_eq!(r.output["stdout"], "connected\n", "{}", r.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn commands_get_no_shared_memory_directory() {
    if !landlock() {
        return;
    }
    let ws = util::workspace();
    let name = format!("/dev/shm/cheng-test-{}", std::process::id());
    let h = host(&allow("touch"), Arc::new(RefuseAll)).await;
    let r = shell(&h, ws.path(), json!({"command": "touch", "args": [name]})).await;
    assert_ne!(r.output["exit_code"], 0, "{}", r.output);
    assert!(!Path::new(&name).exists());
    // Approved by a person too: /dev/shm is not among the writable places.
    let person = host("", Arc::new(Answer(Mutex::default(), Decision::Approved))).await;
    let r = shell(&person, ws.path(), json!({"command": "touch", "args": [name]})).await;
    assert_ne!(r.output["exit_code"], 0, "{}", r.output);
    assert!(!Path::new(&name).exists());
    // The control: the same command writes the workspace.
    let r = shell(&h, ws.path(), json!({"command": "touch", "args": ["here"]})).await;
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
}

#[test]
fn a_command_cannot_kill_its_host() {
    if !landlock() {
        return;
    }
    let ws = util::workspace();
    let state = tempfile::tempdir().unwrap();
    let cfg = ws.path().join("../cheng-kill.toml");
    std::fs::write(&cfg, "[process]\nallow_shell_string = true\nkill_grace_ms = 300\n").unwrap();
    let marker = "301.75";
    let input = json!({"shell_string": format!("setsid sh -c \"exec sleep {marker}\" & kill -9 $PPID; sleep 30"), "timeout_ms": 2000});
    let out = util::cheng_in(ws.path(), state.path())
        .arg("--config")
        .arg(&cfg)
        .args(["call", "--approve", "yes", "workspace_shell", &input.to_string()])
        .output()
        .unwrap();
    // The host lived to report the timeout (exit 1, a failed call), not killed (137).
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["termination"], "timed_out", "{doc}");
    // Everything the command started was stopped.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(util::alive(&format!("sleep {marker}")), 0);
    let _ = std::fs::remove_file(&cfg);
}

#[test]
fn what_a_dead_host_left_behind_is_removed_at_the_next_start() {
    let base = cheng_host::confinement().containment;
    let Some(base) = base.strip_prefix("cgroup v2 under ").map(std::path::PathBuf::from) else {
        util::require("cgroup v2 containment", false);
        return;
    };
    // A host that died: its pid is free now.
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    // Its command's cgroup, with a process still in it, and its command's temp dir.
    let stale = base.join(format!("cheng-{dead}-stale"));
    std::fs::create_dir(&stale).unwrap();
    let mut sleeper = Command::new("sleep").arg("302.25").spawn().unwrap();
    std::fs::write(stale.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
    let tmp = std::env::temp_dir().join(format!("cheng-cmd-{dead}-stale"));
    std::fs::create_dir_all(&tmp).unwrap();
    // A live host's (this test process) are left alone: the control.
    let live = std::env::temp_dir().join(format!("cheng-cmd-{}-live", std::process::id()));
    std::fs::create_dir_all(&live).unwrap();
    // The next start.
    let ws = util::workspace();
    let state = tempfile::tempdir().unwrap();
    let out = util::cheng_in(ws.path(), state.path()).args(["call", "think", r#"{"thought":"x"}"#]).output().unwrap();
    assert!(out.status.success());
    let status = sleeper.wait().unwrap();
    assert!(status.code().is_none(), "the stale cgroup's process was killed");
    assert!(!stale.exists() && !tmp.exists());
    assert!(live.exists());
    let _ = std::fs::remove_dir(&live);
}

#[tokio::test(flavor = "multi_thread")]
async fn private_caches_live_under_the_state_dir() {
    if !landlock() {
        return;
    }
    let ws = util::workspace();
    let state = tempfile::tempdir().unwrap();
    let mut b = HostBuilder::new();
    b.config(
        Config::from_toml_str(&format!("[process]\nprivate_caches = true\n{}", allow("python3")), "t.toml").unwrap(),
    );
    b.state_dir(state.path()).approver(Arc::new(RefuseAll));
    let h = b.build().await.unwrap();
    let probe = "import os; d = os.environ['CARGO_HOME']; os.makedirs(d, exist_ok=True); open(d + '/probe', 'w').write('x'); print(d)";
    let r = shell(&h, ws.path(), json!({"command": "python3", "args": ["-c", probe]})).await;
    let dir = r.output["stdout"].as_str().unwrap().trim().to_string();
    // The cache is the workspace's own, under the state dir, and writable.
    assert!(dir.starts_with(&state.path().join("caches").display().to_string()), "{}", r.output);
    assert!(Path::new(&dir).join("probe").exists(), "{}", r.output);
}
