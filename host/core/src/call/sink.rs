//! Where call records go, and what happens when they cannot: the audit log, failing
//! closed by default. A call's `running` line is written before the tool runs, so a log
//! that cannot take it (a full disk, a read-only state directory) stops the call before
//! anything happens; a call whose final record cannot be written returns an error
//! saying so instead of its result. `[records] on_failure = "continue"` lets calls and
//! results through and logs each lost record.

use crate::ErrorKind;
use crate::policy::OnRecordFailure;
use crate::records::{AuditLog, CallRecord, Status};

use super::CallScope;
use crate::ToolResult;

/// The host's record sink.
#[derive(Clone)]
pub struct RecordSink {
    /// The audit log, if the host keeps one.
    pub log: Option<AuditLog>,
    /// What a record that cannot be written does to its call.
    pub on_failure: OnRecordFailure,
}

impl RecordSink {
    fn unavailable(&self, scope: &CallScope, why: &str) -> Option<ToolResult> {
        match self.on_failure {
            OnRecordFailure::Continue => {
                tracing::error!(target: "cheng::records", call = %scope.id, "a call record was lost: {why}");
                None
            }
            OnRecordFailure::Refuse => {
                tracing::error!(target: "cheng::records", call = %scope.id, "call refused: {why}");
                Some(scope.fail(Status::Error, ErrorKind::Io, super::say::log_unavailable(why)))
            }
        }
    }

    /// The call starts: its `running` line reaches the log first. `Err` with the call's
    /// result when the log cannot take it and the policy is to refuse.
    pub fn start(&self, scope: &CallScope) -> Result<(), ToolResult> {
        let Some(log) = &self.log else { return Ok(()) };
        match log.append(&scope.running_record()) {
            Ok(()) => Ok(()),
            Err(e) => self.unavailable(scope, &e.to_string()).map_or(Ok(()), Err),
        }
    }

    /// The call ends with `result`: its final record reaches the log (the operating
    /// system) before the result reaches the caller. Returns what the caller gets.
    pub fn finish(&self, scope: &CallScope, result: ToolResult) -> (ToolResult, CallRecord) {
        let rec = scope.final_record(&result);
        let Some(log) = &self.log else { return (result, rec) };
        match log.append(&rec) {
            Ok(()) => (result, rec),
            Err(e) => match self.unavailable(scope, &e.to_string()) {
                Some(refused) => {
                    let rec = scope.final_record(&refused);
                    (refused, rec)
                }
                None => (result, rec),
            },
        }
    }
}
