//! `cheng:tool/git`: `workspace_git_write`'s way to change a repository. The spawn
//! grant comes first; then the host checks the operation (paths, names, the
//! repository inside the workspace, its configuration), the operator's `[[git.rules]]`
//! decide or a person approves the card, and the host's git runs confined with the
//! repository's programs switched off ([`crate::process::git_write`]). Every refusal
//! goes into the call's record.

use std::time::Instant;

use super::generated::cheng::tool::git::{Host, Operation as WitOp, WriteOutcome, WriteRequest};
use super::generated::cheng::tool::types::Failure;
use super::process::{approve, denied};
use super::{ChengView, failure};
use crate::capability;
use crate::policy::process::RuleDecision;
use crate::process::Tier;
use crate::process::git_write::{GitRequest, Operation, PreparedGit};

fn operation(op: WitOp) -> Operation {
    match op {
        WitOp::Add(p) => Operation::Add(p),
        WitOp::Unstage(p) => Operation::Unstage(p),
        WitOp::Restore(p) => Operation::Restore(p),
        WitOp::Commit(c) => Operation::Commit { message: c.message, amend: c.amend, allow_empty: c.allow_empty },
        WitOp::Switch(s) => Operation::Switch { branch: s.branch, create: s.create },
        WitOp::BranchDelete(b) => Operation::BranchDelete { branch: b.branch, force: b.force },
        WitOp::StashPush(s) => {
            Operation::StashPush { message: s.message, include_untracked: s.include_untracked, pathspecs: s.pathspecs }
        }
        WitOp::StashPop(n) => Operation::StashPop(n),
        WitOp::Tag(t) => Operation::Tag { name: t.name, target: t.target, message: t.message },
    }
}

impl Host for ChengView<'_> {
    async fn write(&mut self, req: WriteRequest) -> Result<WriteOutcome, Failure> {
        let caps = self.caps()?;
        let scope = caps.scope.clone();
        let request = GitRequest {
            cwd: req.cwd,
            operation: operation(req.operation),
            timeout_ms: req.timeout_ms,
            purpose: req.purpose,
        };
        let name = request.operation.name();
        if let Err(d) = capability::spawn(caps.spawn, &caps.component, "git") {
            let f = denied(&d);
            scope.deny(d);
            return Err(f);
        }
        let prepared = match caps.spawner.prepare_git(&caps.guard, &request) {
            Ok(p) => p,
            Err(r) if r.is_policy() => {
                let d = capability::command(&format!("git {name}"), r.kind, &r.message);
                let f = denied(&d);
                scope.deny(d);
                return Err(f);
            }
            Err(r) => return Err(failure(r.kind, r.message)),
        };
        let started = Instant::now();
        let PreparedGit { prepared, repo, summary, detail } = prepared;
        let allowed = (prepared.decision == RuleDecision::Allow).then(|| {
            tracing::info!(target: "cheng::process", run = %scope.cx.run, operation = name,
                repository = %repo.top.display(), "git operation allowed by an operator rule without asking");
            Tier::Unasked { network: false }
        });
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
        let (branch, head) = repo.head();
        Ok(WriteOutcome {
            command_display: out.command_display,
            repository: repo.top_rel,
            exit_code: out.exit_code,
            termination: out.termination.into(),
            duration_ms: out.duration_ms,
            stdout: out.stdout,
            stdout_truncated: out.stdout_truncated,
            stderr: out.stderr,
            stderr_truncated: out.stderr_truncated,
            error: out.error,
            branch,
            head,
        })
    }
}
