//! Reading `cheng.toml`: parsing, every check a file must pass before a host uses it,
//! and errors that name the line, the column and the table a stray key belongs in.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::*;

/// Whether `name` can name a tool in `[tools.<name>]` or a role: a built-in tool, or a
/// plugin tool (`<id>__<tool>`, checked against what is loaded when the host starts).
fn known_tool_shape(name: &str) -> bool {
    let builtin = RECON_TOOLS.iter().chain(WRITER_EXTRA).chain(DEVELOPER_EXTRA).any(|t| *t == name);
    builtin || name.split_once("__").is_some_and(|(id, tool)| !id.is_empty() && !tool.is_empty())
}

impl Config {
    /// Parse a configuration from TOML text; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Config, ConfigError> {
        Self::parse(text, origin, Some(PathBuf::from(origin)))
    }

    fn parse(text: &str, origin: &str, source: Option<PathBuf>) -> Result<Config, ConfigError> {
        let err = |message: String| ConfigError { path: origin.to_string(), message };
        let mut cfg: Config = toml::from_str(text).map_err(|e| err(describe_toml_error(text, &e)))?;
        cfg.source = source;
        cfg.policy()?;
        let setting = |e: crate::SettingError| err(e.0);
        cfg.process.validate().map_err(setting)?;
        cfg.git.validate().map_err(setting)?;
        cfg.files.read::<&str>(&[]).map_err(setting)?;
        cfg.web.read(&|_| None).map_err(setting)?;
        cfg.mcp().map_err(setting)?;
        cfg.telemetry.urls().map_err(setting)?;
        if cfg.approvals.timeout_ms < MIN_APPROVAL_TIMEOUT_MS {
            return Err(err(format!(
                "[approvals] timeout_ms = {} is below the floor of {MIN_APPROVAL_TIMEOUT_MS} ms; a request must be \
                 answerable (a timeout is a refusal)",
                cfg.approvals.timeout_ms
            )));
        }
        if cfg.records.max_bytes != 0 && cfg.records.max_bytes < crate::tables::MIN_RECORDS_MAX_BYTES {
            return Err(err(format!(
                "[records] max_bytes = {} is too small to hold a record; give 0 (never rotate) or at least {}",
                cfg.records.max_bytes,
                crate::tables::MIN_RECORDS_MAX_BYTES
            )));
        }
        if cfg.limits.wall_ms == 0 || cfg.limits.cpu_ms == 0 || cfg.limits.memory_mb == 0 {
            return Err(err("[limits] memory_mb, cpu_ms and wall_ms must be positive".into()));
        }
        for (name, t) in &cfg.tools {
            if !known_tool_shape(name) {
                return Err(err(format!(
                    "{}: [tools.{name}] names no built-in tool (plugin tools are written <plugin-id>__<tool>)",
                    position(text, &format!("[tools.{name}]"))
                )));
            }
            for (key, v) in [("memory_mb", t.memory_mb), ("cpu_ms", t.cpu_ms)] {
                if v == Some(0) {
                    return Err(err(format!("[tools.{name}] {key} must be a positive integer")));
                }
            }
        }
        Ok(cfg)
    }

    /// Read and parse a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = crate::hostfile::read_to_string(path, crate::hostfile::CONFIG)
            .map_err(|e| ConfigError { path: path.display().to_string(), message: e.reason() })?;
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        Self::parse(&text, &path.display().to_string(), Some(abs))
    }

    /// The `[[mcp_servers]]` entries, checked: ids unique and distinct from plugin ids.
    pub fn mcp(&self) -> Result<Vec<mcp::McpServer>, crate::SettingError> {
        let base = self.source.as_ref().and_then(|p| p.parent()).map(Path::to_path_buf).unwrap_or_default();
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for entry in &self.mcp_servers {
            let server = entry.check(&base)?;
            if !seen.insert(server.id.clone()) || self.plugins.iter().any(|p| p.id == server.id) {
                return Err(crate::SettingError(format!(
                    "[[mcp_servers]] id \"{}\" is used twice (plugins and servers share ids)",
                    server.id
                )));
            }
            out.push(server);
        }
        Ok(out)
    }

    /// The path rules (`[files]`) compiled with the built-in ones; `host_files` are the
    /// host's own configuration and state that lie in the workspace, relative to it.
    pub fn file_rules<S: AsRef<str>>(&self, host_files: &[S]) -> Result<files::FileRules, crate::SettingError> {
        self.files.read(host_files)
    }

    /// The resolved policy: roles with inheritance applied, limits, per-tool settings.
    pub fn policy(&self) -> Result<Policy, ConfigError> {
        Policy::from_config(self)
    }
}

/// "line L, column C" of the first occurrence of `needle` in `text` (else "at its end").
fn position(text: &str, needle: &str) -> String {
    match text.find(needle) {
        Some(at) => line_col(text, at),
        None => "somewhere in the file".to_string(),
    }
}

fn line_col(text: &str, at: usize) -> String {
    let before = &text[..text.floor_char_boundary(at.min(text.len()))];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    format!("line {line}, column {col}")
}

/// A TOML error as "line L, column C: reason", with the key's home when an unknown key
/// is known to another table.
fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let mut reason = e.message().trim().to_string();
    let at = e.span().map(|s| s.start);
    if let Some(key) = reason.strip_prefix("unknown field `").and_then(|r| r.split('`').next()).map(str::to_string) {
        let table = keys::table_at(text, at.unwrap_or(0));
        reason = match keys::home_of(&key, &table) {
            Some(home) => format!("unknown key `{key}` in {table}: {home}"),
            None => format!("unknown key `{key}` in {table} ({reason})"),
        };
    }
    match at {
        Some(at) => format!("{}: {reason}", line_col(text, at)),
        None => reason,
    }
}
