//! The host side of the `tool` world: generated bindings, and one file per imported
//! interface.
//!
//! | interface | file | what the host does |
//! |---|---|---|
//! | `cheng:tool/approval` | [`approval`] | asks the approvals broker |
//! | `cheng:tool/fs` | [`fs`] | atomic writes and removals through the guard, within the grant |
//! | `cheng:tool/process` | [`process`] | policy, approval, then a confined, bounded child ([`crate::process`]) |
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

/// The WIT form of an error kind.
pub fn kind_to_wit(k: crate::ErrorKind) -> types::ErrorKind {
    use crate::ErrorKind as K;
    use types::ErrorKind as W;
    match k {
        K::InvalidArgument => W::InvalidArgument,
        K::PathRefused => W::PathRefused,
        K::NotFound => W::NotFound,
        K::NotGranted => W::NotGranted,
        K::ApprovalDenied => W::ApprovalDenied,
        K::CommandNotAllowed => W::CommandNotAllowed,
        K::ShellSyntaxDisabled => W::ShellSyntaxDisabled,
        K::SpawnFailed => W::SpawnFailed,
        K::Timeout => W::Timeout,
        K::Cancelled => W::Cancelled,
        K::OutputLimit => W::OutputLimit,
        K::Io => W::Io,
        K::Crashed => W::Crashed,
        K::BinaryFile => W::BinaryFile,
        K::TooLarge => W::TooLarge,
        _ => W::Io,
    }
}

/// Add the `tool` world's imports and WASI to `linker`.
pub fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    Tool::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |s| s)?;
    Ok(())
}
