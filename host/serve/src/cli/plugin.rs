//! `cheng plugin pull [ID | oci://…] | diff ID | accept ID`: components from OCI
//! registries, pulled into the state directory through the host's egress guard, and
//! the review of a moved tag before the host loads what it now names.

use std::path::Path;

use anyhow::{Result, bail};
use cheng_host::HostBuilder;
use cheng_host::oci::{self, OciError, PullRequest, Store};
use cheng_host::policy::{Config, PluginConfig};
use serde_json::{Value, json};

use super::{EXIT_ERROR, UsageError, emit_json};

/// `cheng plugin pull`: every OCI entry, entry `target`, or the reference `target`.
/// Exit 1 when a pull failed or a tag now names other bytes than the accepted ones.
pub async fn pull(config: &Config, state: &Path, target: Option<&str>) -> Result<u8> {
    let mut b = HostBuilder::new();
    b.config(config.clone());
    let egress = b.egress()?;
    let store = Store::new(state);
    if let Some(reference) = target.filter(|t| t.starts_with("oci://")) {
        let req = PullRequest { id: None, source: reference, sha256: None, auth: None, signed_by: &[] };
        let report = oci::pull(&egress, &store, &req).await?;
        let mut shown = serde_json::to_value(&report.pulled)?;
        shown["source"] = json!(reference);
        shown["path"] = json!(store.blob_path(&report.pulled.sha256));
        emit_json(&shown)?;
        return Ok(0);
    }
    let entries: Vec<&PluginConfig> =
        config.plugins.iter().filter(|p| p.source.is_some() && target.is_none_or(|t| p.id == t)).collect();
    if let Some(t) = target
        && entries.is_empty()
    {
        bail!(UsageError(if config.plugins.iter().any(|p| p.id == t) {
            format!("plugin \"{t}\" names a file, not an OCI source; there is nothing to pull")
        } else {
            format!("no [[plugins]] entry \"{t}\" in the configuration")
        }));
    }
    let mut shown = Vec::new();
    let mut code = 0;
    for pc in entries {
        let source = pc.source.as_deref().unwrap_or_default();
        let result = match credentials(pc) {
            Ok(auth) => {
                let req = PullRequest {
                    id: Some(&pc.id),
                    source,
                    sha256: pc.sha256.as_deref(),
                    auth,
                    signed_by: &pc.signed_by,
                };
                oci::pull(&egress, &store, &req).await
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(report) => {
                if report.outcome == oci::Outcome::Moved {
                    code = EXIT_ERROR;
                    tracing::warn!(target: "cheng::plugins", plugin = %pc.id,
                        "{source} now names sha256 {}; the accepted one still loads: \
                         see `cheng plugin diff {}`, then `cheng plugin accept {}`",
                        report.pulled.sha256, pc.id, pc.id);
                }
                shown.push(serde_json::to_value(&report)?);
            }
            Err(e) => {
                code = EXIT_ERROR;
                shown.push(json!({"id": pc.id, "source": source, "error": e.to_string()}));
            }
        }
    }
    emit_json(&shown)?;
    Ok(code)
}

/// The credentials entry `pc` names in `auth_env`, if any.
fn credentials(pc: &PluginConfig) -> Result<Option<String>, OciError> {
    let Some(var) = &pc.auth_env else { return Ok(None) };
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => Ok(Some(v)),
        _ => Err(OciError::Auth(format!(
            "plugin \"{}\": auth_env names {var}, which is not set in the environment",
            pc.id
        ))),
    }
}

/// `cheng plugin diff ID`: the accepted and the pending component, and how the tools
/// they declare differ. Exit 1 while one is pending.
pub async fn diff(state: &Path, id: &str) -> Result<u8> {
    let store = Store::new(state);
    let Some(pulled) = store.pulled(id)? else {
        bail!(UsageError(format!("plugin \"{id}\" has not been pulled (`cheng plugin pull {id}`)")));
    };
    let accepted_tools = tools_of(&store, &pulled.accepted.sha256).await?;
    let mut shown = json!({
        "id": id,
        "source": pulled.source,
        "accepted": version(&pulled.accepted, &accepted_tools),
        "pending": null,
    });
    let Some(pending) = &pulled.pending else {
        emit_json(&shown)?;
        return Ok(0);
    };
    let pending_tools = tools_of(&store, &pending.sha256).await?;
    shown["pending"] = version(pending, &pending_tools);
    let by_name = |tools: &[Value]| -> std::collections::BTreeMap<String, Value> {
        tools.iter().map(|t| (t["name"].as_str().unwrap_or_default().to_string(), t.clone())).collect()
    };
    let (old, new) = (by_name(&accepted_tools), by_name(&pending_tools));
    let added: Vec<&String> = new.keys().filter(|k| !old.contains_key(*k)).collect();
    let removed: Vec<&String> = old.keys().filter(|k| !new.contains_key(*k)).collect();
    let mut changed = serde_json::Map::new();
    for (name, before) in &old {
        let Some(after) = new.get(name) else { continue };
        if before != after {
            let fields: Vec<&String> = match (before.as_object(), after.as_object()) {
                (Some(a), Some(b)) => a
                    .keys()
                    .chain(b.keys().filter(|k| !a.contains_key(*k)))
                    .filter(|k| a.get(*k) != b.get(*k))
                    .collect(),
                _ => Vec::new(),
            };
            changed.insert(name.clone(), json!({"fields": fields, "accepted": before, "pending": after}));
        }
    }
    shown["tools"] = json!({"added": added, "removed": removed, "changed": changed});
    emit_json(&shown)?;
    Ok(EXIT_ERROR)
}

fn version(v: &oci::Version, tools: &[Value]) -> Value {
    let mut out = serde_json::to_value(v).unwrap_or_default();
    out["tools"] = json!(tools.iter().map(|t| t["name"].clone()).collect::<Vec<_>>());
    out
}

/// The tools the stored component `sha256` declares, as `cheng plugin inspect` shows them.
async fn tools_of(store: &Store, sha256: &str) -> Result<Vec<Value>> {
    let wasm = store.read(sha256)?;
    let report = cheng_host::inspect(&wasm, &store.blob_path(sha256).display().to_string()).await?;
    Ok(report.tools.iter().map(serde_json::to_value).collect::<Result<_, _>>()?)
}

/// `cheng plugin accept ID`: the pending component becomes the accepted one.
pub fn accept(state: &Path, id: &str) -> Result<u8> {
    let store = Store::new(state);
    match oci::accept(&store, id) {
        Ok(Some(v)) => emit_json(&json!({"id": id, "accepted": v}))?,
        Ok(None) => emit_json(&json!({"id": id, "accepted": null, "message": "nothing is pending"}))?,
        Err(e @ OciError::NotPulled(_)) => bail!(UsageError(e.to_string())),
        Err(e) => return Err(e.into()),
    }
    Ok(0)
}
