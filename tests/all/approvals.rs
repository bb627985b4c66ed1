//! Approvals end to end, before any tool that needs them exists: a test component asks,
//! and every answer path is exercised — approved, declined, timed out, answered from
//! outside, answered late, nobody to ask, auto-approved.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cheng_host::approvals::{ApprovalEvent, ApprovalRequest, ApproveAll, Approver, Decision, RefuseAll};
use cheng_host::grant::Grant;
use cheng_host::policy::Config;
use cheng_host::{CallRecord, Context, Host, HostBuilder, Status, ToolResult};
use serde_json::json;

use crate::util;

struct Fixed(Decision);
impl Approver for Fixed {
    fn decide<'a>(&'a self, _r: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        let d = self.0;
        Box::pin(async move { d })
    }
}

/// A person who never answers.
struct Silent;
impl Approver for Silent {
    fn decide<'a>(&'a self, _r: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(std::future::pending())
    }
}

async fn host(approver: Arc<dyn Approver>, external: bool) -> Host {
    let cfg = "[approvals]\ntimeout_ms = 1000\n[roles.t]\ntools = [\"ap__probe\"]\n";
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(cfg, "test.toml").unwrap());
    b.state_dir(util::shared_state());
    b.approver(approver);
    b.external_approval_answers(external);
    // A CPU budget shorter than the approval wait: waiting must not count against it.
    b.plugin(util::plugin("ap", "hostile", Grant { cpu_ms: Some(300), ..Grant::none() }));
    b.build().await.unwrap()
}

async fn ask(h: &Host, run: &str) -> (ToolResult, CallRecord) {
    let ws = util::workspace();
    let cx = Context::new(ws.path()).role("t").run(run);
    h.call_recorded(&cx, "ap__probe", json!({"action": "approval", "target": "ls -la"})).await
}

fn answer(r: &ToolResult) -> &str {
    r.output["detail"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn approved_and_declined() {
    let (r, rec) = ask(&host(Arc::new(Fixed(Decision::Approved)), false).await, "a1").await;
    assert_eq!(answer(&r), "Approved", "{}", r.output);
    assert_eq!(rec.approvals[0].decision, Decision::Approved);
    let (r, rec) = ask(&host(Arc::new(Fixed(Decision::Declined)), false).await, "a2").await;
    assert_eq!(answer(&r), "Declined");
    assert_eq!(rec.approvals[0].decision, Decision::Declined);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_is_a_refusal_and_costs_no_cpu_budget() {
    let h = host(Arc::new(Silent), false).await;
    let t = Instant::now();
    let (r, rec) = ask(&h, "a3").await;
    // Timed out after the one-second wait; the call itself succeeded although its CPU
    // budget (300 ms) is shorter than the wait.
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(answer(&r), "TimedOut");
    assert!(t.elapsed() >= Duration::from_millis(990));
    assert_eq!(rec.approvals[0].decision, Decision::TimedOut);
    assert!(rec.approvals[0].waited_ms >= 990);
}

#[tokio::test(flavor = "multi_thread")]
async fn answered_from_outside_and_late_answers_ignored() {
    let h = host(Arc::new(Silent), true).await;
    let mut events = h.approvals().subscribe();
    let h2 = h.clone();
    let call = tokio::spawn(async move { ask(&h2, "a4").await });
    // The request appears on the event stream and its run awaits approval.
    let id = match events.recv().await.unwrap() {
        ApprovalEvent::Requested { request, timeout_ms } => {
            assert_eq!(request.summary, "ls -la");
            assert_eq!(request.tool, "ap__probe");
            assert_eq!(timeout_ms, 1000);
            request.id
        }
        other => panic!("{other:?}"),
    };
    assert!(h.approvals().awaiting("a4"));
    assert!(h.answer_approval(&id, true));
    let (r, _) = call.await.unwrap();
    assert_eq!(answer(&r), "Approved");
    assert!(!h.approvals().awaiting("a4"));
    // An answer after the request was settled is ignored.
    assert!(!h.answer_approval(&id, false));

    // Late: the request times out first; the answer that follows changes nothing.
    let h3 = h.clone();
    let call = tokio::spawn(async move { ask(&h3, "a5").await });
    let id = loop {
        if let ApprovalEvent::Requested { request, .. } = events.recv().await.unwrap() {
            break request.id;
        }
    };
    let (r, _) = call.await.unwrap();
    assert_eq!(answer(&r), "TimedOut");
    assert!(!h.answer_approval(&id, true));
}

#[tokio::test(flavor = "multi_thread")]
async fn nobody_to_ask_refuses_at_once_and_auto_approve_approves() {
    let h = host(Arc::new(RefuseAll), false).await;
    // The clock starts once the host is built: only the call is timed.
    let t = Instant::now();
    let (r, rec) = ask(&h, "a6").await;
    // The tool sees a refusal (the same answer as a decline), at once — well before the
    // one-second wait a person gets; the record says why.
    assert_eq!(answer(&r), "Declined");
    assert!(t.elapsed() < Duration::from_millis(900), "{:?}", t.elapsed());
    assert_eq!(rec.approvals[0].decision, Decision::NoApprover);
    let (r, rec) = ask(&host(Arc::new(ApproveAll), false).await, "a7").await;
    assert_eq!(answer(&r), "Approved");
    assert_eq!(rec.approvals[0].decision, Decision::AutoApproved);
}
