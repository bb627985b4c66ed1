//! What an operator watches, kept by the host as calls happen (no engine types): every
//! run's status, role and calls; an event stream (calls started and finished, a run's
//! status changed); and the counters behind `/metrics` (Prometheus text: calls by tool
//! and status, call durations, approvals pending and answered, denials by right,
//! components compiled, spans exported and dropped; the `metrics` feature), kept as
//! OpenTelemetry instruments too when the host exports to a collector
//! (`Observer::export_to`, the `telemetry` feature).
//!
//! # Example
//!
//! ```
//! use cheng_host::observe::Observer;
//!
//! let o = Observer::new();
//! o.call_started("c1", "run-1", "developer", "read_file", "/work/project");
//! assert_eq!(o.runs()[0].active, 1);
//! o.call_finished("c1", "run-1", "read_file", "ok", 1.5, &[]);
//! assert_eq!(o.runs()[0].calls, 1);
//! # #[cfg(feature = "metrics")]
//! assert!(o.metrics_text(0).contains("cheng_calls_total{tool=\"read_file\",status=\"ok\"} 1"));
//! assert_eq!(o.last_minute().calls, 1);
//! ```

use std::collections::BTreeMap;
#[cfg(feature = "telemetry")]
use std::sync::Arc;
use std::sync::Mutex;
#[cfg(feature = "metrics")]
use std::sync::atomic::AtomicU64;
use std::time::Instant;

#[cfg(feature = "metrics")]
use prometheus_client::encoding::EncodeLabelSet;
#[cfg(feature = "metrics")]
use prometheus_client::metrics::counter::Counter;
#[cfg(feature = "metrics")]
use prometheus_client::metrics::family::Family;
#[cfg(feature = "metrics")]
use prometheus_client::metrics::gauge::Gauge;
#[cfg(feature = "metrics")]
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
#[cfg(feature = "metrics")]
use prometheus_client::registry::Registry;
use serde::Serialize;
use tokio::sync::broadcast;

/// How many idle runs are remembered (the newest); runs with a call in flight always are.
pub const MAX_IDLE_RUNS: usize = 1000;

/// The runs, and the idle ones in the order they were last active, so that forgetting the
/// oldest idle run costs a lookup rather than a sort of them all (a client that opens a
/// new connection per call makes a new run per call).
#[derive(Default)]
struct Runs {
    by_id: BTreeMap<String, RunEntry>,
    /// The ids of exactly the runs with no call in flight, by `touched` (unique).
    idle: BTreeMap<u64, String>,
}

/// One run as the host has seen it.
#[derive(Debug, Clone, Serialize)]
pub struct RunEntry {
    /// The run's id.
    pub id: String,
    /// The role its calls run as (the latest call's).
    pub role: String,
    /// The workspace its calls work in (the latest call's; runs of different
    /// workspaces are kept apart by their names).
    pub workspace: String,
    /// Calls finished so far (this host's lifetime).
    pub calls: u64,
    /// Calls in flight now.
    pub active: u32,
    /// The tool called last.
    pub last_tool: String,
    /// When it was last active (Unix ms).
    pub last_ms: u64,
    /// The order runs were last active in (ties in `last_ms` are common).
    #[serde(skip)]
    touched: u64,
}

/// What the event stream carries besides the approvals broker's own events.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A call started.
    CallStarted {
        /// Its id.
        call: String,
        /// Its run.
        run: String,
        /// The tool.
        tool: String,
        /// The role.
        role: String,
    },
    /// A call ended.
    CallFinished {
        /// Its id.
        call: String,
        /// Its run.
        run: String,
        /// The tool.
        tool: String,
        /// `ok`, `error` or `denied`.
        status: String,
        /// How long it took.
        duration_ms: f64,
    },
    /// A run went from idle to running or back.
    RunStatus {
        /// The run.
        run: String,
        /// `running` or `idle`.
        status: String,
    },
}

#[cfg(feature = "metrics")]
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    status: String,
}

#[cfg(feature = "metrics")]
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

#[cfg(feature = "metrics")]
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabel {
    decision: String,
}

#[cfg(feature = "metrics")]
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RightLabel {
    right: String,
}

#[cfg(feature = "metrics")]
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: String,
}

/// The counters again, as OpenTelemetry instruments (exported over OTLP).
#[cfg(feature = "telemetry")]
struct Instruments {
    calls: opentelemetry::metrics::Counter<u64>,
    durations: opentelemetry::metrics::Histogram<f64>,
    answered: opentelemetry::metrics::Counter<u64>,
    denials: opentelemetry::metrics::Counter<u64>,
    compiled: opentelemetry::metrics::Counter<u64>,
    _pending: opentelemetry::metrics::ObservableGauge<u64>,
}

/// The host's runs, events and metrics.
pub struct Observer {
    runs: Mutex<Runs>,
    events: broadcast::Sender<Event>,
    started: Instant,
    #[cfg(feature = "metrics")]
    prom: Prometheus,
    #[cfg(feature = "telemetry")]
    otel: std::sync::OnceLock<Instruments>,
    /// The calls finished in the last minute: (finished at, ms, failed), oldest first.
    recent: Mutex<std::collections::VecDeque<(u64, f64, bool)>>,
}

/// The last minute of calls, for the console's strip of figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LastMinute {
    /// Calls finished.
    pub calls: usize,
    /// Of those, how many ended in an error or a denial.
    pub errors: usize,
    /// Their median duration in milliseconds (none without calls).
    pub p50_ms: Option<f64>,
}

/// The most calls the last-minute window holds (beyond this rate its figures are of
/// the latest ones).
const RECENT_MAX: usize = 20_000;

/// The counters in Prometheus' form (the `metrics` feature).
#[cfg(feature = "metrics")]
struct Prometheus {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    durations: Family<ToolLabel, Histogram>,
    answered: Family<DecisionLabel, Counter>,
    denials: Family<RightLabel, Counter>,
    compiled: Counter,
    pending: Gauge<i64, std::sync::atomic::AtomicI64>,
    spans: Family<OutcomeLabel, Counter>,
    metric_exports: Family<OutcomeLabel, Counter>,
}

#[cfg(feature = "metrics")]
impl Prometheus {
    fn new() -> Prometheus {
        let mut registry = Registry::default();
        let calls = Family::<CallLabels, Counter>::default();
        let durations = Family::<ToolLabel, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(0.0005, 4.0, 10))) as fn() -> Histogram,
        );
        let answered = Family::<DecisionLabel, Counter>::default();
        let denials = Family::<RightLabel, Counter>::default();
        let compiled = Counter::<u64, AtomicU64>::default();
        let pending = Gauge::<i64, std::sync::atomic::AtomicI64>::default();
        let spans = Family::<OutcomeLabel, Counter>::default();
        let metric_exports = Family::<OutcomeLabel, Counter>::default();
        registry.register("cheng_calls", "Tool calls, by tool and final status", calls.clone());
        registry.register("cheng_call_duration_seconds", "How long tool calls took", durations.clone());
        registry.register("cheng_approvals_pending", "Approval requests waiting for an answer", pending.clone());
        registry.register("cheng_approvals_answered", "Approval requests answered, by decision", answered.clone());
        registry.register("cheng_denials", "Refusals the host issued, by the right refused", denials.clone());
        registry.register(
            "cheng_components_compiled",
            "Components compiled (not taken from the cache)",
            compiled.clone(),
        );
        registry.register(
            "cheng_telemetry_spans",
            "Call spans for the collector: exported, dropped_queue_full, dropped_export_failed",
            spans.clone(),
        );
        registry.register(
            "cheng_telemetry_metric_exports",
            "Exports of these counters to the collector, by outcome (ok, failed)",
            metric_exports.clone(),
        );
        Prometheus { registry, calls, durations, answered, denials, compiled, pending, spans, metric_exports }
    }
}

impl Default for Observer {
    fn default() -> Self {
        Self::new()
    }
}

impl Observer {
    /// Nothing seen yet.
    pub fn new() -> Observer {
        let (events, _) = broadcast::channel(1024);
        Observer {
            runs: Mutex::default(),
            events,
            started: Instant::now(),
            #[cfg(feature = "metrics")]
            prom: Prometheus::new(),
            #[cfg(feature = "telemetry")]
            otel: std::sync::OnceLock::new(),
            recent: Mutex::default(),
        }
    }

    /// Keep the counters as OpenTelemetry instruments of `meter` too (once; later calls
    /// change nothing); `pending` says how many approvals wait now.
    #[cfg(feature = "telemetry")]
    pub fn export_to(&self, meter: &opentelemetry::metrics::Meter, pending: Arc<dyn Fn() -> u64 + Send + Sync>) {
        self.otel.get_or_init(|| Instruments {
            calls: meter.u64_counter("cheng.calls").with_description("Tool calls, by tool and final status").build(),
            durations: meter
                .f64_histogram("cheng.call.duration")
                .with_description("How long tool calls took")
                .with_unit("s")
                .with_boundaries((0..10).map(|i| 0.0005 * 4f64.powi(i)).collect())
                .build(),
            answered: meter
                .u64_counter("cheng.approvals.answered")
                .with_description("Approval requests answered, by decision")
                .build(),
            denials: meter
                .u64_counter("cheng.denials")
                .with_description("Refusals the host issued, by the right refused")
                .build(),
            compiled: meter
                .u64_counter("cheng.components.compiled")
                .with_description("Components compiled (not taken from the cache)")
                .build(),
            _pending: meter
                .u64_observable_gauge("cheng.approvals.pending")
                .with_description("Approval requests waiting for an answer")
                .with_callback(move |o| o.observe(pending(), &[]))
                .build(),
        });
    }

    /// Call spans handed to the collector (`exported`) or lost (`dropped_*`).
    pub fn telemetry_spans(&self, outcome: &str, n: u64) {
        #[cfg(feature = "metrics")]
        self.prom.spans.get_or_create(&OutcomeLabel { outcome: outcome.to_string() }).inc_by(n);
        #[cfg(not(feature = "metrics"))]
        let _ = (outcome, n);
    }

    /// One export of the counters, and whether the collector took it.
    pub fn telemetry_metrics(&self, ok: bool) {
        #[cfg(feature = "metrics")]
        {
            let outcome = if ok { "ok" } else { "failed" };
            self.prom.metric_exports.get_or_create(&OutcomeLabel { outcome: outcome.to_string() }).inc();
        }
        #[cfg(not(feature = "metrics"))]
        let _ = ok;
    }

    /// Calls finished in the last 60 s: how many, how many failed, their median time.
    pub fn last_minute(&self) -> LastMinute {
        let since = crate::unix_ms().saturating_sub(60_000);
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        while recent.front().is_some_and(|(at, ..)| *at < since) {
            recent.pop_front();
        }
        let mut times: Vec<f64> = recent.iter().map(|(_, ms, _)| *ms).collect();
        times.sort_by(f64::total_cmp);
        LastMinute {
            calls: recent.len(),
            errors: recent.iter().filter(|(.., failed)| *failed).count(),
            p50_ms: times.get(times.len() / 2).copied(),
        }
    }

    fn runs_lock(&self) -> std::sync::MutexGuard<'_, Runs> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A call started.
    pub fn call_started(&self, call: &str, run: &str, role: &str, tool: &str, workspace: &str) {
        let became_busy = {
            let mut guard = self.runs_lock();
            let Runs { by_id, idle } = &mut *guard;
            // Idle runs beyond the newest MAX_IDLE_RUNS are forgotten, so clients that
            // invent run names cannot grow this without bound.
            if by_id.len() >= MAX_IDLE_RUNS && !by_id.contains_key(run) {
                while idle.len() >= MAX_IDLE_RUNS {
                    let Some((_, id)) = idle.pop_first() else { break };
                    by_id.remove(&id);
                }
            }
            let e = by_id.entry(run.to_string()).or_insert_with(|| RunEntry {
                id: run.to_string(),
                role: role.to_string(),
                workspace: workspace.to_string(),
                calls: 0,
                active: 0,
                last_tool: String::new(),
                last_ms: 0,
                touched: 0,
            });
            // A new run is in neither map yet; an idle one leaves `idle`.
            if e.active == 0 && idle.get(&e.touched).is_some_and(|id| *id == e.id) {
                idle.remove(&e.touched);
            }
            static TOUCHED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            e.touched = TOUCHED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            e.role = role.to_string();
            workspace.clone_into(&mut e.workspace);
            e.last_tool = tool.to_string();
            e.last_ms = crate::unix_ms();
            e.active += 1;
            e.active == 1
        };
        let _ = self.events.send(Event::CallStarted {
            call: call.to_string(),
            run: run.to_string(),
            tool: tool.to_string(),
            role: role.to_string(),
        });
        if became_busy {
            let _ = self.events.send(Event::RunStatus { run: run.to_string(), status: "running".into() });
        }
    }

    /// A call ended with `status`; `denials` are the rights the host refused during it.
    pub fn call_finished(&self, call: &str, run: &str, tool: &str, status: &str, duration_ms: f64, denials: &[&str]) {
        #[cfg(not(any(feature = "metrics", feature = "telemetry")))]
        let _ = denials;
        let became_idle = {
            let mut guard = self.runs_lock();
            let Runs { by_id, idle } = &mut *guard;
            match by_id.get_mut(run) {
                Some(e) => {
                    e.active = e.active.saturating_sub(1);
                    e.calls += 1;
                    e.last_ms = crate::unix_ms();
                    if e.active == 0 {
                        idle.insert(e.touched, e.id.clone());
                    }
                    e.active == 0
                }
                None => false,
            }
        };
        {
            let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
            if recent.len() >= RECENT_MAX {
                recent.pop_front();
            }
            recent.push_back((crate::unix_ms(), duration_ms, matches!(status, "error" | "denied")));
        }
        #[cfg(feature = "metrics")]
        {
            let p = &self.prom;
            p.calls.get_or_create(&CallLabels { tool: tool.to_string(), status: status.to_string() }).inc();
            p.durations.get_or_create(&ToolLabel { tool: tool.to_string() }).observe(duration_ms / 1000.0);
            for right in denials {
                p.denials.get_or_create(&RightLabel { right: right.to_string() }).inc();
            }
        }
        #[cfg(feature = "telemetry")]
        if let Some(m) = self.otel.get() {
            use opentelemetry::KeyValue;
            let t = KeyValue::new("tool", tool.to_string());
            m.calls.add(1, &[t.clone(), KeyValue::new("status", status.to_string())]);
            m.durations.record(duration_ms / 1000.0, &[t]);
            for right in denials {
                m.denials.add(1, &[KeyValue::new("right", right.to_string())]);
            }
        }
        let _ = self.events.send(Event::CallFinished {
            call: call.to_string(),
            run: run.to_string(),
            tool: tool.to_string(),
            status: status.to_string(),
            duration_ms,
        });
        if became_idle {
            let _ = self.events.send(Event::RunStatus { run: run.to_string(), status: "idle".into() });
        }
    }

    /// An approval request was answered (or timed out) with `decision`.
    pub fn approval_answered(&self, decision: &str) {
        #[cfg(not(any(feature = "metrics", feature = "telemetry")))]
        let _ = decision;
        #[cfg(feature = "metrics")]
        self.prom.answered.get_or_create(&DecisionLabel { decision: decision.to_string() }).inc();
        #[cfg(feature = "telemetry")]
        if let Some(m) = self.otel.get() {
            m.answered.add(1, &[opentelemetry::KeyValue::new("decision", decision.to_string())]);
        }
    }

    /// A component was compiled.
    pub fn component_compiled(&self) {
        #[cfg(feature = "metrics")]
        self.prom.compiled.inc();
        #[cfg(feature = "telemetry")]
        if let Some(m) = self.otel.get() {
            m.compiled.add(1, &[]);
        }
    }

    /// Every run seen, most recently active first.
    pub fn runs(&self) -> Vec<RunEntry> {
        let mut list: Vec<RunEntry> = self.runs_lock().by_id.values().cloned().collect();
        list.sort_by_key(|a| std::cmp::Reverse(a.last_ms));
        list
    }

    /// One run.
    pub fn run(&self, id: &str) -> Option<RunEntry> {
        self.runs_lock().by_id.get(id).cloned()
    }

    /// Runs with a call in flight.
    pub fn active_runs(&self) -> usize {
        self.runs_lock().by_id.values().filter(|r| r.active > 0).count()
    }

    /// Follow the events.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// How long the host has been up.
    pub fn uptime(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    /// The metrics in Prometheus text format; `pending` approvals are waiting now.
    #[cfg(feature = "metrics")]
    pub fn metrics_text(&self, pending: usize) -> String {
        self.prom.pending.set(pending as i64);
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.prom.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_runs_are_bounded_and_busy_ones_kept() {
        let o = Observer::default();
        o.call_started("c0", "busy", "developer", "think", "/w");
        for i in 0..(MAX_IDLE_RUNS + 50) {
            o.call_started(&format!("c{i}"), &format!("r{i}"), "developer", "think", "/w");
            o.call_finished(&format!("c{i}"), &format!("r{i}"), "think", "ok", 1.0, &[]);
        }
        let runs = o.runs();
        assert!(runs.len() <= MAX_IDLE_RUNS + 1, "{}", runs.len());
        assert!(runs.iter().any(|r| r.id == "busy"), "a run with a call in flight is never forgotten");
        assert!(runs.iter().any(|r| r.id == format!("r{}", MAX_IDLE_RUNS + 49)), "the newest idle run is kept");
    }

    #[test]
    fn the_oldest_idle_runs_are_forgotten_first() {
        let o = Observer::default();
        let call = |run: &str| {
            o.call_started("c", run, "developer", "think", "/w");
            o.call_finished("c", run, "think", "ok", 1.0, &[]);
        };
        for i in 0..MAX_IDLE_RUNS {
            call(&format!("r{i}"));
        }
        // The oldest run, active again, becomes the newest.
        call("r0");
        for i in MAX_IDLE_RUNS..MAX_IDLE_RUNS + 10 {
            call(&format!("r{i}"));
        }
        let ids: std::collections::HashSet<String> = o.runs().into_iter().map(|r| r.id).collect();
        assert_eq!(ids.len(), MAX_IDLE_RUNS);
        assert!(ids.contains("r0") && ids.contains("r11") && ids.contains(&format!("r{}", MAX_IDLE_RUNS + 9)));
        for i in 1..=10 {
            assert!(!ids.contains(&format!("r{i}")), "r{i} was among the oldest idle runs");
        }
    }

    #[test]
    fn runs_and_events_follow_calls() {
        let o = Observer::new();
        let mut ev = o.subscribe();
        o.call_started("c1", "r", "recon", "read_file", "/w");
        o.call_started("c2", "r", "recon", "list_dir", "/w");
        // Two calls in flight, one run running.
        assert_eq!((o.runs()[0].active, o.active_runs()), (2, 1));
        o.call_finished("c1", "r", "read_file", "ok", 2.0, &[]);
        o.call_finished("c2", "r", "list_dir", "denied", 1.0, &["fs-read"]);
        assert_eq!((o.runs()[0].calls, o.active_runs()), (2, 0));
        // The stream: started, running, started, finished, finished, idle.
        let kinds: Vec<String> = std::iter::from_fn(|| ev.try_recv().ok())
            .map(|e| serde_json::to_value(e).unwrap()["event"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            kinds,
            ["call_started", "run_status", "call_started", "call_finished", "call_finished", "run_status"]
        );
        // The counters.
        #[cfg(feature = "metrics")]
        {
            let text = o.metrics_text(3);
            assert!(text.contains("cheng_calls_total{tool=\"list_dir\",status=\"denied\"} 1"), "{text}");
            assert!(text.contains("cheng_denials_total{right=\"fs-read\"} 1"), "{text}");
            assert!(text.contains("cheng_approvals_pending 3"), "{text}");
            assert!(text.contains("cheng_call_duration_seconds_bucket"), "{text}");
        }
    }
}
