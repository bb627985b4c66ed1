//! The files the host itself reads from a repository before it runs git — its
//! configuration and the files it includes, a `.git` file, `HEAD` and refs — with
//! real FIFOs, an endless device behind a link and a file over the cap: a
//! `workspace_shell` `git status` (approved or declined: the files are read before
//! anyone is asked) and a `workspace_git_write` operation each return promptly with an
//! error naming the file, where the host used to block on the FIFO for good or read the
//! device without end. Each call runs as a task of its own under a deadline, so a call
//! that blocks fails its test (and the FIFOs are then opened for writing, to let the
//! blocked thread go). Positive controls: a normal repository with regular includes
//! inside and outside the workspace and a configuration reached through a link.

use std::future::Future;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cheng_host::approvals::{ApprovalRequest, Approver, Decision};
use cheng_host::{Context, ErrorKind, Host, Status, ToolResult};
use serde_json::{Value, json};

use crate::util;

/// Longer than any of these calls takes on a loaded machine (a refusal takes
/// milliseconds): past it, the call counts as hung.
const DEADLINE: Duration = Duration::from_secs(30);

/// Answers every card with a fixed decision and counts the cards. A yes is full access:
/// these cases are about what git reads, including an include outside the workspace.
struct Answer {
    asked: AtomicUsize,
    decision: Decision,
}
impl Approver for Answer {
    fn answer<'a>(
        &'a self,
        _r: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = cheng_host::approvals::Answer> + Send + 'a>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let a = match self.decision {
            Decision::Approved => cheng_host::approvals::Answer {
                tier: Some(cheng_host::approvals::Tier::Full),
                ..Decision::Approved.into()
            },
            d => d.into(),
        };
        Box::pin(async move { a })
    }
}

async fn host(decision: Decision) -> (Host, Arc<Answer>) {
    let a = Arc::new(Answer { asked: AtomicUsize::new(0), decision });
    // `git status` is known-safe: off here, so that it asks as these cases expect.
    (util::host_with("known_safe = false\n", a.clone()).await, a)
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

/// A repository in `dir`: `main` with one commit of `a.txt`, and `a.txt` changed.
fn init(dir: &Path) {
    for args in [&["init", "-q", "-b", "main"][..], &["config", "user.name", "Ada"], &["config", "user.email", "a@b"]] {
        assert!(util::git(dir).args(args).status().unwrap().success(), "git {args:?}");
    }
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    assert!(util::git(dir).args(["add", "a.txt"]).status().unwrap().success());
    assert!(util::git(dir).args(["commit", "-q", "-m", "one"]).status().unwrap().success());
    std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
}

fn append(file: &Path, text: &str) {
    let mut t = std::fs::read_to_string(file).unwrap();
    t.push_str(text);
    std::fs::write(file, t).unwrap();
}

/// Open each FIFO for writing and close it, over and over for a while, so that a thread
/// blocked opening or reading one goes on (only after a test has already failed).
fn release(fifos: Vec<PathBuf>) {
    std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            for f in &fifos {
                let _ = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(f);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
}

/// Call `tool` in its own task; fail the test if it has not returned by the deadline.
async fn call(h: &Host, ws: &Path, tool: &str, input: Value, fifos: &[PathBuf]) -> ToolResult {
    let (h2, cx, name, inp) = (h.clone(), Context::new(ws), tool.to_string(), input.clone());
    let task = tokio::spawn(async move { h2.call(&cx, &name, inp).await });
    match tokio::time::timeout(DEADLINE, task).await {
        Ok(r) => r.unwrap(),
        Err(_) => {
            release(fifos.to_vec());
            panic!("{tool} {input} did not return within {DEADLINE:?}: the host blocked on a file it read");
        }
    }
}

/// One way to break a repository's files, what the error must say, and the FIFOs made.
struct Arm {
    name: &'static str,
    /// Arms `ws` (a repository) and an outside directory; returns the FIFOs it made.
    arm: fn(&Path, &Path) -> Vec<PathBuf>,
    /// Words the error must hold.
    says: &'static [&'static str],
    kind: ErrorKind,
    /// The directory the call runs in.
    cwd: &'static str,
}

fn fifo_config(ws: &Path, _: &Path) -> Vec<PathBuf> {
    let p = ws.join(".git/config");
    std::fs::remove_file(&p).unwrap();
    mkfifo(&p);
    vec![p]
}

fn fifo_include(ws: &Path, _: &Path) -> Vec<PathBuf> {
    append(&ws.join(".git/config"), "[include]\n\tpath = ../included.cfg\n");
    let p = ws.join("included.cfg");
    mkfifo(&p);
    vec![p]
}

fn fifo_include_outside(ws: &Path, outside: &Path) -> Vec<PathBuf> {
    let p = outside.join("outside.cfg");
    mkfifo(&p);
    append(&ws.join(".git/config"), &format!("[includeIf \"gitdir:/\"]\n\tpath = {}\n", p.display()));
    vec![p]
}

fn zero_behind_link(ws: &Path, _: &Path) -> Vec<PathBuf> {
    let p = ws.join(".git/config");
    std::fs::remove_file(&p).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
    vec![]
}

fn over_cap(ws: &Path, _: &Path) -> Vec<PathBuf> {
    // A valid configuration, made large by comments: 2 MiB.
    let line = format!("# {}\n", "x".repeat(1022));
    append(&ws.join(".git/config"), &line.repeat(2048));
    vec![]
}

fn fifo_dotgit_file(ws: &Path, _: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    let p = ws.join("sub/.git");
    mkfifo(&p);
    vec![p]
}

fn fifo_head(ws: &Path, _: &Path) -> Vec<PathBuf> {
    let p = ws.join(".git/HEAD");
    std::fs::remove_file(&p).unwrap();
    mkfifo(&p);
    vec![p]
}

fn fifo_ref(ws: &Path, _: &Path) -> Vec<PathBuf> {
    let p = ws.join(".git/refs/heads/main");
    std::fs::remove_file(&p).unwrap();
    mkfifo(&p);
    vec![p]
}

const FIFO: &str = "FIFO (named pipe)";

fn shell_arms() -> Vec<Arm> {
    vec![
        Arm {
            name: "a FIFO as .git/config",
            arm: fifo_config,
            says: &[".git/config", FIFO],
            kind: ErrorKind::PathRefused,
            cwd: ".",
        },
        Arm {
            name: "a FIFO as an included file",
            arm: fifo_include,
            says: &["included.cfg", FIFO],
            kind: ErrorKind::PathRefused,
            cwd: ".",
        },
        Arm {
            name: "a FIFO outside the workspace as an included file",
            arm: fifo_include_outside,
            says: &["outside.cfg", FIFO],
            kind: ErrorKind::PathRefused,
            cwd: ".",
        },
        Arm {
            name: "/dev/zero behind a link as .git/config",
            arm: zero_behind_link,
            says: &[".git/config", "/dev/zero", "character device"],
            kind: ErrorKind::PathRefused,
            cwd: ".",
        },
        Arm {
            name: "a .git/config over the cap",
            arm: over_cap,
            says: &[".git/config", "over the 1 MiB limit"],
            kind: ErrorKind::TooLarge,
            cwd: ".",
        },
        Arm {
            name: "a FIFO as a .git file",
            arm: fifo_dotgit_file,
            says: &["sub/.git", FIFO],
            kind: ErrorKind::PathRefused,
            cwd: "sub",
        },
    ]
}

/// Every arm, for a `git status` a person approves and one a person declines: an error
/// naming the file, at once, and nobody asked (nothing would run).
async fn shell_case(arm: &Arm, decision: Decision) {
    let (h, answer) = host(decision).await;
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    init(ws.path());
    let fifos = (arm.arm)(ws.path(), outside.path());
    for args in GIT_STATUS {
        let started = Instant::now();
        let input = json!({"command": "git", "args": args, "cwd": arm.cwd});
        let r = call(&h, ws.path(), "workspace_shell", input, &fifos).await;
        let took = started.elapsed();
        let what = format!("{} ({decision:?}, git {args:?})", arm.name);
        assert_eq!(r.status, Status::Error, "{what}: {}", r.output);
        assert_eq!(r.error_kind, Some(arm.kind), "{what}: {}", r.output);
        let error = r.output["error"].as_str().unwrap_or_default();
        for word in arm.says {
            assert!(error.contains(word), "{what}: {word:?} not in {error}");
        }
        assert!(error.contains("git"), "{what}: {error}");
        assert_eq!(answer.asked.load(Ordering::SeqCst), 0, "{what}: a person was asked");
        assert!(took < Duration::from_secs(10), "{what}: took {took:?}");
    }
}

/// `git status`, and a form of it no list of read-only commands admits (an option
/// before the subcommand), which a person is asked about.
const GIT_STATUS: [&[&str]; 2] = [&["status"], &["-c", "core.quotepath=off", "status"]];

#[tokio::test(flavor = "multi_thread")]
async fn shell_git_status_with_a_fifo_in_the_repositorys_files_is_refused_at_once() {
    for arm in shell_arms().iter().filter(|a| a.name.contains("FIFO")) {
        for decision in [Decision::Approved, Decision::Declined] {
            shell_case(arm, decision).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn shell_git_status_with_an_endless_device_or_an_oversized_configuration_is_refused() {
    for arm in shell_arms().iter().filter(|a| !a.name.contains("FIFO")) {
        for decision in [Decision::Approved, Decision::Declined] {
            shell_case(arm, decision).await;
        }
    }
}

/// The positive control: regular includes inside and outside the workspace, and the
/// configuration reached through a link inside it, are read; git runs when approved,
/// and the card is shown (and declined) otherwise.
#[tokio::test(flavor = "multi_thread")]
async fn shell_git_status_in_a_normal_repository_runs() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    init(ws.path());
    let w = ws.path();
    std::fs::write(w.join("inside.cfg"), "[diff \"pic\"]\n\ttextconv = cat\n").unwrap();
    std::fs::write(outside.path().join("outside.cfg"), "[filter \"x\"]\n\tclean = cat\n").unwrap();
    // The configuration itself behind a link to a regular file inside the workspace.
    std::fs::rename(w.join(".git/config"), w.join("real-config")).unwrap();
    std::os::unix::fs::symlink("../real-config", w.join(".git/config")).unwrap();
    append(
        &w.join("real-config"),
        &format!(
            "[include]\n\tpath = ../inside.cfg\n[include]\n\tpath = {}\n",
            outside.path().join("outside.cfg").display()
        ),
    );
    let asked = json!({"command": "git", "args": GIT_STATUS[1]});
    let (h, answer) = host(Decision::Approved).await;
    let r = call(&h, w, "workspace_shell", asked.clone(), &[]).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    assert!(r.output["stdout"].as_str().unwrap().contains("On branch main"), "{}", r.output);
    assert_eq!(answer.asked.load(Ordering::SeqCst), 1);
    let (h, answer) = host(Decision::Declined).await;
    let r = call(&h, w, "workspace_shell", asked, &[]).await;
    assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{}", r.output);
    assert_eq!(answer.asked.load(Ordering::SeqCst), 1);
}

fn git_write_arms() -> Vec<Arm> {
    vec![
        Arm {
            name: "a FIFO as .git/config",
            arm: fifo_config,
            says: &[".git/config", FIFO],
            kind: ErrorKind::PathRefused,
            cwd: ".",
        },
        Arm {
            name: "a FIFO as HEAD",
            arm: fifo_head,
            says: &[".git/HEAD", FIFO],
            kind: ErrorKind::PathRefused,
            cwd: ".",
        },
        Arm {
            name: "a FIFO as the branch's ref",
            arm: fifo_ref,
            says: &[".git/refs/heads/main", FIFO],
            kind: ErrorKind::PathRefused,
            cwd: ".",
        },
        Arm {
            name: "/dev/zero behind a link as .git/config",
            arm: zero_behind_link,
            says: &[".git/config", "/dev/zero", "character device"],
            kind: ErrorKind::PathRefused,
            cwd: ".",
        },
        Arm {
            name: "a .git/config over the cap",
            arm: over_cap,
            says: &[".git/config", "over the 1 MiB limit"],
            kind: ErrorKind::TooLarge,
            cwd: ".",
        },
    ]
}

/// An arm for `add`, approved or declined: an error naming the file, at once, and
/// nobody asked.
async fn git_write_case(arm: &Arm, decision: Decision) {
    let (h, answer) = host(decision).await;
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    init(ws.path());
    let fifos = (arm.arm)(ws.path(), outside.path());
    let started = Instant::now();
    let input = json!({"operation": "add", "pathspecs": ["a.txt"], "cwd": arm.cwd});
    let r = call(&h, ws.path(), "workspace_git_write", input, &fifos).await;
    let took = started.elapsed();
    let what = format!("{} ({decision:?})", arm.name);
    assert_eq!(r.status, Status::Error, "{what}: {}", r.output);
    assert_eq!(r.error_kind, Some(arm.kind), "{what}: {}", r.output);
    let error = r.output["error"].as_str().unwrap_or_default();
    for word in arm.says {
        assert!(error.contains(word), "{what}: {word:?} not in {error}");
    }
    assert_eq!(answer.asked.load(Ordering::SeqCst), 0, "{what}: a person was asked");
    assert!(took < Duration::from_secs(10), "{what}: took {took:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn git_write_with_a_fifo_in_the_repositorys_files_is_refused_at_once() {
    for arm in git_write_arms().iter().filter(|a| a.name.contains("FIFO")) {
        for decision in [Decision::Approved, Decision::Declined] {
            git_write_case(arm, decision).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn git_write_with_an_endless_device_or_an_oversized_configuration_is_refused() {
    for arm in git_write_arms().iter().filter(|a| !a.name.contains("FIFO")) {
        for decision in [Decision::Approved, Decision::Declined] {
            git_write_case(arm, decision).await;
        }
    }
}

/// The control: the same operation in a normal repository stages the file.
#[tokio::test(flavor = "multi_thread")]
async fn git_write_in_a_normal_repository_runs() {
    let (h, answer) = host(Decision::Approved).await;
    let ws = tempfile::tempdir().unwrap();
    init(ws.path());
    let r = call(&h, ws.path(), "workspace_git_write", json!({"operation": "add", "pathspecs": ["a.txt"]}), &[]).await;
    assert_eq!(r.output["success"], true, "{}", r.output);
    assert_eq!(answer.asked.load(Ordering::SeqCst), 1);
    let staged = util::git(ws.path()).args(["diff", "--cached", "--name-only"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&staged.stdout), "a.txt\n");
}
