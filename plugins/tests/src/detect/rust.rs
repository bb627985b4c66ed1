//! Rust: `Cargo.toml` (a crate or a workspace and its members), `Cargo.lock`, and
//! nextest's configuration.

use super::{Dir, suggestion};
use crate::*;

/// Look for this ecosystem in `dir` (at `rel`) and add what is found to `d`.
pub(super) fn detect(dir: &Dir, rel: &str, d: &mut Detected) {
    if let Some(text) = dir.read("Cargo.toml") {
        let parsed: Option<toml::Table> = text.parse().ok();
        let has_pkg = parsed.as_ref().is_some_and(|t| t.contains_key("package"));
        let ws = parsed.as_ref().and_then(|t| t.get("workspace")).and_then(|w| w.as_table());
        d.add_type("rust", "cargo");
        let mut ev = Vec::new();
        if has_pkg {
            ev.push(dir.ev("Cargo.toml", "[package]: a crate", Some("[package]")));
        }
        if let Some(ws) = ws {
            let members: Vec<String> = ws
                .get("members")
                .and_then(|m| m.as_array())
                .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            let e = dir.ev("Cargo.toml", "[workspace]: a Cargo workspace", Some("[workspace]"));
            ev.push(e.clone());
            if !members.is_empty() {
                d.monorepo = Some(Monorepo { kind: "cargo".into(), members, evidence: e });
            }
        }
        if dir.has("Cargo.lock") {
            ev.push(dir.ev("Cargo.lock", "lock file", None));
        }
        let (args, conf): (&[&str], &str) = match (ws.is_some(), has_pkg) {
            (true, _) => (&["test", "--workspace"], "high"),
            (false, true) => (&["test"], "high"),
            _ => (&["test"], "low"),
        };
        d.suggested_commands.push(suggestion("cargo test", "cargo", args, rel, conf, ev.clone()));
        let nextest_cfg = Dir::open(&dir.path(".config")).ok().filter(|c| c.has("nextest.toml"));
        if let Some(c) = nextest_cfg {
            let mut ev2 = ev;
            ev2.push(c.ev("nextest.toml", "nextest configuration", None));
            d.suggested_commands.push(suggestion("nextest", "cargo", &["nextest", "run"], rel, "medium", ev2));
        }
    }
}
