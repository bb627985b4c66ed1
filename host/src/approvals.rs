//! Approvals: how a component's request for a person's consent is answered.
//!
//! Embedders answer through the [`Approver`] trait; the default refuses everything, so
//! an embedding that forgot to wire one up fails closed. A request that gets no answer
//! within the configured wait is treated as refused.
//!
//! # Example
//!
//! ```
//! use cheng_host::approvals::{Approver, ApprovalRequest, Decision};
//!
//! struct YesToLs;
//! impl Approver for YesToLs {
//!     fn decide<'a>(&'a self, req: &'a ApprovalRequest)
//!         -> std::pin::Pin<Box<dyn std::future::Future<Output = Decision> + Send + 'a>> {
//!         Box::pin(async move {
//!             if req.summary.starts_with("ls") { Decision::Approved } else { Decision::Declined }
//!         })
//!     }
//! }
//! ```

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

/// A request for approval, as shown to the person answering it.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalRequest {
    /// Unique id.
    pub id: String,
    /// The run the call belongs to.
    pub run: String,
    /// The caller's role.
    pub role: String,
    /// The tool asking.
    pub tool: String,
    /// One line (e.g. a command's first line, truncated).
    pub summary: String,
    /// The exact action (e.g. the full command and its working directory).
    pub detail: String,
    /// Why it is needed.
    pub purpose: String,
}

/// The answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Go ahead.
    Approved,
    /// Refused by a person.
    Declined,
    /// Nobody answered within the wait.
    TimedOut,
    /// Nobody could be asked (no terminal, no approver).
    NoApprover,
}

/// Something that answers approval requests. The default method refuses.
pub trait Approver: Send + Sync {
    /// Decide on a request. The host applies its own timeout around this.
    fn decide<'a>(
        &'a self,
        req: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        let _ = req;
        Box::pin(async { Decision::NoApprover })
    }
}

/// The approver used when none is configured: refuses at once.
#[derive(Debug, Default, Clone, Copy)]
pub struct RefuseAll;

impl Approver for RefuseAll {}

/// Approves everything (auto-approve). Only for unattended runs the operator chose.
#[derive(Debug, Default, Clone, Copy)]
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn decide<'a>(
        &'a self,
        _req: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(async { Decision::Approved })
    }
}
