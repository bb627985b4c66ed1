//! [`HostBuilder`]: how an embedder (or the CLI) sets a host up — configuration,
//! approver, state and cache directories, plugins, engine options — and `build`, which
//! starts the engine, loads and vets every component, and wires the call pipeline's
//! parts together.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::Linker;

use crate::approvals::{Approver, Broker, RefuseAll};
use crate::call::RecordSink;
use crate::host::Host;
use crate::pipeline::Inner;
use crate::plugins::PluginSpec;
use crate::policy::Config;
use crate::process::Spawner;
use crate::records::AuditLog;
use crate::registry::Registry;
use crate::runstate::RunStateStore;
use crate::runtime::cache::ComponentCache;
use crate::runtime::component::{LoadedComponent, Source};
use crate::runtime::engine::EngineHandle;
use crate::runtime::store::StoreState;
use crate::{HostError, builtin, plugins, runtime};

/// Builds a [`Host`].
///
/// Defaults, every one of which denies: the built-in roles with `developer` as default,
/// an approver that refuses everything, no cache directory (components compile on
/// every start), no state directory (per-run data lives in memory only).
pub struct HostBuilder {
    config: Config,
    approver: Arc<dyn Approver>,
    cache_dir: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    on_compile: Arc<dyn Fn(&str) + Send + Sync>,
    plugins: Vec<PluginSpec>,
    engine: runtime::engine::EngineOptions,
    audit: Option<PathBuf>,
    audit_off: bool,
    external_answers: bool,
    protected: Vec<PathBuf>,
    resolver: Arc<dyn crate::egress::Resolve>,
    fs_on_workers: bool,
}

impl Default for HostBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl HostBuilder {
    /// A builder with the defaults above.
    pub fn new() -> Self {
        HostBuilder {
            config: Config::default(),
            approver: Arc::new(RefuseAll),
            cache_dir: None,
            state_dir: None,
            on_compile: Arc::new(|_| {}),
            plugins: Vec::new(),
            engine: runtime::engine::EngineOptions::default(),
            audit: None,
            audit_off: false,
            external_answers: false,
            protected: Vec::new(),
            resolver: Arc::new(crate::egress::SystemResolver),
            fs_on_workers: false,
        }
    }

    /// Resolve the host names components' requests name with `resolver` instead of
    /// the system's. Whatever it answers, every address is checked by the egress
    /// guard, and the connection goes to one of the checked addresses.
    pub fn resolver(&mut self, resolver: Arc<dyn crate::egress::Resolve>) -> &mut Self {
        self.resolver = resolver;
        self
    }

    /// Append call records to this JSON Lines file (default: `<state dir>/audit.jsonl`
    /// when a state directory is set, else no audit log).
    pub fn audit_log(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.audit = Some(path.into());
        self
    }

    /// Keep no audit log, even with a state directory (benchmarks, throwaway hosts).
    pub fn without_audit_log(&mut self) -> &mut Self {
        self.audit_off = true;
        self
    }

    /// Answers to approval requests may also arrive through
    /// [`Host::answer_approval`] (an API or console is attached): requests then wait
    /// for their timeout even when the approver cannot ask anyone.
    pub fn external_approval_answers(&mut self, on: bool) -> &mut Self {
        self.external_answers = on;
        self
    }

    /// Engine options: the pooling allocator (on by default; faster per call, costs a
    /// little at start), its slots, and the largest memory a component may reach. A
    /// one-shot process (the CLI's `cheng call`) starts faster without pooling.
    pub fn engine_options(&mut self, opts: runtime::engine::EngineOptions) -> &mut Self {
        self.engine = opts;
        self
    }

    /// For a process that makes one call and exits (the CLI's `cheng call`): components
    /// are given memory on demand rather than from a pool, whose set-up (about 1 ms)
    /// would cost more than it saves.
    pub fn one_shot(&mut self) -> &mut Self {
        self.engine = runtime::engine::EngineOptions { pooling: false, ..self.engine };
        self
    }

    /// Load a third-party component with `grant`. Its tools are granted to no role
    /// until a role names them. A plugin that cannot be loaded is reported by
    /// [`Host::load_errors`]; the host and the other plugins keep working.
    pub fn plugin(&mut self, spec: PluginSpec) -> &mut Self {
        self.plugins.push(spec);
        self
    }

    /// Use this configuration (roles, limits, approvals, tool settings).
    pub fn config(&mut self, config: Config) -> &mut Self {
        self.config = config;
        self
    }

    /// Who answers approval requests.
    pub fn approver(&mut self, approver: Arc<dyn Approver>) -> &mut Self {
        self.approver = approver;
        self
    }

    /// Also protect `path` (a file or directory, which need not exist yet) from every
    /// tool's writes, like the configuration in use: for the other places a
    /// configuration is looked up (the CLI protects each of them).
    pub fn protect(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.protected.push(path.into());
        self
    }

    /// Where precompiled components are cached (shared safely between hosts).
    pub fn cache_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Where per-run data is kept; also the cache directory (`<dir>/cache`) and the
    /// audit log (`<dir>/audit.jsonl`) unless those were set.
    pub fn state_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// Called with a component's name just before it is compiled (not when it comes
    /// from the cache): for a progress notice.
    pub fn on_compile(&mut self, f: impl Fn(&str) + Send + Sync + 'static) -> &mut Self {
        self.on_compile = Arc::new(f);
        self
    }

    /// Not for use: run the `fs` imports' long blocking work (a write's and a removal's
    /// syncs, a large `stat-dirs`' listing threads) on the async worker that runs the
    /// call, as the host did before that work moved to the runtime's blocking threads.
    /// A slow disk then holds up every call on that worker. Only so that the `serve`
    /// benchmark and a test can measure the old way beside the new in one run.
    #[doc(hidden)]
    pub fn blocking_fs_on_workers(&mut self, on: bool) -> &mut Self {
        self.fs_on_workers = on;
        self
    }

    /// Start the engine and load the built-in components and the plugins.
    pub async fn build(&mut self) -> Result<Host, HostError> {
        // Nothing this host starts may read its environment, memory or descriptors.
        crate::process::spawn::harden_host();
        let policy = self.config.policy()?;
        let web = self.web()?;
        let web_env = web_env(&web);
        #[cfg(feature = "telemetry")]
        let extra_roots = web.rules.extra_roots.clone();
        let egress = Arc::new(crate::egress::Egress::new(web.rules, self.resolver.clone()));
        let t0 = Instant::now();
        let observer = Arc::new(crate::observe::Observer::new());
        let on_compile: Arc<dyn Fn(&str) + Send + Sync> = {
            let (user, observer) = (self.on_compile.clone(), observer.clone());
            Arc::new(move |name: &str| {
                observer.component_compiled();
                user(name)
            })
        };
        // Plugins are read and their pins checked first: their grants size the pool.
        let mut load_errors = Vec::new();
        let mut specs = self.plugins.clone();
        for pc in &self.config.plugins {
            match plugins::plugin_from_config(&self.config, pc, self.state_dir.as_deref()) {
                Ok(spec) => specs.push(spec),
                Err(e) => load_errors.push(e.to_string()),
            }
        }
        // The pool's slots must hold the largest memory any call may be given.
        let mut opts = self.engine;
        let largest = policy.largest_memory_mb(specs.iter().map(|s| &s.grant));
        opts.max_memory = opts.max_memory.max((largest as usize).saturating_mul(1 << 20));
        let engine = EngineHandle::with_options(opts)?;
        tracing::debug!(target: "cheng::startup", ms = t0.elapsed().as_secs_f64() * 1e3, "engine ready");
        let mut linker = Linker::<StoreState>::new(engine.engine());
        runtime::bindings::add_to_linker(&mut linker)
            .map_err(|e| HostError::Engine(format!("cannot link the host interfaces: {e:#}")))?;
        let cache_dir = self.cache_dir.clone().or_else(|| self.state_dir.as_ref().map(|d| d.join("cache")));
        let cache = ComponentCache::new(cache_dir);
        let mut registry = Registry::default();
        for (family, bytes, sha) in builtin::BUILTINS {
            let mut c = LoadedComponent::load(
                family,
                Source::Static(bytes, sha),
                builtin::described(family),
                engine.engine(),
                &linker,
                &cache,
                on_compile.as_ref(),
            )
            .await?;
            if *family == "web" {
                c.env = web_env.clone();
            }
            registry.add(Arc::new(c), "")?;
        }
        tracing::debug!(target: "cheng::startup", ms = t0.elapsed().as_secs_f64() * 1e3, "built-ins described");
        for spec in specs {
            let origin = spec.origin.clone();
            if let Err(e) =
                plugins::load_plugin(spec, engine.engine(), &linker, &cache, on_compile.as_ref(), &mut registry).await
            {
                tracing::warn!(target: "cheng::plugins", plugin = %origin, "plugin refused: {e}");
                load_errors.push(e.to_string());
            }
        }

        let run_state = RunStateStore::new(self.state_dir.as_ref().map(|d| d.join("runs")));
        let broker = Broker::new(
            self.approver.clone(),
            Duration::from_millis(self.config.approvals.timeout_ms),
            self.external_answers,
        );
        #[cfg(feature = "telemetry")]
        let telemetry = {
            let broker = broker.clone();
            let pending = Arc::new(move || broker.pending_count() as u64);
            crate::telemetry::Telemetry::new(&self.config.telemetry, extra_roots, observer.clone(), pending)
                .map_err(|e| HostError::Telemetry(e.to_string()))?
        };
        // Without the feature, an endpoint to export to is a load error naming it.
        #[cfg(not(feature = "telemetry"))]
        if self.config.telemetry.endpoint.is_some() {
            load_errors.push(
                "[telemetry] endpoint needs cheng-host's \"telemetry\" feature, which this build was made without; \
                 nothing is exported: remove the endpoint, or build with --features telemetry"
                    .to_string(),
            );
        }
        // Without `web`, settings only the web tools read are a load error naming it.
        #[cfg(not(feature = "web"))]
        {
            let search = &self.config.web.search;
            let mut named: Vec<String> = crate::policy::WEB_TOOLS
                .iter()
                .filter(|t| self.config.tools.contains_key(**t))
                .map(|t| format!("[tools.{t}]"))
                .collect();
            if search.url.is_some() || search.api_key_env.is_some() || search.provider != Default::default() {
                named.push("[web.search]".to_string());
            }
            if !named.is_empty() {
                load_errors.push(format!(
                    "{} set the web tools, which need cheng-host's \"web\" feature, which this build was made \
                     without; they are not offered: remove the section, or build with --features web",
                    named.join(" and ")
                ));
            }
        }
        let audit_path = match self.audit_off {
            true => None,
            false => self.audit.clone().or_else(|| self.state_dir.as_deref().map(crate::records::audit_log_in)),
        };
        let log = match audit_path {
            Some(p) => Some(
                AuditLog::open_rotating(
                    &p,
                    Duration::from_millis(self.config.records.commit_window_ms),
                    self.config.records.max_bytes,
                )
                .map_err(|e| HostError::Audit(e.to_string()))?,
            ),
            None => None,
        };
        // What no tool may write, wherever it sits: the configuration in use, the other
        // places a configuration is looked up, the state directory (resolved now, as far
        // as they exist).
        if let Some(d) = &self.state_dir {
            let _ = std::fs::create_dir_all(d);
        }
        let protected_abs: Vec<PathBuf> = self
            .config
            .source
            .iter()
            .chain(&self.protected)
            .chain(self.state_dir.as_ref())
            .map(|p| resolve_partial(p))
            .collect();
        let workspaces_root =
            self.config.workspaces.root.as_ref().map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| r.clone()));
        let config_error = |crate::policy::SettingError(message)| {
            HostError::Config(crate::policy::ConfigError {
                path: self
                    .config
                    .source
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "configuration".into()),
                message,
            })
        };
        let file_rules = Arc::new(self.config.file_rules::<&str>(&[]).map_err(&config_error)?);
        let spawner = Arc::new(
            Spawner::new(self.config.process.clone(), self.state_dir.as_deref(), protected_abs.clone())
                .with_file_rules(file_rules.clone())
                .with_git(self.config.git.clone())
                .with_egress(egress.clone())
                .with_run_idle(std::time::Duration::from_millis(self.config.serve.idle_session_ms)),
        );
        // External MCP servers: their pinned tools (a server never seen is started once
        // to list them).
        let servers = self.config.mcp().map_err(config_error)?;
        #[cfg(feature = "mcp-sources")]
        let mcp = {
            let mcp = crate::sources::mcp::Hub::new(
                servers,
                spawner.clone(),
                egress.clone(),
                self.state_dir.as_deref(),
                &mut load_errors,
            )
            .await;
            for (server, tools) in mcp.tools() {
                registry.add_mcp(server, tools)?;
            }
            mcp
        };
        // Without the feature, each server is a load error naming it; the rest works.
        #[cfg(not(feature = "mcp-sources"))]
        for server in servers {
            load_errors.push(format!(
                "MCP server \"{}\": [[mcp_servers]] needs cheng-host's \"mcp-sources\" feature, which this build \
                 was made without; remove the entry, or build with --features mcp-sources",
                server.id
            ));
        }
        load_errors.extend(plugins::undeclared(&policy, &registry));
        Ok(Host {
            inner: Arc::new(Inner {
                engine,
                linker,
                cache,
                registry,
                policy,
                config: self.config.clone(),
                run_state,
                on_compile,
                load_errors,
                broker,
                records: RecordSink { log, on_failure: self.config.records.on_failure },
                protected_abs,
                workspaces_root,
                never_found: crate::guard::never_found(self.state_dir.as_deref()),
                spawner,
                observer,
                egress,
                #[cfg(feature = "mcp-sources")]
                mcp,
                #[cfg(feature = "telemetry")]
                telemetry,
                fs_on_workers: self.fs_on_workers,
                file_rules,
                file_rules_here: std::sync::Mutex::default(),
            }),
        })
    }
}

impl HostBuilder {
    /// `[web]` as configured, its key and extra roots read.
    fn web(&self) -> Result<crate::policy::Web, crate::policy::ConfigError> {
        let origin = self.config.source.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "(config)".into());
        self.config
            .web
            .read(&|k| std::env::var(k).ok())
            .and_then(|mut web| {
                web.rules.extra_roots =
                    self.config.web.extra_roots(self.config.source.as_ref().and_then(|p| p.parent()))?;
                Ok(web)
            })
            .map_err(|e| crate::policy::ConfigError { path: origin, message: e.0 })
    }

    /// The egress guard a host built now would use (the `[web]` rules, this builder's
    /// resolver), for network work beside a host: pulling plugin components
    /// (`oci::pull`, with the `oci` feature).
    pub fn egress(&self) -> Result<Arc<crate::egress::Egress>, crate::policy::ConfigError> {
        Ok(Arc::new(crate::egress::Egress::new(self.web()?.rules, self.resolver.clone())))
    }
}

/// What the web component is told of `[web]`, as its environment: caps and the search
/// provider, never the key (the host adds that to the request itself).
fn web_env(web: &crate::policy::Web) -> Vec<(String, String)> {
    vec![
        ("CHENG_WEB_MAX_BYTES".into(), web.rules.max_bytes.to_string()),
        ("CHENG_WEB_TIMEOUT_MS".into(), web.rules.timeout.as_millis().to_string()),
        ("CHENG_WEB_SEARCH_PROVIDER".into(), web.search.provider.as_str().into()),
        ("CHENG_WEB_SEARCH_URL".into(), web.search.url.clone()),
        ("CHENG_WEB_SEARCH_KEY".into(), if web.search.key_present { "set" } else { "missing" }.into()),
        ("CHENG_WEB_SEARCH_KEY_ENV".into(), web.search.key_env.clone()),
    ]
}

/// `path` with symlinks resolved as far as it exists: its longest existing ancestor
/// canonicalized, the rest appended (a configuration that does not exist yet is still
/// protected where it would appear).
fn resolve_partial(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut rest = Vec::new();
    let mut cur = abs.as_path();
    loop {
        if let Ok(real) = std::fs::canonicalize(cur) {
            return rest.iter().rev().fold(real, |p: PathBuf, seg| p.join(seg));
        }
        match (cur.parent(), cur.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                cur = parent;
            }
            _ => return abs,
        }
    }
}

/// A host built without some of its optional features (`cargo test -p cheng-host
/// --no-default-features --lib`, run by CI): what needs a missing feature is refused,
/// naming it, and the rest works.
#[cfg(all(test, not(all(feature = "oci", feature = "mcp-sources", feature = "telemetry", feature = "web"))))]
mod without_features {
    use super::*;

    #[tokio::test]
    async fn a_section_whose_feature_is_off_is_refused_naming_it() {
        let ws = tempfile::tempdir().unwrap();
        let config = crate::policy::Config::from_toml_str(
            "[[mcp_servers]]\nid = \"files\"\ncommand = \"node\"\nargs = [\"server.js\"]\n\
             [[plugins]]\nid = \"remote\"\nsource = \"oci://ghcr.io/acme/tools:1.2\"\n\
             [telemetry]\nendpoint = \"http://127.0.0.1:4318\"\n\
             [tools.web_fetch]\nmemory_mb = 64\n",
            "test",
        )
        .unwrap();
        let mut b = HostBuilder::new();
        b.config(config).without_audit_log();
        let host = b.build().await.unwrap();
        let errors = host.load_errors().join("\n");
        #[cfg(not(feature = "mcp-sources"))]
        assert!(errors.contains("MCP server \"files\"") && errors.contains("\"mcp-sources\" feature"), "{errors}");
        #[cfg(not(feature = "oci"))]
        assert!(errors.contains("plugin \"remote\"") && errors.contains("\"oci\" feature"), "{errors}");
        #[cfg(not(feature = "telemetry"))]
        assert!(errors.contains("[telemetry] endpoint") && errors.contains("\"telemetry\" feature"), "{errors}");
        // Without `web`, the web tools' component is not embedded: its tools are not listed.
        let tools: Vec<String> = host.tools().into_iter().map(|t| t.name).collect();
        assert!(tools.iter().any(|t| t == "read_file"), "{tools:?}");
        #[cfg(not(feature = "web"))]
        assert!(!tools.iter().any(|t| t == "web_fetch" || t == "web_search"), "{tools:?}");
        #[cfg(not(feature = "web"))]
        {
            assert!(errors.contains("[tools.web_fetch]") && errors.contains("\"web\" feature"), "{errors}");
            // A call to one is told why it is not there.
            let r = host.call(&crate::Context::new(ws.path()).given(true), "web_fetch", serde_json::json!({})).await;
            assert!(r.output["error"].as_str().is_some_and(|e| e.contains("\"web\" feature")), "{}", r.output);
        }
        #[cfg(feature = "web")]
        assert!(tools.iter().any(|t| t == "web_fetch"), "{tools:?}");
        // The rest works (control): a built-in tool.
        std::fs::write(ws.path().join("notes.txt"), "hello").unwrap();
        let r = host
            .call(&crate::Context::new(ws.path()).given(true), "read_file", serde_json::json!({"path": "notes.txt"}))
            .await;
        assert_eq!(r.status, crate::Status::Ok, "{}", r.output);
    }
}
