//! `cheng:tool/process`: the only way a component can ask for a process. The capability
//! check comes first (a spawn grant); then the host's [`Spawner`](crate::process::Spawner)
//! checks the request against policy, the approvals broker asks a person (unless a rule
//! allows the command), and the command runs confined and bounded at the tier its
//! approval earned. Every refusal by grant, policy or a person goes into the call's
//! record; time spent waiting is taken off the CPU budget.

use std::time::Instant;

use super::generated::cheng::tool::process::{CommandOutcome, CommandRequest, Host};
use super::generated::cheng::tool::types::Failure;
use super::{ChengView, failure};
use crate::approvals::{self, Decision};
use crate::capability;
use crate::policy::process::RuleDecision;
use crate::process::{self as proc_, Tier};
use cheng_contract::ErrorKind;

fn denied(d: &capability::Denial) -> Failure {
    Failure { kind: d.kind.into(), message: d.message.clone(), terminal: true }
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
        let tier = if prepared.decision == RuleDecision::Allow {
            tracing::info!(target: "cheng::process", run = %scope.cx.run,
                command = %cheng_contract::text::escape_line(&prepared.display), "allowed by an operator rule without asking");
            Tier::Unasked { network: prepared.rule_network }
        } else {
            let (summary, detail) = proc_::card(&prepared);
            let card = approvals::ApprovalRequest::new(
                &scope.cx.run,
                &scope.cx.role,
                &scope.tool,
                summary,
                detail,
                prepared.purpose.clone(),
            );
            let broker = caps.broker.clone();
            let decision = tokio::select! {
                o = broker.request(card) => Some(o),
                _ = scope.cx.cancel.cancelled() => None,
            };
            let Some(outcome) = decision else {
                self.ctx.budget.add_wait(started.elapsed());
                return Err(failure(
                    ErrorKind::Cancelled,
                    "The call was cancelled while the command waited for approval; nothing ran.",
                ));
            };
            let d = outcome.decision;
            scope.approval(outcome);
            match d {
                Decision::Approved => Tier::Approved,
                // Approved without asking anyone: no person saw the command.
                Decision::AutoApproved => Tier::Unasked { network: false },
                _ => {
                    self.ctx.budget.add_wait(started.elapsed());
                    let why = match d {
                        Decision::TimedOut => " (nobody answered in time)",
                        Decision::NoApprover => " (nobody could be asked)",
                        _ => "",
                    };
                    let denial = capability::approval(&prepared.display, why);
                    let f = denied(&denial);
                    scope.deny(denial);
                    return Err(f);
                }
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
