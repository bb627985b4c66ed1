//! `cheng:tool/approval`: ask the configured approver, bounded by the approval timeout.
//! Time spent waiting is not guest computing time, so it is taken off the CPU budget.

use std::time::Instant;

use super::generated::cheng::tool::approval::{ApprovalRequest, Decision, Host};
use crate::approvals::{self, Decision as D};
use crate::runtime::store::StoreState;

impl Host for StoreState {
    async fn request(&mut self, req: ApprovalRequest) -> Decision {
        let started = Instant::now();
        let card = approvals::ApprovalRequest {
            id: uuid::Uuid::new_v4().to_string(),
            run: self.call.run.clone(),
            role: self.call.role.clone(),
            tool: self.call.tool.clone(),
            summary: req.summary,
            detail: req.detail,
            purpose: req.purpose,
        };
        let approver = self.call.approver.clone();
        let wait = self.call.approval_timeout;
        let decision = match tokio::time::timeout(wait, approver.decide(&card)).await {
            Ok(d) => d,
            Err(_) => {
                tracing::info!(target: "approvals", id = %card.id, tool = %card.tool, wait_ms = wait.as_millis() as u64, "approval timed out; treated as refused");
                D::TimedOut
            }
        };
        self.budget.add_wait(started.elapsed());
        tracing::info!(target: "approvals", id = %card.id, tool = %card.tool, decision = ?decision, "approval answered");
        match decision {
            D::Approved => Decision::Approved,
            D::TimedOut => Decision::TimedOut,
            D::Declined | D::NoApprover => Decision::Declined,
        }
    }
}
