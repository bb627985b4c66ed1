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
use crate::approvals::{Scope, Tier as ApprovalTier};
use crate::call::{Answer, CallScope, say, why_not};
use crate::capability;
use crate::policy::process::RuleDecision;
use crate::process::learned::Remembered;
use crate::process::{self as proc_, Net, Outcome, Prepared, Tier};
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
/// runs at — `allowed` when an operator rule or a remembered answer let it run without
/// asking, else a person's answer to the card (a refusal, a timeout or nobody to ask is
/// a failure, recorded as a denial) — then the command, counted on the call while it
/// runs. A yes "for this run" or "always" is remembered (an "always" saved as a learned
/// rule, noted on the approval's record); targets the command's proxy refused are
/// recorded as network denials. Time spent waiting is taken off the CPU budget.
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
    // A person answered and chose less than full access: a failure says more can be asked.
    let mut asked_confined = false;
    let tier = match allowed {
        Some(tier) => tier,
        None => {
            let mut card = scope.card(summary, detail, prepared.purpose.clone());
            if let Some(offer) = &prepared.offer {
                card = card.with_offer(offer.clone());
            }
            let display = &prepared.display;
            let answer = scope.ask(&caps.broker, card, |d| capability::approval(display, why_not(d))).await;
            match answer {
                Answer::Go { asked, granted, id } => {
                    if asked && granted.scope.is_some_and(|s| s != Scope::Once) {
                        let by = scope.answered_by(&id).unwrap_or_default();
                        match caps.spawner.remember(&prepared, &scope.cx.run, &granted, &id, &by) {
                            Ok(Some(rule)) if granted.scope == Some(Scope::Always) => {
                                tracing::info!(target: "approvals", rule = %rule.id, card = %id, by = %by,
                                    text = %cheng_contract::text::escape_line(&rule.text), "learned rule saved");
                                scope.approval_saved_rule(&id, &rule.id);
                            }
                            Ok(_) => {}
                            Err(e) => {
                                tracing::warn!(target: "approvals", card = %id, "the answer could not be remembered: {e}")
                            }
                        }
                    }
                    let tier = match (granted.tier, granted.hosts) {
                        (Some(ApprovalTier::Full), _) => Tier::Full,
                        (Some(ApprovalTier::Hosts), Some(h)) => Tier::Confined { net: Net::Hosts(h) },
                        _ => Tier::Confined { net: Net::None },
                    };
                    asked_confined = asked && tier != Tier::Full;
                    tier
                }
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
    let (mut out, report) = caps.spawner.run_reporting(prepared, tier, &scope.cx.cancel).await;
    scope.commands(-1);
    for r in report.refused {
        scope.deny(capability::command_network(&r.target, &r.why));
    }
    for h in report.carve_hits {
        scope.deny(capability::path_rule(&h.rel, h.write, h.message));
    }
    if asked_confined && out.exit_code.is_some_and(|c| c != 0) {
        out.stderr.push_str(
            "\n[cheng] This command ran confined: it read only the system, the workspace and its toolchains, and \
             reached only the hosts it was granted. If it failed for that, ask again: the person can grant named \
             hosts or full access for one command.\n",
        );
    }
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
        let mut prepared = caps.spawner.prepare(&caps.guard, &request).map_err(|r| refusal(scope, shown, r))?;
        // Below full access, what the path rules protect is carved out of its view.
        prepared.carve = Some(caps.file_rules.clone());
        let command = cheng_contract::text::escape_line(&prepared.display);
        let allowed = if prepared.decision == RuleDecision::Allow {
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
                network: prepared.rule_network.any(),
                hosts: prepared.rule_network.hosts(),
            });
            Some(Tier::Confined { net: prepared.rule_network.clone() })
        } else if let Some((by, rule)) = caps.spawner.remembered(&prepared, &scope.cx.run) {
            tracing::info!(target: "cheng::process", run = %scope.cx.run, %command, rule = %rule.id, by = by.as_str(),
                "admitted by a remembered answer without asking");
            if by == Remembered::Learned {
                let (store, id) = (caps.spawner.learned.clone(), rule.id.clone());
                let counted = tokio::task::spawn_blocking(move || store.matched(&id, crate::unix_ms())).await;
                if let Ok(Err(e)) = counted {
                    tracing::warn!(target: "cheng::process", rule = %rule.id, "the rule's match was not counted: {e}");
                }
            }
            scope.unasked(crate::records::UnaskedRecord {
                command,
                by: by.as_str().into(),
                entry: Some(rule.id.clone()),
                tier: "confined".into(),
                network: !rule.hosts.is_empty(),
                hosts: rule.hosts.clone(),
            });
            let net = if rule.hosts.is_empty() { Net::None } else { Net::Hosts(rule.hosts) };
            Some(Tier::Confined { net })
        } else {
            None
        };
        let (summary, detail) = proc_::card(&prepared);
        Ok(approve_and_run(self, prepared, allowed, summary, detail).await?.into())
    }
}
