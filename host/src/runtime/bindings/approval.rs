//! `cheng:tool/approval`: ask the approvals broker. Time spent waiting is not guest
//! computing time, so it is taken off the CPU budget; the outcome goes into the call's
//! record, and an answer other than yes is recorded as the host's denial.

use std::time::Instant;

use super::ChengView;
use super::generated::cheng::tool::approval::{ApprovalRequest, Decision, Host};
use crate::approvals;
use crate::capability::{Denial, Right};

impl Host for ChengView<'_> {
    async fn request(&mut self, req: ApprovalRequest) -> Decision {
        let Ok(caps) = self.caps() else { return Decision::Declined };
        let started = Instant::now();
        let scope = caps.scope.clone();
        let card = approvals::ApprovalRequest::new(
            &scope.cx.run,
            &scope.cx.role,
            &scope.tool,
            req.summary,
            req.detail,
            req.purpose,
        )
        .of_call(&scope.cx);
        let summary = card.summary.clone();
        let outcome = tokio::select! {
            o = caps.broker.request(card) => Some(o),
            _ = scope.cx.cancel.cancelled() => None,
        };
        self.ctx.budget.add_wait(started.elapsed());
        let Some(outcome) = outcome else { return Decision::Declined };
        let decision = outcome.decision;
        scope.approval(outcome);
        if !decision.approved() {
            scope.deny(Denial::new(
                Right::Approval,
                summary,
                cheng_contract::ErrorKind::ApprovalDenied,
                format!("approval {}", decision.as_str()),
            ));
        }
        decision.into()
    }
}
