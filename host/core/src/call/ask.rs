//! The one approval path. Every source that needs a person's yes — a command, a git
//! write, a tool of an MCP server, a component asking directly — calls
//! [`CallScope::ask`]: the card goes to the broker, the wait ends with the answer or the
//! call's cancellation, the outcome goes into the call's record, and an answer other
//! than yes becomes the denial the caller built (recorded here, once).

use crate::approvals::{ApprovalRequest, Broker, Decision, Granted};
use crate::capability::Denial;

use super::CallScope;

/// How an approval ended, for the caller to turn into its own result.
#[derive(Debug)]
pub enum Answer {
    /// Yes. `asked` is false when the broker approved without asking anyone.
    Go {
        /// Whether a person saw the card.
        asked: bool,
        /// What the yes chose: scope, tier, hosts, prefix.
        granted: Granted,
        /// The request's id.
        id: String,
    },
    /// The call was cancelled while it waited; nothing was decided.
    Cancelled,
    /// No: declined, timed out, nobody to ask, or withdrawn. The denial is on the
    /// call's record already.
    Refused {
        /// The broker's decision.
        decision: Decision,
        /// The denial recorded for it.
        denial: Denial,
    },
}

/// Why an answer that is not yes was not yes, as a clause for the model's sentence
/// (empty for a plain no).
pub fn why_not(decision: Decision) -> &'static str {
    match decision {
        Decision::TimedOut => " (nobody answered in time)",
        Decision::NoApprover => " (nobody could be asked)",
        Decision::Withdrawn => " (the call ended before an answer)",
        _ => "",
    }
}

impl CallScope {
    /// Ask a person with `card` (made the call's own here), waiting for the answer or
    /// this call's cancellation. A refusal is `refusal(decision)`, a denial built by the
    /// capability layer (most with [`why_not`]'s clause), and is recorded as the host's.
    pub async fn ask(
        &self,
        broker: &Broker,
        card: ApprovalRequest,
        refusal: impl FnOnce(Decision) -> Denial,
    ) -> Answer {
        let card = card.of_call(&self.cx);
        let outcome = tokio::select! {
            o = broker.request(card) => o,
            _ = self.cx.cancel.cancelled() => return Answer::Cancelled,
        };
        let decision = outcome.decision;
        let (granted, id) = (outcome.granted.clone(), outcome.id.clone());
        self.approval(outcome);
        match decision {
            Decision::Approved => Answer::Go { asked: true, granted, id },
            Decision::AutoApproved => Answer::Go { asked: false, granted, id },
            _ => {
                let mut denial = refusal(decision);
                if let Some(m) = &granted.message {
                    // What the person asked for instead reaches the model, as one line.
                    denial.message.push_str(&format!(
                        " The person who declined said: \"{}\"",
                        cheng_contract::text::escape_line(m)
                    ));
                }
                self.deny(denial.clone());
                Answer::Refused { decision, denial }
            }
        }
    }

    /// A card for this call: its run, role and tool, with `summary`, `detail` and
    /// `purpose`.
    pub fn card(&self, summary: String, detail: String, purpose: String) -> ApprovalRequest {
        ApprovalRequest::new(&self.cx.run, &self.cx.role, &self.tool, summary, detail, purpose)
    }
}
