//! Approvals: a broker that any host import can ask for a person's consent.
//!
//! A request carries an id, the run, role and tool, a one-line summary, the exact detail
//! and a purpose. The broker hands it to the embedder's [`Approver`] (a terminal prompt,
//! a console…) and also accepts an answer from outside through [`Broker::answer`] (an
//! HTTP API, a web console); the first answer wins and is applied exactly once, a late
//! one is ignored. A request nobody answers within the timeout (default 10 minutes,
//! floor 1 second) is refused and logged at the `approvals` target with the wait it
//! used. While a run has a request pending its status is `awaiting-approval`, and every
//! request and answer is published on an event stream ([`Broker::subscribe`]).
//!
//! Declined, timed out and "nobody to ask" give the tool the same answer; the log, the
//! events and the call record tell them apart.
//!
//! Every card is escaped by the broker itself, whatever sent it (a command's card, a
//! component's own request): each field is one line, with control characters (ANSI
//! escape sequences among them), newlines, bidirectional overrides and invisible
//! characters shown as escapes ([`cheng_contract::text::escape_line`]), and cut to a
//! bounded length. An approver, a console or an API only ever sees the escaped card.
//!
//! # Example
//!
//! ```
//! use cheng_core::approvals::{Approver, ApprovalRequest, Decision};
//!
//! struct YesToLs;
//! impl Approver for YesToLs {
//!     fn decide<'a>(&'a self, req: &'a ApprovalRequest)
//!         -> std::pin::Pin<Box<dyn std::future::Future<Output = Decision> + Send + 'a>> {
//!         Box::pin(async move {
//!             if req.summary.starts_with("ls") { Decision::Approved } else { Decision::Declined }
//!         })
//!     }
//! }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, oneshot};

mod answer;

pub use answer::{Answer, MAX_EXPIRY_MS, MESSAGE_CHARS, Offer, Route, RulePreview, Scope, Tier};

/// The shortest wait a request may be given.
pub const MIN_TIMEOUT: Duration = Duration::from_secs(1);
/// The default wait.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest summary shown on a card; longer ones are cut with `…`.
pub const SUMMARY_CHARS: usize = 120;
/// Longest detail kept on a card (characters, before escaping).
pub const DETAIL_CHARS: usize = 8192;
/// Longest purpose kept on a card (characters, before escaping).
pub const PURPOSE_CHARS: usize = 1024;

/// A request for approval, as shown to the person answering it.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalRequest {
    /// Unique id.
    pub id: String,
    /// The run the call belongs to.
    pub run: String,
    /// The caller's role.
    pub role: String,
    /// The tool asking.
    pub tool: String,
    /// One line (e.g. a command's first line, truncated).
    pub summary: String,
    /// The exact action (e.g. the full command and its working directory).
    pub detail: String,
    /// Why it is needed.
    pub purpose: String,
    /// The workspace of the call that asks (absolute; empty when not known).
    pub workspace: String,
    /// When it was asked, in milliseconds since the Unix epoch.
    pub requested_at_ms: u64,
    /// Who asks: the caller as the host knows it (a token's name, the MCP client's name
    /// and version); empty when not known.
    pub asked_by: String,
    /// What it may be answered with (scopes, the rule "always" would save, tiers,
    /// proposed hosts); none for a card answered once with a plain yes or no.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer: Option<Offer>,
}

impl ApprovalRequest {
    /// A request with a fresh id. Its text is escaped when the broker takes it.
    pub fn new(
        run: &str,
        role: &str,
        tool: &str,
        summary: impl Into<String>,
        detail: impl Into<String>,
        purpose: impl Into<String>,
    ) -> Self {
        ApprovalRequest {
            id: crate::new_id(),
            run: run.to_string(),
            role: role.to_string(),
            tool: tool.to_string(),
            summary: summary.into(),
            detail: detail.into(),
            purpose: purpose.into(),
            workspace: String::new(),
            requested_at_ms: crate::unix_ms(),
            asked_by: String::new(),
            offer: None,
        }
    }

    /// With `offer`: what the card may be answered with.
    pub fn with_offer(mut self, offer: Offer) -> Self {
        self.offer = Some(offer);
        self
    }

    /// The asking call's workspace and caller, shown on the card.
    pub fn of_call(mut self, cx: &crate::Context) -> Self {
        self.workspace = cx.workspace.display().to_string();
        self.asked_by = cx.caller.clone();
        self
    }

    /// The card as people see it: every field one escaped line, of bounded length.
    fn escaped(mut self) -> Self {
        use cheng_contract::text::{cut_chars, escape_line};
        let more_lines = self.summary.lines().nth(1).is_some();
        let first = self.summary.lines().next().unwrap_or("");
        let mut summary = escape_line(&cut_chars(first, SUMMARY_CHARS));
        if more_lines && !summary.ends_with('…') {
            summary.push('…');
        }
        self.summary = summary;
        self.detail = escape_line(&cut_chars(&self.detail, DETAIL_CHARS));
        self.purpose = escape_line(&cut_chars(&self.purpose, PURPOSE_CHARS));
        for f in [&mut self.run, &mut self.role, &mut self.tool, &mut self.workspace, &mut self.asked_by] {
            *f = escape_line(f);
        }
        if let Some(offer) = &mut self.offer {
            for p in &mut offer.prefixes {
                p.rule = escape_line(&cut_chars(&p.rule, DETAIL_CHARS));
                p.text = escape_line(&cut_chars(&p.text, DETAIL_CHARS));
            }
            for h in &mut offer.hosts {
                *h = escape_line(h);
            }
            if let Some(why) = &mut offer.once_only {
                *why = escape_line(why);
            }
            offer.full = escape_line(&offer.full);
        }
        self
    }
}

/// The answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Go ahead.
    Approved,
    /// Refused by a person.
    #[default]
    Declined,
    /// Nobody answered within the wait.
    TimedOut,
    /// Nobody could be asked (no terminal, no approver).
    NoApprover,
    /// Approved without asking, because auto-approve is on.
    AutoApproved,
    /// Withdrawn before anyone answered: the call that asked was cancelled or its
    /// client went away. Nothing runs.
    Withdrawn,
}

impl Decision {
    /// Whether the action may go ahead.
    pub fn approved(self) -> bool {
        matches!(self, Decision::Approved | Decision::AutoApproved)
    }

    /// The decision's name, as it is serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approved => "approved",
            Decision::Declined => "declined",
            Decision::TimedOut => "timed_out",
            Decision::NoApprover => "no_approver",
            Decision::AutoApproved => "auto_approved",
            Decision::Withdrawn => "withdrawn",
        }
    }
}

/// Something that answers approval requests. The default refuses at once, reporting
/// that nobody could be asked.
pub trait Approver: Send + Sync {
    /// Decide on a request. The broker applies its timeout around this.
    fn decide<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        let _ = req;
        Box::pin(async { Decision::NoApprover })
    }

    /// Answer a request with a scope, a tier or a message. The default is
    /// [`Approver::decide`]'s decision as a plain answer: a yes once, at the card's
    /// default tier (confined, with the hosts it proposes).
    fn answer<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
        Box::pin(async move { self.decide(req).await.into() })
    }

    /// Who answers through it, which bounds what an answer may choose: the operator
    /// (the default: an embedder's approver, the terminal) or an MCP client's person.
    fn route(&self) -> Route {
        Route::Operator
    }

    /// Whether this approver can reach a person at all. When false and no other answer
    /// path exists, requests are refused at once instead of waiting out the timeout.
    fn can_ask(&self) -> bool {
        true
    }

    /// Who answers through it, for the record (`terminal`, `mcp-client`, …).
    fn name(&self) -> &str {
        "approver"
    }
}

/// The approver used when none is configured: refuses at once.
#[derive(Debug, Default, Clone, Copy)]
pub struct RefuseAll;

impl Approver for RefuseAll {
    fn can_ask(&self) -> bool {
        false
    }
}

/// Approves everything without asking (auto-approve). Only for unattended runs the
/// operator chose; every approval it gives is reported.
#[derive(Debug, Default, Clone, Copy)]
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn name(&self) -> &str {
        "auto-approve"
    }

    fn decide<'a>(&'a self, _req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(async { Decision::AutoApproved })
    }
}

/// Several approvers asked at once; the first real answer wins. An approver that
/// cannot reach anyone ([`Decision::NoApprover`]) drops out; when all do, nobody could
/// be asked. For example the MCP client and the terminal of `cheng serve`.
pub struct FirstAnswer(pub Vec<Arc<dyn Approver>>);

impl Approver for FirstAnswer {
    fn decide<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(async move { self.answer(req).await.decision })
    }

    /// The first real answer, checked against the route of the approver that gave it
    /// (an MCP client's answer cannot pick "always"): one it may not give is a no.
    fn answer<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
        Box::pin(async move {
            let mut asks: Vec<_> = self
                .0
                .iter()
                .filter(|a| a.can_ask())
                .map(|a| {
                    let route = a.route();
                    Box::pin(async move { (a.answer(req).await, route) })
                })
                .collect();
            while !asks.is_empty() {
                let ((a, route), _, rest) = futures::future::select_all(asks).await;
                if a.decision != Decision::NoApprover {
                    return a.checked(req.offer.as_ref(), route).unwrap_or_else(|why| {
                        tracing::info!(target: "approvals", id = %req.id, "an answer was refused: {why}; treated as no");
                        Answer::no()
                    });
                }
                asks = rest;
            }
            Decision::NoApprover.into()
        })
    }

    fn can_ask(&self) -> bool {
        self.0.iter().any(|a| a.can_ask())
    }

    fn name(&self) -> &str {
        match self.0.as_slice() {
            [one] => one.name(),
            _ => "approver",
        }
    }
}

/// What the event stream reports.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ApprovalEvent {
    /// A request is waiting.
    Requested {
        /// The card.
        request: Box<ApprovalRequest>,
        /// How long it will wait, in milliseconds.
        timeout_ms: u64,
    },
    /// A request was answered (or timed out).
    Resolved {
        /// Its id.
        id: String,
        /// Its run.
        run: String,
        /// The answer.
        decision: Decision,
        /// How long it waited, in milliseconds.
        waited_ms: u64,
        /// Who answered (see [`ApprovalOutcome::answered_by`]).
        #[serde(skip_serializing_if = "Option::is_none")]
        answered_by: Option<String>,
        /// For a yes: how long it holds.
        #[serde(skip_serializing_if = "Option::is_none")]
        scope: Option<Scope>,
        /// For a yes to a command: the tier it runs at.
        #[serde(skip_serializing_if = "Option::is_none")]
        tier: Option<Tier>,
    },
}

/// A request that is no longer waiting, as the approvals history lists it.
#[derive(Debug, Clone, Serialize)]
pub struct AnsweredApproval {
    /// The card as it was shown.
    pub request: ApprovalRequest,
    /// The outcome.
    pub decision: Decision,
    /// Who answered; none when nobody did (a timeout, a withdrawal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// How long it waited, in milliseconds.
    pub waited_ms: u64,
    /// Unix time (ms) of the outcome.
    pub answered_at_ms: u64,
    /// The answer's scope, tier, hosts, prefix and message.
    #[serde(flatten)]
    pub granted: Granted,
}

/// The outcome of one request, for the call record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApprovalOutcome {
    /// The request's id.
    pub id: String,
    /// The answer.
    pub decision: Decision,
    /// How long it waited, in milliseconds.
    pub waited_ms: u64,
    /// Who answered: `operator:<token name>`, `socket:uid <n>`, the approver's name
    /// (`terminal`, `mcp-client`, `auto-approve`); none when nobody did (a timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// What the answer chose beyond yes or no.
    #[serde(flatten)]
    pub granted: Granted,
}

/// What an answer chose beyond yes or no, as records and the history keep it (each
/// field absent when it does not apply).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Granted {
    /// For a yes to a card with an offer: how long it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// For a yes to a command: the tier it runs at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// The hosts of [`Tier::Hosts`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<String>>,
    /// For "this run" and "always": the words of the command kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<usize>,
    /// For "always": in every workspace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub every_workspace: bool,
    /// For "always": the rule's lifetime, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in_ms: Option<u64>,
    /// For a no: what the person asked the agent to do instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The learned rule "always" saved, once saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

impl Granted {
    fn of(a: &Answer, offered: bool) -> Granted {
        let yes = a.decision.approved();
        Granted {
            scope: (yes && offered).then_some(a.scope),
            tier: if yes { a.tier } else { None },
            hosts: if yes { a.hosts.clone() } else { None },
            prefix: if yes { a.prefix } else { None },
            every_workspace: yes && a.every_workspace,
            expires_in_ms: if yes { a.expires_in_ms } else { None },
            message: if yes { None } else { a.message.clone() },
            rule: None,
        }
    }
}

/// A request waiting for an answer, as the console and the API list it.
#[derive(Debug, Clone, Serialize)]
pub struct PendingApproval {
    /// The card.
    pub request: ApprovalRequest,
    /// The whole wait it was given, in milliseconds.
    pub timeout_ms: u64,
    /// How long it has waited so far, in milliseconds.
    pub waited_ms: u64,
}

/// Withdraws a waiting card whose wait was dropped.
struct Withdraw<'a> {
    broker: &'a Broker,
    req: &'a ApprovalRequest,
    started: Instant,
    armed: bool,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let inner = &self.broker.inner;
        let was_pending = {
            let mut pending = inner.pending.lock().unwrap_or_else(|p| p.into_inner());
            let removed = pending.remove(&self.req.id).is_some();
            if removed {
                self.broker.remember(&self.req.id);
            }
            removed
        };
        if was_pending {
            tracing::info!(target: "approvals", id = %self.req.id, tool = %self.req.tool, run = %self.req.run,
                "approval withdrawn: the call that asked ended before an answer");
            let _ = self.broker.resolved(self.req, Decision::Withdrawn, self.started, None);
        }
    }
}

/// What an answer from outside did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answered {
    /// The answer cannot be taken for this card from this route (a scope or tier not
    /// offered, "always" from an MCP client); the request still waits.
    Invalid(String),
    /// It was the first answer, and applies.
    Applied,
    /// The request was answered before (or timed out): this answer changed nothing.
    TooLate,
    /// No such request was ever made here.
    Unknown,
}

struct Pending {
    request: ApprovalRequest,
    started: Instant,
    tx: oneshot::Sender<(Answer, String)>,
}

/// How many answered requests are remembered, to tell a late answer from an unknown id.
const REMEMBERED: usize = 4096;

/// How many outcomes the history keeps (the audit log keeps every one with its call).
const HISTORY: usize = 1000;

/// The approvals broker. Cheap to clone; one per host.
#[derive(Clone)]
pub struct Broker {
    inner: Arc<BrokerInner>,
}

struct BrokerInner {
    approver: Arc<dyn Approver>,
    /// Whether answers may also come through [`Broker::answer`] (an API or console is
    /// attached), so that requests wait even when the approver cannot ask.
    external: bool,
    timeout: Duration,
    pending: Mutex<HashMap<String, Pending>>,
    resolved: Mutex<(std::collections::VecDeque<String>, std::collections::HashSet<String>)>,
    history: Mutex<std::collections::VecDeque<AnsweredApproval>>,
    events: broadcast::Sender<ApprovalEvent>,
}

impl Broker {
    /// A broker asking `approver`, waiting at most `timeout` (floored at one second).
    /// `external` says whether answers can also arrive through [`Broker::answer`].
    pub fn new(approver: Arc<dyn Approver>, timeout: Duration, external: bool) -> Self {
        let (events, _) = broadcast::channel(256);
        Broker {
            inner: Arc::new(BrokerInner {
                approver,
                external,
                timeout: timeout.max(MIN_TIMEOUT),
                pending: Mutex::new(HashMap::new()),
                resolved: Mutex::default(),
                history: Mutex::default(),
                events,
            }),
        }
    }

    /// The wait in force.
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// Follow requests and answers.
    pub fn subscribe(&self) -> broadcast::Receiver<ApprovalEvent> {
        self.inner.events.subscribe()
    }

    /// Requests waiting now.
    pub fn pending_count(&self) -> usize {
        self.inner.pending.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether `run` has a request waiting (its status is then `awaiting-approval`).
    pub fn awaiting(&self, run: &str) -> bool {
        self.inner.pending.lock().unwrap_or_else(|p| p.into_inner()).values().any(|p| p.request.run == run)
    }

    /// The summary of the request `run` waits on, if any (the run's activity).
    pub fn awaiting_summary(&self, run: &str) -> Option<String> {
        let pending = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.values().find(|p| p.request.run == run).map(|p| p.request.summary.clone())
    }

    /// Every request waiting now, oldest first.
    pub fn pending(&self) -> Vec<PendingApproval> {
        let pending = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner());
        let mut list: Vec<_> = pending
            .values()
            .map(|p| PendingApproval {
                request: p.request.clone(),
                timeout_ms: self.inner.timeout.as_millis() as u64,
                waited_ms: p.started.elapsed().as_millis() as u64,
            })
            .collect();
        list.sort_by_key(|a| std::cmp::Reverse(a.waited_ms));
        list
    }

    /// The requests answered, timed out or withdrawn since this host started (the last
    /// thousand), newest first.
    pub fn history(&self) -> Vec<AnsweredApproval> {
        self.inner.history.lock().unwrap_or_else(|p| p.into_inner()).iter().rev().cloned().collect()
    }

    /// Answer a pending request from outside (API, console). Returns false when no such
    /// request is waiting (unknown, already answered, or timed out): a late answer is
    /// ignored.
    pub fn answer(&self, id: &str, approved: bool) -> bool {
        self.answer_by(id, approved, "api") == Answered::Applied
    }

    /// Answer a pending request from outside on behalf of `by` with a plain yes or no
    /// (see [`Broker::answer_with`]).
    pub fn answer_by(&self, id: &str, approved: bool, by: &str) -> Answered {
        let answer = if approved { Answer::yes() } else { Answer::no() };
        self.answer_with(id, answer, by, Route::Operator)
    }

    /// Answer a pending request from outside on behalf of `by`, who came by `route`
    /// (recorded with the answer). The first answer wins; a later one, or one after the
    /// timeout, is [`Answered::TooLate`] and changes nothing. An answer the card does not
    /// offer, or `route` may not give, is [`Answered::Invalid`] and leaves it waiting.
    pub fn answer_with(&self, id: &str, answer: Answer, by: &str, route: Route) -> Answered {
        if !matches!(answer.decision, Decision::Approved | Decision::Declined) {
            return Answered::Invalid("an answer is a yes or a no".into());
        }
        // Taken and sent under the lock: the waiting request decides under the same lock
        // whether it was still pending, so exactly one answer is ever the one applied.
        let sent = {
            let mut pending = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(p) = pending.get(id)
                && let Err(why) = answer.clone().checked(p.request.offer.as_ref(), route)
            {
                return Answered::Invalid(why);
            }
            pending.remove(id).map(|p| {
                // Remembered as answered before the card leaves the pending table's lock:
                // a second answer racing this one finds it in one place or the other, and
                // is told "too late" (409), never "unknown" (404).
                self.remember(id);
                let checked = answer.checked(p.request.offer.as_ref(), route).unwrap_or_else(|_| Answer::no());
                p.tx.send((checked, by.to_string())).is_ok()
            })
        };
        match sent {
            Some(true) => Answered::Applied,
            Some(false) => Answered::TooLate,
            None if self.inner.resolved.lock().unwrap_or_else(|p| p.into_inner()).1.contains(id) => Answered::TooLate,
            None => Answered::Unknown,
        }
    }

    /// Answer every request `run` waits on with `answer` (each checked against its own
    /// card; one it cannot take is skipped). Returns the ids answered.
    pub fn answer_run(&self, run: &str, answer: &Answer, by: &str, route: Route) -> Vec<String> {
        let ids: Vec<String> = {
            let pending = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner());
            pending.values().filter(|p| p.request.run == run).map(|p| p.request.id.clone()).collect()
        };
        ids.into_iter().filter(|id| self.answer_with(id, answer.clone(), by, route) == Answered::Applied).collect()
    }

    /// Ask for approval and wait for the first answer, the timeout, or a refusal at once
    /// when nobody can be asked.
    pub async fn request(&self, req: ApprovalRequest) -> ApprovalOutcome {
        let req = req.escaped();
        let started = Instant::now();
        let inner = &self.inner;
        if !inner.approver.can_ask() && !inner.external {
            tracing::info!(target: "approvals", id = %req.id, tool = %req.tool, run = %req.run, "approval refused at once: nobody can be asked");
            return self.resolved(&req, Decision::NoApprover, started, None);
        }
        let (tx, mut rx) = oneshot::channel();
        inner
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(req.id.clone(), Pending { request: req.clone(), started, tx });
        let _ = inner.events.send(ApprovalEvent::Requested {
            request: Box::new(req.clone()),
            timeout_ms: inner.timeout.as_millis() as u64,
        });
        // If this wait is dropped (its call cancelled, its client gone), the card is
        // withdrawn at once: it leaves the table, and an answer to it gets "too late".
        let mut withdraw = Withdraw { broker: self, req: &req, started, armed: true };
        let timeout = tokio::time::sleep(inner.timeout);
        tokio::pin!(timeout);
        let name = inner.approver.name().to_string();
        let ask = inner.approver.answer(&req);
        tokio::pin!(ask);
        let mut asking = true;
        let (mut answer, mut by) = loop {
            tokio::select! {
                biased;
                Ok((a, by)) = &mut rx => break (a, Some(by)),
                a = &mut ask, if asking => {
                    // An approver that could reach nobody leaves the answer to the other
                    // paths (an API, a console) when there are any.
                    if a.decision == Decision::NoApprover && inner.external {
                        asking = false;
                        continue;
                    }
                    let by = (a.decision != Decision::NoApprover).then_some(name.clone());
                    // An answer this card or this approver's route cannot take is a no.
                    let a = a.checked(req.offer.as_ref(), inner.approver.route()).unwrap_or_else(|why| {
                        tracing::info!(target: "approvals", id = %req.id, "the approver's answer was refused: {why}; treated as no");
                        Answer::no()
                    });
                    break (a, by);
                }
                _ = &mut timeout => break (Decision::TimedOut.into(), None),
            }
        };
        // Whoever takes the request out of the pending table is the first answer. When an
        // outside answer took it (it sends under the table's lock) while the approver or
        // the timeout was settling here, that answer is the one that counts.
        withdraw.armed = false;
        let taken_here = inner.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(&req.id).is_some();
        if !taken_here && let Ok((a, b)) = rx.try_recv() {
            (answer, by) = (a, Some(b));
        }
        if answer.decision == Decision::TimedOut {
            tracing::info!(target: "approvals", id = %req.id, tool = %req.tool, run = %req.run, wait_ms = inner.timeout.as_millis() as u64, "approval timed out; treated as refused");
        }
        self.resolved_with(&req, &answer, started, by)
    }

    /// Remember `id` as resolved (the last [`REMEMBERED`] are kept).
    fn remember(&self, id: &str) {
        let mut r = self.inner.resolved.lock().unwrap_or_else(|p| p.into_inner());
        if r.1.insert(id.to_string()) {
            r.0.push_back(id.to_string());
        }
        if r.0.len() > REMEMBERED
            && let Some(old) = r.0.pop_front()
        {
            r.1.remove(&old);
        }
    }

    fn resolved(
        &self,
        req: &ApprovalRequest,
        decision: Decision,
        started: Instant,
        answered_by: Option<String>,
    ) -> ApprovalOutcome {
        self.resolved_with(req, &decision.into(), started, answered_by)
    }

    fn resolved_with(
        &self,
        req: &ApprovalRequest,
        answer: &Answer,
        started: Instant,
        answered_by: Option<String>,
    ) -> ApprovalOutcome {
        let decision = answer.decision;
        let granted = Granted::of(answer, req.offer.is_some());
        let waited_ms = started.elapsed().as_millis() as u64;
        tracing::info!(target: "approvals", id = %req.id, tool = %req.tool, run = %req.run, ?decision,
            scope = ?granted.scope, tier = ?granted.tier, waited_ms, "approval resolved");
        self.remember(&req.id);
        {
            let mut history = self.inner.history.lock().unwrap_or_else(|p| p.into_inner());
            history.push_back(AnsweredApproval {
                request: req.clone(),
                decision,
                answered_by: answered_by.clone(),
                waited_ms,
                answered_at_ms: crate::unix_ms(),
                granted: granted.clone(),
            });
            if history.len() > HISTORY {
                history.pop_front();
            }
        }
        let _ = self.inner.events.send(ApprovalEvent::Resolved {
            id: req.id.clone(),
            run: req.run.clone(),
            decision,
            waited_ms,
            answered_by: answered_by.clone(),
            scope: granted.scope,
            tier: granted.tier,
        });
        ApprovalOutcome { id: req.id.clone(), decision, waited_ms, answered_by, granted }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: &str) -> ApprovalRequest {
        ApprovalRequest {
            id: id.into(),
            run: "r1".into(),
            role: "developer".into(),
            tool: "t".into(),
            summary: "ls -la\nsecond line".into(),
            detail: "ls -la (in .)".into(),
            purpose: "look".into(),
            workspace: "/w".into(),
            requested_at_ms: 0,
            asked_by: "token \"t\"".into(),
            offer: None,
        }
    }

    /// Never answers.
    struct Silent;
    impl Approver for Silent {
        fn decide<'a>(&'a self, _r: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test]
    async fn timeout_is_a_refusal_after_the_floor() {
        // A zero timeout is raised to the one-second floor.
        let b = Broker::new(Arc::new(Silent), Duration::ZERO, false);
        assert_eq!(b.timeout(), MIN_TIMEOUT);
        let t = Instant::now();
        let out = b.request(req("a")).await;
        // Timed out, refused, after about a second.
        assert_eq!(out.decision, Decision::TimedOut);
        assert!(!out.decision.approved());
        assert!(t.elapsed() >= Duration::from_millis(990));
        assert_eq!(b.pending_count(), 0);
    }

    /// Answers "approve" itself, right after an operator declined the same request.
    struct Racing(std::sync::OnceLock<Broker>);
    impl Approver for Racing {
        fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
            let b = self.0.get().unwrap().clone();
            Box::pin(async move {
                assert_eq!(b.answer_by(&r.id, false, "operator"), Answered::Applied);
                Decision::Approved
            })
        }
    }

    #[tokio::test]
    async fn the_answer_that_was_applied_is_the_decision() {
        // Both answers are ready in the same instant: the one told "applied" must be the
        // one that counts, every time.
        for i in 0..200 {
            let racing = Arc::new(Racing(std::sync::OnceLock::new()));
            let b = Broker::new(racing.clone(), Duration::from_secs(30), true);
            let _ = racing.0.set(b.clone());
            let out = b.request(req(&format!("race-{i}"))).await;
            assert_eq!(out.decision, Decision::Declined, "round {i}");
            assert_eq!(out.answered_by.as_deref(), Some("operator"), "round {i}");
        }
    }

    #[tokio::test]
    async fn external_answer_wins_once_and_late_answers_are_ignored() {
        let b = Broker::new(Arc::new(Silent), Duration::from_secs(30), true);
        let mut events = b.subscribe();
        let b2 = b.clone();
        let task = tokio::spawn(async move { b2.request(req("x")).await });
        // The request shows up as an event, and its run is awaiting approval.
        let ev = events.recv().await.unwrap();
        assert!(matches!(ev, ApprovalEvent::Requested { ref request, .. } if request.id == "x"));
        assert!(b.awaiting("r1"));
        // The summary on the card is the first line, marked as cut.
        if let ApprovalEvent::Requested { request, .. } = ev {
            assert_eq!(request.summary, "ls -la…");
        }
        // The first answer applies.
        assert!(b.answer("x", true));
        assert_eq!(task.await.unwrap().decision, Decision::Approved);
        // A second (late) answer finds nothing.
        assert!(!b.answer("x", false));
        assert!(!b.awaiting("r1"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_answers_in_the_same_instant_one_applied_the_other_too_late() {
        // The loser of a race is told "too late" (409), never "unknown" (404): the card
        // is remembered as answered before it leaves the pending table.
        for i in 0..300 {
            let b = Broker::new(Arc::new(Silent), Duration::from_secs(30), true);
            let id = format!("race-{i}");
            let waiting = tokio::spawn({
                let (b, id) = (b.clone(), id.clone());
                async move { b.request(req(&id)).await }
            });
            while b.pending_count() == 0 {
                tokio::task::yield_now().await;
            }
            let start = Arc::new(std::sync::Barrier::new(2));
            let answer = |approve: bool| {
                let (b, id, start) = (b.clone(), id.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    b.answer_by(&id, approve, "operator")
                })
            };
            let (one, two) = (answer(true), answer(false));
            let mut got = [one.join().unwrap(), two.join().unwrap()];
            got.sort_by_key(|a| *a != Answered::Applied);
            assert_eq!(got, [Answered::Applied, Answered::TooLate], "round {i}");
            waiting.await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_wait_dropped_withdraws_its_card_and_a_later_answer_is_too_late() {
        let b = Broker::new(Arc::new(Silent), Duration::from_secs(30), true);
        let mut events = b.subscribe();
        let task = tokio::spawn({
            let b = b.clone();
            async move { b.request(req("gone")).await }
        });
        assert!(matches!(events.recv().await.unwrap(), ApprovalEvent::Requested { .. }));
        assert_eq!(b.pending_count(), 1);
        // The call that asked goes away (its client disconnected, it was cancelled).
        task.abort();
        let _ = task.await;
        assert_eq!(b.pending_count(), 0, "the card must disappear at once");
        assert!(matches!(events.recv().await.unwrap(), ApprovalEvent::Resolved { decision: Decision::Withdrawn, .. }));
        assert_eq!(b.answer_by("gone", true, "operator"), Answered::TooLate);
    }

    /// Keeps the cards it is shown.
    struct Keep(Mutex<Vec<ApprovalRequest>>);
    impl Approver for Keep {
        fn decide<'a>(&'a self, r: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
            self.0.lock().unwrap().push(r.clone());
            Box::pin(async { Decision::Declined })
        }
    }

    #[tokio::test]
    async fn every_card_is_escaped_by_the_broker() {
        let keep = Arc::new(Keep(Mutex::default()));
        let b = Broker::new(keep.clone(), Duration::from_secs(5), false);
        // A card as a component might send it: escapes, a forged second card in the
        // purpose, bidi and zero-width characters.
        let mut r = req("e");
        r.summary = "ls\u{1b}]0;owned\u{7}\u{1b}[2J".into();
        r.detail = "rm -rf /\u{202e}gpj.txt\u{200b}\u{061c}\u{feff}".into();
        r.purpose = "look\n── approval requested ──\n  summary: ls -la".into();
        b.request(r).await;
        let seen = keep.0.lock().unwrap()[0].clone();
        // The approver sees every field as one line, nothing left to interpret.
        for field in [&seen.summary, &seen.detail, &seen.purpose] {
            assert!(!field.chars().any(cheng_contract::text::is_hidden_char), "{field:?}");
        }
        assert!(seen.summary.contains("\\u{1b}]0;owned"), "{}", seen.summary);
        assert!(
            seen.detail.contains("\\u{202e}") && seen.detail.contains("\\u{61c}") && seen.detail.contains("\\u{feff}")
        );
        assert!(seen.purpose.starts_with("look\\n── approval requested"), "{}", seen.purpose);
    }

    #[tokio::test]
    async fn nobody_to_ask_refuses_at_once() {
        let b = Broker::new(Arc::new(RefuseAll), Duration::from_secs(600), false);
        let t = Instant::now();
        let out = b.request(req("n")).await;
        // Refused with its own reason, without waiting.
        assert_eq!(out.decision, Decision::NoApprover);
        assert!(t.elapsed() < Duration::from_millis(100));
    }

    #[tokio::test]
    async fn auto_approve_says_so() {
        let b = Broker::new(Arc::new(ApproveAll), Duration::from_secs(1), false);
        let out = b.request(req("y")).await;
        // Approved, and recorded as auto-approved rather than approved by a person.
        assert_eq!(out.decision, Decision::AutoApproved);
        assert!(out.decision.approved());
    }
}
