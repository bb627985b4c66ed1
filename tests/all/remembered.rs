//! Answers that remember, and an approval that lifts only what it names: a yes "for
//! this run" or "always" lets the same command prefix run again without a card — in
//! the run, or in the workspace until revoked — always confined (no reads outside the
//! workspace and toolchains, no network but the hosts named); what a remembered answer
//! could not describe (an interpreter given code, a launcher chain, another executable
//! of the same name) is offered once only; a plain yes is confined, full access is an
//! explicit choice; a decline's message reaches the model. Real programs throughout
//! (`cat`, `cp`, `env`, `python3`, `cargo`), each with its control.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use cheng_host::approvals::{Answer, ApprovalRequest, Approver, Decision, Scope, Tier};
use cheng_host::policy::Config;
use cheng_host::records::CallRecord;
use cheng_host::{Context, Host, HostBuilder, Status, ToolResult};
use serde_json::{Value, json};

use crate::util;

/// Answers each card with the next scripted answer (the last one repeats), keeping the
/// cards.
pub(crate) struct Script {
    cards: Mutex<Vec<ApprovalRequest>>,
    answers: Mutex<Vec<Answer>>,
}

impl Approver for Script {
    fn answer<'a>(&'a self, r: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
        self.cards.lock().unwrap().push(r.clone());
        let mut answers = self.answers.lock().unwrap();
        let a = if answers.len() > 1 { answers.remove(0) } else { answers[0].clone() };
        Box::pin(async move { a })
    }
}

impl Script {
    pub(crate) fn new(answers: Vec<Answer>) -> Arc<Script> {
        Arc::new(Script { cards: Mutex::default(), answers: Mutex::new(answers) })
    }
    pub(crate) fn count(&self) -> usize {
        self.cards.lock().unwrap().len()
    }
    pub(crate) fn last(&self) -> ApprovalRequest {
        self.cards.lock().unwrap().last().cloned().unwrap()
    }
}

fn landlock() -> bool {
    util::require("Landlock", cheng_host::confinement().landlock_abi.is_some_and(|v| v >= 4))
}

/// A host with its own state directory (learned rules start empty), answering with
/// `approver`.
async fn host(config: &str, state: &Path, approver: Arc<dyn Approver>) -> Host {
    let mut b = HostBuilder::new();
    // `cat` and `wc` are known-safe: the list is off here, so they ask.
    let text = format!("[process]\nkill_grace_ms = 300\nknown_safe = false\n{config}");
    b.config(Config::from_toml_str(&text, "test.toml").unwrap());
    b.state_dir(state);
    b.cache_dir(util::shared_state().join("cache"));
    b.approver(approver);
    b.build().await.unwrap()
}

async fn run(h: &Host, ws: &Path, input: Value) -> (ToolResult, CallRecord) {
    h.call_recorded(&Context::new(ws), "workspace_shell", input).await
}

async fn run_in(h: &Host, ws: &Path, run: &str, input: Value) -> (ToolResult, CallRecord) {
    let mut cx = Context::new(ws);
    cx.run = run.into();
    h.call_recorded(&cx, "workspace_shell", input).await
}

fn always(prefix: usize) -> Answer {
    Answer { scope: Scope::Always, prefix: Some(prefix), ..Answer::yes() }
}

/// A secret in a directory of the home directory, which a confined command cannot read.
fn home_secret() -> (tempfile::TempDir, PathBuf) {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap();
    let dir = tempfile::Builder::new().prefix(".cheng-remembered-").tempdir_in(&home).unwrap();
    let secret = dir.path().join("id_test");
    std::fs::write(&secret, "TOPSECRET").unwrap();
    (dir, secret)
}

#[tokio::test(flavor = "multi_thread")]
async fn always_saves_a_rule_that_admits_the_prefix_here_confined_and_asks_elsewhere_and_after_revoke() {
    if !landlock() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let (w1, w2) = (util::workspace(), util::workspace());
    let (_home, secret) = home_secret();
    let script = Script::new(vec![always(1), Answer::no()]);
    let h = host("", state.path(), script.clone()).await;
    let cat_secret = json!({"command": "cat", "args": ["inside.txt", secret]});

    // The card offers the three scopes and the rule "always" would save, in words.
    let (r, rec) = run(&h, w1.path(), json!({"command": "cat", "args": ["inside.txt"]})).await;
    assert_eq!(r.output["stdout"], "inside", "{}", r.output);
    let card = script.last();
    let offer = card.offer.clone().expect("a command's card carries an offer");
    assert_eq!(offer.scopes, vec![Scope::Once, Scope::Run, Scope::Always]);
    let shown = offer.prefixes.iter().find(|p| p.words == 1).expect("the program alone is offered");
    assert_eq!(shown.text, format!("`cat` with any arguments, in {}", w1.path().display()));
    assert_eq!(offer.tiers.first(), Some(&Tier::Confined));
    let rule = rec.approvals[0].granted.rule.clone().expect("the approval's record names the rule it saved");
    assert_eq!(rec.approvals[0].granted.scope, Some(Scope::Always));
    let listed = h.learned_rules().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].id.as_str(), listed[0].card.as_str()), (rule.as_str(), rec.approvals[0].id.as_str()));
    assert_eq!(listed[0].workspace.as_deref(), Some(w1.path().canonicalize().unwrap().as_path()));

    // The next `cat` here runs with no card, confined: the workspace file yes, the
    // secret in the home directory no.
    let (r, rec) = run(&h, w1.path(), cat_secret.clone()).await;
    assert_eq!(script.count(), 1, "a card was shown for a command the rule admits");
    assert_eq!((rec.unasked[0].by.as_str(), rec.unasked[0].entry.as_deref()), ("learned", Some(rule.as_str())));
    assert_eq!(rec.unasked[0].tier, "confined");
    let out = r.output.to_string();
    assert!(out.contains("inside") && out.contains("Permission denied") && !out.contains("TOPSECRET"), "{out}");
    assert_eq!(h.learned_rules().unwrap()[0].matches, 1);

    // In another workspace it asks (and the person says no there).
    let (r, _) = run(&h, w2.path(), json!({"command": "cat", "args": ["inside.txt"]})).await;
    assert_eq!(script.count(), 2, "another workspace must ask");
    assert_eq!(r.status, Status::Denied, "{}", r.output);

    // Revoked: it asks again here, and the revoke is in the audit log.
    assert!(h.revoke_rule(&rule, "operator:test").unwrap().is_some());
    assert!(h.revoke_rule(&rule, "operator:test").unwrap().is_none());
    let (_, rec) = run(&h, w1.path(), json!({"command": "cat", "args": ["inside.txt"]})).await;
    assert_eq!(script.count(), 3, "a revoked rule must not admit anything");
    assert!(rec.unasked.is_empty());
    let log = cheng_host::records::read_log(&state.path().join("audit.jsonl"), &Default::default()).unwrap();
    let revoke = log.iter().find(|r| r.tool == "cheng.rules.revoke").expect("the revoke is recorded");
    assert_eq!(revoke.arguments["rule"], rule.as_str());
    assert_eq!(revoke.arguments["by"], "operator:test");
    assert!(cheng_host::records::verify(&state.path().join("audit.jsonl")).unwrap().ok);
}

#[tokio::test(flavor = "multi_thread")]
async fn this_run_admits_the_prefix_in_the_run_only() {
    if !landlock() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let script = Script::new(vec![Answer { scope: Scope::Run, ..Answer::yes() }, Answer::no()]);
    let h = host("", state.path(), script.clone()).await;
    let wc = |f: &str| json!({"command": "wc", "args": ["-c", f]});
    let (r, rec) = run_in(&h, ws.path(), "run-a", wc("inside.txt")).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(rec.approvals[0].granted.scope, Some(Scope::Run));
    // The same program and prefix in the same run: no card. `wc -c` is the default
    // prefix (two words, the second an option: the whole command is kept).
    let (r, rec) = run_in(&h, ws.path(), "run-a", wc("inside.txt")).await;
    assert_eq!((script.count(), r.status), (1, Status::Ok), "{}", r.output);
    assert_eq!(rec.unasked[0].by, "run");
    // Another run asks; nothing was saved for later.
    let (r, _) = run_in(&h, ws.path(), "run-b", wc("inside.txt")).await;
    assert_eq!((script.count(), r.status), (2, Status::Denied));
    assert!(h.learned_rules().unwrap().is_empty());
    // The run ended: asked again.
    h.end_run("run-a");
    let _ = run_in(&h, ws.path(), "run-a", wc("inside.txt")).await;
    assert_eq!(script.count(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_rule_could_not_describe_is_offered_once_only_and_never_admitted() {
    if !landlock() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let script = Script::new(vec![always(1)]);
    let h = host("", state.path(), script.clone()).await;
    // Save "always" for `cat` here.
    let (_, rec) = run(&h, ws.path(), json!({"command": "cat", "args": ["inside.txt"]})).await;
    assert!(rec.approvals[0].granted.rule.is_some());
    // Positive control: `cat` again runs unasked.
    let (_, rec) = run(&h, ws.path(), json!({"command": "cat", "args": ["docs/a.md"]})).await;
    assert_eq!((script.count(), rec.unasked.len()), (1, 1));

    // Through a launcher: asked, and once only.
    let (_, rec) = run(&h, ws.path(), json!({"command": "env", "args": ["cat", "inside.txt"]})).await;
    assert_eq!(script.count(), 2, "a launcher chain was admitted");
    assert!(rec.unasked.is_empty());
    let offer = script.last().offer.unwrap();
    assert_eq!(offer.scopes, vec![Scope::Once]);
    assert!(offer.once_only.unwrap().contains("env"), "the card says why");
    // The scripted "always" for a once-only card is refused: no rule saved, the command refused.
    assert_eq!(h.learned_rules().unwrap().len(), 1);

    // Another executable named `cat` (a copy outside the workspace): asked.
    let elsewhere = tempfile::tempdir().unwrap();
    let copy = elsewhere.path().join("cat");
    std::fs::copy("/bin/cat", &copy).unwrap();
    let _ = run(&h, ws.path(), json!({"command": copy, "args": ["inside.txt"]})).await;
    assert_eq!(script.count(), 3, "another executable of the same name was admitted");

    // An interpreter given code is offered once only; given a script, "always".
    let _ = run(&h, ws.path(), json!({"command": "python3", "args": ["-c", "print(1)"]})).await;
    let offer = script.last().offer.unwrap();
    assert_eq!(offer.scopes, vec![Scope::Once]);
    assert!(offer.once_only.unwrap().contains("-c"));
    std::fs::write(ws.path().join("hello.py"), "print('hello')\n").unwrap();
    let _ = run(&h, ws.path(), json!({"command": "python3", "args": ["hello.py"]})).await;
    let offer = script.last().offer.unwrap();
    assert_eq!(offer.scopes, vec![Scope::Once, Scope::Run, Scope::Always]);
    assert_eq!(offer.prefixes[0].words, 2, "the script is part of the shortest rule");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_cannot_write_the_rules_file_and_a_plain_yes_is_confined() {
    if !landlock() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let (_home, secret) = home_secret();
    std::fs::write(ws.path().join("evil.json"), r#"{"version":1,"rules":[]}"#).unwrap();
    let script = Script::new(vec![Answer::yes()]);
    let h = host("", state.path(), script.clone()).await;
    let rules_file = state.path().join("learned-rules.json");
    // Approved with a plain yes: confined, so the state directory is out of reach.
    let (r, rec) = run(&h, ws.path(), json!({"command": "cp", "args": ["evil.json", rules_file]})).await;
    assert_ne!(r.output["exit_code"], 0, "{}", r.output);
    assert!(!rules_file.exists());
    assert_eq!(rec.approvals[0].granted.tier, Some(Tier::Confined));
    assert!(r.output["stderr"].as_str().unwrap().contains("ran confined"), "{}", r.output);
    // Control: the same copy inside the workspace works.
    let (r, _) = run(&h, ws.path(), json!({"command": "cp", "args": ["evil.json", "copy.json"]})).await;
    assert_eq!(r.output["exit_code"], 0, "{}", r.output);
    // A plain yes does not read the home directory's secret; full access, chosen, does.
    let (r, _) = run(&h, ws.path(), json!({"command": "cat", "args": [secret.clone()]})).await;
    assert!(!r.output.to_string().contains("TOPSECRET"), "{}", r.output);
    let full = Script::new(vec![Answer { tier: Some(Tier::Full), ..Answer::yes() }]);
    let h = host("", state.path(), full.clone()).await;
    let (r, rec) = run(&h, ws.path(), json!({"command": "cat", "args": [secret]})).await;
    assert_eq!(r.output["stdout"], "TOPSECRET", "{}", r.output);
    assert_eq!(rec.approvals[0].granted.tier, Some(Tier::Full));
    // "always" with full access is refused: the answer counts as a no.
    let both = Script::new(vec![Answer { scope: Scope::Always, tier: Some(Tier::Full), ..Answer::yes() }]);
    let h = host("", state.path(), both).await;
    let (r, _) = run(&h, ws.path(), json!({"command": "cat", "args": ["inside.txt"]})).await;
    assert_eq!(r.status, Status::Denied, "{}", r.output);
    assert!(h.learned_rules().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_decline_with_a_message_reaches_the_model_and_the_record() {
    let state = tempfile::tempdir().unwrap();
    let ws = util::workspace();
    let script = Script::new(vec![Answer::decline_with("use `cargo check` instead")]);
    let h = host("", state.path(), script).await;
    let (r, rec) = run(&h, ws.path(), json!({"command": "cargo", "args": ["build"]})).await;
    assert_eq!(r.status, Status::Denied);
    let text = r.output.to_string();
    assert!(text.contains("declined") && text.contains("use `cargo check` instead"), "{text}");
    assert_eq!(rec.approvals[0].decision, Decision::Declined);
    assert_eq!(rec.approvals[0].granted.message.as_deref(), Some("use `cargo check` instead"));
}
