//! Resolution: the roles with inheritance applied, and what one call of a tool gets
//! ([`Policy::effective`]) from its declared needs, its component's grant and the
//! operator's per-tool settings.

use std::collections::{BTreeMap, BTreeSet};

use cheng_contract::Needs;

use super::*;
use crate::grant::{Grant, Mount};

/// What one call of a tool gets, resolved by [`Policy::effective`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    /// The directories preopened for the component.
    pub mounts: Vec<Mount>,
    /// Whether it may ask the host to run processes.
    pub spawn: bool,
    /// Its memory limit in MiB.
    pub memory_mb: u64,
    /// Its CPU deadline in milliseconds.
    pub cpu_ms: u64,
}

/// The resolved policy: each role's full tool set (inheritance applied), the limits
/// and the per-tool settings.
#[derive(Debug, Clone)]
pub struct Policy {
    roles: BTreeMap<String, BTreeSet<String>>,
    default_role: String,
    limits: LimitsConfig,
    tools: BTreeMap<String, ToolConfig>,
}

impl Policy {
    pub(super) fn from_config(cfg: &Config) -> Result<Policy, ConfigError> {
        let origin =
            cfg.source.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "(built-in defaults)".to_string());
        let err = |message: String| ConfigError { path: origin.clone(), message };

        let mut defs: BTreeMap<String, RoleConfig> = BTreeMap::new();
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        defs.insert("recon".into(), RoleConfig { inherits: None, tools: set(RECON_TOOLS) });
        defs.insert("writer".into(), RoleConfig { inherits: Some("recon".into()), tools: set(WRITER_EXTRA) });
        defs.insert("developer".into(), RoleConfig { inherits: Some("writer".into()), tools: set(DEVELOPER_EXTRA) });
        for (name, role) in &cfg.roles {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                return Err(err(format!("role name \"{name}\" must be letters, digits, '-' or '_'")));
            }
            defs.insert(name.clone(), role.clone());
        }

        let mut roles = BTreeMap::new();
        for name in defs.keys() {
            let mut tools = BTreeSet::new();
            let mut seen = Vec::new();
            let mut cur = Some(name.clone());
            while let Some(r) = cur {
                if seen.contains(&r) {
                    return Err(err(format!("role \"{name}\" inherits in a cycle: {}", seen.join(" -> "))));
                }
                let def = defs.get(&r).ok_or_else(|| {
                    err(format!("role \"{}\" inherits unknown role \"{r}\"", seen.last().unwrap_or(name)))
                })?;
                tools.extend(def.tools.iter().cloned());
                seen.push(r);
                cur = def.inherits.clone();
            }
            roles.insert(name.clone(), tools);
        }
        let default_role = cfg.default_role.clone().unwrap_or_else(|| DEFAULT_ROLE.to_string());
        if !roles.contains_key(&default_role) {
            return Err(err(format!("default_role \"{default_role}\" is not a defined role")));
        }
        Ok(Policy { roles, default_role, limits: cfg.limits.clone(), tools: cfg.tools.clone() })
    }

    /// The built-in defaults.
    pub fn defaults() -> Policy {
        Policy::from_config(&Config::default()).expect("built-in roles are consistent")
    }

    /// The default role's name.
    pub fn default_role(&self) -> &str {
        &self.default_role
    }

    /// Whether `role` exists.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.contains_key(role)
    }

    /// The role names.
    pub fn role_names(&self) -> impl Iterator<Item = &str> {
        self.roles.keys().map(String::as_str)
    }

    /// Whether `role` holds `tool`.
    pub fn grants(&self, role: &str, tool: &str) -> bool {
        self.roles.get(role).is_some_and(|t| t.contains(tool))
    }

    /// The tools `role` holds (empty for an unknown role).
    pub fn tools_of(&self, role: &str) -> Vec<&str> {
        self.roles.get(role).map(|t| t.iter().map(String::as_str).collect()).unwrap_or_default()
    }

    /// The tool names `[tools.<name>]` configures.
    pub fn configured_tools(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// What a call of `tool` gets: the intersection of what it declared (`needs`), what
    /// its component was granted (`grant`) and what `[tools.<tool>]` narrows it to, with
    /// its limits — the tool's own settings, else the component's grant, else `[limits]`.
    pub fn effective(&self, tool: &str, needs: &Needs, grant: &Grant) -> Effective {
        let t = self.tools.get(tool);
        let declared = t.and_then(|t| t.fs).map_or(needs.fs, |narrow| needs.fs.min(narrow.into()));
        Effective {
            mounts: crate::grant::mounts(declared, &grant.fs),
            spawn: needs.spawn && grant.spawn,
            memory_mb: t.and_then(|t| t.memory_mb).or(grant.memory_mb).unwrap_or(self.limits.memory_mb),
            cpu_ms: t.and_then(|t| t.cpu_ms).or(grant.cpu_ms).unwrap_or(self.limits.cpu_ms),
        }
    }

    /// The largest memory any call may be given, in MiB: `[limits]`, every
    /// `[tools.<name>]` and every grant in `grants` (what the instance pool must hold).
    pub fn largest_memory_mb<'a>(&self, grants: impl IntoIterator<Item = &'a Grant>) -> u64 {
        let tools = self.tools.values().filter_map(|t| t.memory_mb);
        let granted = grants.into_iter().filter_map(|g| g.memory_mb);
        tools.chain(granted).chain([self.limits.memory_mb]).max().unwrap_or(DEFAULT_MEMORY_MB)
    }
}
