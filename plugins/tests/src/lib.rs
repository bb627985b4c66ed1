//! The `tests` component: `workspace_tests`.
//!
//! - `detect` reads manifests and lock files (read-only, no process) and suggests the
//!   commands that run the project's tests, each with the files and lines that led to
//!   it and a confidence.
//! - `run` asks the host to run an explicit command (the host's policy, approval card,
//!   confinement and caps apply, as for `workspace_shell`) and reads the runner's output
//!   into counts and failure locations (`cheng-test-report`).

use cheng_sdk::host::{self, Termination};
use cheng_sdk::prelude::*;
use cheng_test_report::{parse, runner_hint};

/// Default budget of a test run.
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;
/// Longest budget; longer requests are clamped (the contract's, as for every command).
pub use cheng_sdk::host::MAX_TIMEOUT_MS;
/// Largest manifest read.
const MAX_MANIFEST: u64 = 1 << 20;

mod detect;

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
            Operation::Detect => detect::detect(&input, cx),
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
    let verdict = out.verdict();
    let summary = run_summary(&out, &verdict.summary, &counts);
    Ok(TestsOutput {
        operation: "run".into(),
        success: verdict.success,
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
        error_kind: verdict.error_kind.map(|k| k.code().to_string()),
        terminal: verdict.terminal,
        error: verdict.error,
        ..Default::default()
    })
}

/// A run's summary: the contract's sentence for how the command ended, with the verdict
/// of the tests and their counts.
fn run_summary(out: &host::Outcome, ended: &str, counts: &str) -> String {
    match out.termination {
        Termination::Exited => {
            let verdict = if out.exit_code == Some(0) { "passed" } else { "failed" };
            format!("Tests {verdict}: {counts}; {ended} after {:.1} s", out.duration_ms as f64 / 1000.0)
        }
        Termination::SpawnFailed => ended.to_string(),
        Termination::TimedOut | Termination::Cancelled | Termination::Signalled => format!("{ended}; {counts}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(out: host::Outcome) -> String {
        run_summary(&out, &out.verdict().summary, "3 passed, 1 failed")
    }

    fn outcome(termination: Termination) -> host::Outcome {
        host::Outcome { duration_ms: 2340, timeout_ms: 300_000, ..host::Outcome::new("cargo test", termination) }
    }

    #[test]
    fn the_summary_is_the_contracts_sentence_with_the_counts() {
        assert_eq!(
            summary(host::Outcome { exit_code: Some(0), ..outcome(Termination::Exited) }),
            "Tests passed: 3 passed, 1 failed; `cargo test` exited with code 0 after 2.3 s"
        );
        assert_eq!(
            summary(host::Outcome { exit_code: Some(101), ..outcome(Termination::Exited) }),
            "Tests failed: 3 passed, 1 failed; `cargo test` failed with exit code 101 after 2.3 s"
        );
        assert_eq!(
            summary(outcome(Termination::TimedOut)),
            "Command timed out after 300000 ms and was killed; 3 passed, 1 failed"
        );
        assert_eq!(
            summary(outcome(Termination::Cancelled)),
            "Command was cancelled after 2340 ms and was killed; 3 passed, 1 failed"
        );
        assert_eq!(
            summary(host::Outcome { signal: Some(6), ..outcome(Termination::Signalled) }),
            "`cargo test` was killed by SIGABRT; 3 passed, 1 failed"
        );
        assert_eq!(summary(outcome(Termination::Signalled)), "`cargo test` was killed by a signal; 3 passed, 1 failed");
        assert_eq!(
            summary(host::Outcome { error: Some("no cargo".into()), ..outcome(Termination::SpawnFailed) }),
            "`cargo test` could not be started: no cargo"
        );
    }
}
