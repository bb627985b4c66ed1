//! A command a component asks the host to run, and what became of it — the Rust side of
//! `cheng:tool/process` (`wit/process.wit`), used as is by the host's process layer and
//! the SDK. Each side converts its generated WIT bindings to these types in one file.
//!
//! [`CommandOutcome::verdict`] is the one place an outcome becomes words: the `success`,
//! `summary`, `error_kind`, `terminal` and `error` of every tool that runs a command
//! (`workspace_shell`, `workspace_tests`, `workspace_git_write`).
//!
//! # Example
//!
//! ```
//! use cheng_contract::ErrorKind;
//! use cheng_contract::process::{CommandOutcome, Termination};
//!
//! let mut out = CommandOutcome::new("sleep 9", Termination::TimedOut);
//! out.timeout_ms = 300;
//! let v = out.verdict();
//! assert_eq!(v.summary, "Command timed out after 300 ms and was killed");
//! assert_eq!((v.error_kind, v.terminal), (Some(ErrorKind::Timeout), false));
//! ```

use crate::ErrorKind;

/// The longest budget a command may ask for, in milliseconds; longer ones are clamped.
pub const MAX_TIMEOUT_MS: u64 = 600_000;

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

impl CommandOutcome {
    /// An outcome of `command_display` that ended as `termination`, every other field
    /// empty: a start for tests and for outcomes built from another form (a git write's).
    pub fn new(command_display: impl Into<String>, termination: Termination) -> CommandOutcome {
        CommandOutcome {
            command_display: command_display.into(),
            cwd: String::new(),
            exit_code: None,
            termination,
            duration_ms: 0,
            timeout_ms: 0,
            stdout: String::new(),
            stdout_truncated: false,
            stderr: String::new(),
            stderr_truncated: false,
            signal: None,
            error: None,
        }
    }

    /// What this outcome says, in the one wording every tool uses: one sentence per way a
    /// command ends. A tool may add its own words (test counts, git's complaint) around
    /// these, but says none of these facts differently.
    ///
    /// | how it ended | `summary` | `error_kind` | `terminal` | `error` |
    /// |---|---|---|---|---|
    /// | exit 0 | `` `CMD` exited with code 0 `` | none | false | none |
    /// | exit N | `` `CMD` failed with exit code N `` | none | false | none |
    /// | timeout | `Command timed out after T ms and was killed` | `Timeout` | false | what to do |
    /// | cancelled | `Command was cancelled after D ms and was killed` | `Cancelled` | false | what was stopped |
    /// | signal | `` `CMD` was killed by SIGSEGV `` (or `signal N`, or `a signal` when unknown) | none | false | the summary |
    /// | no start | `` `CMD` could not be started: WHY `` | `SpawnFailed` | true | the host's reason |
    ///
    /// A non-zero exit and a signal are results, not failures of the call: the command
    /// ran, and its output says why.
    pub fn verdict(&self) -> Verdict {
        let display = &self.command_display;
        let ran = |summary: String| Verdict { success: false, summary, error_kind: None, terminal: false, error: None };
        let failed = |kind: ErrorKind, summary: String, error: String| Verdict {
            success: false,
            summary,
            error_kind: Some(kind),
            terminal: kind.default_terminal(),
            error: Some(error),
        };
        match self.termination {
            Termination::Exited => match self.exit_code {
                Some(0) => Verdict { success: true, ..ran(format!("`{display}` exited with code 0")) },
                Some(code) => ran(format!("`{display}` failed with exit code {code}")),
                None => ran(format!("`{display}` exited without an exit code")),
            },
            Termination::TimedOut => failed(
                ErrorKind::Timeout,
                format!("Command timed out after {} ms and was killed", self.timeout_ms),
                format!(
                    "`{display}` was still running after {} ms, so it and everything it started were stopped; give a \
                     larger timeout_ms (at most {MAX_TIMEOUT_MS}) or split the work",
                    self.timeout_ms
                ),
            ),
            Termination::Cancelled => failed(
                ErrorKind::Cancelled,
                format!("Command was cancelled after {} ms and was killed", self.duration_ms),
                format!("the call was cancelled, so `{display}` and everything it started were stopped"),
            ),
            Termination::Signalled => {
                let by = match self.signal.filter(|&s| s > 0) {
                    Some(sig) => signal_name(sig).map_or_else(|| format!("signal {sig}"), str::to_string),
                    None => "a signal".to_string(),
                };
                let said = format!("`{display}` was killed by {by}");
                Verdict { error: Some(said.clone()), ..ran(said) }
            }
            Termination::SpawnFailed => {
                let start = format!("`{display}` could not be started");
                match self.error.as_deref().map(str::trim).filter(|why| !why.is_empty()) {
                    Some(why) => {
                        // The host's reason may already begin with these words.
                        let reason = why.strip_prefix(start.as_str()).map_or(why, |r| r.trim_start_matches(':').trim());
                        let summary = if reason.is_empty() { start } else { format!("{start}: {reason}") };
                        failed(ErrorKind::SpawnFailed, summary, why.to_string())
                    }
                    None => failed(ErrorKind::SpawnFailed, start.clone(), start),
                }
            }
        }
    }
}

/// What a command's outcome says, for a tool's result ([`CommandOutcome::verdict`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// It exited with code 0.
    pub success: bool,
    /// One sentence: how it ended.
    pub summary: String,
    /// The failure kind: set for a timeout, a cancellation and a command that could not
    /// start; none when it ran to its end (whatever its exit code, or a signal).
    pub error_kind: Option<ErrorKind>,
    /// Whether the same request cannot succeed on a retry (the kind's default).
    pub terminal: bool,
    /// What went wrong, and what to do about it, when it did not exit by itself.
    pub error: Option<String>,
}

/// The name of signal `signal` as Linux numbers them (`9` is `SIGKILL`); `None` for a
/// number without a fixed name (0, negative, the real-time signals).
pub fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        16 => "SIGSTKFLT",
        17 => "SIGCHLD",
        18 => "SIGCONT",
        19 => "SIGSTOP",
        20 => "SIGTSTP",
        21 => "SIGTTIN",
        22 => "SIGTTOU",
        23 => "SIGURG",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        26 => "SIGVTALRM",
        27 => "SIGPROF",
        28 => "SIGWINCH",
        29 => "SIGIO",
        30 => "SIGPWR",
        31 => "SIGSYS",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(termination: Termination) -> CommandOutcome {
        CommandOutcome { duration_ms: 1234, timeout_ms: 5000, ..CommandOutcome::new("make -j2", termination) }
    }

    fn exited(code: Option<i32>) -> Verdict {
        CommandOutcome { exit_code: code, ..ended(Termination::Exited) }.verdict()
    }

    fn signalled(signal: Option<i32>) -> Verdict {
        CommandOutcome { signal, ..ended(Termination::Signalled) }.verdict()
    }

    fn spawn_failed(error: Option<&str>) -> Verdict {
        CommandOutcome { error: error.map(str::to_string), ..ended(Termination::SpawnFailed) }.verdict()
    }

    #[test]
    fn exits_are_results_not_failures() {
        let ok = exited(Some(0));
        assert_eq!(
            ok,
            Verdict {
                success: true,
                summary: "`make -j2` exited with code 0".into(),
                error_kind: None,
                terminal: false,
                error: None
            }
        );
        for (code, summary) in [
            (Some(2), "`make -j2` failed with exit code 2"),
            (Some(-1), "`make -j2` failed with exit code -1"),
            (None, "`make -j2` exited without an exit code"),
        ] {
            let v = exited(code);
            assert_eq!(
                v,
                Verdict { success: false, summary: summary.into(), error_kind: None, terminal: false, error: None }
            );
        }
    }

    #[test]
    fn a_timeout_says_the_budget_and_what_to_do() {
        let v = ended(Termination::TimedOut).verdict();
        assert!(!v.success);
        assert_eq!(v.summary, "Command timed out after 5000 ms and was killed");
        assert_eq!((v.error_kind, v.terminal), (Some(ErrorKind::Timeout), false));
        assert_eq!(
            v.error.as_deref(),
            Some(
                "`make -j2` was still running after 5000 ms, so it and everything it started were stopped; give a \
                 larger timeout_ms (at most 600000) or split the work"
            )
        );
    }

    #[test]
    fn a_cancellation_says_how_long_it_ran() {
        let v = ended(Termination::Cancelled).verdict();
        assert!(!v.success);
        assert_eq!(v.summary, "Command was cancelled after 1234 ms and was killed");
        assert_eq!((v.error_kind, v.terminal), (Some(ErrorKind::Cancelled), false));
        assert_eq!(
            v.error.as_deref(),
            Some("the call was cancelled, so `make -j2` and everything it started were stopped")
        );
    }

    #[test]
    fn a_signal_is_named_when_known_and_never_numbered_zero() {
        for (signal, by) in [
            (Some(9), "SIGKILL"),
            (Some(11), "SIGSEGV"),
            (Some(15), "SIGTERM"),
            (Some(40), "signal 40"),
            (Some(0), "a signal"),
            (Some(-3), "a signal"),
            (None, "a signal"),
        ] {
            let v = signalled(signal);
            let said = format!("`make -j2` was killed by {by}");
            assert_eq!(
                v,
                Verdict { success: false, summary: said.clone(), error_kind: None, terminal: false, error: Some(said) },
                "{signal:?}"
            );
            assert!(!v.summary.contains("signal 0") && !v.summary.contains("signal -"), "{}", v.summary);
        }
    }

    #[test]
    fn signal_names_follow_linux() {
        assert_eq!(signal_name(1), Some("SIGHUP"));
        assert_eq!(signal_name(6), Some("SIGABRT"));
        assert_eq!(signal_name(31), Some("SIGSYS"));
        for n in [0, -1, 32, 34, 64, i32::MAX] {
            assert_eq!(signal_name(n), None, "{n}");
        }
        // Every name is unique and looks like one.
        let mut names: Vec<_> = (1..=31).map(|n| signal_name(n).unwrap()).collect();
        assert!(names.iter().all(|n| n.starts_with("SIG")));
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 31);
    }

    #[test]
    fn a_command_that_could_not_start_gives_the_hosts_reason() {
        let why = "\"mkae\" was not found on the host's PATH; check the spelling";
        let v = spawn_failed(Some(why));
        assert_eq!(
            v,
            Verdict {
                success: false,
                summary: format!("`make -j2` could not be started: {why}"),
                error_kind: Some(ErrorKind::SpawnFailed),
                terminal: true,
                error: Some(why.into()),
            }
        );
        // A reason that already says so is not said twice in the summary.
        let why = "`make -j2` could not be started: Permission denied (os error 13) (is it executable?)";
        let v = spawn_failed(Some(why));
        assert_eq!(v.summary, why);
        assert_eq!(v.error.as_deref(), Some(why));
        // No reason: the fact alone, in both.
        for none in [None, Some(""), Some("  ")] {
            let v = spawn_failed(none);
            assert_eq!(v.summary, "`make -j2` could not be started", "{none:?}");
            assert_eq!(v.error.as_deref(), Some("`make -j2` could not be started"));
            assert_eq!((v.error_kind, v.terminal), (Some(ErrorKind::SpawnFailed), true));
        }
    }

    #[test]
    fn every_way_to_end_has_one_sentence() {
        for t in [
            Termination::Exited,
            Termination::TimedOut,
            Termination::Cancelled,
            Termination::Signalled,
            Termination::SpawnFailed,
        ] {
            let v = CommandOutcome { exit_code: Some(1), signal: Some(9), ..ended(t) }.verdict();
            for text in std::iter::once(&v.summary).chain(v.error.as_ref()) {
                assert!(!text.is_empty() && !text.contains('\n') && !text.trim_end().ends_with('.'), "{t:?}: {text}");
                assert!(!text.contains(". "), "one sentence: {t:?}: {text}");
            }
            // Only a command that ran to its end is not a failure of the call.
            assert_eq!(v.error_kind.is_none(), matches!(t, Termination::Exited | Termination::Signalled), "{t:?}");
        }
    }
}
