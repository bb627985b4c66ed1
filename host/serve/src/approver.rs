//! Approvals answered through the MCP client (`[serve] approvals_via_client = true`):
//! while a call runs, its run is attached to the client that made it; a card for that
//! run is sent to the client as an elicitation when the client can show one: a form with
//! a yes/no field, for a command whose card offers it a `scope` field (`once` or `run`:
//! "always" and full access are the operator's, never offered here), and a `message`
//! for a no. Accepting with "yes" approves, confined with the hosts the card proposes;
//! anything else — decline, cancel, no answer, an error — declines. A client without the capability (or on the stateless
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

use cheng_host::approvals::{Answer, ApprovalRequest, Approver, Decision, Route, Scope};

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

/// The form a client shows: the card, one required yes/no answer, for a command that
/// may be remembered the scope (once or this run), and a message for a no.
fn form(req: &ApprovalRequest) -> ElicitRequestParams {
    let mut properties = serde_json::json!({
        "approve": {"type": "boolean", "title": "Approve", "description": "Let this run?", "default": false},
        "message": {"type": "string", "title": "Message", "description": "If not: what should the agent do instead?"}
    });
    let run_offered = req.offer.as_ref().is_some_and(|o| o.scopes.contains(&Scope::Run));
    if run_offered {
        properties["scope"] = serde_json::json!({
            "type": "string", "title": "For", "enum": ["once", "run"], "enumNames": ["this command", "the rest of this run"],
            "default": "once"
        });
    }
    let schema = schema_of(properties).unwrap_or_else(|| {
        tracing::warn!(target: "approvals", "the elicitation form could not be built; asking yes or no only");
        schema_of(serde_json::json!({"approve": {"type": "boolean", "title": "Approve", "default": false}}))
            .unwrap_or_else(|| ElicitationSchema::new(Default::default()))
    });
    let mut message = format!(
        "Approval requested by {} (role {}, run {}):\nsummary: {}\ndetail: {}\npurpose: {}",
        req.tool, req.role, req.run, req.summary, req.detail, req.purpose
    );
    if let Some(offer) = &req.offer {
        match offer.hosts.as_slice() {
            [] => message.push_str("\nA yes runs it confined: the workspace and toolchains, no network."),
            hosts => {
                message.push_str(&format!("\nA yes runs it confined, with the network to {} only.", hosts.join(", ")))
            }
        }
        if run_offered && let Some(p) = offer.prefixes.iter().find(|p| p.words == offer.prefix) {
            message.push_str(&format!("\n\"For the rest of this run\" lets {} run unasked in this run.", p.text));
        }
    }
    ElicitRequestParams::FormElicitationParams { meta: None, message, requested_schema: schema }
}

fn schema_of(properties: serde_json::Value) -> Option<ElicitationSchema> {
    serde_json::from_value(serde_json::json!({"type": "object", "properties": properties, "required": ["approve"]}))
        .ok()
}

impl Approver for ClientApprover {
    fn name(&self) -> &str {
        "mcp-client"
    }

    fn route(&self) -> Route {
        Route::Client
    }

    fn decide<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(async move { self.answer(req).await.decision })
    }

    fn answer<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Answer> + Send + 'a>> {
        Box::pin(async move {
            let Some(peer) = self.peer(&req.run) else { return Decision::NoApprover.into() };
            match peer.create_elicitation(form(req)).await {
                Ok(r) if r.action == ElicitationAction::Accept => {
                    let content = r.content.as_ref();
                    let field = |k: &str| content.and_then(|c| c.get(k));
                    match field("approve").and_then(|v| v.as_bool()) {
                        Some(true) => {
                            // Only "once" and "this run" are offered here; anything else
                            // is passed on as asked, and the broker refuses it (a no).
                            let scope = match field("scope").and_then(|v| v.as_str()) {
                                None | Some("once") => Scope::Once,
                                Some("run") => Scope::Run,
                                Some(_) => Scope::Always,
                            };
                            Answer { scope, ..Answer::yes() }
                        }
                        _ => match field("message").and_then(|v| v.as_str()) {
                            Some(m) if !m.trim().is_empty() => Answer::decline_with(m),
                            _ => Answer::no(),
                        },
                    }
                }
                Ok(_) => Answer::no(),
                Err(e) => {
                    tracing::info!(target: "approvals", run = %req.run, "the client could not be asked: {e}");
                    Decision::NoApprover.into()
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cheng_host::approvals::{Offer, Tier};

    #[test]
    fn the_form_offers_once_or_this_run_and_a_message() {
        let mut req = ApprovalRequest::new("r", "dev", "workspace_shell", "cargo test", "cargo test (in /w)", "");
        req.offer = Some(Offer {
            scopes: vec![Scope::Once, Scope::Run, Scope::Always],
            tiers: vec![Tier::Confined, Tier::Hosts, Tier::Full],
            ..Default::default()
        });
        let ElicitRequestParams::FormElicitationParams { requested_schema, message, .. } = form(&req) else {
            panic!("a form")
        };
        let v = serde_json::to_value(&requested_schema).unwrap();
        assert_eq!(v["properties"]["scope"]["enum"], serde_json::json!(["once", "run"]), "{v}");
        assert!(v["properties"]["message"].is_object() && v["properties"]["approve"].is_object(), "{v}");
        assert!(message.contains("confined"), "{message}");
        // A card answered once only has no scope field.
        req.offer = Some(Offer { scopes: vec![Scope::Once], ..Default::default() });
        let ElicitRequestParams::FormElicitationParams { requested_schema, .. } = form(&req) else { panic!() };
        assert!(serde_json::to_value(&requested_schema).unwrap()["properties"].get("scope").is_none());
    }
}
