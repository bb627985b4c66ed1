//! Typed failures: what a tool returns instead of output when it cannot do the job.

use crate::wit::cheng::tool::types as wt;

pub use cheng_contract::ErrorKind;

fn kind_to_wit(kind: ErrorKind) -> wt::ErrorKind {
    use ErrorKind::*;
    match kind {
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
        // Host-only kinds (MCP servers) have no WIT case: each crosses as the nearest one.
        HandshakeTimeout => wt::ErrorKind::Timeout,
        RefreshFailed => wt::ErrorKind::Crashed,
        TransportError => wt::ErrorKind::Io,
    }
}

fn kind_from_wit(kind: wt::ErrorKind) -> ErrorKind {
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
        Failure { kind, message: message.into(), terminal: kind.default_terminal() }
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
        wt::Failure { kind: kind_to_wit(self.kind), message: self.message, terminal: self.terminal }
    }

    pub(crate) fn from_wit(f: wt::Failure) -> Self {
        Failure { kind: kind_from_wit(f.kind), message: f.message, terminal: f.terminal }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}
