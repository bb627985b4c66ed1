//! The host side of the `tool` world: generated bindings, the state the imports work
//! on, and one file per imported interface.
//!
//! | interface | file | what the host does |
//! |---|---|---|
//! | `cheng:tool/approval` | [`approval`] | asks the approvals broker |
//! | `cheng:tool/fs` | [`fs`] | reads, listings, atomic writes and removals through the guard, within the grant |
//! | `cheng:tool/process` | [`process`] | policy, approval, then a confined, bounded child |
//! | `cheng:tool/git` | [`git`] | checked git operations: rules or approval, then the host's git, confined |
//! | `cheng:tool/run-state` | [`run_state`] | per-run data, scoped to the component |
//! | `cheng:tool/log` | [`log`] | guest log lines into `tracing` |
//! | `wasi:http/outgoing-handler` | [`http`] | the egress guard, then a connection to the checked address |
//!
//! WASI comes from `wasmtime-wasi` (`p2`), limited per call by the store's context;
//! `wasi:http` from `wasmtime-wasi-http`, with the host's own hook sending requests.
//!
//! The shape is wasmtime's: a state struct ([`ChengCtx`]), a borrowed view
//! ([`ChengView`]) on which every generated `Host` trait is implemented, a trait the
//! embedder's store data implements to hand out the view ([`ChengHostView`]), and
//! [`add_to_linker`]. The interfaces have no resources, so the view holds no table.
//! A store made to run `describe` has no call (`ChengCtx::describe`): every import
//! then refuses, and nothing stands in for a broker or a spawner.
//!
//! Every import that can fail returns [`ImportError`] (bindgen's trappable error type):
//! a [`types::Failure`] goes to the guest as its typed error; a [`ImportError::Fault`],
//! a host bug found inside the import, traps the guest instead, and the call ends as
//! "crashed" with the fault named — never a wrong answer, never a hang. (A host panic
//! inside an import ends the same way: `runtime::call` catches it.)

pub mod approval;
mod convert;
pub mod fs;
pub mod git;
pub mod http;
pub mod log;
pub mod process;
pub mod run_state;

#[allow(missing_docs)]
mod generated {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "cheng:tool/tool",
        // Every import may trap: one that returns `result<_, failure>` through
        // `ImportError`, the others through an outer `wasmtime::Result`.
        imports: { default: async | trappable },
        exports: { default: async },
        trappable_error_type: { "cheng:tool/types.failure" => crate::runtime::bindings::ImportError },
    });
}

use std::sync::Arc;

pub(crate) use convert::failure;
pub use generated::Tool;
pub use generated::ToolPre;
pub use generated::cheng::tool::types;
use wasmtime::component::{HasData, Linker};

use crate::approvals::Broker;
use crate::call::CallScope;
use crate::grant::Mount;
use crate::guard::Guard;
use crate::process::Spawner;
use crate::runstate::RunState;
use crate::runtime::store::CpuBudget;

/// What the imports may use for the call in progress: its scope (record, denials,
/// approvals, cancellation) and the capabilities its grant resolved to.
pub(crate) struct CallCaps {
    /// The call.
    pub scope: Arc<CallScope>,
    /// The component's name (for logs and run-state scoping).
    pub component: String,
    /// The workspace guard.
    pub guard: Arc<Guard>,
    /// What the component has mounted, for host-side filesystem requests.
    pub mounts: Vec<Mount>,
    /// Workspace-relative paths no tool writes (besides `.git`).
    pub protected: Vec<String>,
    /// The path rules: which reads and writes ask a person or are refused.
    pub file_rules: Arc<crate::policy::files::FileRules>,
    /// Whether the component is a built-in git component, which reads `.git` and the
    /// files the rules protect from reading (to hash and compare, never to show).
    pub reads_git: bool,
    /// Protected files a person let this call read or write (`read:<path>`).
    pub paths_answered: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Whether the component may ask for processes.
    pub spawn: bool,
    /// Per-run state.
    pub run_state: RunState,
    /// Starts processes.
    pub spawner: Arc<Spawner>,
    /// The approvals broker.
    pub broker: Broker,
    /// Run the fs imports' long blocking work on the call's async worker, as before it
    /// moved to the blocking threads (the benchmark's "before" only).
    pub fs_on_worker: bool,
}

/// The state of the host's imports in one store.
pub struct ChengCtx {
    pub(crate) call: Option<CallCaps>,
    pub(crate) budget: CpuBudget,
}

impl ChengCtx {
    pub(crate) fn for_call(call: CallCaps, budget: CpuBudget) -> ChengCtx {
        ChengCtx { call: Some(call), budget }
    }

    /// For a component describing itself: no call, so every import refuses.
    pub(crate) fn describe(budget: CpuBudget) -> ChengCtx {
        ChengCtx { call: None, budget }
    }

    /// The guest's computing time budget.
    pub(crate) fn budget(&self) -> &CpuBudget {
        &self.budget
    }
}

/// A borrowed view of a store's [`ChengCtx`]; the generated `Host` traits are
/// implemented on it.
pub struct ChengView<'a> {
    /// The state.
    pub ctx: &'a mut ChengCtx,
}

impl ChengView<'_> {
    /// The call's capabilities, or the refusal an import gives while a component
    /// describes itself.
    fn caps(&self) -> Result<&CallCaps, types::Failure> {
        self.ctx.call.as_ref().ok_or_else(|| {
            failure(
                cheng_contract::ErrorKind::NotGranted,
                "host services are not available while a component describes itself",
            )
        })
    }
}

/// Record `d` as the host's denial in `scope`'s record and return it as the guest's
/// failure (terminal: the same request will be refused again).
pub(crate) fn refused(scope: &CallScope, d: crate::capability::Denial) -> types::Failure {
    let f = denied(&d);
    scope.deny(d);
    f
}

/// A denial as the guest's failure (terminal: the same request will be refused again).
pub(crate) fn denied(d: &crate::capability::Denial) -> types::Failure {
    types::Failure { kind: d.kind.into(), message: d.message.clone(), terminal: true }
}

/// Store data that holds a [`ChengCtx`].
pub trait ChengHostView: Send {
    /// The view of this store's import state.
    fn cheng(&mut self) -> ChengView<'_>;
}

struct HasCheng;

impl HasData for HasCheng {
    type Data<'a> = ChengView<'a>;
}

/// What a failing import returns: the guest's typed failure, or a fault of the host's
/// own that must not reach the guest as an answer.
#[derive(Debug)]
pub enum ImportError {
    /// A failure the guest receives (`result::err`).
    Failure(types::Failure),
    /// A host bug found inside the import: the guest traps and the call is "crashed".
    Fault(wasmtime::Error),
}

impl From<types::Failure> for ImportError {
    fn from(f: types::Failure) -> Self {
        ImportError::Failure(f)
    }
}

/// A host fault found inside an import, as the trap it becomes: `what` says what went
/// wrong, for the record and the operator.
pub(crate) fn fault(what: impl std::fmt::Display) -> wasmtime::Error {
    wasmtime::Error::msg(format!("a host fault inside a host service: {what}"))
}

impl types::Host for ChengView<'_> {
    fn convert_failure(&mut self, err: ImportError) -> wasmtime::Result<types::Failure> {
        match err {
            ImportError::Failure(f) => Ok(f),
            ImportError::Fault(e) => {
                tracing::error!(target: "cheng::host", "{e:#}");
                Err(e)
            }
        }
    }
}

/// What a store's state gives the linked imports: Cheng's own and WASI's, and with the
/// `web` feature `wasi:http`'s.
#[cfg(feature = "web")]
pub trait LinkedView: ChengHostView + wasmtime_wasi::WasiView + wasmtime_wasi_http::WasiHttpView {}
#[cfg(feature = "web")]
impl<T: ChengHostView + wasmtime_wasi::WasiView + wasmtime_wasi_http::WasiHttpView> LinkedView for T {}
/// What a store's state gives the linked imports: Cheng's own and WASI's, and with the
/// `web` feature `wasi:http`'s.
#[cfg(not(feature = "web"))]
pub trait LinkedView: ChengHostView + wasmtime_wasi::WasiView {}
#[cfg(not(feature = "web"))]
impl<T: ChengHostView + wasmtime_wasi::WasiView> LinkedView for T {}

/// Add the `tool` world's imports and WASI to `linker` (and `wasi:http` with the `web`
/// feature; without it, a component importing `wasi:http` does not link).
pub fn add_to_linker<T: LinkedView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    #[cfg(feature = "web")]
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)?;
    Tool::add_to_linker::<T, HasCheng>(linker, |t| t.cheng())?;
    Ok(())
}
