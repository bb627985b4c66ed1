//! The `tests` component: `workspace_tests`.
//!
//! - `detect` reads manifests and lock files (read-only, no process) and suggests the
//!   commands that run the project's tests, each with the files and lines that led to
//!   it and a confidence.
//! - `run` asks the host to run an explicit command (the host's policy, approval card,
//!   confinement and caps apply, as for `workspace_shell`) and reads the runner's output
//!   into counts and failure locations (`cheng-test-report`).

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

use cheng_sdk::host::{self, EntryKind, Termination};
use cheng_sdk::prelude::*;
use cheng_test_report::{parse, runner_hint};

/// Default budget of a test run.
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;
/// Longest budget; longer requests are clamped.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Largest manifest read.
const MAX_MANIFEST: u64 = 1 << 20;

#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    // Explained by the tool's description; no doc comments, so the schema is a plain `enum`.
    Detect,
    Run,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestsInput {
    operation: Operation,
    /// run: e.g. "cargo".
    #[serde(default)]
    command: Option<String>,
    /// run: literal.
    #[serde(default)]
    args: Vec<String>,
    /// The project's directory (e.g. one inside a monorepo).
    #[serde(default)]
    cwd: Option<String>,
    /// run: default 300000, at most 600000.
    #[serde(default)]
    #[schemars(range(min = 1))]
    timeout_ms: Option<u64>,
}

#[derive(Serialize, JsonSchema, Clone)]
pub struct Evidence {
    /// Workspace-relative file.
    file: String,
    /// 1-based line, when one line says it.
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
    /// What that line or file shows.
    text: String,
}

#[derive(Serialize, JsonSchema, Clone)]
pub struct Suggestion {
    /// The runner it starts (cargo test, nextest, pytest, unittest, jest, vitest, npm script, go test, maven, gradle, tox).
    runner: String,
    /// Program to pass as `command` to run.
    command: String,
    /// Arguments to pass as `args`.
    args: Vec<String>,
    /// Directory to pass as `cwd`.
    cwd: String,
    /// high, medium or low.
    confidence: String,
    /// Why.
    evidence: Vec<Evidence>,
}

#[derive(Serialize, JsonSchema, Clone)]
pub struct Monorepo {
    /// cargo, npm, pnpm, yarn, go, maven or gradle.
    kind: String,
    /// Member globs or paths as the manifest lists them.
    members: Vec<String>,
    /// Where it is declared.
    evidence: Evidence,
}

#[derive(Serialize, JsonSchema, Clone, Default)]
pub struct Detected {
    /// rust, node, python, go, java (maven or gradle).
    project_types: Vec<String>,
    /// cargo, npm, pnpm, yarn, bun, pip, poetry, uv, go, maven or gradle — the first found.
    package_manager: Option<String>,
    /// Commands to run the tests, most likely first.
    suggested_commands: Vec<Suggestion>,
    /// The best suggestion's confidence (none when nothing was found).
    confidence: String,
    /// Every file and line that was used.
    evidence: Vec<Evidence>,
    /// Set when the directory declares a workspace of several projects.
    monorepo: Option<Monorepo>,
}

#[derive(Serialize, JsonSchema)]
pub struct FailureHint {
    /// The test.
    name: String,
    /// Its file, when the output says.
    file: Option<String>,
    /// Its line, when the output says.
    line: Option<u32>,
    /// The first lines of the failure.
    message: String,
}

#[derive(Serialize, JsonSchema, Default)]
pub struct TestsOutput {
    operation: String,
    /// detect: something was found; run: the command exited 0.
    success: bool,
    summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    detected_project: Option<Detected>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command_display: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    passed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ms: Option<u64>,
    /// Best effort.
    #[serde(skip_serializing_if = "Option::is_none")]
    failure_summary: Option<Vec<FailureHint>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    runner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    termination: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stdout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stdout_truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stderr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stderr_truncated: Option<bool>,
    error_kind: Option<String>,
    terminal: bool,
    error: Option<String>,
}

pub struct WorkspaceTests;
impl Tool for WorkspaceTests {
    const NAME: &'static str = "workspace_tests";
    const DESCRIPTION: &'static str = "Find and run tests. detect suggests commands from manifests and runs nothing; \
        run runs `command` + `args` (default timeout 300 s, max 600 s) and parses cargo, pytest, jest, vitest and go \
        test output.";
    const NEEDS: Needs = Needs::READ.with_spawn();
    type Input = TestsInput;
    type Output = TestsOutput;

    fn run(input: TestsInput, cx: &Context) -> Result<TestsOutput, Failure> {
        match input.operation {
            Operation::Detect => detect(&input, cx),
            Operation::Run => run(&input),
        }
    }
}

cheng_sdk::export_tools!(WorkspaceTests);

fn run(input: &TestsInput) -> Result<TestsOutput, Failure> {
    let command = input.command.clone().unwrap_or_default();
    if command.trim().is_empty() {
        return Err(Failure::invalid_argument(
            "operation run needs `command` (and `args`): e.g. command \"cargo\", args [\"test\"]; use operation detect to find the project's commands",
        ));
    }
    let timeout = input.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS).clamp(1, MAX_TIMEOUT_MS);
    let req = host::Command {
        command: command.clone(),
        args: input.args.clone(),
        shell_string: None,
        cwd: input.cwd.clone(),
        env: Vec::new(),
        timeout_ms: Some(timeout),
        purpose: Some("Run the project's tests".to_string()),
    };
    let out = host::run_process(&req)?;
    let report = parse(runner_hint(&command, &input.args), &out.stdout, &out.stderr);
    let runner = report
        .runner
        .map(|r| serde_json::to_value(r).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default());
    let counts = match (report.passed, report.failed) {
        (Some(p), Some(f)) => format!("{p} passed, {f} failed"),
        (None, Some(f)) => format!("{f} failed"),
        _ => format!("counts unknown ({})", report.note.clone().unwrap_or_default()),
    };
    let secs = out.duration_ms as f64 / 1000.0;
    let (summary, error_kind, terminal, error) = match out.termination {
        Termination::Exited => {
            let code = out.exit_code.unwrap_or(-1);
            let verdict = if code == 0 { "passed" } else { "failed" };
            (
                format!(
                    "Tests {verdict}: {counts}; `{}` exited with code {code} after {secs:.1} s",
                    out.command_display
                ),
                None,
                false,
                None,
            )
        }
        Termination::TimedOut => (
            format!("Command timed out after {} ms and was killed; {counts}", out.timeout_ms),
            Some(ErrorKind::Timeout),
            false,
            Some(format!(
                "the test run was still going after {} ms; give a larger timeout_ms (at most {MAX_TIMEOUT_MS}) or run fewer tests",
                out.timeout_ms
            )),
        ),
        Termination::Cancelled => (
            format!("The test run was cancelled after {secs:.1} s; {counts}"),
            Some(ErrorKind::Cancelled),
            false,
            Some("the call was cancelled; the run and everything it started were stopped".into()),
        ),
        Termination::Signalled => (
            format!("`{}` was ended by signal {}; {counts}", out.command_display, out.signal.unwrap_or(0)),
            None,
            false,
            Some(format!("the test process was ended by signal {}", out.signal.unwrap_or(0))),
        ),
        Termination::SpawnFailed => {
            let why = out.error.clone().unwrap_or_else(|| "it could not be started".into());
            (
                format!("`{}` could not be started: {why}", out.command_display),
                Some(ErrorKind::SpawnFailed),
                true,
                Some(why),
            )
        }
    };
    Ok(TestsOutput {
        operation: "run".into(),
        success: out.termination == Termination::Exited && out.exit_code == Some(0),
        summary,
        command_display: Some(out.command_display.clone()),
        passed: report.passed,
        failed: report.failed,
        duration_ms: Some(out.duration_ms),
        failure_summary: Some(
            report
                .failures
                .into_iter()
                .map(|f| FailureHint { name: f.name, file: f.file, line: f.line, message: f.message })
                .collect(),
        ),
        runner,
        termination: Some(out.termination.as_str().to_string()),
        exit_code: out.exit_code,
        stdout: Some(out.stdout),
        stdout_truncated: Some(out.stdout_truncated),
        stderr: Some(out.stderr),
        stderr_truncated: Some(out.stderr_truncated),
        error_kind: error_kind.map(|k| k.code().to_string()),
        terminal,
        error,
        ..Default::default()
    })
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

fn detect(input: &TestsInput, cx: &Context) -> Result<TestsOutput, Failure> {
    let cwd_in = input.cwd.as_deref().filter(|c| !c.trim().is_empty()).unwrap_or(".");
    let resolved = cx.resolve(cwd_in)?;
    let rel = if resolved.rel.is_empty() { ".".to_string() } else { resolved.rel.clone() };
    let dir = Dir::open(&rel)?;
    let mut d = Detected::default();
    let add_type = |d: &mut Detected, t: &str, pm: &str| {
        if !d.project_types.iter().any(|x| x == t) {
            d.project_types.push(t.into());
        }
        if d.package_manager.is_none() {
            d.package_manager = Some(pm.into());
        }
    };

    // Rust.
    if let Some(text) = dir.read("Cargo.toml") {
        let parsed: Option<toml::Table> = text.parse().ok();
        let has_pkg = parsed.as_ref().is_some_and(|t| t.contains_key("package"));
        let ws = parsed.as_ref().and_then(|t| t.get("workspace")).and_then(|w| w.as_table());
        add_type(&mut d, "rust", "cargo");
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
        d.suggested_commands.push(suggestion("cargo test", "cargo", args, &rel, conf, ev.clone()));
        let nextest_cfg = Dir::open(&dir.path(".config")).ok().filter(|c| c.has("nextest.toml"));
        if let Some(c) = nextest_cfg {
            let mut ev2 = ev;
            ev2.push(c.ev("nextest.toml", "nextest configuration", None));
            d.suggested_commands.push(suggestion("nextest", "cargo", &["nextest", "run"], &rel, "medium", ev2));
        }
    }

    // Node.
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
        add_type(&mut d, "node", &pm);
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
                &rel,
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
                    &rel,
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

    // Python.
    let mut py_ev: Vec<Evidence> = Vec::new();
    let mut pytest_conf = None::<&str>;
    let mut py_pm = "pip";
    if let Some(text) = dir.read("pyproject.toml") {
        if text.contains("[tool.pytest.ini_options]") {
            py_ev.push(dir.ev(
                "pyproject.toml",
                "[tool.pytest.ini_options]: pytest configuration",
                Some("[tool.pytest.ini_options]"),
            ));
            pytest_conf = Some("high");
        } else if text.contains("pytest") {
            py_ev.push(dir.ev("pyproject.toml", "pytest is listed", Some("pytest")));
            pytest_conf.get_or_insert("medium");
        } else {
            py_ev.push(dir.ev("pyproject.toml", "a Python project", None));
        }
        if text.contains("[tool.poetry") {
            py_pm = "poetry";
        }
    }
    if dir.has("uv.lock") {
        py_pm = "uv";
        py_ev.push(dir.ev("uv.lock", "uv lock file", None));
    } else if dir.has("poetry.lock") {
        py_pm = "poetry";
        py_ev.push(dir.ev("poetry.lock", "poetry lock file", None));
    }
    if dir.has("pytest.ini") {
        py_ev.push(dir.ev("pytest.ini", "pytest configuration", None));
        pytest_conf = Some("high");
    }
    if let Some(text) = dir.read("setup.cfg")
        && text.contains("[tool:pytest]")
    {
        py_ev.push(dir.ev("setup.cfg", "[tool:pytest]: pytest configuration", Some("[tool:pytest]")));
        pytest_conf = Some("high");
    }
    let mut tox = None;
    if let Some(text) = dir.read("tox.ini") {
        if text.contains("[pytest]") {
            py_ev.push(dir.ev("tox.ini", "[pytest]: pytest configuration", Some("[pytest]")));
            pytest_conf = Some("high");
        }
        if text.contains("[tox]") {
            tox = Some(dir.ev("tox.ini", "[tox]: tox environments", Some("[tox]")));
        }
    }
    if dir.has("conftest.py") {
        py_ev.push(dir.ev("conftest.py", "pytest fixtures", None));
        pytest_conf.get_or_insert("medium");
    }
    // Test files: test_*.py here or in tests/.
    let mut test_files: Vec<String> =
        dir.names.iter().filter(|n| n.starts_with("test") && n.ends_with(".py")).map(|n| dir.path(n)).collect();
    if dir.has("tests")
        && let Ok(t) = Dir::open(&dir.path("tests"))
    {
        test_files.extend(t.names.iter().filter(|n| n.starts_with("test") && n.ends_with(".py")).map(|n| t.path(n)));
    }
    let is_python = !py_ev.is_empty() || !test_files.is_empty() || dir.has("setup.py") || dir.has("requirements.txt");
    if is_python {
        add_type(&mut d, "python", py_pm);
        let mut uses_unittest = None;
        let mut uses_pytest = false;
        for f in test_files.iter().take(20) {
            if let Ok(b) = host::read_file(f, MAX_MANIFEST) {
                let t = String::from_utf8_lossy(&b);
                if uses_unittest.is_none()
                    && let Some(l) = line_of(&t, "import unittest")
                {
                    uses_unittest = Some(Evidence { file: f.clone(), line: Some(l), text: "imports unittest".into() });
                }
                uses_pytest |= t.contains("import pytest") || t.contains("def test_");
            }
        }
        if let Some(f) = test_files.first() {
            py_ev.push(Evidence { file: f.clone(), line: None, text: format!("{} test file(s)", test_files.len()) });
        }
        let (cmd, pre): (&str, Vec<&str>) = match py_pm {
            "poetry" => ("poetry", vec!["run", "pytest"]),
            "uv" => ("uv", vec!["run", "pytest"]),
            _ => ("python3", vec!["-m", "pytest"]),
        };
        match (pytest_conf, &uses_unittest) {
            (Some(conf), _) => d.suggested_commands.push(suggestion("pytest", cmd, &pre, &rel, conf, py_ev.clone())),
            (None, Some(u)) if !uses_pytest => {
                let mut ev = py_ev.clone();
                ev.push(u.clone());
                d.suggested_commands.push(suggestion("unittest", "python3", &["-m", "unittest"], &rel, "medium", ev));
            }
            (None, _) if !test_files.is_empty() => {
                d.suggested_commands.push(suggestion("pytest", cmd, &pre, &rel, "medium", py_ev.clone()));
            }
            _ => {}
        }
        if let Some(t) = tox {
            d.suggested_commands.push(suggestion("tox", "tox", &[], &rel, "medium", vec![t]));
        }
    }

    // Go.
    if let Some(text) = dir.read("go.mod") {
        add_type(&mut d, "go", "go");
        let module = text.lines().find_map(|l| l.strip_prefix("module ")).unwrap_or("").trim().to_string();
        let mut ev = vec![dir.ev("go.mod", &format!("module {module}"), Some("module "))];
        if dir.has("go.work") {
            ev.push(dir.ev("go.work", "Go workspace", None));
        }
        d.suggested_commands.push(suggestion("go test", "go", &["test", "./..."], &rel, "high", ev));
    }

    // Java.
    if dir.has("pom.xml") {
        add_type(&mut d, "java", "maven");
        let (cmd, ev2) =
            if dir.has("mvnw") { ("./mvnw", Some(dir.ev("mvnw", "Maven wrapper", None))) } else { ("mvn", None) };
        let mut ev = vec![dir.ev("pom.xml", "Maven project", None)];
        ev.extend(ev2);
        d.suggested_commands.push(suggestion("maven", cmd, &["test"], &rel, "high", ev));
        if let Some(t) = dir.read("pom.xml")
            && let Some(l) = line_of(&t, "<modules>")
        {
            let members = t
                .lines()
                .filter_map(|l| l.trim().strip_prefix("<module>"))
                .map(|m| m.trim_end_matches("</module>").to_string())
                .collect();
            d.monorepo.get_or_insert(Monorepo {
                kind: "maven".into(),
                members,
                evidence: Evidence { file: dir.path("pom.xml"), line: Some(l), text: "<modules>".into() },
            });
        }
    }
    let gradle_file =
        ["build.gradle.kts", "build.gradle", "settings.gradle.kts", "settings.gradle"].into_iter().find(|f| dir.has(f));
    if let Some(f) = gradle_file {
        add_type(&mut d, "java", "gradle");
        let (cmd, ev2) = if dir.has("gradlew") {
            ("./gradlew", Some(dir.ev("gradlew", "Gradle wrapper", None)))
        } else {
            ("gradle", None)
        };
        let mut ev = vec![dir.ev(f, "Gradle build", None)];
        ev.extend(ev2);
        d.suggested_commands.push(suggestion("gradle", cmd, &["test"], &rel, "high", ev));
    }

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
