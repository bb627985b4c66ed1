//! W3C Trace Context (`traceparent`, `tracestate`) read from a caller and written into
//! what a call sends on, with OpenTelemetry's propagator; no engine, no export (that is
//! `cheng_host::telemetry`). Without the `telemetry` feature there is no trace context: a
//! caller's is ignored and nothing is sent on.

#[cfg(feature = "telemetry")]
use std::collections::HashMap;

#[cfg(feature = "telemetry")]
use opentelemetry::propagation::TextMapPropagator as _;
#[cfg(feature = "telemetry")]
use opentelemetry::trace::{SpanContext, TraceContextExt as _};
#[cfg(feature = "telemetry")]
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// A caller's or a call's trace context: OpenTelemetry's span context.
#[cfg(feature = "telemetry")]
pub type TraceContext = SpanContext;

/// A caller's or a call's trace context; this host is built without the `telemetry`
/// feature, so there is none (the type has no values).
#[cfg(not(feature = "telemetry"))]
#[derive(Debug, Clone)]
pub enum TraceContext {}

/// The remote context `traceparent` (and `tracestate`) describe, if they parse.
#[cfg(feature = "telemetry")]
pub fn extract(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    let mut carrier = HashMap::with_capacity(2);
    carrier.insert("traceparent".to_string(), traceparent.to_string());
    if let Some(s) = tracestate {
        carrier.insert("tracestate".to_string(), s.to_string());
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    let sc = cx.span().span_context().clone();
    sc.is_valid().then_some(sc)
}

/// `traceparent` and `tracestate` for `sc`, as they are sent on.
#[cfg(feature = "telemetry")]
pub fn inject(sc: &SpanContext) -> Vec<(&'static str, String)> {
    let mut carrier: HashMap<String, String> = HashMap::with_capacity(2);
    let cx = opentelemetry::Context::new().with_remote_span_context(sc.clone());
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    let mut out = Vec::with_capacity(2);
    for key in ["traceparent", "tracestate"] {
        if let Some(v) = carrier.remove(key).filter(|v| !v.is_empty()) {
            out.push((key, v));
        }
    }
    out
}

#[cfg(all(test, feature = "telemetry"))]
mod tests {
    use super::*;

    #[test]
    fn trace_context_goes_in_and_out_unchanged() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let sc = extract(tp, Some("rojo=00f067aa0ba902b7")).unwrap();
        assert_eq!(sc.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert!(sc.is_sampled() && sc.is_remote());
        let out = inject(&sc);
        assert_eq!(out[0], ("traceparent", tp.to_string()));
        assert_eq!(out[1], ("tracestate", "rojo=00f067aa0ba902b7".to_string()));
        // Malformed, all-zero and unknown-version-with-garbage values start no trace.
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01x",
        ] {
            assert!(extract(bad, None).is_none(), "{bad}");
        }
    }
}
