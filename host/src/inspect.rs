//! `cheng plugin inspect`: what a component file holds — its SHA-256 (what to pin),
//! its imports (and which of them a plugin may not have), and the tools its `describe`
//! declares — without loading it into a host.

use std::sync::Arc;

use serde::Serialize;
use wasmtime::component::Linker;

use crate::plugins::refused_imports;
use crate::runtime;
use crate::runtime::cache::ComponentCache;
use crate::runtime::component::{LoadedComponent, Source};
use crate::runtime::engine::EngineHandle;
use crate::runtime::store::StoreState;
use crate::{HostError, ToolSpec};

/// What a component file holds, as `cheng plugin inspect` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    /// SHA-256 of the file (what `cheng.toml` pins).
    pub sha256: String,
    /// Size in bytes.
    pub size: usize,
    /// Every import it asks for.
    pub imports: Vec<String>,
    /// Imports beyond the tool world and WASI: a plugin asking for any is refused.
    pub refused_imports: Vec<String>,
    /// The tools its `describe` declares, with schemas and needs.
    pub tools: Vec<ToolSpec>,
}

/// Compile `wasm` and run its `describe` in a sandbox with no filesystem: what a
/// component declares, without loading it into a host.
pub async fn inspect(wasm: &[u8], name: &str) -> Result<Inspection, HostError> {
    let engine = EngineHandle::with_options(runtime::engine::EngineOptions { pooling: false, ..Default::default() })?;
    let err = |e: wasmtime::Error| HostError::Component { name: name.to_string(), reason: format!("{e:#}") };
    let component = wasmtime::component::Component::new(engine.engine(), wasm).map_err(err)?;
    let imports: Vec<String> =
        component.component_type().imports(engine.engine()).map(|(n, _)| n.to_string()).collect();
    let refused = refused_imports(&component, engine.engine());
    let mut tools = Vec::new();
    if refused.is_empty() {
        let mut linker = Linker::<StoreState>::new(engine.engine());
        runtime::bindings::add_to_linker(&mut linker).map_err(err)?;
        let c = LoadedComponent::load(
            name,
            Source::Owned(Arc::new(wasm.to_vec())),
            None,
            engine.engine(),
            &linker,
            &ComponentCache::new(None),
            &|_| {},
        )
        .await?;
        tools = c.tools;
    }
    Ok(Inspection {
        sha256: runtime::cache::sha256_hex(wasm),
        size: wasm.len(),
        imports,
        refused_imports: refused,
        tools,
    })
}
