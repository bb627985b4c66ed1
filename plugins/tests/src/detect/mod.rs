//! `detect`: one directory's manifests and lock files read (never a process), one file
//! per ecosystem, each adding the commands it suggests with the evidence that led to
//! them; then the suggestions ranked and summed up.

mod go;
mod java;
mod node;
mod python;
mod rust;

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use cheng_sdk::host::{self, EntryKind};
use cheng_sdk::prelude::*;

use crate::*;

impl Detected {
    /// `t` is one of the project's types; `pm` its package manager unless one is known.
    fn add_type(&mut self, t: &str, pm: &str) {
        if !self.project_types.iter().any(|x| x == t) {
            self.project_types.push(t.into());
        }
        if self.package_manager.is_none() {
            self.package_manager = Some(pm.into());
        }
    }
}

/// What detection looks at in one directory.
struct Dir {
    /// Workspace-relative, "." for the root.
    rel: String,
    names: BTreeSet<String>,
    /// Files read so far (a manifest is read once, however many evidence lines it gives).
    read: RefCell<HashMap<String, Option<Rc<str>>>>,
}

impl Dir {
    fn open(rel: &str) -> Result<Dir, Failure> {
        let entries = host::read_dir(rel, false)?;
        let names =
            entries.into_iter().filter(|e| e.valid_utf8 && e.kind != EntryKind::Symlink).map(|e| e.name).collect();
        Ok(Dir { rel: rel.to_string(), names, read: RefCell::default() })
    }

    fn path(&self, name: &str) -> String {
        if self.rel == "." { name.to_string() } else { format!("{}/{name}", self.rel) }
    }

    fn has(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    fn read(&self, name: &str) -> Option<Rc<str>> {
        if !self.has(name) {
            return None;
        }
        self.read
            .borrow_mut()
            .entry(name.to_string())
            .or_insert_with(|| {
                host::read_file(&self.path(name), MAX_MANIFEST).ok().map(|b| String::from_utf8_lossy(&b).into())
            })
            .clone()
    }

    fn ev(&self, name: &str, text: &str, needle: Option<&str>) -> Evidence {
        let content = needle.and_then(|_| self.read(name));
        let line = match (needle, &content) {
            (Some(n), Some(c)) => line_of(c, n),
            _ => None,
        };
        Evidence { file: self.path(name), line, text: text.to_string() }
    }
}

/// The package manager of the nearest ancestor of `rel` with a lock file or a
/// `packageManager` field.
fn ancestor_lock(rel: &str) -> Option<(String, Evidence)> {
    if rel == "." {
        return None;
    }
    let parts: Vec<&str> = rel.split('/').collect();
    for n in (0..parts.len()).rev() {
        let up = if n == 0 { ".".to_string() } else { parts[..n].join("/") };
        let Ok(d) = Dir::open(&up) else { continue };
        if let Some(spec) = d.read("package.json").and_then(|t| {
            serde_json::from_str::<serde_json::Value>(&t).ok()?.get("packageManager")?.as_str().map(str::to_string)
        }) {
            let name = spec.split('@').next().unwrap_or(&spec).to_string();
            return Some((
                name,
                d.ev("package.json", &format!("workspace root packageManager: {spec}"), Some("\"packageManager\"")),
            ));
        }
        for (file, pm) in [
            ("pnpm-lock.yaml", "pnpm"),
            ("yarn.lock", "yarn"),
            ("bun.lock", "bun"),
            ("bun.lockb", "bun"),
            ("package-lock.json", "npm"),
        ] {
            if d.has(file) {
                return Some((pm.to_string(), d.ev(file, &format!("workspace root {pm} lock file"), None)));
            }
        }
    }
    None
}

/// The first 1-based line containing `needle`.
fn line_of(text: &str, needle: &str) -> Option<u32> {
    text.lines().position(|l| l.contains(needle)).map(|i| i as u32 + 1)
}

fn suggestion(
    runner: &str,
    command: &str,
    args: &[&str],
    cwd: &str,
    confidence: &str,
    evidence: Vec<Evidence>,
) -> Suggestion {
    Suggestion {
        runner: runner.into(),
        command: command.into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        cwd: cwd.into(),
        confidence: confidence.into(),
        evidence,
    }
}

pub(crate) fn detect(input: &TestsInput, cx: &Context) -> Result<TestsOutput, Failure> {
    let cwd_in = input.cwd.as_deref().filter(|c| !c.trim().is_empty()).unwrap_or(".");
    let resolved = cx.resolve(cwd_in)?;
    let rel = if resolved.rel.is_empty() { ".".to_string() } else { resolved.rel.clone() };
    let dir = Dir::open(&rel)?;
    let mut d = Detected::default();
    rust::detect(&dir, &rel, &mut d);
    node::detect(&dir, &rel, &mut d);
    python::detect(&dir, &rel, &mut d);
    go::detect(&dir, &rel, &mut d);
    java::detect(&dir, &rel, &mut d);

    // The most likely first.
    let rank = |c: &str| match c {
        "high" => 0,
        "medium" => 1,
        _ => 2,
    };
    d.suggested_commands.sort_by_key(|s| rank(&s.confidence));
    d.confidence = d.suggested_commands.first().map(|s| s.confidence.clone()).unwrap_or_else(|| "none".into());
    let mut seen = BTreeSet::new();
    d.evidence = d
        .suggested_commands
        .iter()
        .flat_map(|s| s.evidence.iter().cloned())
        .filter(|e| seen.insert((e.file.clone(), e.line, e.text.clone())))
        .collect();
    let found = !d.suggested_commands.is_empty();
    let summary = match d.suggested_commands.first() {
        Some(s) => format!(
            "Detected {} in {rel}; most likely test command: `{} {}` ({} confidence){}",
            d.project_types.join(", "),
            s.command,
            s.args.join(" "),
            s.confidence,
            if d.suggested_commands.len() > 1 {
                format!(", {} more suggested", d.suggested_commands.len() - 1)
            } else {
                String::new()
            }
        ),
        None => format!(
            "No test setup found in {rel}: no Cargo.toml, package.json, pyproject.toml, setup.cfg, tox.ini, pytest.ini, go.mod, pom.xml or build.gradle here. \
             In a monorepo, pass the project's directory as cwd"
        ),
    };
    Ok(TestsOutput {
        operation: "detect".into(),
        success: found,
        summary,
        detected_project: Some(d),
        ..Default::default()
    })
}
