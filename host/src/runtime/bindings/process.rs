//! `cheng:tool/process`: the only way a component can ask for a process. Without a
//! spawn grant the request is refused with `not-granted`. With one, the host's
//! [`Spawner`](crate::process::Spawner) checks it against policy, the approvals broker
//! asks a person (unless a rule allows the command or auto-approve is on), and the
//! command runs confined and bounded. Every refusal is logged at `cheng::denials` and
//! lands in the call's record; time spent waiting is taken off the CPU budget.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::generated::cheng::tool::process::{CommandOutcome, CommandRequest, Host, Termination};
use super::generated::cheng::tool::types::{ErrorKind, Failure};
use crate::approvals::{self, Decision as D};
use crate::process::{self as proc_, RuleDecision};
use crate::runtime::store::StoreState;

fn failure(kind: crate::ErrorKind, message: String) -> Failure {
    Failure { kind: super::kind_to_wit(kind), message, terminal: kind.default_terminal() }
}

impl Host for StoreState {
    async fn run(&mut self, req: CommandRequest) -> Result<CommandOutcome, Failure> {
        let call = self.call.clone();
        if !call.spawn_granted {
            tracing::warn!(target: "cheng::denials", component = %call.component, tool = %call.tool, command = %req.command, "process spawning refused: not granted");
            return Err(Failure {
                kind: ErrorKind::NotGranted,
                message: format!("refused: the component \"{}\" is not granted process spawning", call.component),
                terminal: true,
            });
        }
        let Some(guard) = call.guard.clone() else {
            return Err(failure(crate::ErrorKind::NotGranted, "no workspace for this call".into()));
        };
        let request = proc_::Request {
            command: req.command,
            args: req.args,
            shell_string: req.shell_string,
            cwd: req.cwd,
            env: req.env,
            timeout_ms: req.timeout_ms,
            purpose: req.purpose,
        };
        let prepared = match call.spawner.prepare(&guard, &request) {
            Ok(p) => p,
            Err(r) => {
                tracing::warn!(target: "cheng::denials", run = %call.run, tool = %call.tool, kind = %r.kind, "command refused: {}", r.message);
                return Err(failure(r.kind, r.message));
            }
        };
        let started = Instant::now();
        if prepared.decision == RuleDecision::Allow {
            tracing::info!(target: "cheng::process", run = %call.run, command = %prepared.display, "allowed by an operator rule without asking");
        } else {
            let (summary, detail) = proc_::card(&prepared);
            let card = approvals::ApprovalRequest {
                id: crate::new_id(),
                run: call.run.clone(),
                role: call.role.clone(),
                tool: call.tool.clone(),
                summary,
                detail,
                purpose: prepared.purpose.clone(),
            };
            let decision = tokio::select! {
                o = call.broker.request(card) => Some(o),
                _ = call.cancel.cancelled() => None,
            };
            let Some(outcome) = decision else {
                self.budget.add_wait(started.elapsed());
                return Err(failure(
                    crate::ErrorKind::Cancelled,
                    "The call was cancelled while the command waited for approval; nothing ran.".into(),
                ));
            };
            let d = outcome.decision;
            call.approvals.lock().unwrap_or_else(|p| p.into_inner()).push(outcome);
            if !matches!(d, D::Approved | D::AutoApproved) {
                self.budget.add_wait(started.elapsed());
                tracing::warn!(target: "cheng::denials", run = %call.run, command = %prepared.display, decision = ?d, "command not approved");
                let why = match d {
                    D::TimedOut => " (nobody answered in time)",
                    D::NoApprover => " (nobody could be asked)",
                    _ => "",
                };
                return Err(failure(
                    crate::ErrorKind::ApprovalDenied,
                    format!(
                        "The human declined to run this shell command{why}: `{}`. Do not run it again, \
                         and do not retry a variant of it; propose a different approach or ask the user what to do.",
                        proc_::escape_for_card(&prepared.display)
                    ),
                ));
            }
        }
        call.processes.fetch_add(1, Ordering::SeqCst);
        let out = call.spawner.run(prepared, &call.cancel).await;
        call.processes.fetch_sub(1, Ordering::SeqCst);
        self.budget.add_wait(started.elapsed());
        Ok(CommandOutcome {
            command_display: out.command_display,
            cwd: out.cwd,
            exit_code: out.exit_code,
            termination: match out.termination {
                proc_::Termination::Exited => Termination::Exited,
                proc_::Termination::TimedOut => Termination::TimedOut,
                proc_::Termination::Cancelled => Termination::Cancelled,
                proc_::Termination::Signalled => Termination::Signalled,
                proc_::Termination::SpawnFailed => Termination::SpawnFailed,
            },
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
