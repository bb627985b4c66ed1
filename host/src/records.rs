//! Call records: what every call was asked, what it answered, and how long it took.

use serde::Serialize;

/// A call's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The tool ran and answered.
    Ok,
    /// The tool (or the host, about the call) reported a failure.
    Error,
    /// Policy refused the call before it ran.
    Denied,
    /// Still running.
    Running,
}

/// Longest preview kept in a record.
pub const PREVIEW_CHARS: usize = 200;

/// The record of one call.
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    /// Call id.
    pub id: String,
    /// Run id.
    pub run: String,
    /// Role.
    pub role: String,
    /// Tool name as called.
    pub tool: String,
    /// The arguments exactly as sent.
    pub arguments: serde_json::Value,
    /// Final status.
    pub status: Status,
    /// A short preview of the result.
    pub preview: String,
    /// Duration in milliseconds (fractional).
    pub duration_ms: f64,
    /// The result.
    pub result: serde_json::Value,
    /// The error kind, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<&'static str>,
    /// Unix time (ms) the call started.
    pub started_at_ms: u64,
}

/// A one-line preview: the summary if the result has one, else the start of its JSON.
pub fn preview(result: &serde_json::Value) -> String {
    let text = match result.get("summary").and_then(|s| s.as_str()) {
        Some(s) => s.to_string(),
        None => result.to_string(),
    };
    let mut p: String = text.chars().take(PREVIEW_CHARS).collect();
    if text.chars().count() > PREVIEW_CHARS {
        p.push('…');
    }
    p
}
