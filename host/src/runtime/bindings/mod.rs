//! The host side of the `tool` world: generated bindings, and one file per imported
//! interface.
//!
//! | interface | file | what the host does |
//! |---|---|---|
//! | `cheng:tool/approval` | [`approval`] | asks the approvals broker |
//! | `cheng:tool/fs` | [`fs`] | atomic writes and removals through the guard, within the grant |
//! | `cheng:tool/process` | [`process`] | refuses without a spawn grant |
//! | `cheng:tool/run-state` | [`run_state`] | per-run data, scoped to the component |
//! | `cheng:tool/log` | [`log`] | guest log lines into `tracing` |
//!
//! WASI comes from `wasmtime-wasi` (`p2`), limited per call by the store's context.

pub mod approval;
pub mod fs;
pub mod log;
pub mod process;
pub mod run_state;

#[allow(missing_docs)]
mod generated {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "cheng:tool/tool",
        imports: { default: async },
        exports: { default: async },
    });
}

pub use generated::Tool;
pub use generated::ToolPre;
pub use generated::cheng::tool::types;

use wasmtime::component::{HasSelf, Linker};

use crate::runtime::store::StoreState;

impl types::Host for StoreState {}

/// Add the `tool` world's imports and WASI to `linker`.
pub fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    Tool::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |s| s)?;
    Ok(())
}
