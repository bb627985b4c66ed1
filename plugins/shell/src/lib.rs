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
    /// The program to run, e.g. "ls", "cargo", "pytest" (looked up on the host's PATH;
    /// a program inside the workspace only by a relative path such as "./gradlew").
    /// Not the tool's name.
    #[serde(default)]
    command: String,
    /// Literal arguments, e.g. ["-la"]. Never interpreted by a shell.
    #[serde(default)]
    args: Vec<String>,
    /// A simple command line instead of command + args. Split into words like a shell
    /// would; pipes, redirection, variables, globs and sequences are refused unless the
    /// operator enabled shell strings.
    #[serde(default)]
    shell_string: Option<String>,
    /// Working directory relative to the workspace root; omit for the root.
    #[serde(default)]
    cwd: Option<String>,
    /// Extra environment variables; only names on the host's allowlist are accepted.
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Wall-clock budget in ms (default 60000, at most 600000; longer is clamped).
    #[serde(default)]
    #[schemars(range(min = 1))]
    timeout_ms: Option<u64>,
    /// One sentence on why this command is needed; shown to the person approving it.
    #[serde(default)]
    purpose: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct ShellOutput {
    /// True when the command exited with code 0.
    success: bool,
    /// What happened, in one sentence.
    summary: String,
    /// The command as run, shell-quoted.
    command_display: String,
    /// The working directory, relative to the workspace root.
    cwd: String,
    /// The exit code (null when the process did not exit by itself).
    exit_code: Option<i32>,
    /// exited, timed_out, cancelled, signalled or spawn_failed.
    termination: String,
    /// Wall-clock milliseconds.
    duration_ms: u64,
    /// Standard output (head and tail kept when over the cap).
    stdout: String,
    /// True when stdout was cut.
    stdout_truncated: bool,
    /// Standard error (head and tail kept when over the cap).
    stderr: String,
    /// True when stderr was cut.
    stderr_truncated: bool,
    /// A LOCAL_EXECUTOR_* code when the command did not run to its end.
    error_kind: Option<String>,
    /// True when retrying the same command cannot help.
    terminal: bool,
    /// What went wrong, when something did.
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
    const DESCRIPTION: &'static str = "Run a program in the workspace (build, test, lint, diagnostics): `command` plus \
        literal `args`, optionally a `cwd` below the workspace root. A person approves each command unless the operator \
        allowed it; say why in `purpose`. Output is capped (head and tail kept), the run is time-bounded (default 60 s, \
        max 600 s) and everything it started is stopped at the end. A non-zero exit is reported, not an error.";
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
