//! The host core's defences, each attacked for real with a positive control: command
//! rules that hold however a program is named, cards escaped by the broker whatever
//! sends them, denials that only the host can issue (and every one in the record), a
//! per-tool memory limit above `[limits]`, and an audit log that fails closed on a
//! full or read-only file system.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use cheng_host::approvals::{ApprovalRequest, ApproveAll, Approver, Decision};
use cheng_host::grant::{FsGrant, Grant};
use cheng_host::policy::Config;
use cheng_host::{Context, ErrorKind, Host, HostBuilder, Status};
use serde_json::{Value, json};

use crate::util;

async fn host(config: &str, approver: Arc<dyn Approver>, plugins: Vec<cheng_host::PluginSpec>) -> Host {
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(config, "test.toml").unwrap());
    b.state_dir(util::shared_state());
    b.approver(approver);
    for p in plugins {
        b.plugin(p);
    }
    b.build().await.unwrap()
}

async fn shell(h: &Host, ws: &Path, input: Value) -> (cheng_host::ToolResult, cheng_host::CallRecord) {
    h.call_recorded(&Context::new(ws), "workspace_shell", input).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_forbid_rule_holds_however_the_program_is_named() {
    let ws = util::workspace();
    let links = tempfile::tempdir().unwrap();
    let touch = ["/usr/bin/touch", "/bin/touch"].into_iter().find(|p| Path::new(p).exists()).unwrap();
    std::os::unix::fs::symlink(touch, links.path().join("mytouch")).unwrap();
    let rule = "[[process.rules]]\nprogram = \"touch\"\nargs = []\ndecision = \"forbid\"\n";
    let h = host(rule, Arc::new(ApproveAll), vec![]).await;
    let mytouch = links.path().join("mytouch").display().to_string();
    for (n, input) in [
        json!({"command": "touch", "args": ["a"]}),
        json!({"command": touch, "args": ["b"]}),
        json!({"command": "env", "args": ["touch", "c"]}),
        json!({"command": mytouch, "args": ["d"]}),
        json!({"command": "nice", "args": ["-n", "1", "touch", "e"]}),
        json!({"command": "timeout", "args": ["5", "touch", "f"]}),
        json!({"command": "sh", "args": ["-c", "touch g"]}),
        json!({"command": "sh", "args": ["-c", "true && touch h"]}),
        json!({"command": "env", "args": ["-S", "touch i"]}),
    ]
    .into_iter()
    .enumerate()
    {
        let (r, rec) = shell(&h, ws.path(), input.clone()).await;
        // Refused by policy, recorded as the host's denial; nothing ran.
        assert_eq!(
            (r.status, r.error_kind),
            (Status::Denied, Some(ErrorKind::CommandNotAllowed)),
            "{input}: {}",
            r.output
        );
        assert_eq!(rec.denials.len(), 1, "{input}");
        let name = ["a", "b", "c", "d", "e", "f", "g", "h", "i"][n];
        assert!(!ws.path().join(name).exists(), "{input} ran");
    }
    // The control: the same launchers run other programs, and without the rule touch runs.
    let (r, _) = shell(&h, ws.path(), json!({"command": "env", "args": ["true"]})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    let free = host("", Arc::new(ApproveAll), vec![]).await;
    let (r, _) = shell(&free, ws.path(), json!({"command": "env", "args": ["touch", "c"]})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert!(ws.path().join("c").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allow_rule_covers_only_the_program_it_names_started_directly() {
    let ws = util::workspace();
    let rule = "[[process.rules]]\nprogram = \"touch\"\nargs = []\ndecision = \"allow\"\n";
    // Nobody can be asked: only what the rule allows runs.
    let h = host(rule, Arc::new(cheng_host::approvals::RefuseAll), vec![]).await;
    // Started directly, by name or path: allowed without asking.
    let (r, rec) = shell(&h, ws.path(), json!({"command": "touch", "args": ["direct"]})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert!(rec.approvals.is_empty() && ws.path().join("direct").exists());
    // Through a launcher: asked (and so refused here), whatever the launcher starts.
    for input in [
        json!({"command": "env", "args": ["touch", "via-env"]}),
        json!({"command": "sh", "args": ["-c", "touch via-sh"]}),
    ] {
        let (r, rec) = shell(&h, ws.path(), input.clone()).await;
        assert_eq!(r.status, Status::Denied, "{input}: {}", r.output);
        assert_eq!(rec.approvals.len(), 1, "{input}: asked");
    }
    assert!(!ws.path().join("via-env").exists() && !ws.path().join("via-sh").exists());
}

/// Keeps the cards it is shown, and declines.
struct Keep(Mutex<Vec<ApprovalRequest>>);
impl Approver for Keep {
    fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        self.0.lock().unwrap().push(r.clone());
        Box::pin(async { Decision::Declined })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_components_own_card_is_escaped_like_a_commands() {
    let ws = util::workspace();
    let keep = Arc::new(Keep(Mutex::default()));
    let role = "[roles.t]\ntools = [\"evil__probe\", \"workspace_shell\"]\n";
    let h = host(role, keep.clone(), vec![util::plugin("evil", "hostile", Grant::none())]).await;
    let cx = Context::new(ws.path()).role("t");
    // A component's card: an OSC title change, a screen clear, a forged line, U+061C,
    // zero-width characters and a byte-order mark.
    let nasty = "ls\u{1b}]0;owned\u{7}\u{1b}[2J\n  summary: rm -rf ~\u{061c}\u{200b}\u{200d}\u{feff}";
    let r = h.call(&cx, "evil__probe", json!({"action": "approval", "target": nasty})).await;
    assert_eq!(r.output["detail"], "Declined", "{}", r.output);
    // The same text in a command's card.
    let _ = h.call(&cx, "workspace_shell", json!({"command": "echo", "args": [nasty], "purpose": nasty})).await;
    let cards = keep.0.lock().unwrap().clone();
    assert_eq!(cards.len(), 2);
    for card in &cards {
        for field in [&card.summary, &card.detail, &card.purpose] {
            // One line each, nothing a terminal or a page would interpret or hide.
            assert!(!field.chars().any(cheng_contract::text::is_hidden_char), "{field:?}");
            assert!(!field.contains('\n'), "{field:?}");
        }
        // The same escapes from both sources.
        assert!(card.detail.contains("\\u{1b}]0;owned") && card.detail.contains("\\u{61c}\\u{200b}\\u{200d}\\u{feff}"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_host_issues_denials_and_every_one_is_recorded() {
    let ws = util::workspace();
    std::fs::create_dir_all(ws.path().join(".git")).unwrap();
    let role = "[roles.t]\ntools = [\"evil__probe\", \"evilw__probe\"]\n";
    let docs_only =
        Grant { fs: FsGrant::Scoped { read: vec!["docs".into()], write: vec!["out".into()] }, ..Grant::none() };
    let plugins = vec![util::plugin("evil", "hostile", Grant::none()), util::plugin("evilw", "hostile", docs_only)];
    let h = host(role, Arc::new(ApproveAll), plugins).await;
    let cx = Context::new(ws.path()).role("t");
    // A component claiming a denial on its own is reporting an error.
    for kind in ["not-granted", "approval-denied", "command-not-allowed"] {
        let (r, rec) = h.call_recorded(&cx, "evil__probe", json!({"action": "claim", "target": kind})).await;
        assert_eq!(r.status, Status::Error, "{kind}");
        assert!(rec.denials.is_empty());
    }
    // The host's own refusals inside a call are denials, each in the record with what
    // was refused and why.
    for (tool, input, right) in [
        ("evilw__probe", json!({"action": "host_read", "target": "inside.txt"}), "fs-read"),
        ("evilw__probe", json!({"action": "host_write", "target": "docs/x.txt"}), "fs-write"),
        ("evilw__probe", json!({"action": "host_write", "target": "out/.git/x"}), "protected"),
        ("evil__probe", json!({"action": "spawn"}), "spawn"),
    ] {
        let (r, rec) = h.call_recorded(&cx, tool, input.clone()).await;
        assert_eq!(r.status, Status::Denied, "{input}: {}", r.output);
        let d = serde_json::to_value(&rec.denials).unwrap();
        assert_eq!(d[0]["right"], right, "{input}: {d}");
        assert!(d[0]["message"].as_str().unwrap().len() > 10);
    }
    // The control: what the grant covers is no denial.
    let (r, rec) = h.call_recorded(&cx, "evilw__probe", json!({"action": "host_read", "target": "docs/a.md"})).await;
    assert_eq!((r.status, rec.denials.len()), (Status::Ok, 0), "{}", r.output);
    // The denials reach the audit log too.
    let log = h.audit_log().unwrap().read(&cheng_host::records::Filter::default()).unwrap();
    assert!(log.iter().any(|r| r.denials.iter().any(|d| d.target == "out/.git/x")));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tools_memory_limit_above_the_default_is_honoured_and_named_when_hit() {
    let ws = util::workspace();
    // The pool is sized from every effective limit, [tools.X] included.
    let cfg = "[limits]\nmemory_mb = 64\n[roles.t]\ntools = [\"big__probe\", \"small__probe\"]\n[tools.big__probe]\nmemory_mb = 320\n";
    let plugins = vec![util::plugin("big", "hostile", Grant::none()), util::plugin("small", "hostile", Grant::none())];
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(cfg, "test.toml").unwrap()).state_dir(util::shared_state());
    for p in plugins {
        b.plugin(p);
    }
    let h = b.build().await.unwrap();
    let cx = Context::new(ws.path()).role("t");
    // 288 MiB fits the tool's own limit of 320, above the pool's default 256.
    let r = h.call(&cx, "big__probe", json!({"action": "memory", "n": 288})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["detail"], "held 288 MiB");
    // Past it, the crash says what was hit.
    let r = h.call(&cx, "big__probe", json!({"action": "memory"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Crashed));
    assert!(r.output["error"].as_str().unwrap().contains("memory limit of 320 MiB"), "{}", r.output);
    // The control: the other tool keeps [limits]' 64 MiB.
    let r = h.call(&cx, "small__probe", json!({"action": "memory", "n": 100})).await;
    assert!(r.output["error"].as_str().unwrap().contains("memory limit of 64 MiB"), "{}", r.output);
}

/// A small tmpfs mounted for one test, filled to the last byte when asked; unmounted on drop.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount(kib: u64) -> Option<SmallFs> {
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        util::require("mounting a tmpfs (root, or CAP_SYS_ADMIN)", ok).then_some(SmallFs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn fill(&self) {
        let mut f = std::fs::File::create(self.path().join("filler")).unwrap();
        let block = vec![0u8; 4096];
        while std::io::Write::write_all(&mut f, &block).is_ok() {}
        let _ = std::io::Write::write_all(&mut f, b"x");
    }

    fn empty(&self) {
        let _ = std::fs::remove_file(self.path().join("filler"));
    }

    fn remount(&self, ro: bool) {
        let opt = if ro { "remount,ro" } else { "remount,rw" };
        // Nothing of ours may hold a file open for writing on it meanwhile.
        assert!(std::process::Command::new("mount").args(["-o", opt]).arg(self.path()).status().unwrap().success());
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(self.dir.path()).status();
    }
}

async fn logged_host(log: &Path, on_failure: &str) -> Host {
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(&format!("[records]\non_failure = \"{on_failure}\"\n"), "test.toml").unwrap());
    b.state_dir(util::shared_state()).audit_log(log);
    b.build().await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_disk_stops_calls_instead_of_losing_their_records() {
    let Some(fs) = SmallFs::mount(256) else { return };
    let ws = util::workspace();
    let log = fs.path().join("audit.jsonl");
    let h = logged_host(&log, "refuse").await;
    let cx = Context::new(ws.path());
    // Content larger than a page, so that a record never fits in what is left of one.
    let write = |name: &str| json!({"path": name, "content": "x".repeat(20_000)});
    // The control: with room, a call runs and is recorded.
    assert_eq!(h.call(&cx, "write_file", write("one.txt")).await.status, Status::Ok);
    // The disk fills: the call that cannot be recorded fails before it runs, saying why.
    fs.fill();
    let r = h.call(&cx, "write_file", write("two.txt")).await;
    assert_eq!((r.status, r.error_kind), (Status::Error, Some(ErrorKind::Io)), "{}", r.output);
    assert!(r.output["error"].as_str().unwrap().contains("audit log is unavailable"), "{}", r.output);
    assert!(!ws.path().join("two.txt").exists(), "the tool ran although its call could not be recorded");
    // From then on nothing runs until the log can be written again.
    let r = h.call(&cx, "write_file", write("three.txt")).await;
    assert!(r.output["error"].as_str().unwrap().contains("audit log is unavailable"));
    assert!(!ws.path().join("three.txt").exists(), "a call ran unrecorded");
    // Room again: calls run, and every record written is whole.
    fs.empty();
    assert_eq!(h.call(&cx, "write_file", write("four.txt")).await.status, Status::Ok);
    let recs = cheng_host::records::read_log(&log, &Default::default()).unwrap();
    let paths: Vec<&str> = recs.iter().filter_map(|r| r.arguments["path"].as_str()).collect();
    assert!(paths.contains(&"one.txt") && paths.contains(&"four.txt"), "{paths:?}");
    // With `continue`, the operator lets results through and the loss is logged.
    fs.fill();
    let lenient = logged_host(&fs.path().join("audit2.jsonl"), "continue").await;
    assert_eq!(lenient.call(&cx, "write_file", write("five.txt")).await.status, Status::Ok);
    assert!(ws.path().join("five.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_state_dir_stops_the_host_at_start() {
    let Some(fs) = SmallFs::mount(1024) else { return };
    fs.remount(true);
    // A log that cannot be opened for appending refuses the host, naming the file.
    let mut b = HostBuilder::new();
    b.state_dir(util::shared_state()).audit_log(fs.path().join("audit.jsonl"));
    let err = b.build().await.err().expect("the host refused to start");
    assert!(err.to_string().contains("audit.jsonl"), "{err}");
    // The CLI says so and stops; nothing is called.
    let ws = util::workspace();
    let out = util::cheng_in(ws.path(), fs.path())
        .args(["call", "write_file", r#"{"path":"ro.txt","content":"x"}"#])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(!ws.path().join("ro.txt").exists());
    // The control: writable again, the same host starts.
    fs.remount(false);
    assert!(b.build().await.is_ok());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_full_cache_disk_leaves_no_temporary_files() {
    let Some(fs) = SmallFs::mount(512) else { return };
    fs.fill();
    // Every component compiles (the cache cannot take them) and the host works.
    let mut b = HostBuilder::new();
    b.cache_dir(fs.path().join("cache")).without_audit_log();
    b.engine_options(cheng_host::runtime::engine::EngineOptions { pooling: false, ..Default::default() });
    let h = b.build().await.unwrap();
    h.warm_up().await;
    let ws = util::workspace();
    assert_eq!(h.call(&Context::new(ws.path()), "read_file", json!({"path": "inside.txt"})).await.status, Status::Ok);
    // No half-written cache file is left behind.
    let left: Vec<String> = std::fs::read_dir(fs.path().join("cache"))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert!(left.iter().all(|n| !n.ends_with(".tmp")), "{left:?}");
    // The control: with room (a compiled component is larger than this small disk
    // holds), the same host writes its cache.
    let room = tempfile::tempdir().unwrap();
    let mut b = HostBuilder::new();
    b.cache_dir(room.path()).without_audit_log();
    b.engine_options(cheng_host::runtime::engine::EngineOptions { pooling: false, ..Default::default() });
    b.build().await.unwrap().warm_up().await;
    let written = std::fs::read_dir(room.path()).unwrap().flatten();
    assert!(written.filter(|e| e.path().extension().is_some_and(|x| x == "cwasm")).count() > 0);
}
