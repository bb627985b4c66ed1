//! A loaded component: its identity (name and SHA-256), the tools its `describe`
//! declared (cached by hash so a warm start runs no guest code), and its
//! `InstancePre`, prepared on first use.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;
use wasmtime::component::Linker;

use super::bindings::{ToolPre, types};
use super::cache::{ComponentCache, sha256_hex};
use super::store::StoreState;
use crate::error::HostError;
use cheng_contract::Needs;

/// One tool as its component describes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name inside the component.
    pub name: String,
    /// The description for the model.
    pub description: String,
    /// JSON Schema of the input.
    pub input_schema: serde_json::Value,
    /// JSON Schema of the output.
    pub output_schema: serde_json::Value,
    /// Declared needs.
    pub needs: Needs,
}

impl ToolSpec {
    fn from_wit(spec: types::ToolSpec) -> Result<Self, String> {
        let parse = |what: &str, text: &str| {
            serde_json::from_str::<serde_json::Value>(text)
                .map_err(|e| format!("tool \"{}\" has an invalid {what} schema: {e}", spec.name))
        };
        let valid_name = !spec.name.is_empty()
            && spec.name.len() <= 64
            && spec.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(format!("tool name \"{}\" is not of the form [a-zA-Z0-9_-]{{1,64}}", spec.name));
        }
        Ok(ToolSpec {
            input_schema: crate::schema::portable(parse("input", &spec.input_schema)?),
            output_schema: crate::schema::portable(parse("output", &spec.output_schema)?),
            needs: Needs { fs: spec.needs.fs.into(), spawn: spec.needs.spawn, network: spec.needs.network },
            name: spec.name,
            description: spec.description,
        })
    }
}

/// Where a component's bytes come from.
#[derive(Clone)]
pub enum Source {
    /// Embedded in the binary, with its SHA-256 computed at build time.
    Static(&'static [u8], &'static str),
    /// Supplied at load time (a plugin file).
    Owned(Arc<Vec<u8>>),
}

impl Source {
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Source::Static(b, _) => b,
            Source::Owned(b) => b,
        }
    }
}

/// A component known to the host.
pub struct LoadedComponent {
    /// Its name (built-in family or plugin id).
    pub name: String,
    /// SHA-256 of its bytes.
    pub sha256: String,
    /// Its tools.
    pub tools: Vec<ToolSpec>,
    /// What the operator granted it (built-ins: their declared needs).
    pub grant: crate::grant::Grant,
    /// The hosts it may reach over `wasi:http`: built-ins that declare network needs
    /// reach public hosts; a plugin reaches its `net` grant; others nothing.
    pub reach: crate::egress::Reach,
    /// Its environment: settings the host gives it (the web component's `[web]`
    /// settings, never a secret); empty for others.
    pub env: Vec<(String, String)>,
    source: Source,
    pre: OnceCell<ToolPre<StoreState>>,
}

/// Limits for running `describe`: no files, little memory, a short deadline.
const DESCRIBE_MEMORY: usize = 64 << 20;
const DESCRIBE_CPU: Duration = Duration::from_secs(10);

impl LoadedComponent {
    /// Whether it is embedded in the host (a built-in), not a plugin loaded from a file.
    pub fn is_builtin(&self) -> bool {
        matches!(self.source, Source::Static(..))
    }

    /// Load a component: its tools come from the describe cache when present, else from
    /// `known` (a built-in's description recorded with the source, so a fresh state
    /// directory lists the tools without compiling anything), else from running its
    /// `describe` once in a sandbox with no filesystem. The component itself is compiled
    /// when first called (or warmed up ahead: [`crate::Host::warm_up`]).
    pub async fn load(
        name: &str,
        source: Source,
        known: Option<Vec<ToolSpec>>,
        engine: &wasmtime::Engine,
        linker: &Linker<StoreState>,
        cache: &ComponentCache,
        on_compile: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Self, HostError> {
        let sha256 = match &source {
            Source::Static(_, sha) => sha.to_string(),
            Source::Owned(bytes) => sha256_hex(bytes),
        };
        let describe_file = cache.dir().map(|d| d.join(format!("{sha256}.describe.json")));
        let cached: Option<Vec<ToolSpec>> = describe_file
            .as_ref()
            // A recorded list that is missing, not a regular file, over its cap or damaged
            // is a miss: the component describes itself again.
            .and_then(|f| crate::policy::hostfile::read(f, crate::policy::hostfile::CACHE_META).ok())
            .and_then(|b| serde_json::from_slice(&b).ok())
            .or(known);
        let me = LoadedComponent {
            name: name.to_string(),
            sha256,
            tools: Vec::new(),
            grant: crate::grant::Grant::builtin(),
            reach: crate::egress::Reach::Nothing,
            env: Vec::new(),
            source,
            pre: OnceCell::new(),
        };
        let reach_of = |tools: &[ToolSpec]| match tools.iter().any(|t| !t.needs.network.is_empty()) {
            true => crate::egress::Reach::Public,
            false => crate::egress::Reach::Nothing,
        };
        if let Some(mut tools) = cached {
            // A description cached by an older host is made portable as a fresh one is.
            for t in &mut tools {
                t.input_schema = crate::schema::portable(std::mem::take(&mut t.input_schema));
                t.output_schema = crate::schema::portable(std::mem::take(&mut t.output_schema));
            }
            return Ok(LoadedComponent { reach: reach_of(&tools), tools, ..me });
        }
        let pre = me.pre(engine, linker, cache, on_compile).await?.clone();
        let specs = super::call::describe(engine, &pre, DESCRIBE_MEMORY, DESCRIBE_CPU)
            .await
            .map_err(|reason| HostError::Component { name: name.to_string(), reason })?;
        let mut tools = Vec::new();
        for s in specs {
            tools
                .push(ToolSpec::from_wit(s).map_err(|reason| HostError::Component { name: name.to_string(), reason })?);
        }
        if let Some(f) = &describe_file
            && let Ok(json) = serde_json::to_vec(&tools)
        {
            let _ = crate::atomic::write_atomic(f, &json);
        }
        Ok(LoadedComponent { reach: reach_of(&tools), tools, ..me })
    }

    /// The prepared instance, compiling (or loading from the cache) on first use.
    pub async fn pre(
        &self,
        engine: &wasmtime::Engine,
        linker: &Linker<StoreState>,
        cache: &ComponentCache,
        on_compile: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<&ToolPre<StoreState>, HostError> {
        self.pre
            .get_or_try_init(|| async {
                let (component, _) = cache.load(engine, &self.name, self.source.bytes(), &self.sha256, on_compile)?;
                let err =
                    |e: wasmtime::Error| HostError::Component { name: self.name.clone(), reason: format!("{e:#}") };
                #[cfg(not(feature = "web"))]
                if let Some(http) =
                    component.component_type().imports(engine).map(|(name, _)| name).find(|n| n.starts_with("wasi:http/"))
                {
                    return Err(HostError::Component {
                        name: self.name.clone(),
                        reason: format!(
                            "it imports {http}, and this host is built without the `web` feature (the component-side HTTP \
                             client); build cheng-host with `--features web`"
                        ),
                    });
                }
                let instance_pre = linker.instantiate_pre(&component).map_err(err)?;
                ToolPre::new(instance_pre).map_err(err)
            })
            .await
    }
}

/// Without the `web` feature no `wasi:http` is linked: a component importing it is
/// refused when it is prepared, naming the feature.
#[cfg(all(test, not(feature = "web")))]
mod without_web {
    use super::*;
    use crate::runtime::engine::EngineHandle;

    #[tokio::test]
    async fn a_component_importing_wasi_http_is_refused_naming_the_feature() {
        let engine = EngineHandle::new().unwrap();
        let mut linker = Linker::<StoreState>::new(engine.engine());
        crate::runtime::bindings::add_to_linker(&mut linker).unwrap();
        let cache = ComponentCache::new(None);
        let load = |text: &str| {
            let bytes = wat::parse_str(text).unwrap();
            LoadedComponent::load(
                "net",
                Source::Owned(Arc::new(bytes)),
                None,
                engine.engine(),
                &linker,
                &cache,
                &|_| {},
            )
        };
        let e = load(r#"(component (import "wasi:http/outgoing-handler@0.2.6" (instance)))"#).await.err().unwrap();
        let e = e.to_string();
        assert!(e.contains("wasi:http/outgoing-handler@0.2.6") && e.contains("`web` feature"), "{e}");
        // Control: a component without that import gets past the check (and fails later,
        // for exporting no tools).
        let e = load("(component)").await.err().unwrap().to_string();
        assert!(!e.contains("`web` feature"), "{e}");
    }
}
