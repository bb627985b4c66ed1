//! What a model reads when a call fails for a reason of the host's or the tool's own
//! making, written once: a crash, a timeout, a cancellation, a log that cannot be
//! written. Each sentence names the tool and says what to do next, so an agent reports
//! or narrows instead of retrying blindly.

/// The tool crashed (trapped, could not be compiled, returned what is not a result, or
/// its server failed): `why` says how.
pub fn crashed(tool: &str, why: &str) -> String {
    format!("The tool \"{tool}\" crashed: {why}. Report this to the user rather than working around it.")
}

/// The tool ran out of time; `how` says which budget and what was done about it.
pub fn timed_out(tool: &str, how: &str) -> String {
    format!(
        "The tool \"{tool}\" timed out: {how}. Do not retry the same request; narrow it or report the problem to the user."
    )
}

/// The caller cancelled the call.
pub fn cancelled(tool: &str) -> String {
    format!("The call to \"{tool}\" was cancelled.")
}

/// The caller cancelled the call while it waited for a person; `nothing` says what
/// therefore did not happen.
pub fn cancelled_waiting(nothing: &str) -> String {
    format!("The call was cancelled while it waited for approval; {nothing}.")
}

/// The audit log cannot take the call's record and the policy is to refuse.
pub fn log_unavailable(why: &str) -> String {
    format!(
        "The audit log is unavailable ({why}); no tool runs until it can be written again. Report this to the user; \
         retrying will not help until the operator fixes it."
    )
}
