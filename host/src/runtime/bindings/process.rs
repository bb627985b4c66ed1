//! `cheng:tool/process`: the only way a component can ask for a process. The capability
//! check comes first (a spawn grant); then the host's `Spawner`
//! checks the request against policy, the approvals broker asks a person (unless a rule
//! allows the command), and the command runs confined and bounded at the tier its
//! approval earned. Every refusal by grant, policy or a person goes into the call's
//! record; time spent waiting is taken off the CPU budget.

use std::time::Instant;

use super::generated::cheng::tool::process::{CommandOutcome, CommandRequest, Host};
use super::generated::cheng::tool::types::Failure;
use super::{ChengView, ImportError, denied, failure, refused};
use crate::call::{Answer, CallScope, say, why_not};
use crate::capability;
use crate::policy::process::RuleDecision;
use crate::process::{self as proc_, Outcome, Prepared, Tier};
use cheng_contract::ErrorKind;

/// A request the command policy refused (recorded as a denial), or one that cannot be
/// run as written (a plain failure).
pub(super) fn refusal(scope: &CallScope, shown: &str, r: proc_::Refusal) -> Failure {
    if r.is_policy() {
        refused(scope, capability::command(shown, r.kind, &r.message))
    } else {
        failure(r.kind, r.message)
    }
}

/// The sequence every command source shares once its request is prepared: the tier it
/// runs at — `allowed` when an operator rule let it run without asking, else a
/// person's answer to the card (a refusal, a timeout or nobody to ask is a failure,
/// recorded as a denial) — then the command, counted on the call while it runs. Time
/// spent waiting is taken off the CPU budget.
pub(super) async fn approve_and_run(
    view: &mut ChengView<'_>,
    prepared: Prepared,
    allowed: Option<Tier>,
    summary: String,
    detail: String,
) -> Result<Outcome, Failure> {
    let caps = view.caps()?;
    let scope = &caps.scope;
    let started = Instant::now();
    let tier = match allowed {
        Some(tier) => tier,
        None => {
            let card = scope.card(summary, detail, prepared.purpose.clone());
            let display = &prepared.display;
            let answer = scope.ask(&caps.broker, card, |d| capability::approval(display, why_not(d))).await;
            match answer {
                Answer::Go { asked: true } => Tier::Approved,
                // Approved without asking anyone: no person saw the command.
                Answer::Go { asked: false } => Tier::Unasked { network: false },
                Answer::Cancelled => {
                    view.ctx.budget.add_wait(started.elapsed());
                    return Err(failure(ErrorKind::Cancelled, say::cancelled_waiting("nothing ran")));
                }
                Answer::Refused { denial, .. } => {
                    view.ctx.budget.add_wait(started.elapsed());
                    return Err(denied(&denial));
                }
            }
        }
    };
    scope.commands(1);
    let out = caps.spawner.run(prepared, tier, &scope.cx.cancel).await;
    scope.commands(-1);
    view.ctx.budget.add_wait(started.elapsed());
    Ok(out)
}

impl Host for ChengView<'_> {
    async fn run(&mut self, req: CommandRequest) -> Result<CommandOutcome, ImportError> {
        let caps = self.caps()?;
        let scope = &caps.scope;
        capability::spawn(caps.spawn, &caps.component, &req.command).map_err(|d| refused(scope, d))?;
        let request = proc_::Request::from(req);
        let shown = request.shell_string.as_deref().unwrap_or(&request.command);
        let prepared = caps.spawner.prepare(&caps.guard, &request).map_err(|r| refusal(scope, shown, r))?;
        let allowed = (prepared.decision == RuleDecision::Allow).then(|| {
            let command = cheng_contract::text::escape_line(&prepared.display);
            match &prepared.known_safe {
                Some(entry) => tracing::info!(target: "cheng::process", run = %scope.cx.run, %command, entry = %entry,
                    "known-safe: run without asking, confined and read-only"),
                None => tracing::info!(target: "cheng::process", run = %scope.cx.run, %command,
                    "allowed by an operator rule without asking"),
            }
            scope.unasked(crate::records::UnaskedRecord {
                command,
                by: if prepared.known_safe.is_some() { "known_safe" } else { "rule" }.into(),
                entry: prepared.known_safe.clone(),
                tier: "confined".into(),
                network: prepared.rule_network,
            });
            Tier::Unasked { network: prepared.rule_network }
        });
        let (summary, detail) = proc_::card(&prepared);
        Ok(approve_and_run(self, prepared, allowed, summary, detail).await?.into())
    }
}
