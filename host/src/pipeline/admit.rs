//! Admission: the stages a call passes before anything of the tool runs — the tool
//! exists, the role holds it, the run may make another call, the input is a JSON
//! object within the size cap that matches the tool's schema, and the workspace is
//! one this host serves.

use std::sync::Arc;

use super::Inner;
use crate::call::CallScope;
use crate::capability;
use crate::guard::Guard;
use crate::records::Status;
use crate::registry::{Entry, InputError};
use crate::{ErrorKind, ToolResult};

/// The largest input a call accepts, as JSON text.
pub const MAX_INPUT_BYTES: usize = 32 << 20;

/// Stage 1: The registry: does the tool exist at all?
pub(super) fn entry(inner: &Inner, scope: &CallScope) -> Result<Arc<Entry>, ToolResult> {
    inner.registry.get(&scope.tool).cloned().ok_or_else(|| {
        #[cfg(not(feature = "web"))]
        if crate::policy::WEB_TOOLS.contains(&scope.tool.as_str()) {
            return scope.fail(
                Status::Error,
                ErrorKind::InvalidArgument,
                format!(
                    "unknown tool \"{}\": this host is built without cheng-host's \"web\" feature, which brings \
                     the web tools",
                    scope.tool
                ),
            );
        }
        scope.fail(Status::Error, ErrorKind::InvalidArgument, format!("unknown tool \"{}\"", scope.tool))
    })
}

/// Stage 2: The grant: does the caller's role hold it?
pub(super) fn grant(inner: &Inner, scope: &CallScope) -> Result<(), ToolResult> {
    capability::tool(&inner.policy, &scope.cx.role, &scope.tool, &|t| inner.registry.get(t).is_some())
        .map_err(|d| scope.refuse(d))
}

/// Whether `run` is usable as a run id (it names a directory in the state dir).
fn valid_run_id(run: &str) -> bool {
    !run.is_empty()
        && run.len() <= 128
        && !run.starts_with('.')
        && run.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Stage 3: The run: a usable id, and a call budget not yet spent.
pub(super) fn run(inner: &Inner, scope: &CallScope) -> Result<(), ToolResult> {
    let run = &scope.cx.run;
    if !valid_run_id(run) {
        return Err(scope.fail(
            Status::Error,
            ErrorKind::InvalidArgument,
            format!("invalid run id \"{}\": use letters, digits, '-', '_' or '.' (at most 128)", cut(run)),
        ));
    }
    let max_calls = inner.config.runs.max_calls;
    if max_calls > 0 && inner.run_state.count_call(run) > max_calls {
        return Err(scope.refuse(capability::run_budget(run, max_calls)));
    }
    Ok(())
}

/// Text echoed in a message, cut to a readable length.
fn cut(s: &str) -> String {
    cheng_contract::text::cut_chars(&cheng_contract::text::escape_line(s), 200)
}

/// The input's schema check: done already, or running beside the instance loading.
pub(super) enum Validation {
    Done(Result<(), InputError>),
    Pending(tokio::task::JoinHandle<Result<(), InputError>>),
}

/// Stage 4: The input: a JSON object, at most [`MAX_INPUT_BYTES`]; its text (what the
/// component gets) and its schema check. The first validation of a tool compiles its
/// schema (about a millisecond, most of it one-time setup), so that one runs beside
/// the instance loading.
pub(super) fn input(entry: &Arc<Entry>, scope: &CallScope) -> Result<(String, Validation), ToolResult> {
    let tool = &scope.tool;
    if !scope.input.is_object() {
        return Err(scope.fail(
            Status::Error,
            ErrorKind::InvalidArgument,
            format!("bad arguments for \"{tool}\": the input must be a JSON object"),
        ));
    }
    let text = scope.input.to_string();
    if text.len() > MAX_INPUT_BYTES {
        return Err(scope.fail(
            Status::Error,
            ErrorKind::TooLarge,
            format!(
                "bad arguments for \"{tool}\": the input is {} bytes, more than the {MAX_INPUT_BYTES} bytes a call accepts; \
                 send less at once (write large content in parts, or read it from a file)",
                text.len()
            ),
        ));
    }
    let validation = if entry.validator_ready() {
        Validation::Done(entry.validate(&scope.input))
    } else {
        let (e, i) = (entry.clone(), scope.input.clone());
        Validation::Pending(tokio::task::spawn_blocking(move || e.validate(&i)))
    };
    Ok((text, validation))
}

/// The schema check's verdict.
pub(super) async fn validated(scope: &CallScope, v: Validation) -> Result<(), ToolResult> {
    let verdict = match v {
        Validation::Done(r) => r,
        // The check itself failed (a panic in the host): a host fault, not bad input.
        Validation::Pending(task) => match task.await {
            Ok(r) => r,
            Err(e) => return Err(scope.crashed(&format!("the host's schema check failed ({e})"))),
        },
    };
    verdict.map_err(|why| match why {
        InputError::Invalid(_) => scope.fail(
            Status::Error,
            ErrorKind::InvalidArgument,
            format!("bad arguments for \"{}\": {why}", scope.tool),
        ),
        InputError::BadSchema(_) => scope.crashed(&why.to_string()),
    })
}

/// Stage 5: The workspace: resolved once per call (it may sit behind a symlink), inside
/// the workspaces root when external workspaces are off, and — when it was found, not
/// given — none of `/`, the home, or a directory holding either or the state directory.
pub(super) fn workspace(inner: &Inner, scope: &CallScope) -> Result<Arc<Guard>, ToolResult> {
    let guard =
        Guard::new(&scope.cx.workspace).map_err(|e| scope.fail(Status::Error, ErrorKind::NotFound, e.to_string()))?;
    if let Some(root) = &inner.workspaces_root
        && !inner.config.workspaces.allow_external
        && !guard.root().starts_with(root)
    {
        return Err(scope.refuse(capability::workspace(guard.root(), root)));
    }
    if !scope.cx.given
        && let Some(why) = crate::guard::found_workspace_refusal(guard.root(), &inner.never_found)
    {
        return Err(scope.refuse(capability::found_workspace(guard.root(), &why)));
    }
    Ok(Arc::new(guard))
}
