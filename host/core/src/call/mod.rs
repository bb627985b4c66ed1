//! One call in progress, below every stage that runs it: its `CallScope` (who asks,
//! what it waited on, what was refused, where its record goes), the `RecordSink` that
//! takes its records, the one approval path every source asks through (`CallScope::ask`)
//! and the sentences a model reads when a call fails ([`say`]).
//!
//! The pipeline, the runtime's bindings and the MCP sources all build on this module;
//! it knows none of them.

mod ask;
pub mod say;
mod scope;
mod sink;

pub use ask::{Answer, why_not};
pub use scope::{CallScope, MAX_REQUESTS_PER_CALL, NetRequest};
pub use sink::RecordSink;
