//! OpenTelemetry export (`[telemetry]`): every call as a span, the `/metrics` counters as
//! OTLP metrics, both sent to the operator's collector over OTLP/HTTP (protobuf) by the
//! `opentelemetry-otlp` exporters; and W3C Trace Context in and out, so one agent step is
//! one trace across hosts.
//!
//! - A call's span starts when the call does, as the child of the caller's trace context
//!   when it sent one ([`crate::Context::traceparent`]), and ends with its record: tool,
//!   role, run, workspace, status, error kind, approvals and their wait, denials (each an
//!   event), network requests. Nothing derived from the arguments or the result leaves
//!   the host unless the operator opts in: a failed span's status is its error kind (the
//!   message quotes arguments: a refused path, a missing file, a declined command), a
//!   denial event names the right and the kind, and its target and message go only with
//!   `export_arguments`; the arguments themselves go with `export_arguments`, the result
//!   with `export_results`.
//! - What a call sends on carries the call's context: `traceparent`/`tracestate` on a
//!   component's HTTP requests, in `_meta` of a `tools/call` to an MCP server (the keys
//!   the MCP revision of 2026-07-28 reserves), and as headers to an HTTP MCP server.
//!   Without export the caller's context is passed on unchanged ([`crate::trace`]).
//! - Export never slows a call: a finished span goes into a bounded queue (`queue`); when
//!   it is full the span is dropped and counted (`cheng_telemetry_spans_total` in
//!   `/metrics`), and a thread of its own sends batches, so a collector that is down or
//!   slow costs spans, never calls ([`export`]).

mod export;

use std::sync::Arc;
use std::time::SystemTime;

use opentelemetry::trace::{
    Span as _, SpanContext, SpanKind, Status as SpanStatus, TraceContextExt as _, Tracer as _, TracerProvider as _,
};
use opentelemetry::{KeyValue, StringValue, Value};

use crate::observe::Observer;
use crate::policy::TelemetryConfig;
use crate::records::{CallRecord, Status};

/// Why telemetry could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("[telemetry]: {0}")]
pub struct TelemetryError(String);

/// The exporters and the span pipeline of a host with `[telemetry] endpoint` set.
pub struct Telemetry {
    tracer: opentelemetry_sdk::trace::SdkTracer,
    provider: opentelemetry_sdk::trace::SdkTracerProvider,
    worker: export::Worker,
    export_arguments: bool,
    export_results: bool,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").finish_non_exhaustive()
    }
}

/// A call's span, from its start to its record.
pub(crate) struct CallSpan(opentelemetry_sdk::trace::Span);

impl CallSpan {
    /// The span's context, to pass on.
    pub(crate) fn context(&self) -> SpanContext {
        self.0.span_context().clone()
    }
}

impl Telemetry {
    /// Export as `config` says; `None` when it names no endpoint. `roots` are the
    /// certificates trusted besides the Mozilla roots (`[web] ca_file`).
    pub fn new(
        config: &TelemetryConfig,
        roots: Vec<rustls::pki_types::CertificateDer<'static>>,
        observer: Arc<Observer>,
        pending: Arc<dyn Fn() -> u64 + Send + Sync>,
    ) -> Result<Option<Telemetry>, TelemetryError> {
        let Some((traces, metrics)) = config.urls().map_err(|e| TelemetryError(e.0))? else {
            return Ok(None);
        };
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(config.service_name.clone())
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let worker = export::Worker::start(export::Settings {
            traces,
            metrics,
            headers: config.headers.clone().into_iter().collect(),
            timeout: std::time::Duration::from_millis(config.timeout_ms),
            metrics_interval: std::time::Duration::from_millis(config.metrics_interval_ms),
            queue: config.queue,
            roots,
            resource: resource.clone(),
            observer: observer.clone(),
        })
        .map_err(TelemetryError)?;
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_span_processor(worker.processor())
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("cheng");
        observer.export_to(&worker.meter(), pending);
        Ok(Some(Telemetry {
            tracer,
            provider,
            worker,
            export_arguments: config.export_arguments,
            export_results: config.export_results,
        }))
    }

    /// A span for a call of `tool` under `cx`, starting now.
    pub(crate) fn start(&self, cx: &crate::Context, call: &str, tool: &str) -> CallSpan {
        let parent = match &cx.trace {
            Some(sc) => opentelemetry::Context::new().with_remote_span_context(sc.clone()),
            None => opentelemetry::Context::new(),
        };
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", tool.to_string()),
            KeyValue::new("cheng.call.id", call.to_string()),
            KeyValue::new("cheng.role", cx.role.clone()),
            KeyValue::new("cheng.run", cx.run.clone()),
            KeyValue::new("cheng.workspace", cx.workspace.display().to_string()),
        ];
        if !cx.caller.is_empty() {
            attributes.push(KeyValue::new("cheng.caller", cx.caller.clone()));
        }
        // Named as the MCP server's request when it is one, else for what it is (the
        // GenAI conventions' name for running a tool).
        let name = match cx.mcp_method {
            Some(method) => {
                attributes.push(KeyValue::new("mcp.method.name", method));
                format!("{method} {tool}")
            }
            None => format!("execute_tool {tool}"),
        };
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_start_time(SystemTime::now())
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &parent);
        CallSpan(span)
    }

    /// End `span` with what `rec` says of its call.
    pub(crate) fn end(&self, span: CallSpan, rec: &CallRecord) {
        let mut span = span.0;
        let waited: u64 = rec.approvals.iter().map(|a| a.waited_ms).sum();
        let rights: Vec<StringValue> = rec.denials.iter().map(|d| StringValue::from(d.right.as_str())).collect();
        let mut attributes = vec![
            KeyValue::new("cheng.status", rec.status.as_str()),
            KeyValue::new("cheng.approvals", rec.approvals.len() as i64),
            KeyValue::new("cheng.approval.wait_ms", waited as i64),
            KeyValue::new("cheng.denials", rec.denials.len() as i64),
            KeyValue::new("cheng.requests", rec.requests.len() as i64),
        ];
        if !rights.is_empty() {
            attributes.push(KeyValue::new("cheng.denied_rights", Value::Array(rights.into())));
        }
        if let Some(kind) = &rec.error_kind {
            attributes.push(KeyValue::new("error.type", kind.clone()));
        }
        if self.export_arguments {
            attributes.push(KeyValue::new("cheng.arguments", rec.arguments.to_string()));
        }
        if self.export_results {
            attributes.push(KeyValue::new("cheng.result", rec.result.to_string()));
        }
        span.set_attributes(attributes);
        for d in &rec.denials {
            let mut event =
                vec![KeyValue::new("cheng.right", d.right.as_str()), KeyValue::new("cheng.kind", d.kind.code())];
            // The target and the message name what the arguments asked for.
            if self.export_arguments {
                event.push(KeyValue::new("cheng.target", d.target.clone()));
                event.push(KeyValue::new("cheng.message", d.message.clone()));
            }
            span.add_event("cheng.denial", event);
        }
        if rec.status != Status::Ok {
            // The kind, never the message: a message quotes the arguments or the result.
            let kind = rec.error_kind.clone().unwrap_or_else(|| rec.status.as_str().to_string());
            span.set_status(SpanStatus::error(kind));
        }
        span.end();
    }

    /// Send what is queued now, and the counters, waiting for the collector (up to the
    /// export timeout).
    pub fn flush(&self) {
        let _ = self.provider.force_flush();
        self.worker.flush();
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        // What is queued still goes out (bounded by the export timeout).
        self.worker.shutdown();
    }
}
