//! A command a component asks the host to run, and what became of it — the Rust side of
//! `cheng:tool/process` (`wit/process.wit`), used as is by the host's process layer and
//! the SDK. Each side converts its generated WIT bindings to these types in one file.

/// A command for the host to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandRequest {
    /// The program.
    pub command: String,
    /// Literal arguments.
    pub args: Vec<String>,
    /// A shell string instead of `command` + `args` (refused unless the operator allows it).
    pub shell_string: Option<String>,
    /// Working directory relative to the workspace root.
    pub cwd: Option<String>,
    /// Extra environment variables (subject to the host's allowlist).
    pub env: Vec<(String, String)>,
    /// Wall-clock budget in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Why, for the approval card.
    pub purpose: Option<String>,
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// It exited.
    Exited,
    /// Killed at its timeout.
    TimedOut,
    /// Killed because the call was cancelled.
    Cancelled,
    /// Ended by a signal.
    Signalled,
    /// Never started.
    SpawnFailed,
}

impl Termination {
    /// The wire name (`exited`, `timed_out`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Termination::Exited => "exited",
            Termination::TimedOut => "timed_out",
            Termination::Cancelled => "cancelled",
            Termination::Signalled => "signalled",
            Termination::SpawnFailed => "spawn_failed",
        }
    }
}

/// What happened to a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutcome {
    /// The command as shown to people.
    pub command_display: String,
    /// The working directory used, relative to the workspace root.
    pub cwd: String,
    /// The exit code when it exited normally.
    pub exit_code: Option<i32>,
    /// How it ended.
    pub termination: Termination,
    /// Wall-clock milliseconds.
    pub duration_ms: u64,
    /// The budget it ran with.
    pub timeout_ms: u64,
    /// Captured stdout (head and tail when cut).
    pub stdout: String,
    /// Whether stdout was cut.
    pub stdout_truncated: bool,
    /// Captured stderr (head and tail when cut).
    pub stderr: String,
    /// Whether stderr was cut.
    pub stderr_truncated: bool,
    /// The signal that ended it, when signalled.
    pub signal: Option<i32>,
    /// Why it could not start, when `termination` is `SpawnFailed`.
    pub error: Option<String>,
}
