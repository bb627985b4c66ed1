//! The `shell` component: `workspace_shell`. It holds no authority of its own: it turns
//! the model's request into a `cheng:tool/process` request, and the host checks policy,
//! asks for approval, runs the command confined (cwd through the workspace guard,
//! allowlisted environment, Landlock, a cgroup), bounds its time and output, and stops
//! its whole process tree. This component only shapes the answer.

use std::collections::BTreeMap;

use cheng_sdk::host::{self, Termination};
use cheng_sdk::prelude::*;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellInput {
    /// e.g. "cargo"; from PATH or "./gradlew". Not this tool's name.
    #[serde(default)]
    command: String,
    /// Not shell-parsed.
    #[serde(default)]
    args: Vec<String>,
    /// Instead of command + args; shell syntax is refused unless enabled.
    #[serde(default)]
    shell_string: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
    /// Allowlisted names only.
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Default 60000, at most 600000 (longer is clamped).
    #[serde(default)]
    #[schemars(range(min = 1))]
    timeout_ms: Option<u64>,
    #[serde(default)]
    purpose: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct ShellOutput {
    success: bool,
    summary: String,
    command_display: String,
    cwd: String,
    exit_code: Option<i32>,
    termination: String,
    duration_ms: u64,
    stdout: String,
    stdout_truncated: bool,
    stderr: String,
    stderr_truncated: bool,
    error_kind: Option<String>,
    terminal: bool,
    error: Option<String>,
}

pub struct WorkspaceShell;
impl Tool for WorkspaceShell {
    const NAME: &'static str = "workspace_shell";
    const DESCRIPTION: &'static str = "Run a program (build, test, lint). Default timeout 60 s, max 600 s. A non-zero \
        exit is reported, not an error.";
    const NEEDS: Needs = Needs::NONE.with_spawn();
    type Input = ShellInput;
    type Output = ShellOutput;

    fn run(input: ShellInput, _cx: &Context) -> Result<ShellOutput, Failure> {
        let cmd = host::Command {
            command: input.command,
            args: input.args,
            shell_string: input.shell_string,
            cwd: input.cwd,
            env: input.env.into_iter().collect(),
            timeout_ms: input.timeout_ms,
            purpose: input.purpose,
        };
        Ok(shape(host::run_process(&cmd)?))
    }
}

/// The tool's answer: the contract's verdict, with what only this tool says (a command
/// that printed nothing, stderr to read, output cut).
fn shape(out: host::Outcome) -> ShellOutput {
    let verdict = out.verdict();
    let mut summary = verdict.summary;
    if out.termination == Termination::Exited {
        if out.stdout.is_empty() && out.stderr.is_empty() {
            summary.push_str(" and printed nothing");
        } else if !verdict.success && !out.stderr.is_empty() {
            summary.push_str("; stderr says why");
        }
    }
    if out.stdout_truncated || out.stderr_truncated {
        summary.push_str(" (output cut: head and tail kept)");
    }
    ShellOutput {
        success: verdict.success,
        summary,
        command_display: out.command_display,
        cwd: out.cwd,
        exit_code: out.exit_code,
        termination: out.termination.as_str().to_string(),
        duration_ms: out.duration_ms,
        stdout: out.stdout,
        stdout_truncated: out.stdout_truncated,
        stderr: out.stderr,
        stderr_truncated: out.stderr_truncated,
        error_kind: verdict.error_kind.map(|k| k.code().to_string()),
        terminal: verdict.terminal,
        error: verdict.error,
    }
}

cheng_sdk::export_tools!(WorkspaceShell);

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(termination: Termination) -> host::Outcome {
        host::Outcome { timeout_ms: 300, duration_ms: 40, ..host::Outcome::new("sh -c 'exit 3'", termination) }
    }

    #[test]
    fn exits_add_what_only_the_shell_says() {
        let silent = shape(host::Outcome { exit_code: Some(0), ..outcome(Termination::Exited) });
        assert!(silent.success);
        assert_eq!(silent.summary, "`sh -c 'exit 3'` exited with code 0 and printed nothing");
        let failed =
            shape(host::Outcome { exit_code: Some(3), stderr: "boom\n".into(), ..outcome(Termination::Exited) });
        assert!(!failed.success);
        assert_eq!(failed.summary, "`sh -c 'exit 3'` failed with exit code 3; stderr says why");
        assert_eq!((failed.error_kind, failed.error), (None, None));
        let cut = shape(host::Outcome {
            exit_code: Some(0),
            stdout: "x".into(),
            stdout_truncated: true,
            ..outcome(Termination::Exited)
        });
        assert_eq!(cut.summary, "`sh -c 'exit 3'` exited with code 0 (output cut: head and tail kept)");
    }

    #[test]
    fn the_other_endings_are_the_contracts_words() {
        let t = shape(outcome(Termination::TimedOut));
        assert_eq!(t.summary, "Command timed out after 300 ms and was killed");
        assert_eq!(t.error_kind.as_deref(), Some("LOCAL_EXECUTOR_TIMEOUT"));
        assert_eq!(t.termination, "timed_out");
        let s = shape(host::Outcome { signal: Some(11), ..outcome(Termination::Signalled) });
        assert_eq!(s.summary, "`sh -c 'exit 3'` was killed by SIGSEGV");
        let f = shape(host::Outcome {
            error: Some("\"x\" is not an executable file".into()),
            ..outcome(Termination::SpawnFailed)
        });
        assert_eq!((f.error_kind.as_deref(), f.terminal), (Some("LOCAL_EXECUTOR_SPAWN_FAILED"), true));
        assert_eq!(f.error.as_deref(), Some("\"x\" is not an executable file"));
    }
}
