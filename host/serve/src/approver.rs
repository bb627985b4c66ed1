//! Approvals answered through the MCP client (`[serve] approvals_via_client = true`):
//! while a call runs, its run is attached to the client that made it; a card for that
//! run is sent to the client as an elicitation (a form with one yes/no field) when the
//! client can show one. Accepting with "yes" approves; anything else — decline, cancel,
//! no answer, an error — declines. A client without the capability (or on the stateless
//! 2026-07-28 revision, which has no server-to-client requests) is not asked: the other
//! answer paths (the console, the terminal) and the timeout decide. Whatever path
//! answers first wins; the broker applies it once and records it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema, ProtocolVersion};
use rmcp::service::{Peer, RequestContext};

use cheng_host::approvals::{ApprovalRequest, Approver, Decision};

/// The runs whose clients may be asked, and how to reach them.
#[derive(Default)]
pub struct ClientApprover {
    peers: Mutex<HashMap<String, (Peer<RoleServer>, usize)>>,
}

/// Keeps a run attached to its client while a call runs.
pub struct Attached {
    approver: Arc<ClientApprover>,
    run: String,
}

impl Drop for Attached {
    fn drop(&mut self) {
        let mut peers = self.approver.peers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, n)) = peers.get_mut(&self.run) {
            *n -= 1;
            if *n == 0 {
                peers.remove(&self.run);
            }
        }
    }
}

impl ClientApprover {
    /// Attach `run` to the client of `cx` while the returned guard lives — when that
    /// client can show an elicitation; `None` when it cannot.
    pub fn attach(self: &Arc<Self>, run: &str, cx: &RequestContext<RoleServer>) -> Option<Attached> {
        let stateless = cx.protocol_version().is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let can = cx.client_capabilities().is_some_and(|c| c.elicitation.is_some());
        if stateless || !can {
            return None;
        }
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let entry = peers.entry(run.to_string()).or_insert_with(|| (cx.peer.clone(), 0));
        entry.1 += 1;
        Some(Attached { approver: self.clone(), run: run.to_string() })
    }

    fn peer(&self, run: &str) -> Option<Peer<RoleServer>> {
        self.peers.lock().unwrap_or_else(|p| p.into_inner()).get(run).map(|(p, _)| p.clone())
    }
}

/// The form a client shows: the card, and one required yes/no answer.
fn form(req: &ApprovalRequest) -> ElicitRequestParams {
    let schema: ElicitationSchema = serde_json::from_value(serde_json::json!({
        "type": "object",
        "properties": {
            "approve": {"type": "boolean", "title": "Approve", "description": "Let this run?", "default": false}
        },
        "required": ["approve"]
    }))
    .unwrap_or_else(|_| ElicitationSchema::new(Default::default()));
    let message = format!(
        "Approval requested by {} (role {}, run {}):\nsummary: {}\ndetail: {}\npurpose: {}",
        req.tool, req.role, req.run, req.summary, req.detail, req.purpose
    );
    ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: schema }
}

impl Approver for ClientApprover {
    fn name(&self) -> &str {
        "mcp-client"
    }

    fn decide<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(async move {
            let Some(peer) = self.peer(&req.run) else { return Decision::NoApprover };
            match peer.create_elicitation(form(req)).await {
                Ok(r) if r.action == ElicitationAction::Accept => {
                    match r.content.as_ref().and_then(|c| c.get("approve")).and_then(|v| v.as_bool()) {
                        Some(true) => Decision::Approved,
                        _ => Decision::Declined,
                    }
                }
                Ok(_) => Decision::Declined,
                Err(e) => {
                    tracing::info!(target: "approvals", run = %req.run, "the client could not be asked: {e}");
                    Decision::NoApprover
                }
            }
        })
    }
}
