//! Node: `package.json` (its test script and runner dependencies), the package manager
//! from `packageManager` or a lock file (here or at the workspace root), and workspaces.

use super::ancestor_lock;
use super::{Dir, suggestion};
use crate::*;

/// Look for this ecosystem in `dir` (at `rel`) and add what is found to `d`.
pub(super) fn detect(dir: &Dir, rel: &str, d: &mut Detected) {
    if let Some(text) = dir.read("package.json") {
        let pkg: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let (pm, pm_ev) = if let Some(spec) = pkg.get("packageManager").and_then(|v| v.as_str()) {
            let name = spec.split('@').next().unwrap_or(spec).to_string();
            (name, dir.ev("package.json", &format!("packageManager: {spec}"), Some("\"packageManager\"")))
        } else if dir.has("pnpm-lock.yaml") {
            ("pnpm".into(), dir.ev("pnpm-lock.yaml", "pnpm lock file", None))
        } else if dir.has("yarn.lock") {
            ("yarn".into(), dir.ev("yarn.lock", "yarn lock file", None))
        } else if dir.has("bun.lockb") || dir.has("bun.lock") {
            let f = if dir.has("bun.lock") { "bun.lock" } else { "bun.lockb" };
            ("bun".into(), dir.ev(f, "bun lock file", None))
        } else if dir.has("package-lock.json") {
            ("npm".into(), dir.ev("package-lock.json", "npm lock file", None))
        } else if let Some(found) = ancestor_lock(&dir.rel) {
            // A package inside a monorepo: the workspace root's lock file decides.
            found
        } else {
            ("npm".into(), dir.ev("package.json", "package.json without a lock file: npm assumed", None))
        };
        d.add_type("node", &pm);
        let deps = |name: &str| {
            ["dependencies", "devDependencies"].iter().any(|k| pkg.get(k).and_then(|m| m.get(name)).is_some())
        };
        let script = pkg.get("scripts").and_then(|s| s.get("test")).and_then(|v| v.as_str());
        if let Some(s) = script.filter(|s| !s.contains("no test specified")) {
            let runner = if s.contains("vitest") {
                "vitest"
            } else if s.contains("jest") {
                "jest"
            } else {
                "npm script"
            };
            d.suggested_commands.push(suggestion(
                runner,
                &pm,
                &["test"],
                rel,
                "high",
                vec![dir.ev("package.json", &format!("scripts.test: {s}"), Some("\"test\"")), pm_ev.clone()],
            ));
        }
        let exec: (&str, Vec<&str>) = match pm.as_str() {
            "pnpm" => ("pnpm", vec!["exec"]),
            "yarn" => ("yarn", vec![]),
            "bun" => ("bunx", vec![]),
            _ => ("npx", vec![]),
        };
        for (runner, tail) in [("vitest", vec!["vitest", "run"]), ("jest", vec!["jest"])] {
            if deps(runner) {
                let mut args = exec.1.clone();
                args.extend(tail);
                let conf = if d.suggested_commands.iter().any(|s| s.runner == runner) { "medium" } else { "high" };
                d.suggested_commands.push(suggestion(
                    runner,
                    exec.0,
                    &args,
                    rel,
                    conf,
                    vec![
                        dir.ev("package.json", &format!("{runner} is a dependency"), Some(&format!("\"{runner}\""))),
                        pm_ev.clone(),
                    ],
                ));
            }
        }
        let ws_members: Vec<String> = match pkg.get("workspaces") {
            Some(serde_json::Value::Array(a)) => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
            Some(serde_json::Value::Object(o)) => o
                .get("packages")
                .and_then(|p| p.as_array())
                .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        if !ws_members.is_empty() && d.monorepo.is_none() {
            d.monorepo = Some(Monorepo {
                kind: pm.clone(),
                members: ws_members,
                evidence: dir.ev("package.json", "workspaces", Some("\"workspaces\"")),
            });
        } else if let Some(y) = dir.read("pnpm-workspace.yaml").filter(|_| d.monorepo.is_none()) {
            let members = y
                .lines()
                .filter_map(|l| l.trim().strip_prefix("- "))
                .map(|m| m.trim_matches(|c| c == '\'' || c == '"').to_string())
                .collect();
            d.monorepo = Some(Monorepo {
                kind: "pnpm".into(),
                members,
                evidence: dir.ev("pnpm-workspace.yaml", "pnpm workspace", Some("packages")),
            });
        }
    }
}
