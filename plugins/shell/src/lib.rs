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

fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        _ => "a signal",
    }
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
        let out = host::run_process(&cmd)?;
        let display = &out.command_display;
        let silent = out.stdout.is_empty() && out.stderr.is_empty();
        let (summary, error_kind, terminal, error) = match out.termination {
            Termination::Exited => {
                let code = out.exit_code.unwrap_or(-1);
                let mut s = if code == 0 {
                    format!("`{display}` exited with code 0")
                } else {
                    format!("`{display}` failed with exit code {code}")
                };
                if silent {
                    s.push_str(" and printed nothing");
                } else if code != 0 && !out.stderr.is_empty() {
                    s.push_str("; stderr says why");
                }
                (s, None, false, None)
            }
            Termination::TimedOut => (
                format!("Command timed out after {} ms and was killed", out.timeout_ms),
                Some(ErrorKind::Timeout),
                false,
                Some(format!(
                    "`{display}` was still running after {} ms; it and everything it started were stopped. \
                     Give a larger timeout_ms (at most 600000) or split the work",
                    out.timeout_ms
                )),
            ),
            Termination::Cancelled => (
                format!("Command was cancelled after {} ms and was killed", out.duration_ms),
                Some(ErrorKind::Cancelled),
                false,
                Some("the call was cancelled; the command and everything it started were stopped".to_string()),
            ),
            Termination::Signalled => {
                let what = match out.signal {
                    Some(sig) => format!("signal {sig} ({})", signal_name(sig)),
                    None => "a signal".to_string(),
                };
                (
                    format!("`{display}` was ended by {what}"),
                    None,
                    false,
                    Some(format!("the process was ended by {what}")),
                )
            }
            Termination::SpawnFailed => {
                let why = out.error.clone().unwrap_or_else(|| "it could not be started".to_string());
                (format!("`{display}` could not be started: {why}"), Some(ErrorKind::SpawnFailed), true, Some(why))
            }
        };
        let mut summary = summary;
        if out.stdout_truncated || out.stderr_truncated {
            summary.push_str(" (output cut: head and tail kept)");
        }
        Ok(ShellOutput {
            success: out.termination == Termination::Exited && out.exit_code == Some(0),
            summary,
            command_display: out.command_display.clone(),
            cwd: out.cwd,
            exit_code: out.exit_code,
            termination: out.termination.as_str().to_string(),
            duration_ms: out.duration_ms,
            stdout: out.stdout,
            stdout_truncated: out.stdout_truncated,
            stderr: out.stderr,
            stderr_truncated: out.stderr_truncated,
            error_kind: error_kind.map(|k| k.code().to_string()),
            terminal,
            error,
        })
    }
}

cheng_sdk::export_tools!(WorkspaceShell);
