//! Typed failures: what a tool returns instead of output when it cannot do the job.

use crate::wit::cheng::tool::types as wt;

/// The kind of a failure. Callers see it as `LOCAL_EXECUTOR_<KIND>`; each kind has a
/// default for whether a retry can help ([`ErrorKind::terminal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input was malformed or named a bad value.
    InvalidArgument,
    /// A path was refused by the workspace rules.
    PathRefused,
    /// The named thing does not exist.
    NotFound,
    /// The grant does not cover the request.
    NotGranted,
    /// A person declined, or did not answer in time.
    ApprovalDenied,
    /// The command is outside the operator's command policy.
    CommandNotAllowed,
    /// Shell syntax while shell strings are disabled.
    ShellSyntaxDisabled,
    /// A process could not be started.
    SpawnFailed,
    /// The work ran past its time budget.
    Timeout,
    /// The call was cancelled.
    Cancelled,
    /// The output exceeded its cap.
    OutputLimit,
    /// An input/output error.
    Io,
    /// The tool broke (a defect, not a bad request).
    Crashed,
    /// The file is binary and cannot be read as text.
    BinaryFile,
    /// A size or count cap refuses the request as asked.
    TooLarge,
}

impl ErrorKind {
    /// Whether a failure of this kind is terminal by default (retrying the same
    /// request cannot succeed).
    pub fn terminal(self) -> bool {
        !matches!(self, ErrorKind::Timeout | ErrorKind::Cancelled | ErrorKind::OutputLimit | ErrorKind::Io)
    }

    /// The stable wire code callers see, e.g. `LOCAL_EXECUTOR_NOT_FOUND`.
    pub fn code(self) -> &'static str {
        use ErrorKind::*;
        match self {
            InvalidArgument => "LOCAL_EXECUTOR_INVALID_ARGUMENT",
            PathRefused => "LOCAL_EXECUTOR_PATH_REFUSED",
            NotFound => "LOCAL_EXECUTOR_NOT_FOUND",
            NotGranted => "LOCAL_EXECUTOR_NOT_GRANTED",
            ApprovalDenied => "LOCAL_EXECUTOR_APPROVAL_DENIED",
            CommandNotAllowed => "LOCAL_EXECUTOR_COMMAND_NOT_ALLOWED",
            ShellSyntaxDisabled => "LOCAL_EXECUTOR_SHELL_SYNTAX_DISABLED",
            SpawnFailed => "LOCAL_EXECUTOR_SPAWN_FAILED",
            Timeout => "LOCAL_EXECUTOR_TIMEOUT",
            Cancelled => "LOCAL_EXECUTOR_CANCELLED",
            OutputLimit => "LOCAL_EXECUTOR_OUTPUT_LIMIT",
            Io => "LOCAL_EXECUTOR_IO",
            Crashed => "LOCAL_EXECUTOR_CRASHED",
            BinaryFile => "LOCAL_EXECUTOR_BINARY_FILE",
            TooLarge => "LOCAL_EXECUTOR_TOO_LARGE",
        }
    }

    pub(crate) fn to_wit(self) -> wt::ErrorKind {
        use ErrorKind::*;
        match self {
            InvalidArgument => wt::ErrorKind::InvalidArgument,
            PathRefused => wt::ErrorKind::PathRefused,
            NotFound => wt::ErrorKind::NotFound,
            NotGranted => wt::ErrorKind::NotGranted,
            ApprovalDenied => wt::ErrorKind::ApprovalDenied,
            CommandNotAllowed => wt::ErrorKind::CommandNotAllowed,
            ShellSyntaxDisabled => wt::ErrorKind::ShellSyntaxDisabled,
            SpawnFailed => wt::ErrorKind::SpawnFailed,
            Timeout => wt::ErrorKind::Timeout,
            Cancelled => wt::ErrorKind::Cancelled,
            OutputLimit => wt::ErrorKind::OutputLimit,
            Io => wt::ErrorKind::Io,
            Crashed => wt::ErrorKind::Crashed,
            BinaryFile => wt::ErrorKind::BinaryFile,
            TooLarge => wt::ErrorKind::TooLarge,
        }
    }

    pub(crate) fn from_wit(kind: wt::ErrorKind) -> Self {
        use ErrorKind::*;
        match kind {
            wt::ErrorKind::InvalidArgument => InvalidArgument,
            wt::ErrorKind::PathRefused => PathRefused,
            wt::ErrorKind::NotFound => NotFound,
            wt::ErrorKind::NotGranted => NotGranted,
            wt::ErrorKind::ApprovalDenied => ApprovalDenied,
            wt::ErrorKind::CommandNotAllowed => CommandNotAllowed,
            wt::ErrorKind::ShellSyntaxDisabled => ShellSyntaxDisabled,
            wt::ErrorKind::SpawnFailed => SpawnFailed,
            wt::ErrorKind::Timeout => Timeout,
            wt::ErrorKind::Cancelled => Cancelled,
            wt::ErrorKind::OutputLimit => OutputLimit,
            wt::ErrorKind::Io => Io,
            wt::ErrorKind::Crashed => Crashed,
            wt::ErrorKind::BinaryFile => BinaryFile,
            wt::ErrorKind::TooLarge => TooLarge,
        }
    }
}

/// A failure a tool returns: its kind, a message written for a model (what went wrong
/// and what to do instead), and whether a retry can help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The kind.
    pub kind: ErrorKind,
    /// The message for the model.
    pub message: String,
    /// True when the same request must not be retried.
    pub terminal: bool,
}

impl Failure {
    /// A failure of `kind` with its default terminal flag.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Failure { kind, message: message.into(), terminal: kind.terminal() }
    }

    /// A bad input value.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }

    /// A path the workspace rules refuse.
    pub fn path_refused(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::PathRefused, message)
    }

    /// Something that does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// An input/output error, with what was being done.
    pub fn io(doing: &str, err: &std::io::Error) -> Self {
        Self::new(ErrorKind::Io, format!("{doing}: {err}"))
    }

    /// Override the terminal flag.
    pub fn with_terminal(mut self, terminal: bool) -> Self {
        self.terminal = terminal;
        self
    }

    pub(crate) fn into_wit(self) -> wt::Failure {
        wt::Failure { kind: self.kind.to_wit(), message: self.message, terminal: self.terminal }
    }

    pub(crate) fn from_wit(f: wt::Failure) -> Self {
        Failure { kind: ErrorKind::from_wit(f.kind), message: f.message, terminal: f.terminal }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}
