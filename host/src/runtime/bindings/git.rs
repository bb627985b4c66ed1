//! `cheng:tool/git`: `workspace_git_write`'s way to change a repository. The spawn
//! grant comes first; then the host checks the operation (paths, names, the
//! repository inside the workspace, its configuration), the operator's `[[git.rules]]`
//! decide or a person approves the card, and the host's git runs confined with the
//! repository's programs switched off (`process::git_write`). Every refusal
//! goes into the call's record.

use super::generated::cheng::tool::git::{Host, Operation as WitOp, WriteOutcome, WriteRequest};
use super::process::{approve_and_run, refusal};
use super::refused;
use super::{ChengView, ImportError};
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
    async fn write(&mut self, req: WriteRequest) -> Result<WriteOutcome, ImportError> {
        let caps = self.caps()?;
        let scope = &caps.scope;
        let request = GitRequest {
            cwd: req.cwd,
            operation: operation(req.operation),
            timeout_ms: req.timeout_ms,
            purpose: req.purpose,
        };
        let name = request.operation.name();
        capability::spawn(caps.spawn, &caps.component, "git").map_err(|d| refused(scope, d))?;
        let prepared =
            caps.spawner.prepare_git(&caps.guard, &request).map_err(|r| refusal(scope, &format!("git {name}"), r))?;
        let PreparedGit { prepared, repo, summary, detail } = prepared;
        let allowed = (prepared.decision == RuleDecision::Allow).then(|| {
            tracing::info!(target: "cheng::process", run = %scope.cx.run, operation = name,
                repository = %repo.top.display(), "git operation allowed by an operator rule without asking");
            Tier::Confined { net: Default::default() }
        });
        let out = approve_and_run(self, prepared, allowed, summary, detail).await?;
        // Read again afterwards, by the same rules (what cannot be read is left out).
        let (branch, head) = repo.head(&self.caps()?.guard).unwrap_or_default();
        Ok(super::convert::write_outcome(out, repo.top_rel, branch, head))
    }
}
