//! workspace_shell and host-owned process spawning, with real processes: every seed
//! field, each termination, the policy refusals, the approval card, and the attacks
//! (argument and environment injection, PATH hijack, floods, processes that hold the
//! pipe, ignore TERM or detach, writes and hard links out of the workspace). Each attack
//! has a positive control showing the test would notice a missing defence.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cheng_host::approvals::{ApprovalRequest, ApproveAll, Approver, Decision, RefuseAll};
use cheng_host::policy::Config;
use cheng_host::{Context, Host, Status, ToolResult};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::util;

/// Records every card and answers with a fixed decision (or never).
struct Recorder {
    cards: Mutex<Vec<ApprovalRequest>>,
    answer: Option<Decision>,
}
impl Approver for Recorder {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        self.cards.lock().unwrap().push(r.clone());
        let a = self.answer;
        Box::pin(async move {
            match a {
                Some(d) => d,
                None => std::future::pending().await,
            }
        })
    }
}

async fn host_with(config: &str, approver: Arc<dyn Approver>) -> Host {
    util::host_with(config, approver).await
}

async fn yes_host(config: &str) -> Host {
    host_with(config, Arc::new(ApproveAll)).await
}

async fn shell(h: &Host, ws: &Path, input: Value) -> ToolResult {
    h.call(&Context::new(ws), "workspace_shell", input).await
}

/// Live (not zombie) processes whose command line contains `marker`.
fn alive(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = state.rfind(')').is_some_and(|i| state[i + 2..].starts_with('Z'));
        if cmd.contains(marker) && !zombie {
            out.push(pid);
        }
    }
    out
}

fn kill_all(marker: &str) {
    for pid in alive(marker) {
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Live processes that are exactly `sleep <marker>` (exec'd, not a shell about to).
fn sleeping(marker: &str) -> usize {
    let exact = format!("sleep\0{marker}\0");
    alive(marker)
        .into_iter()
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == exact.as_bytes()))
        .count()
}

/// Poll until nothing matches `marker` (up to `secs`); returns what is still alive.
fn settle(marker: &str, secs: u64) -> Vec<i32> {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let a = alive(marker);
        if a.is_empty() || Instant::now() > until {
            return a;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn out(r: &ToolResult) -> &Value {
    &r.output
}

#[tokio::test(flavor = "multi_thread")]
async fn ls_produces_every_seed_field() {
    let ws = util::workspace();
    let h = yes_host("").await;
    let r = shell(&h, ws.path(), json!({"command": "ls", "args": ["-la"], "purpose": "see the files"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    let o = out(&r);
    for field in [
        "success",
        "summary",
        "command_display",
        "cwd",
        "exit_code",
        "termination",
        "duration_ms",
        "stdout",
        "stdout_truncated",
        "stderr",
        "stderr_truncated",
        "error_kind",
        "terminal",
        "error",
    ] {
        assert!(o.get(field).is_some(), "missing {field}: {o}");
    }
    assert_eq!(o["success"], true);
    assert_eq!(o["exit_code"], 0);
    assert_eq!(o["termination"], "exited");
    assert_eq!(o["command_display"], "ls -la");
    assert_eq!(o["cwd"], ".");
    assert!(o["stdout"].as_str().unwrap().contains("inside.txt"), "{o}");
    assert_eq!(o["stdout_truncated"], false);
    assert_eq!(o["error_kind"], Value::Null);
    assert_eq!(o["terminal"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn nonzero_exit_is_a_normal_result_and_silence_is_said() {
    let ws = util::workspace();
    let h = yes_host("").await;
    let r = shell(&h, ws.path(), json!({"command": "sh", "args": ["-c", "echo boom >&2; exit 3"]})).await;
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.output["success"], false);
    assert_eq!(r.output["exit_code"], 3);
    assert_eq!(r.output["termination"], "exited");
    assert_eq!(r.output["stderr"], "boom\n");
    assert!(r.output["summary"].as_str().unwrap().contains("exit code 3"), "{}", r.output);

    let r = shell(&h, ws.path(), json!({"command": "true"})).await;
    assert_eq!(r.output["success"], true);
    assert!(r.output["summary"].as_str().unwrap().contains("printed nothing"), "{}", r.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_kills_and_says_so() {
    let ws = util::workspace();
    let h = yes_host("").await;
    let started = Instant::now();
    let r = shell(&h, ws.path(), json!({"command": "sleep", "args": ["1001.5"], "timeout_ms": 300})).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(r.output["termination"], "timed_out", "{}", r.output);
    assert_eq!(r.output["summary"], "Command timed out after 300 ms and was killed");
    assert_eq!(r.output["error_kind"], "LOCAL_EXECUTOR_TIMEOUT");
    assert_eq!(r.output["exit_code"], Value::Null);
    assert!(settle("1001.5", 3).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn trap_term_is_killed_after_the_grace() {
    let ws = util::workspace();
    let h = yes_host("").await;
    let started = Instant::now();
    let r = shell(
        &h,
        ws.path(),
        json!({"command": "sh", "args": ["-c", "trap '' TERM; echo ready; sleep 1002.5; sleep 1002.5"], "timeout_ms": 300}),
    )
    .await;
    assert_eq!(r.output["termination"], "timed_out", "{}", r.output);
    assert_eq!(r.output["stdout"], "ready\n");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(settle("1002.5", 3).is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn signalled_and_spawn_failed() {
    let ws = util::workspace();
    let h = yes_host("").await;
    let r = shell(&h, ws.path(), json!({"command": "sh", "args": ["-c", "kill -SEGV $$"]})).await;
    assert_eq!(r.output["termination"], "signalled", "{}", r.output);
    assert_eq!(r.output["exit_code"], Value::Null);
    assert!(r.output["summary"].as_str().unwrap().ends_with("was killed by SIGSEGV"), "{}", r.output);
    assert_eq!(r.output["error"], r.output["summary"]);

    let r = shell(&h, ws.path(), json!({"command": "no-such-program-cheng"})).await;
    assert_eq!(r.output["termination"], "spawn_failed", "{}", r.output);
    assert_eq!(r.output["error_kind"], "LOCAL_EXECUTOR_SPAWN_FAILED");
    assert_eq!(r.output["terminal"], true);
    assert!(r.output["error"].as_str().unwrap().contains("not found on the host's PATH"), "{}", r.output);

    // Exists but is not executable: the kernel refuses the exec.
    std::fs::write(ws.path().join("script.sh"), "#!/bin/sh\necho hi\n").unwrap();
    let r = shell(&h, ws.path(), json!({"command": "./script.sh"})).await;
    assert_eq!(r.output["termination"], "spawn_failed", "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("could not be started"), "{}", r.output);
    // The host's reason already says so: the summary says it once.
    let summary = r.output["summary"].as_str().unwrap();
    assert_eq!(summary.matches("could not be started").count(), 1, "{summary}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_during_run_reports_cancelled_and_leaves_nothing() {
    let ws = util::workspace();
    let h = yes_host("").await;
    let token = CancellationToken::new();
    let cx = Context::new(ws.path()).cancel_with(token.clone());
    let script = "setsid sleep 1003.5 & echo started; sleep 1003.5";
    let h2 = h.clone();
    let call =
        tokio::spawn(
            async move { h2.call(&cx, "workspace_shell", json!({"command": "sh", "args": ["-c", script]})).await },
        );
    // Cancelled while it runs: once both sleeps (the detached one and the foreground one,
    // after the echo) have started.
    util::wait_until_async("the command's two sleeps", Duration::from_secs(30), || sleeping("1003.5") >= 2).await;
    token.cancel();
    let r = call.await.unwrap();
    assert_eq!(r.output["termination"], "cancelled", "{}", r.output);
    assert_eq!(r.output["stdout"], "started\n");
    assert_eq!(r.output["error_kind"], "LOCAL_EXECUTOR_CANCELLED");
    assert!(r.output["summary"].as_str().unwrap().starts_with("Command was cancelled after "), "{}", r.output);
    assert!(settle("1003.5", 3).is_empty(), "survivors: {:?}", alive("1003.5"));
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_during_approval_runs_nothing() {
    let ws = util::workspace();
    let rec = Arc::new(Recorder { cards: Mutex::default(), answer: None });
    let h = host_with("", rec.clone()).await;
    let token = CancellationToken::new();
    let cx = Context::new(ws.path()).cancel_with(token.clone());
    let h2 = h.clone();
    let call =
        tokio::spawn(
            async move { h2.call(&cx, "workspace_shell", json!({"command": "touch", "args": ["ran.txt"]})).await },
        );
    // Cancelled while the card waits for a person.
    util::wait_until_async("the approval card", Duration::from_secs(30), || !rec.cards.lock().unwrap().is_empty())
        .await;
    token.cancel();
    let r = call.await.unwrap();
    assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::Cancelled), "{}", r.output);
    let card = rec.cards.lock().unwrap().clone();
    assert_eq!(card.len(), 1);
    // The card was withdrawn with the call: approving it now is too late, and the
    // command never ran.
    assert!(!h.answer_approval(&card[0].id, true), "the cancelled call's card was still pending");
    assert!(!ws.path().join("ran.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn background_job_holding_the_pipe_does_not_hang_the_call() {
    let ws = util::workspace();
    let h = yes_host("").await;
    let started = Instant::now();
    let r = shell(&h, ws.path(), json!({"command": "sh", "args": ["-c", "sleep 1004.5 & echo bg"]})).await;
    assert_eq!(r.output["termination"], "exited", "{}", r.output);
    assert_eq!(r.output["stdout"], "bg\n");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(settle("1004.5", 3).is_empty());
}

/// A tree of 200 processes that ignore TERM and leave the process group with setsid.
fn detaching_tree(marker: &str, n: usize) -> String {
    format!(
        "i=0; while [ $i -lt {n} ]; do setsid sh -c \"trap '' TERM; exec sleep {marker}\" & i=$((i+1)); done; echo started; sleep {marker}"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn detached_term_ignoring_tree_is_stopped() {
    // Positive control: run outside cheng, these processes outlive their parent.
    let control = "1005.25";
    let mut c = std::process::Command::new("sh").args(["-c", &detaching_tree(control, 3)]).spawn().unwrap();
    // Killed once the tree stands: three detached sleeps and the parent's own.
    util::wait_until("the control tree to start", Duration::from_secs(30), || sleeping(control) >= 4);
    unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
    let _ = c.wait();
    assert!(sleeping(control) >= 3, "the control tree should survive its parent");
    kill_all(control);

    for (containment, marker) in [("auto", "1005.5"), ("walk", "1005.75")] {
        let ws = util::workspace();
        let h = yes_host(&format!("containment = \"{containment}\"\n")).await;
        let r = shell(
            &h,
            ws.path(),
            json!({"command": "sh", "args": ["-c", detaching_tree(marker, 200)], "timeout_ms": 3000}),
        )
        .await;
        assert_eq!(r.output["termination"], "timed_out", "{containment}: {}", r.output);
        assert_eq!(r.output["stdout"], "started\n", "{containment}");
        let left = settle(marker, 5);
        kill_all(marker);
        assert!(left.is_empty(), "{containment}: {} survivors", left.len());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn floods_stay_bounded() {
    let ws = util::workspace();
    let h = yes_host("").await;
    // 1 GB on stdout.
    let r = shell(
        &h,
        ws.path(),
        json!({"command": "head", "args": ["-c", "1000000000", "/dev/zero"], "timeout_ms": 120000}),
    )
    .await;
    assert_eq!(r.output["termination"], "exited", "{}", &r.output["summary"]);
    assert_eq!(r.output["stdout_truncated"], true);
    assert!(r.output["stdout"].as_str().unwrap().len() < 140 * 1024);
    assert!(r.output["stdout"].as_str().unwrap().contains("bytes omitted"));
    // 100 MB in one line, no newline, on stderr.
    let r = shell(
        &h,
        ws.path(),
        json!({"command": "sh", "args": ["-c", "head -c 100000000 /dev/zero | tr '\\0' a >&2; printf end >&2"], "timeout_ms": 120000}),
    )
    .await;
    let err = r.output["stderr"].as_str().unwrap();
    assert_eq!(r.output["stderr_truncated"], true);
    assert!(err.starts_with("aaaa") && err.ends_with("aend") && err.len() < 140 * 1024, "{}", err.len());
    // The host's memory stayed near the cap: nothing like 100 MB was held.
    let rss = std::fs::read_to_string("/proc/self/status").unwrap();
    let hwm: u64 =
        rss.lines().find(|l| l.starts_with("VmHWM")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(hwm < 900 * 1024, "peak RSS {hwm} kB");
}

#[tokio::test(flavor = "multi_thread")]
async fn shell_strings() {
    let ws = util::workspace();
    let h = yes_host("").await;
    // Plain words split like a shell, quotes honoured.
    let r = shell(&h, ws.path(), json!({"shell_string": "echo 'hello   world' again"})).await;
    assert_eq!(r.output["stdout"], "hello   world again\n", "{}", r.output);
    // Shell syntax is refused by name, and nothing runs.
    for s in [
        "ls | wc -l",
        "touch a && touch b",
        "echo $HOME",
        "echo `id`",
        "touch x; touch y",
        "cat < /etc/passwd",
        "echo a\ntouch z",
        "ls *.txt",
    ] {
        let r = shell(&h, ws.path(), json!({"shell_string": s})).await;
        assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::ShellSyntaxDisabled), "{s}: {}", r.output);
        assert_eq!(r.status, Status::Denied);
    }
    assert!(!ws.path().join("a").exists() && !ws.path().join("x").exists());
    // With the operator's opt-in it runs under sh -c.
    let h = yes_host("allow_shell_string = true\n").await;
    let r = shell(&h, ws.path(), json!({"shell_string": "echo abc | tr a-c x-z"})).await;
    assert_eq!(r.output["stdout"], "xyz\n", "{}", r.output);
    // Both forms at once is a mistake.
    let r = shell(&h, ws.path(), json!({"command": "ls", "shell_string": "ls"})).await;
    assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::InvalidArgument));
}

#[tokio::test(flavor = "multi_thread")]
async fn whitelist_and_rules() {
    let ws = util::workspace();
    for wl in [
        "command_whitelist = \"\"\"\necho\n# comment\n\"\"\"\nallow_shell_string = true\n",
        "command_whitelist = [\"echo\"]\n",
    ] {
        let h = yes_host(wl).await;
        let r = shell(&h, ws.path(), json!({"command": "echo", "args": ["ok"]})).await;
        assert_eq!(r.output["stdout"], "ok\n", "{}", r.output);
        // A workspace program under a listed name is not the listed program.
        std::fs::write(ws.path().join("echo"), "#!/bin/sh\necho workspace-echo\n").unwrap();
        std::fs::set_permissions(ws.path().join("echo"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let r = shell(&h, ws.path(), json!({"command": "./echo", "args": ["ok"]})).await;
        assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::CommandNotAllowed), "{}", r.output);
        assert!(!r.output.to_string().contains("workspace-echo"), "{}", r.output);
        let r = shell(&h, ws.path(), json!({"command": "ls"})).await;
        assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::CommandNotAllowed), "{}", r.output);
        let r = shell(&h, ws.path(), json!({"shell_string": "echo ok"})).await;
        assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::CommandNotAllowed), "{}", r.output);
    }
    // Rules: allow runs without asking (nobody could be asked here), forbid refuses,
    // the strictest match wins, anything else asks (and is refused: nobody to ask).
    let rules = "[[process.rules]]\nprogram = \"echo\"\ndecision = \"allow\"\n\
                 [[process.rules]]\nprogram = \"echo\"\nargs = [\"-e\"]\ndecision = \"forbid\"\n";
    let h = host_with(rules, Arc::new(RefuseAll)).await;
    let r = shell(&h, ws.path(), json!({"command": "echo", "args": ["fine"]})).await;
    assert_eq!(r.output["stdout"], "fine\n", "{}", r.output);
    let r = shell(&h, ws.path(), json!({"command": "echo", "args": ["-e", "x"]})).await;
    assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::CommandNotAllowed), "{}", r.output);
    let r = shell(&h, ws.path(), json!({"command": "true"})).await;
    assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::ApprovalDenied), "{}", r.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn host_owned_fields_are_refused_from_the_model() {
    let ws = util::workspace();
    let h = yes_host("").await;
    for (k, v) in [("sandbox_root", json!("/")), ("allow_shell_string", json!(true)), ("command_whitelist", json!(""))]
    {
        let mut input = json!({"command": "true"});
        input[k] = v;
        let r = shell(&h, ws.path(), input).await;
        assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::InvalidArgument), "{k}: {}", r.output);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn environment_is_an_allowlist() {
    let ws = util::workspace();
    let h = yes_host("env = [\"CHENG_TEST_FLAG\"]\n").await;
    let r = shell(&h, ws.path(), json!({"command": "env", "env": {"CHENG_TEST_FLAG": "1", "LANG": "C"}})).await;
    let names: Vec<&str> = r.output["stdout"].as_str().unwrap().lines().filter_map(|l| l.split('=').next()).collect();
    for n in &names {
        let ok = ["PATH", "HOME", "LANG", "TERM", "TZ", "USER", "TMPDIR", "CHENG_TEST_FLAG"].contains(n)
            || n.starts_with("LC_");
        assert!(ok, "{n} leaked into the child: {names:?}");
    }
    assert!(names.contains(&"CHENG_TEST_FLAG") && names.contains(&"TMPDIR"));
    // The test harness's own variables (CARGO_*, RUST_*) never reach the child.
    assert!(std::env::vars().any(|(k, _)| k.starts_with("CARGO")));
    for bad in [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "GIT_DIR",
        "GIT_SSH_COMMAND",
        "PAGER",
        "EDITOR",
        "BASH_ENV",
        "NODE_OPTIONS",
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "SOMETHING_ELSE",
        "PATH",
    ] {
        let r = shell(&h, ws.path(), json!({"command": "true", "env": {bad: "/tmp/x"}})).await;
        assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::CommandNotAllowed), "{bad}: {}", r.output);
        assert!(r.output["error"].as_str().unwrap().contains(bad));
    }
    // The operator cannot allow a never-passed name either.
    assert!(Config::from_toml_str("[process]\nenv = [\"LD_PRELOAD\"]\n", "t.toml").is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn arguments_are_literal_and_shown_exactly() {
    let ws = util::workspace();
    let h = yes_host("").await;
    let r = shell(
        &h,
        ws.path(),
        json!({"command": "echo", "args": ["a; touch pwned", "$(touch pwned2)", "`touch pwned3`"]}),
    )
    .await;
    assert_eq!(r.output["stdout"], "a; touch pwned $(touch pwned2) `touch pwned3`\n");
    for f in ["pwned", "pwned2", "pwned3"] {
        assert!(!ws.path().join(f).exists());
    }
    // Option injection reaches the card verbatim, so the person sees it; declined, nothing runs.
    let rec = Arc::new(Recorder { cards: Mutex::default(), answer: Some(Decision::Declined) });
    let h = host_with("", rec.clone()).await;
    let marker = ws.path().join("ssh-ran");
    let args = json!(["-c", format!("core.sshCommand=touch {}", marker.display()), "fetch", "origin"]);
    let r = shell(&h, ws.path(), json!({"command": "git", "args": args, "purpose": "update"})).await;
    assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::ApprovalDenied));
    assert_eq!(r.status, Status::Denied);
    let msg = r.output["error"].as_str().unwrap();
    assert!(
        msg.starts_with("The human declined to run this shell command") && msg.contains("Do not run it again"),
        "{msg}"
    );
    let card = rec.cards.lock().unwrap()[0].clone();
    assert!(card.summary.contains("core.sshCommand=touch"), "{}", card.summary);
    assert!(card.detail.contains(&ws.path().canonicalize().unwrap().display().to_string()), "{}", card.detail);
    assert_eq!(card.purpose, "update");
    assert!(!marker.exists());
    // find -exec and --output= style writes outside the workspace fail under Landlock…
    let h = yes_host("").await;
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("sorted");
    let r = shell(
        &h,
        ws.path(),
        json!({"command": "sort", "args": [format!("--output={}", target.display()), "inside.txt"]}),
    )
    .await;
    assert_ne!(r.output["exit_code"], 0, "{}", r.output);
    assert!(!target.exists());
    let r = shell(&h, ws.path(), json!({"command": "find", "args": [".", "-name", "inside.txt", "-exec", "cp", "{}", outside.path().join("copied").display().to_string(), ";"]})).await;
    assert!(r.output["stderr"].as_str().unwrap().contains("Permission denied"), "{}", r.output);
    assert!(!outside.path().join("copied").exists());
    // …and the same writes inside it work (the control).
    let r = shell(&h, ws.path(), json!({"command": "sort", "args": ["--output=out/sorted", "inside.txt"]})).await;
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    assert!(ws.path().join("out/sorted").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn card_escapes_control_and_bidi_characters() {
    let ws = util::workspace();
    let rec = Arc::new(Recorder { cards: Mutex::default(), answer: Some(Decision::Declined) });
    let h = host_with("", rec.clone()).await;
    let _ = shell(
        &h,
        ws.path(),
        json!({"command": "echo", "args": ["safe\u{202e}txt.exe", "\u{1b}[2Jclear", "two\nlines"]}),
    )
    .await;
    let card = rec.cards.lock().unwrap()[0].clone();
    assert!(card.summary.contains("\\u{202e}") && card.summary.contains("\\u{1b}"), "{}", card.summary);
    assert!(!card.summary.contains('\u{202e}') && !card.summary.contains('\n'), "{}", card.summary);
    // Every field is one line: the newline is shown, not kept.
    assert!(card.detail.contains("two\\nlines") && !card.detail.contains('\n'), "{}", card.detail);
}

#[tokio::test(flavor = "multi_thread")]
async fn landlock_refuses_writes_and_hard_links_out() {
    if !util::require("Landlock (a kernel with it enabled)", cheng_host::confinement().landlock_abi.is_some()) {
        return;
    }
    let ws = util::workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s").unwrap();
    let h = yes_host("").await;
    let script = format!(
        "echo x > {o}/new; ln {o}/secret linked; echo in > made.txt; ln made.txt made2.txt; echo tmp > \"$TMPDIR/t\" && echo tmpok",
        o = outside.path().display()
    );
    let r = shell(&h, ws.path(), json!({"command": "sh", "args": ["-c", script]})).await;
    let err = r.output["stderr"].as_str().unwrap();
    assert!(!outside.path().join("new").exists(), "{err}");
    assert!(!ws.path().join("linked").exists(), "{err}");
    // Controls: writes and links inside, and the private temp dir, work.
    assert!(ws.path().join("made.txt").exists() && ws.path().join("made2.txt").exists(), "{err}");
    assert_eq!(r.output["stdout"], "tmpok\n", "{}", r.output);
    // With Landlock off the same hard link succeeds: the refusal above is Landlock's.
    let h = yes_host("landlock = false\n").await;
    let r = shell(
        &h,
        ws.path(),
        json!({"command": "ln", "args": [outside.path().join("secret").display().to_string(), "linked"]}),
    )
    .await;
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn programs_come_from_the_host_path_not_the_workspace() {
    use std::os::unix::fs::PermissionsExt;
    let ws = util::workspace();
    std::fs::create_dir(ws.path().join("bin")).unwrap();
    for p in ["bin/ls", "ls", "bin/git"] {
        let f = ws.path().join(p);
        std::fs::write(&f, "#!/bin/sh\necho HIJACKED\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // The CLI, with the workspace's bin/ first on its PATH.
    let path = format!("{}:{}", ws.path().join("bin").display(), std::env::var("PATH").unwrap());
    let run = |input: &str| {
        let o = util::cheng(ws.path())
            .env("PATH", &path)
            .args(["call", "workspace_shell", input, "--approve", "yes"])
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    let o = run(r#"{"command":"ls"}"#);
    assert!(!o["stdout"].as_str().unwrap().contains("HIJACKED"), "{o}");
    assert!(o["stdout"].as_str().unwrap().contains("inside.txt"), "{o}");
    // The child's PATH does not hold the workspace either.
    let o = run(r#"{"command":"sh","args":["-c","echo $PATH"]}"#);
    assert!(!o["stdout"].as_str().unwrap().contains(&ws.path().display().to_string()), "{o}");
    // Control: a relative path runs the workspace's program (approval-gated as ever).
    let o = run(r#"{"command":"./ls"}"#);
    assert_eq!(o["stdout"], "HIJACKED\n", "{o}");
    let o = run(r#"{"command":"./ls","cwd":"bin"}"#);
    assert_eq!(o["stdout"], "HIJACKED\n", "{o}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cwd_goes_through_the_guard() {
    let ws = util::workspace();
    let h = yes_host("").await;
    let r = shell(&h, ws.path(), json!({"command": "pwd", "cwd": "docs"})).await;
    assert_eq!(r.output["cwd"], "docs");
    assert_eq!(
        r.output["stdout"].as_str().unwrap().trim(),
        ws.path().canonicalize().unwrap().join("docs").display().to_string()
    );
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.path().join("link")).unwrap();
    for (cwd, kind) in [
        ("..", cheng_host::ErrorKind::PathRefused),
        ("link", cheng_host::ErrorKind::PathRefused),
        ("/etc", cheng_host::ErrorKind::PathRefused),
        ("inside.txt", cheng_host::ErrorKind::InvalidArgument),
        ("nope", cheng_host::ErrorKind::NotFound),
    ] {
        let r = shell(&h, ws.path(), json!({"command": "pwd", "cwd": cwd})).await;
        assert_eq!(r.error_kind, Some(kind), "{cwd}: {}", r.output);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_are_recorded_as_denials() {
    let ws = util::workspace();
    let h = yes_host("").await;
    let (r, rec) =
        h.call_recorded(&Context::new(ws.path()), "workspace_shell", json!({"shell_string": "ls | wc"})).await;
    assert_eq!(r.status, Status::Denied);
    assert_eq!(rec.status, Status::Denied);
    assert_eq!(rec.error_kind.as_deref(), Some("LOCAL_EXECUTOR_SHELL_SYNTAX_DISABLED"));
    // Auto-approval is recorded too.
    let (_, rec) = h.call_recorded(&Context::new(ws.path()), "workspace_shell", json!({"command": "true"})).await;
    assert_eq!(rec.approvals[0].decision, Decision::AutoApproved);
}

#[test]
fn cli_refuses_without_a_terminal_and_prompts_on_one() {
    let ws = util::workspace();
    let state = tempfile::tempdir().unwrap();
    // `tac`, not `ls`: `ls -la` is known-safe and would run with nobody asked.
    let input = r#"{"command":"tac","args":["inside.txt"]}"#;
    let started = Instant::now();
    let o = std::process::Command::new("setsid")
        .arg(env!("CARGO_BIN_EXE_cheng"))
        .args(["--state-dir", &state.path().display().to_string(), "--workspace", &ws.path().display().to_string()])
        .args(["call", "workspace_shell", input])
        .env("CHENG_LOG", "error")
        .env("XDG_CONFIG_HOME", state.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["error_kind"], "LOCAL_EXECUTOR_APPROVAL_DENIED", "{v}");
    assert_eq!(o.status.code(), Some(2));
    assert!(started.elapsed() < Duration::from_secs(60));

    let (st, w) = (state.path().display().to_string(), ws.path().display().to_string());
    let screen = util::cheng_at_terminal(
        &["--state-dir", &st, "--workspace", &w, "call", "workspace_shell", input],
        state.path(),
        "y\n",
        Duration::from_millis(1500),
    );
    assert!(screen.contains("summary: tac inside.txt"), "{screen}");
    assert!(screen.contains("\"termination\": \"exited\""), "{screen}");
    assert!(screen.contains("\"stdout\": \"inside\""), "{screen}");
}

#[test]
fn settings_report_what_confines_commands() {
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let o = util::cheng_in(ws.path(), state.path()).arg("settings").output().unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let landlock = v["process_confinement"]["landlock"].as_str().unwrap();
    let expected = if cheng_host::confinement().landlock_abi.is_some() { "available" } else { "unavailable" };
    assert!(landlock.starts_with(expected), "{v}");
    assert!(v["process_confinement"]["containment"].as_str().unwrap().len() > 5, "{v}");
    // The path rules in force: the built-in ones, and the operator's from cheng.toml.
    let built_in = v["path_rules"]["built_in"].as_array().unwrap();
    assert!(built_in.iter().any(|r| r["paths"] == ".env" && r["read"] == "prompt"), "{v}");
    assert!(built_in.iter().any(|r| r["paths"] == ".vscode/**" && r["write"] == "prompt"), "{v}");
    assert_eq!(v["path_rules"]["operator"], json!([]), "{v}");
    std::fs::write(ws.path().join("cheng.toml"), "[[files.rules]]\npaths = [\"/.env\"]\nread = \"allow\"\n").unwrap();
    let o = util::cheng_in(ws.path(), state.path())
        .arg("--config")
        .arg(ws.path().join("cheng.toml"))
        .arg("settings")
        .output()
        .unwrap();
    let v: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)));
    assert_eq!(v["path_rules"]["operator"], json!([{"paths": ["/.env"], "read": "allow", "write": null}]), "{v}");
}
