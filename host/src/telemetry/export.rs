//! The export side: a bounded queue of finished spans and one thread (with a runtime of
//! its own) that sends them in batches, the counters collected at an interval by the
//! SDK's periodic reader; both through the `opentelemetry-otlp` HTTP exporters, over a
//! client whose requests run on that thread's runtime and connect the way the host's
//! other connections do (TLS with the Mozilla roots and `[web] ca_file`). The collector is
//! the operator's own endpoint, so it is not subject to the `[web]` rules or proxy.
//!
//! A call only ever `try_send`s its span: a full queue drops it and counts it, an export
//! that fails or times out counts its batch as dropped, so neither a collector that is
//! down nor one that is slow holds a call up.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _, SpanProcessor};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::egress::{Egress, Host, Rules, Target, connect, parse_host};
use crate::observe::Observer;

/// Most spans in one export request.
const MAX_BATCH: usize = 512;
/// How long a span waits for companions before its batch goes.
const BATCH_DELAY: Duration = Duration::from_millis(500);
/// Largest collector answer read.
const MAX_ANSWER_BYTES: usize = 1 << 20;
/// At most one warning about a failing collector this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// What the worker is set up with.
pub(super) struct Settings {
    pub traces: String,
    pub metrics: String,
    pub headers: HashMap<String, String>,
    pub timeout: Duration,
    pub metrics_interval: Duration,
    pub queue: usize,
    pub roots: Vec<rustls::pki_types::CertificateDer<'static>>,
    pub resource: opentelemetry_sdk::Resource,
    pub observer: Arc<Observer>,
}

enum Control {
    /// Send everything now, then say so.
    Flush(std::sync::mpsc::Sender<()>),
    /// Send everything, say so, and stop.
    Shutdown(std::sync::mpsc::Sender<()>),
}

/// The queue, the thread that drains it, and the meter provider whose counters it sends.
pub(super) struct Worker {
    spans: mpsc::Sender<SpanData>,
    control: mpsc::UnboundedSender<Control>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    meters: SdkMeterProvider,
    observer: Arc<Observer>,
    wait: Duration,
}

impl Worker {
    /// Build the exporters and start the thread.
    pub(super) fn start(s: Settings) -> Result<Worker, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the export runtime: {e}"))?;
        let mut rules = Rules { connect_timeout: s.timeout, ..Rules::default() };
        rules.extra_roots = s.roots;
        let client: Arc<dyn opentelemetry_http::HttpClient> = Arc::new(Collector {
            egress: Arc::new(Egress::new(rules, Arc::new(crate::egress::SystemResolver))),
            timeout: s.timeout,
            runtime: runtime.handle().clone(),
        });
        let mut spans_out = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(s.traces.clone())
            .with_timeout(s.timeout)
            .with_headers(s.headers.clone())
            .with_shared_http_client(client.clone())
            .build()
            .map_err(|e| format!("cannot build the span exporter for {}: {e}", s.traces))?;
        spans_out.set_resource(&s.resource);
        let metrics_out = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(s.metrics.clone())
            .with_timeout(s.timeout)
            .with_headers(s.headers)
            .with_shared_http_client(client)
            .build()
            .map_err(|e| format!("cannot build the metric exporter for {}: {e}", s.metrics))?;
        let reader = PeriodicReader::builder(Counted { inner: metrics_out, observer: s.observer.clone() })
            .with_interval(s.metrics_interval)
            .build();
        let meters = SdkMeterProvider::builder().with_reader(reader).with_resource(s.resource).build();
        let (spans, queue) = mpsc::channel(s.queue);
        let (control, orders) = mpsc::unbounded_channel();
        let drain = Drain { spans_out, observer: s.observer.clone(), timeout: s.timeout, warned: None };
        let thread = std::thread::Builder::new()
            .name("cheng-telemetry".into())
            .spawn(move || runtime.block_on(drain.run(queue, orders)))
            .map_err(|e| format!("cannot start the export thread: {e}"))?;
        Ok(Worker {
            spans,
            control,
            thread: Mutex::new(Some(thread)),
            meters,
            observer: s.observer,
            wait: s.timeout + Duration::from_secs(2),
        })
    }

    /// The span processor that feeds the queue.
    pub(super) fn processor(&self) -> Enqueue {
        Enqueue { spans: self.spans.clone(), observer: self.observer.clone() }
    }

    /// The meter the host's counters are kept in.
    pub(super) fn meter(&self) -> opentelemetry::metrics::Meter {
        use opentelemetry::metrics::MeterProvider as _;
        self.meters.meter("cheng")
    }

    /// Send what is queued and the counters now; wait for it (bounded).
    pub(super) fn flush(&self) {
        let _ = self.meters.force_flush();
        let (done, wait) = std::sync::mpsc::channel();
        if self.control.send(Control::Flush(done)).is_ok() {
            let _ = wait.recv_timeout(self.wait);
        }
    }

    /// Send what is queued and stop the thread (bounded: a collector that does not
    /// answer leaves the thread behind, never the caller).
    pub(super) fn shutdown(&self) {
        // The counters' last collection goes out while the runtime still runs.
        let _ = self.meters.shutdown();
        let (done, wait) = std::sync::mpsc::channel();
        if self.control.send(Control::Shutdown(done)).is_ok() && wait.recv_timeout(self.wait).is_ok() {
            let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(t) = thread {
                let _ = t.join();
            }
        }
    }
}

/// Finished spans into the queue, or counted as dropped.
pub(super) struct Enqueue {
    spans: mpsc::Sender<SpanData>,
    observer: Arc<Observer>,
}

impl std::fmt::Debug for Enqueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enqueue").field("capacity", &self.spans.max_capacity()).finish_non_exhaustive()
    }
}

impl SpanProcessor for Enqueue {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.spans.try_send(span).is_err() {
            self.observer.telemetry_spans("dropped_queue_full", 1);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// The metric exporter, its outcomes counted in `/metrics`.
struct Counted {
    inner: opentelemetry_otlp::MetricExporter,
    observer: Arc<Observer>,
}

impl PushMetricExporter for Counted {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let sent = self.inner.export(metrics).await;
        self.observer.telemetry_metrics(sent.is_ok());
        if let Err(e) = &sent {
            tracing::debug!(target: "cheng::telemetry", "counters not exported: {e}");
        }
        sent
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

/// The export thread's state.
struct Drain {
    spans_out: opentelemetry_otlp::SpanExporter,
    observer: Arc<Observer>,
    timeout: Duration,
    warned: Option<Instant>,
}

impl Drain {
    async fn run(mut self, mut queue: mpsc::Receiver<SpanData>, mut orders: mpsc::UnboundedReceiver<Control>) {
        let mut batch: Vec<SpanData> = Vec::new();
        let mut due: Option<Instant> = None;
        loop {
            tokio::select! {
                span = queue.recv() => match span {
                    Some(s) => {
                        batch.push(s);
                        due.get_or_insert_with(|| Instant::now() + BATCH_DELAY);
                        if batch.len() >= MAX_BATCH {
                            self.send_spans(&mut batch).await;
                            due = None;
                        }
                    }
                    None => break,
                },
                _ = async { tokio::time::sleep_until(due.unwrap_or_else(Instant::now)).await }, if due.is_some() => {
                    self.send_spans(&mut batch).await;
                    due = None;
                }
                order = orders.recv() => {
                    // Everything queued until now goes.
                    while let Ok(s) = queue.try_recv() {
                        batch.push(s);
                        if batch.len() >= MAX_BATCH {
                            self.send_spans(&mut batch).await;
                        }
                    }
                    self.send_spans(&mut batch).await;
                    due = None;
                    match order {
                        Some(Control::Flush(done)) => {
                            let _ = done.send(());
                        }
                        Some(Control::Shutdown(done)) => {
                            let _ = done.send(());
                            break;
                        }
                        None => break,
                    }
                }
            }
        }
    }

    async fn send_spans(&mut self, batch: &mut Vec<SpanData>) {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        let sent = tokio::time::timeout(self.timeout, self.spans_out.export(std::mem::take(batch))).await;
        match sent {
            Ok(Ok(())) => self.observer.telemetry_spans("exported", n),
            Ok(Err(e)) => {
                self.observer.telemetry_spans("dropped_export_failed", n);
                self.warn(&format!("{n} spans not exported: {e}"));
            }
            Err(_) => {
                self.observer.telemetry_spans("dropped_export_failed", n);
                self.warn(&format!("{n} spans not exported: the collector did not answer in time"));
            }
        }
    }

    fn warn(&mut self, what: &str) {
        if self.warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            self.warned = Some(Instant::now());
            tracing::warn!(target: "cheng::telemetry", "{what} (counted in /metrics as cheng_telemetry_*; this warning repeats at most once a minute)");
        }
    }
}

/// The exporters' HTTP client: one request to the collector, connected directly.
struct Collector {
    egress: Arc<Egress>,
    timeout: Duration,
    /// The export thread's runtime: a request runs there whoever asks (the periodic
    /// reader asks from a thread without one).
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collector").finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Collector {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, opentelemetry_http::HttpError> {
        let sent = self.runtime.spawn(send(self.egress.clone(), self.timeout, request));
        sent.await.map_err(|_| "the export runtime has stopped")?
    }
}

/// One request to the collector, answered within `timeout`.
async fn send(
    egress: Arc<Egress>,
    timeout: Duration,
    request: Request<Bytes>,
) -> Result<Response<Bytes>, opentelemetry_http::HttpError> {
    let deadline = Instant::now() + timeout;
    let uri = request.uri().clone();
    let https = uri.scheme_str() == Some("https");
    let authority = uri.authority().ok_or("the endpoint has no host")?.clone();
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let host = parse_host(authority.host()).map_err(|e| e.to_string())?;
    let addrs: Vec<SocketAddr> = match &host {
        Host::Ip(ip) => vec![SocketAddr::new(*ip, port)],
        Host::Name(name) => {
            let lookup = tokio::net::lookup_host((name.as_str(), port));
            tokio::time::timeout_at(deadline, lookup).await.map_err(|_| "timed out resolving the collector")??.collect()
        }
    };
    let target = Target { https, host, port, addrs };
    let (mut parts, body) = request.into_parts();
    parts.headers.insert(http::header::HOST, http::HeaderValue::from_str(authority.as_str())?);
    let request = Request::from_parts(parts, http_body_util::Full::new(body));
    let answer = connect::send(&egress, &target, request, deadline).await.map_err(|e| e.to_string())?;
    let (parts, body) = answer.into_parts();
    let body = http_body_util::Limited::new(body, MAX_ANSWER_BYTES);
    let bytes = tokio::time::timeout_at(deadline, body.collect())
        .await
        .map_err(|_| "timed out reading the collector's answer")??
        .to_bytes();
    Ok(Response::from_parts(parts, bytes))
}
