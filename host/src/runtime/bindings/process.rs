//! `cheng:tool/process`: the only way a component can ask for a process. The capability
//! check comes first (a spawn grant); then the host's [`Spawner`](crate::process::Spawner)
//! checks the request against policy, the approvals broker asks a person (unless a rule
//! allows the command), and the command runs confined and bounded at the tier its
//! approval earned. Every refusal by grant, policy or a person goes into the call's
//! record; time spent waiting is taken off the CPU budget.

use std::time::Instant;

use super::generated::cheng::tool::process::{CommandOutcome, CommandRequest, Host};
use super::generated::cheng::tool::types::Failure;
use super::{CallCaps, ChengView, failure};
use crate::approvals::{self, Decision};
use crate::capability;
use crate::policy::process::RuleDecision;
use crate::process::{self as proc_, Tier};
use cheng_contract::ErrorKind;

pub(super) fn denied(d: &capability::Denial) -> Failure {
    Failure { kind: d.kind.into(), message: d.message.clone(), terminal: true }
}

/// The tier a command runs at: `allowed` when an operator rule let it run without
/// asking, else a person's answer to the card. A refusal, a timeout or nobody to ask is
/// a failure, recorded as a denial with the approval on the call's record.
pub(super) async fn approve(
    caps: &CallCaps,
    allowed: Option<Tier>,
    summary: String,
    detail: String,
    purpose: String,
    display: &str,
) -> Result<Tier, Failure> {
    if let Some(tier) = allowed {
        return Ok(tier);
    }
    let scope = &caps.scope;
    let card = approvals::ApprovalRequest::new(&scope.cx.run, &scope.cx.role, &scope.tool, summary, detail, purpose)
        .of_call(&scope.cx);
    let broker = caps.broker.clone();
    let decision = tokio::select! {
        o = broker.request(card) => Some(o),
        _ = scope.cx.cancel.cancelled() => None,
    };
    let Some(outcome) = decision else {
        return Err(failure(
            ErrorKind::Cancelled,
            "The call was cancelled while the command waited for approval; nothing ran.",
        ));
    };
    let d = outcome.decision;
    scope.approval(outcome);
    match d {
        Decision::Approved => Ok(Tier::Approved),
        // Approved without asking anyone: no person saw the command.
        Decision::AutoApproved => Ok(Tier::Unasked { network: false }),
        _ => {
            let why = match d {
                Decision::TimedOut => " (nobody answered in time)",
                Decision::NoApprover => " (nobody could be asked)",
                Decision::Withdrawn => " (the call ended before an answer)",
                _ => "",
            };
            let denial = capability::approval(display, why);
            let f = denied(&denial);
            scope.deny(denial);
            Err(f)
        }
    }
}

impl Host for ChengView<'_> {
    async fn run(&mut self, req: CommandRequest) -> Result<CommandOutcome, Failure> {
        let caps = self.caps()?;
        let scope = caps.scope.clone();
        if let Err(d) = capability::spawn(caps.spawn, &caps.component, &req.command) {
            let f = denied(&d);
            scope.deny(d);
            return Err(f);
        }
        let request = proc_::Request {
            command: req.command,
            args: req.args,
            shell_string: req.shell_string,
            cwd: req.cwd,
            env: req.env,
            timeout_ms: req.timeout_ms,
            purpose: req.purpose,
        };
        let prepared = match caps.spawner.prepare(&caps.guard, &request) {
            Ok(p) => p,
            Err(r) if r.is_policy() => {
                let shown = request.shell_string.clone().unwrap_or_else(|| request.command.clone());
                let d = capability::command(&shown, r.kind, &r.message);
                let f = denied(&d);
                scope.deny(d);
                return Err(f);
            }
            Err(r) => return Err(failure(r.kind, r.message)),
        };
        let started = Instant::now();
        let allowed = (prepared.decision == RuleDecision::Allow).then(|| {
            tracing::info!(target: "cheng::process", run = %scope.cx.run,
                command = %cheng_contract::text::escape_line(&prepared.display), "allowed by an operator rule without asking");
            Tier::Unasked { network: prepared.rule_network }
        });
        let (summary, detail) = proc_::card(&prepared);
        let asked = approve(caps, allowed, summary, detail, prepared.purpose.clone(), &prepared.display).await;
        let tier = match asked {
            Ok(t) => t,
            Err(f) => {
                self.ctx.budget.add_wait(started.elapsed());
                return Err(f);
            }
        };
        scope.commands(1);
        let out = caps.spawner.run(prepared, tier, &scope.cx.cancel).await;
        scope.commands(-1);
        self.ctx.budget.add_wait(started.elapsed());
        Ok(CommandOutcome {
            command_display: out.command_display,
            cwd: out.cwd,
            exit_code: out.exit_code,
            termination: out.termination.into(),
            duration_ms: out.duration_ms,
            timeout_ms: out.timeout_ms,
            stdout: out.stdout,
            stdout_truncated: out.stdout_truncated,
            stderr: out.stderr,
            stderr_truncated: out.stderr_truncated,
            signal: out.signal,
            error: out.error,
        })
    }
}
