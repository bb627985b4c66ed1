//! [`CallScope`]: everything one call carries from its first stage to its record — its
//! id and start, who is calling, the input, the approvals it waited on, the refusals the
//! host issued, how many commands it has in flight, and where its record goes.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::approvals::ApprovalOutcome;
use crate::capability::Denial;
use crate::records::{self, CallRecord, RequestRecord, Status, UnaskedRecord};
use crate::{Context, ErrorKind, ToolResult};

/// One call in progress.
pub struct CallScope {
    /// The call's id (as in its record).
    pub id: String,
    /// The tool, as called.
    pub tool: String,
    /// Who is calling, where, for which run; its cancellation token.
    pub cx: Context,
    /// The input as sent.
    pub input: serde_json::Value,
    started: Instant,
    started_at_ms: u64,
    approvals: Mutex<Vec<ApprovalOutcome>>,
    denials: Mutex<Vec<Denial>>,
    processes: AtomicUsize,
    requests: Mutex<Vec<Arc<NetRequest>>>,
    unasked: Mutex<Vec<UnaskedRecord>>,
    requests_made: AtomicUsize,
    /// Whether a `running` line (with the arguments) was handed to the log.
    running_written: AtomicBool,
    /// The trace context what the call sends on carries (its span's, or the caller's).
    trace: Option<crate::trace::TraceContext>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl CallScope {
    /// Call `id` of `tool` with `input` under `cx`, starting now; what it sends on
    /// carries `trace`.
    pub fn new(
        id: String,
        cx: &Context,
        tool: &str,
        input: serde_json::Value,
        trace: Option<crate::trace::TraceContext>,
    ) -> CallScope {
        CallScope {
            id,
            tool: tool.to_string(),
            cx: cx.clone(),
            input,
            started: Instant::now(),
            started_at_ms: crate::unix_ms(),
            approvals: Mutex::default(),
            denials: Mutex::default(),
            processes: AtomicUsize::new(0),
            requests: Mutex::default(),
            unasked: Mutex::default(),
            requests_made: AtomicUsize::new(0),
            running_written: AtomicBool::new(false),
            trace,
        }
    }

    /// `traceparent` (and `tracestate`) for what the call sends on; empty without a trace.
    pub fn trace_headers(&self) -> Vec<(&'static str, String)> {
        #[cfg(feature = "telemetry")]
        return self.trace.as_ref().map(crate::trace::inject).unwrap_or_default();
        #[cfg(not(feature = "telemetry"))]
        match &self.trace {
            Some(never) => match *never {},
            None => Vec::new(),
        }
    }

    /// Time since the call started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Record an approval the call waited on.
    pub fn approval(&self, outcome: ApprovalOutcome) {
        lock(&self.approvals).push(outcome);
    }

    /// Who answered approval `id` of this call, as recorded.
    pub fn answered_by(&self, id: &str) -> Option<String> {
        lock(&self.approvals).iter().find(|a| a.id == id).and_then(|a| a.answered_by.clone())
    }

    /// Note on the record of approval `id` the learned rule its "always" saved.
    pub fn approval_saved_rule(&self, id: &str, rule: &str) {
        if let Some(a) = lock(&self.approvals).iter_mut().find(|a| a.id == id) {
            a.granted.rule = Some(rule.to_string());
        }
    }

    /// Record a command the call runs without asking anyone.
    pub fn unasked(&self, run: UnaskedRecord) {
        lock(&self.unasked).push(run);
    }

    /// Record a refusal the host issued during the call, and log it.
    pub fn deny(&self, denial: Denial) {
        tracing::info!(target: "cheng::denials", call = %self.id, run = %self.cx.run, tool = %self.tool,
            right = ?denial.right, target_ = %cheng_contract::text::escape_line(&denial.target), "{}",
            cheng_contract::text::escape_line(&denial.message));
        lock(&self.denials).push(denial);
    }

    /// Whether the host issued a denial of this kind during the call: a failure of that
    /// kind is then the host's refusal passed on, not the component's own claim.
    pub fn denied_as(&self, kind: ErrorKind) -> bool {
        lock(&self.denials).iter().any(|d| d.kind == kind)
    }

    /// A network request begins: its entry in the record, updated as it goes. A call
    /// makes at most [`MAX_REQUESTS_PER_CALL`] requests, every one listed; an entry
    /// past them is not listed and says so ([`NetRequest::counted`]), and the request
    /// is to be refused.
    pub fn request(&self, method: &str, url: &str) -> Arc<NetRequest> {
        let n = self.requests_made.fetch_add(1, Ordering::SeqCst);
        let entry = Arc::new(NetRequest {
            ordinal: n,
            method: method.to_string(),
            url: cheng_contract::text::escape_line(&cheng_contract::text::cut_chars(url, 512)),
            status: AtomicU32::new(0),
            bytes: AtomicU64::new(0),
            refused: AtomicBool::new(false),
            error: Mutex::new(None),
        });
        if entry.counted() {
            lock(&self.requests).push(entry.clone());
        }
        entry
    }

    /// A command starts or ends (`+1` / `-1`).
    pub fn commands(&self, delta: isize) {
        if delta > 0 {
            self.processes.fetch_add(delta as usize, Ordering::SeqCst);
        } else {
            self.processes.fetch_sub(delta.unsigned_abs(), Ordering::SeqCst);
        }
    }

    /// Whether a command is running for this call.
    pub fn has_commands(&self) -> bool {
        self.processes.load(Ordering::SeqCst) > 0
    }

    /// A failure result of `kind` with `status`.
    pub fn fail(&self, status: Status, kind: ErrorKind, message: String) -> ToolResult {
        ToolResult::failure(self.id.clone(), status, kind, message, kind.default_terminal(), self.elapsed())
    }

    /// The tool crashed: `why` says how.
    pub fn crashed(&self, why: &str) -> ToolResult {
        self.fail(Status::Error, ErrorKind::Crashed, super::say::crashed(&self.tool, why))
    }

    /// The tool ran out of time: `how` says which budget.
    pub fn timed_out(&self, how: &str) -> ToolResult {
        self.fail(Status::Error, ErrorKind::Timeout, super::say::timed_out(&self.tool, how))
    }

    /// A denial issued before the component ran: recorded, and the call's result.
    pub fn refuse(&self, denial: Denial) -> ToolResult {
        let r = self.fail(Status::Denied, denial.kind, denial.message.clone());
        self.deny(denial);
        r
    }

    /// The `running` line for the log; it carries the arguments (as stored), so a call
    /// the host did not live to finish is still on record with what it was asked.
    pub fn running_record(&self) -> CallRecord {
        self.running_written.store(true, Ordering::Release);
        let mut rec = self.record_of(Status::Running, &serde_json::json!({}), None, Duration::ZERO);
        rec.arguments = records::stored_arguments(&self.input);
        rec
    }

    /// The final record for `result`; it repeats the arguments only when no `running`
    /// line carried them (readers fold the two lines).
    pub fn final_record(&self, result: &ToolResult) -> CallRecord {
        let mut rec = self.record_of(result.status, &result.output, result.error_kind, result.duration);
        if !self.running_written.load(Ordering::Acquire) {
            rec.arguments = records::stored_arguments(&self.input);
        }
        rec
    }

    fn record_of(
        &self,
        status: Status,
        output: &serde_json::Value,
        kind: Option<ErrorKind>,
        d: Duration,
    ) -> CallRecord {
        CallRecord {
            id: self.id.clone(),
            run: self.cx.run.clone(),
            role: self.cx.role.clone(),
            workspace: self.cx.workspace.display().to_string(),
            tool: self.tool.clone(),
            arguments: serde_json::Value::Null,
            status,
            preview: records::preview(output),
            duration_ms: d.as_secs_f64() * 1000.0,
            result: if status == Status::Running { serde_json::json!({}) } else { records::stored_result(output) },
            error_kind: kind.map(|k| k.code().to_string()),
            approvals: lock(&self.approvals).clone(),
            denials: lock(&self.denials).clone(),
            requests: lock(&self.requests).iter().map(|r| r.record()).collect(),
            unasked: lock(&self.unasked).clone(),
            started_at_ms: self.started_at_ms,
        }
    }
}

/// Network requests one call may make (each is listed in its record); past them every
/// request is refused.
pub const MAX_REQUESTS_PER_CALL: usize = 128;

/// One network request of a call in progress, as the egress hook updates it.
#[derive(Debug)]
pub struct NetRequest {
    ordinal: usize,
    method: String,
    url: String,
    status: AtomicU32,
    bytes: AtomicU64,
    refused: AtomicBool,
    error: Mutex<Option<String>>,
}

impl NetRequest {
    /// Within the call's cap (listed in the record).
    pub fn counted(&self) -> bool {
        self.ordinal < MAX_REQUESTS_PER_CALL
    }

    /// The first request past the cap.
    pub fn first_past_cap(&self) -> bool {
        self.ordinal == MAX_REQUESTS_PER_CALL
    }

    /// The guard refused it.
    pub fn refuse(&self, message: &str) {
        self.refused.store(true, Ordering::Relaxed);
        *lock(&self.error) = Some(message.to_string());
    }

    /// It failed (the first failure is kept).
    pub fn fail(&self, message: &str) {
        lock(&self.error).get_or_insert_with(|| message.to_string());
    }

    /// Its response status arrived.
    pub fn status(&self, code: u16) {
        self.status.store(code as u32, Ordering::Relaxed);
    }

    /// Body bytes passed on.
    pub fn add_bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    fn record(&self) -> RequestRecord {
        let status = self.status.load(Ordering::Relaxed);
        RequestRecord {
            method: self.method.clone(),
            url: self.url.clone(),
            status: (status != 0).then_some(status as u16),
            bytes: self.bytes.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            error: lock(&self.error).clone(),
        }
    }
}
