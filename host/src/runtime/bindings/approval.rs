//! `cheng:tool/approval`: ask the approvals broker. Time spent waiting is not guest
//! computing time, so it is taken off the CPU budget; the outcome goes into the call's
//! record, and an answer other than yes is recorded as the host's denial.

use std::time::Instant;

use super::ChengView;
use super::generated::cheng::tool::approval::{ApprovalRequest, Decision, Host};
use crate::call::Answer;
use crate::capability;

impl Host for ChengView<'_> {
    async fn request(&mut self, req: ApprovalRequest) -> wasmtime::Result<Decision> {
        let Ok(caps) = self.caps() else { return Ok(Decision::Declined) };
        let started = Instant::now();
        let scope = caps.scope.clone();
        let summary = req.summary.clone();
        let card = scope.card(req.summary, req.detail, req.purpose);
        let answer = scope.ask(&caps.broker, card, |d| capability::asked_approval(&summary, d.as_str())).await;
        self.ctx.budget.add_wait(started.elapsed());
        Ok(match answer {
            Answer::Go { .. } => Decision::Approved,
            Answer::Cancelled => Decision::Declined,
            Answer::Refused { decision, .. } => decision.into(),
        })
    }
}
