//! Settling a call: the guest's outcome as the caller's result, by one rule for every
//! tool. A call failed when the component returned a failure, or output whose
//! `error_kind` is set (a command that could not start or timed out: the output keeps
//! every field, and the call is still a failure; a command's own non-zero exit is not).
//! A failure is `denied` only when the host itself issued a denial of that kind during
//! the call (a grant, the operator's policy, a person's answer); a component that
//! reports `not-granted` or `approval-denied` on its own is reporting an error, and is
//! recorded as one.

use crate::call::CallScope;
use crate::records::Status;
use crate::runtime::call::GuestOutcome;
use crate::{ErrorKind, ToolResult};

pub(super) fn result(scope: &CallScope, outcome: GuestOutcome) -> ToolResult {
    match outcome {
        GuestOutcome::Ok(output) => {
            let kind = output
                .get("error_kind")
                .and_then(|k| k.as_str())
                .and_then(|code| ErrorKind::ALL.into_iter().find(|k| k.code() == code));
            let status = match kind {
                None => Status::Ok,
                Some(k) if scope.denied_as(k) => Status::Denied,
                Some(_) => Status::Error,
            };
            let terminal =
                kind.is_some_and(|k| output.get("terminal").and_then(|t| t.as_bool()).unwrap_or(k.default_terminal()));
            ToolResult {
                call_id: scope.id.clone(),
                status,
                output,
                error_kind: kind,
                terminal,
                duration: scope.elapsed(),
            }
        }
        GuestOutcome::Failed { kind, message, terminal } => {
            let status = if scope.denied_as(kind) { Status::Denied } else { Status::Error };
            ToolResult::failure(scope.id.clone(), status, kind, message, terminal, scope.elapsed())
        }
    }
}
