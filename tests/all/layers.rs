//! The host library's modules form layers: each may use only modules of a lower layer,
//! so no two modules import each other, directly or around a loop. Where a layer is a
//! crate of its own, cargo keeps the order (the call core, `cheng-core`, below; the server
//! and the command line, `cheng-serve`, above); inside `cheng-host` the order below is the
//! one `host/src/lib.rs` describes, and this test reads every `crate::` path in the
//! library's sources (comments aside) and fails on any use that points sideways or up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Bottom to top. Modules in one layer do not use each other.
const LAYERS: &[&[&str]] = &[
    &["egress", "schema", "signature"],
    &["error", "oci"],
    &["process"],
    &["runtime"],
    &["builtin", "sources"],
    &["registry", "observe"],
    &["telemetry"],
    &["plugins", "pipeline"],
    &["inspect", "host"],
    &["builder"],
];

/// Items re-exported at the crate's root, by the module that defines them.
const ROOT_ITEMS: &[(&str, &str)] = &[
    ("HostError", "error"),
    ("valid_plugin_id", "policy"),
    ("PluginSpec", "plugins"),
    ("PluginError", "plugins"),
    ("plugin_signature_path", "plugins"),
    ("ToolSpec", "runtime"),
    ("Host", "host"),
    ("ToolInfo", "host"),
    ("Inspection", "inspect"),
    ("inspect", "inspect"),
    ("HostBuilder", "builder"),
    // `lib.rs` itself only describes the machine's confinement, from `process`.
    ("confinement", "process"),
    ("Confinement", "process"),
    ("ProcessStat", "process"),
    ("process_stat", "process"),
    // Crates below the host's own layers, whose direction cargo enforces: the call core
    // (cheng-core), the policy crate (cheng-policy, with its grants) and the contract
    // (cheng-contract).
    ("Context", ""),
    ("ToolResult", ""),
    ("Status", ""),
    ("CallRecord", ""),
    ("new_id", ""),
    ("unix_ms", ""),
    ("ErrorKind", ""),
    ("approvals", ""),
    ("atomic", ""),
    ("call", ""),
    ("capability", ""),
    ("guard", ""),
    ("records", ""),
    ("runstate", ""),
    ("testing", ""),
    ("trace", ""),
    ("policy", ""),
    ("grant", ""),
    ("FsAccess", ""),
    ("Needs", ""),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The first segment of every `crate::` path in `text` (line comments dropped).
fn crate_uses(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // `crate::{a, b::c, d::{e, f}}`: the first segment at depth 0.
                let (mut depth, mut item) = (0, String::new());
                for c in group.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            found.push(first_segment(&item));
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    if depth == 0 || c != '{' {
                        item.push(c);
                    }
                }
                found.push(first_segment(&item));
            } else {
                found.push(first_segment(rest));
            }
        }
    }
    found.retain(|s| !s.is_empty() && s != "self");
    found
}

fn first_segment(s: &str) -> String {
    s.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

#[test]
fn every_module_uses_only_lower_layers() {
    let src = crate::util::repo().join("host/src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let roots: BTreeMap<&str, &str> = ROOT_ITEMS.iter().copied().collect();
    let mut wrong = Vec::new();
    let mut seen_files = 0;
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let module = rel.iter().next().unwrap().to_string_lossy().trim_end_matches(".rs").to_string();
        if module == "main" || module == "lib" {
            continue;
        }
        let Some(own) = layer_of(&module) else {
            wrong.push(format!("{}: module `{module}` is in no layer; add it to LAYERS", rel.display()));
            continue;
        };
        seen_files += 1;
        for used in crate_uses(&std::fs::read_to_string(file).unwrap()) {
            let target = roots.get(used.as_str()).map(|m| m.to_string()).unwrap_or(used.clone());
            if target.is_empty() || target == module {
                continue;
            }
            match layer_of(&target) {
                Some(l) if l < own => {}
                Some(l) => wrong.push(format!(
                    "{}: `{module}` (layer {own}) uses `crate::{used}` of `{target}` (layer {l}), which is not below it",
                    rel.display()
                )),
                None => wrong.push(format!("{}: `crate::{used}` names no module in LAYERS", rel.display())),
            }
        }
    }
    assert!(seen_files > 40, "the sources were not found under {}", src.display());
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn the_reader_sees_an_upward_use() {
    // The control: the parser finds every form of path the check relies on.
    let text = "use crate::host::Inner;\nuse crate::{call::{CallScope, say}, ErrorKind};\n// crate::server in a comment\nlet x = crate::pipeline::f();";
    assert_eq!(crate_uses(text), ["host", "call", "ErrorKind", "pipeline"]);
}
