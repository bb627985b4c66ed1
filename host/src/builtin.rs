//! The built-in tool components, compiled from `plugins/` by the build script and
//! embedded in the binary, and their descriptions.
//!
//! A host lists its tools before compiling anything: compiling the built-ins
//! takes tens of seconds on a small machine, longer than some MCP clients wait for
//! `initialize`. So what each built-in's `describe` answers is recorded beside the
//! source, in `builtin-tools.json`, and embedded too; a component is compiled when it is
//! first called, or ahead of time by [`crate::Host::warm_up`]. A test runs every
//! built-in's own `describe` and fails when the record differs (it rewrites the record
//! under `CHENG_BLESS=1`), so the two cannot drift apart.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::runtime::component::ToolSpec;

include!(concat!(env!("OUT_DIR"), "/builtin.rs"));

/// The recorded descriptions, by family.
const DESCRIBED: &str = include_str!("builtin-tools.json");

/// What the built-in `family` declares, as recorded (`None` for a family the record
/// does not have: it is then described by running it).
pub(crate) fn described(family: &str) -> Option<Vec<ToolSpec>> {
    static PARSED: OnceLock<HashMap<String, Vec<ToolSpec>>> = OnceLock::new();
    PARSED
        .get_or_init(|| match serde_json::from_str(DESCRIBED) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(target: "cheng::startup", "builtin-tools.json is not readable ({e}): built-ins are described by running them");
                HashMap::new()
            }
        })
        .get(family)
        .cloned()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use wasmtime::component::Linker;

    use super::*;
    use crate::runtime::cache::ComponentCache;
    use crate::runtime::component::{LoadedComponent, Source};
    use crate::runtime::engine::EngineHandle;
    use crate::runtime::store::StoreState;

    /// Every built-in's `describe`, run now, is what `builtin-tools.json` records.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_recorded_descriptions_are_the_components_own() {
        let engine = EngineHandle::new().unwrap();
        let mut linker = Linker::<StoreState>::new(engine.engine());
        crate::runtime::bindings::add_to_linker(&mut linker).unwrap();
        // The compiled code of the integration tests' shared cache, when it is there
        // (content-keyed), but none of its recorded descriptions: each `describe` runs.
        let code = tempfile::tempdir().unwrap();
        let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-state/cache");
        for e in std::fs::read_dir(&shared).into_iter().flatten().flatten() {
            if !e.file_name().to_string_lossy().ends_with(".describe.json") {
                let _ = std::os::unix::fs::symlink(e.path(), code.path().join(e.file_name()));
            }
        }
        let cache = ComponentCache::new(Some(code.path().to_path_buf()));
        let mut now = BTreeMap::new();
        for (family, bytes, sha) in BUILTINS {
            let c = LoadedComponent::load(
                family,
                Source::Static(bytes, sha),
                None,
                engine.engine(),
                &linker,
                &cache,
                &|_| {},
            )
            .await
            .unwrap();
            now.insert(family.to_string(), serde_json::to_value(&c.tools).unwrap());
        }
        // Without the `web` feature, the web tools' component is not built: its recorded
        // description stays as it is (and must not be blessed away).
        #[cfg(not(feature = "web"))]
        {
            assert!(!now.contains_key("web"), "the web component is embedded without the `web` feature");
            now.insert("web".to_string(), serde_json::from_str::<serde_json::Value>(DESCRIBED).unwrap()["web"].clone());
        }
        let now = serde_json::to_value(&now).unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/builtin-tools.json");
        if std::env::var_os("CHENG_BLESS").is_some() {
            std::fs::write(&path, serde_json::to_string_pretty(&now).unwrap() + "\n").unwrap();
            return;
        }
        let recorded: serde_json::Value = serde_json::from_str(DESCRIBED).unwrap();
        assert!(
            recorded == now,
            "host/src/builtin-tools.json differs from what the built-ins describe: record it again with \
             `CHENG_BLESS=1 cargo test --release -p cheng-host --lib the_recorded_descriptions`"
        );
    }
}
