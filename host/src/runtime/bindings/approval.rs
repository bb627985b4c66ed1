//! `cheng:tool/approval`: ask the approvals broker. Time spent waiting is not guest
//! computing time, so it is taken off the CPU budget; the outcome goes into the call's
//! record.

use std::time::Instant;

use super::generated::cheng::tool::approval::{ApprovalRequest, Decision, Host};
use crate::approvals::{self, Decision as D};
use crate::runtime::store::StoreState;

impl Host for StoreState {
    async fn request(&mut self, req: ApprovalRequest) -> Decision {
        let started = Instant::now();
        let card = approvals::ApprovalRequest {
            id: crate::new_id(),
            run: self.call.run.clone(),
            role: self.call.role.clone(),
            tool: self.call.tool.clone(),
            summary: req.summary,
            detail: req.detail,
            purpose: req.purpose,
        };
        let outcome = self.call.broker.request(card).await;
        self.budget.add_wait(started.elapsed());
        let decision = outcome.decision;
        self.call.approvals.lock().unwrap_or_else(|p| p.into_inner()).push(outcome);
        match decision {
            D::Approved | D::AutoApproved => Decision::Approved,
            D::TimedOut => Decision::TimedOut,
            D::Declined | D::NoApprover => Decision::Declined,
        }
    }
}
