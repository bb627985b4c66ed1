//! Cheng's call core: what one tool call is and carries, below everything that runs one.
//!
//! A [`Context`] says who calls, in which workspace and for which run; a
//! [`call::CallScope`] carries one call from admission to its record. Around it, the
//! checks every call goes through, none of which runs a component, a process or a
//! connection:
//!
//! - [`guard`]: the workspace path guard (every path a tool names, resolved without
//!   following a link out), and its crash-safe writes;
//! - [`capability`]: every grant check, with typed denials;
//! - [`approvals`]: the broker, the [`approvals::Approver`] trait, and the answers that
//!   remember (for a run, or as a rule);
//! - [`records`]: call records and the audit log's hash chain;
//! - [`call`]: the one approval path, the record sink and the sentences a model reads
//!   when a call fails;
//! - [`runstate`]: per-run data for components; [`atomic`]: the host's own file writes;
//!   [`trace`]: W3C trace context read from callers and sent on.
//!
//! The crate sits on the operator policy ([`policy`], the cheng-policy crate) and the
//! contract (cheng-contract); `cheng-host` (processes, egress, the engine, the pipeline)
//! builds on it, so nothing here can reach up into them: cargo refuses the import.
//! `cheng-host` re-exports every module, so embedders use them as `cheng_host::guard` and
//! so on.
//!
//! # Features
//!
//! - `telemetry`: the caller's trace context continued and sent on ([`trace`]); without
//!   it there is none, and [`trace::TraceContext`] has no values.
#![deny(missing_docs)]

pub mod approvals;
pub mod atomic;
pub mod call;
pub mod capability;
mod context;
pub mod guard;
pub mod records;
pub mod runstate;
#[doc(hidden)]
pub mod testing;
pub mod trace;

pub use cheng_contract::ErrorKind;
pub use cheng_policy as policy;
pub use cheng_policy::grant;
pub use context::{Context, ToolResult, new_id, unix_ms};
pub use records::{CallRecord, Status};
