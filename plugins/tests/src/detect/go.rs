//! Go: `go.mod` (and a `go.work` workspace).

use super::{Dir, suggestion};
use crate::*;

/// Look for this ecosystem in `dir` (at `rel`) and add what is found to `d`.
pub(super) fn detect(dir: &Dir, rel: &str, d: &mut Detected) {
    if let Some(text) = dir.read("go.mod") {
        d.add_type("go", "go");
        let module = text.lines().find_map(|l| l.strip_prefix("module ")).unwrap_or("").trim().to_string();
        let mut ev = vec![dir.ev("go.mod", &format!("module {module}"), Some("module "))];
        if dir.has("go.work") {
            ev.push(dir.ev("go.work", "Go workspace", None));
        }
        d.suggested_commands.push(suggestion("go test", "go", &["test", "./..."], rel, "high", ev));
    }
}
