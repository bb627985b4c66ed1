//! Third-party components: reading an entry of `cheng.toml` (pin, id, grant folders),
//! vetting the component (it must be a tool-world component importing nothing beyond
//! the tool world and WASI, and no network), and registering its tools as
//! `<plugin-id>__<tool>`. A plugin that fails any of this is refused with one message
//! naming it; the host and the other plugins keep working.

use std::path::Path;
use std::sync::Arc;

use wasmtime::component::Linker;

use crate::grant::{FsGrant, Grant};
use crate::policy::{Config, FsGrantConfig, PluginConfig, Policy, check_grant_folder, valid_plugin_id};
use crate::registry::Registry;
use crate::runtime;
use crate::runtime::cache::ComponentCache;
use crate::runtime::component::{LoadedComponent, Source};
use crate::runtime::store::StoreState;

/// A third-party component to load.
#[derive(Debug, Clone)]
pub struct PluginSpec {
    /// Its id (`[a-z][a-z0-9-]{0,15}`); tools register as `<id>__<tool>`.
    pub id: String,
    /// The component's bytes.
    pub wasm: Vec<u8>,
    /// Where it came from (for messages).
    pub origin: String,
    /// What it is granted.
    pub grant: Grant,
}

/// Why a plugin was not loaded; each message names the plugin and what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// Its entry is invalid: the id, a grant, a host pattern.
    #[error("{0}")]
    Entry(String),
    /// Its file could not be read.
    #[error("plugin \"{id}\": cannot read {}: {source}", path.display())]
    Read {
        /// The plugin.
        id: String,
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Its component or signature file is not a regular file, or is over its cap.
    #[error("plugin \"{id}\": {source}; refusing to load it")]
    File {
        /// The plugin.
        id: String,
        /// What is wrong with the file (it names the file and the limit).
        #[source]
        source: crate::policy::hostfile::HostFileError,
    },
    /// Its bytes are not those the entry pins, or nothing pins them.
    #[error("{0}")]
    Pin(String),
    /// Its entry lists signing keys, and its signature is missing, by another key, or
    /// not of these bytes.
    #[error("{0}")]
    Signature(String),
    /// The file is not a component of the tool world, or it imports what a plugin may not.
    #[error("{0}")]
    Component(String),
    /// Its component comes from a registry, and was not pulled, or its stored copy is
    /// damaged.
    #[error("{0}")]
    #[cfg(feature = "oci")]
    Oci(#[from] crate::oci::OciError),
    /// Its tools could not be registered (a name another component has).
    #[error(transparent)]
    Registry(#[from] crate::HostError),
}

/// Where a component's detached minisign signature is: `<file>.minisig`.
pub fn signature_path(wasm: &Path) -> std::path::PathBuf {
    crate::signature::detached_path(wasm)
}

/// A plugin entry from `cheng.toml`, read and checked (pin, signature, id, grants).
pub(crate) fn plugin_from_config(
    cfg: &Config,
    pc: &PluginConfig,
    state_dir: Option<&Path>,
) -> Result<PluginSpec, PluginError> {
    let id = &pc.id;
    if !valid_plugin_id(id) {
        return Err(PluginError::Entry(format!("plugin id \"{id}\" must match [a-z][a-z0-9-]{{0,15}}")));
    }
    for host in &pc.net {
        crate::egress::HostPattern::parse(host)
            .map_err(|e| PluginError::Entry(format!("plugin \"{id}\": net: {e}")))?;
    }
    let (wasm, path) = match (&pc.path, &pc.source) {
        (Some(file), None) => {
            let base = cfg.source.as_ref().and_then(|p| p.parent()).map(Path::to_path_buf).unwrap_or_default();
            let path = base.join(file);
            let wasm =
                crate::policy::hostfile::read(&path, crate::policy::hostfile::PLUGIN_WASM).map_err(|source| {
                    match source {
                        crate::policy::hostfile::HostFileError::Io { source, .. } => {
                            PluginError::Read { id: id.clone(), path: path.clone(), source }
                        }
                        source => PluginError::File { id: id.clone(), source },
                    }
                })?;
            (wasm, path)
        }
        // A component from a registry: the accepted version in the state directory's
        // store, checked there; nothing is fetched now.
        #[cfg(not(feature = "oci"))]
        (None, Some(source)) => {
            let _ = state_dir;
            return Err(PluginError::Entry(format!(
                "plugin \"{id}\": source = \"{source}\" (a component from a registry) needs cheng-host's \"oci\" \
                 feature, which this build was made without; give the component as path = \"….wasm\", or build \
                 with --features oci"
            )));
        }
        #[cfg(feature = "oci")]
        (None, Some(source)) => {
            let Some(state) = state_dir else {
                return Err(PluginError::Oci(crate::oci::OciError::NotPulled(format!(
                    "plugin \"{id}\": a component from {source} needs a state directory to be pulled into"
                ))));
            };
            crate::oci::load(&crate::oci::Store::new(state), id, source).map_err(|e| match e {
                // The store's own messages name its file, not the plugin.
                crate::oci::OciError::Store(m) => {
                    crate::oci::OciError::Store(format!("plugin \"{id}\": {m}; refusing to load it"))
                }
                e => e,
            })?
        }
        _ => {
            return Err(PluginError::Entry(format!(
                "plugin \"{id}\": name either path (a .wasm file) or source (an oci:// reference), not both or neither"
            )));
        }
    };
    let actual = runtime::cache::sha256_hex(&wasm);
    match &pc.sha256 {
        Some(expected) if !expected.eq_ignore_ascii_case(&actual) => {
            return Err(PluginError::Pin(format!(
                "plugin \"{id}\": {} has sha256 {actual}, but cheng.toml pins {expected}; refusing to load it",
                path.display()
            )));
        }
        // A signature by a listed key pins it as well as a digest does.
        // So does the digest accepted when the component was pulled.
        None if !cfg.allow_unpinned_plugins && pc.signed_by.is_empty() && pc.source.is_none() => {
            return Err(PluginError::Pin(format!(
                "plugin \"{id}\": no sha256 pin in cheng.toml; add sha256 = \"{actual}\" after vetting {}",
                path.display()
            )));
        }
        _ => {}
    }
    if !pc.signed_by.is_empty() {
        let sig_path = signature_path(&path);
        let refused = |e: crate::signature::SignatureError| {
            PluginError::Signature(format!("plugin \"{id}\" ({}): {e}; refusing to load it", path.display()))
        };
        crate::signature::check_keys(&pc.signed_by).map_err(refused)?;
        let text = match crate::policy::hostfile::read_to_string(&sig_path, crate::policy::hostfile::SIGNATURE) {
            Ok(t) => t,
            Err(e) if e.is_not_found() => {
                return Err(refused(crate::signature::SignatureError::Missing(sig_path.display().to_string())));
            }
            Err(crate::policy::hostfile::HostFileError::Io { source, .. }) => {
                return Err(PluginError::Read { id: id.clone(), path: sig_path, source });
            }
            Err(source) => return Err(PluginError::File { id: id.clone(), source }),
        };
        let info =
            crate::signature::verify(&wasm, &text, &sig_path.display().to_string(), &pc.signed_by).map_err(refused)?;
        tracing::info!(target: "cheng::plugins", plugin = %id, key = %info.key_id,
            comment = %cheng_contract::text::escape_line(&info.trusted_comment), "signature verified");
    }
    let fs = match &pc.fs {
        FsGrantConfig::Simple(s) if s == "none" => FsGrant::None,
        FsGrantConfig::Simple(s) if s == "read" => FsGrant::Read,
        FsGrantConfig::Simple(s) => {
            return Err(PluginError::Entry(format!(
                "plugin \"{id}\": fs = \"{s}\" is not none, read, or {{ read = [...], write = [...] }}"
            )));
        }
        FsGrantConfig::Scoped { read, write } => {
            let who = format!("plugin \"{id}\"");
            FsGrant::Scoped {
                read: read
                    .iter()
                    .map(|f| check_grant_folder(&who, f, false))
                    .collect::<Result<_, _>>()
                    .map_err(|e| PluginError::Entry(e.0))?,
                write: write
                    .iter()
                    .map(|f| check_grant_folder(&who, f, true))
                    .collect::<Result<_, _>>()
                    .map_err(|e| PluginError::Entry(e.0))?,
            }
        }
    };
    Ok(PluginSpec {
        id: id.clone(),
        wasm,
        origin: path.display().to_string(),
        grant: Grant { fs, spawn: pc.spawn, memory_mb: pc.memory_mb, cpu_ms: pc.timeout_ms, net: pc.net.clone() },
    })
}

/// Imports a component asks for beyond the `tool` world and WASI.
pub(crate) fn refused_imports(component: &wasmtime::component::Component, engine: &wasmtime::Engine) -> Vec<String> {
    component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .filter(|name| !(name.starts_with("cheng:tool/") || name.starts_with("wasi:")))
        .collect()
}

/// Network imports (`wasi:sockets/*`, `wasi:http/*`) a component asks for.
fn network_imports(component: &wasmtime::component::Component, engine: &wasmtime::Engine) -> Vec<String> {
    component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .filter(|name| name.starts_with("wasi:sockets/") || name.starts_with("wasi:http/"))
        .collect()
}

/// Load one plugin and register its tools as `<id>__<tool>`.
pub(crate) async fn load_plugin(
    spec: PluginSpec,
    engine: &wasmtime::Engine,
    linker: &Linker<StoreState>,
    cache: &ComponentCache,
    on_compile: &(dyn Fn(&str) + Send + Sync),
    registry: &mut Registry,
) -> Result<(), PluginError> {
    let id = spec.id.clone();
    if !valid_plugin_id(&id) {
        return Err(PluginError::Entry(format!("plugin id \"{id}\" must match [a-z][a-z0-9-]{{0,15}}")));
    }
    let origin = spec.origin.clone();
    let mut c = LoadedComponent::load(&id, Source::Owned(Arc::new(spec.wasm)), None, engine, linker, cache, on_compile)
        .await
        .map_err(|e| PluginError::Component(format!("plugin \"{id}\" ({origin}): {e}")))?;
    c.grant = spec.grant;
    // Plugins are compiled (or loaded from the cache) now, so that a corrupt or
    // wrong-world file is one clear error at start, naming the file.
    let pre = c
        .pre(engine, linker, cache, on_compile)
        .await
        .map_err(|e| PluginError::Component(format!("plugin \"{id}\" ({origin}): {e}")))?;
    let refused = refused_imports(pre.instance_pre().component(), engine);
    if !refused.is_empty() {
        return Err(PluginError::Component(format!(
            "plugin \"{id}\" ({origin}) imports {}, beyond the tool world and WASI; refusing to load it",
            refused.join(", ")
        )));
    }
    // A plugin reaches the network only through `wasi:http`, and only with a `net`
    // grant: without one, a component that imports sockets or HTTP is refused now, by
    // name, rather than loaded to have every request fail at run time. Sockets are
    // refused whatever the grant (the host has no guard for raw connections).
    let network = network_imports(pre.instance_pre().component(), engine);
    let sockets: Vec<&String> = network.iter().filter(|n| n.starts_with("wasi:sockets/")).collect();
    if !sockets.is_empty() || (!network.is_empty() && c.grant.net.is_empty()) {
        let shown = if sockets.is_empty() { network.clone() } else { sockets.iter().map(|s| s.to_string()).collect() };
        let why = if sockets.is_empty() {
            "but its entry grants no `net` hosts"
        } else {
            "but plugins reach the network only through wasi:http with a `net` grant, never raw sockets"
        };
        return Err(PluginError::Component(format!(
            "plugin \"{id}\" ({origin}) imports {}, {why}; refusing to load it \
             (build it without networking, or leave it out)",
            shown.join(", ")
        )));
    }
    c.reach = if c.grant.net.is_empty() {
        crate::egress::Reach::Nothing
    } else {
        let patterns = c.grant.net.iter().map(|h| crate::egress::HostPattern::parse(h)).collect::<Result<Vec<_>, _>>();
        crate::egress::Reach::Only(patterns.map_err(|e| PluginError::Entry(format!("plugin \"{id}\": net: {e}")))?)
    };
    for t in &c.tools {
        let name = format!("{id}__{}", t.name);
        if name.len() > 64 {
            return Err(PluginError::Component(format!(
                "plugin \"{id}\": tool name \"{name}\" is longer than 64 characters"
            )));
        }
    }
    Ok(registry.add(Arc::new(c), &format!("{id}__"))?)
}

/// Roles and `[tools.<name>]` tables that name plugin tools no loaded plugin declares,
/// one message each (reported when the host starts, not at call time).
pub(crate) fn undeclared(policy: &Policy, registry: &Registry) -> Vec<String> {
    let declared_by = |id: &str| -> Vec<&str> {
        registry.iter().filter(|e| e.component().is_some_and(|c| c.name == id)).map(|e| e.name.as_str()).collect()
    };
    let explain = |what: String, tool: &str| -> Option<String> {
        let (id, _) = tool.split_once("__")?;
        if registry.get(tool).is_some() {
            return None;
        }
        let declared = declared_by(id);
        Some(if declared.is_empty() {
            format!("{what} names \"{tool}\", but no plugin \"{id}\" is loaded")
        } else {
            format!(
                "{what} names \"{tool}\", which plugin \"{id}\" does not declare; it declares: {}",
                declared.join(", ")
            )
        })
    };
    let mut out = Vec::new();
    for role in policy.role_names() {
        out.extend(policy.tools_of(role).into_iter().filter_map(|t| explain(format!("role \"{role}\""), t)));
    }
    out.extend(policy.configured_tools().filter_map(|t| explain(format!("[tools.{t}]"), t)));
    for msg in &out {
        tracing::warn!(target: "cheng::plugins", "{msg}");
    }
    out
}
