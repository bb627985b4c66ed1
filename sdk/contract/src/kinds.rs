//! The stable failure vocabulary (the WIT `error-kind` enum, and three kinds only the
//! host issues, for MCP servers): each kind's wire code (`LOCAL_EXECUTOR_*`) and whether
//! it is terminal by default.
//!
//! # Example
//!
//! ```
//! use cheng_contract::ErrorKind;
//!
//! assert_eq!(ErrorKind::NotFound.code(), "LOCAL_EXECUTOR_NOT_FOUND");
//! assert!(!ErrorKind::Timeout.default_terminal());
//! ```

/// The stable failure kinds, shown to callers as `LOCAL_EXECUTOR_<KIND>`.
///
/// Each kind has a default for `terminal` (a retry of the same request cannot
/// succeed); a tool may override it per failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "SCREAMING_SNAKE_CASE"))]
pub enum ErrorKind {
    /// Malformed input, an unknown tool, or a bad value. Terminal.
    InvalidArgument,
    /// A path refused by the workspace guard. Terminal.
    PathRefused,
    /// The named thing does not exist. Terminal.
    NotFound,
    /// Outside the role's or the component's grant. Terminal.
    NotGranted,
    /// A person declined, or the approval timed out. Terminal.
    ApprovalDenied,
    /// Outside the operator's command policy. Terminal.
    CommandNotAllowed,
    /// Shell syntax while shell strings are disabled. Terminal.
    ShellSyntaxDisabled,
    /// A process could not be started. Terminal.
    SpawnFailed,
    /// Past the time budget. Not terminal.
    Timeout,
    /// Cancelled by the caller. Not terminal.
    Cancelled,
    /// Output over its cap. Not terminal.
    OutputLimit,
    /// An input/output error. Not terminal.
    Io,
    /// The tool trapped, ran out of memory or CPU time, or broke its contract. Terminal.
    Crashed,
    /// A binary file where text was expected. Terminal.
    BinaryFile,
    /// A size or count cap refuses the request as asked. Terminal.
    TooLarge,
    /// Host only (not in the WIT enum): an MCP server did not finish its handshake
    /// within its budget. Not terminal: the next call starts it again.
    HandshakeTimeout,
    /// Host only (not in the WIT enum): an MCP server's tool list could not be read
    /// (at its start, or after it announced a change), so the call was not sent.
    /// Terminal.
    RefreshFailed,
    /// Host only (not in the WIT enum): the connection to an MCP server failed: it
    /// exited, closed its output, sent what is not JSON-RPC or a message over the cap,
    /// or its HTTP endpoint failed. Terminal.
    TransportError,
}

impl ErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [ErrorKind; 18] = [
        ErrorKind::InvalidArgument,
        ErrorKind::PathRefused,
        ErrorKind::NotFound,
        ErrorKind::NotGranted,
        ErrorKind::ApprovalDenied,
        ErrorKind::CommandNotAllowed,
        ErrorKind::ShellSyntaxDisabled,
        ErrorKind::SpawnFailed,
        ErrorKind::Timeout,
        ErrorKind::Cancelled,
        ErrorKind::OutputLimit,
        ErrorKind::Io,
        ErrorKind::Crashed,
        ErrorKind::BinaryFile,
        ErrorKind::TooLarge,
        ErrorKind::HandshakeTimeout,
        ErrorKind::RefreshFailed,
        ErrorKind::TransportError,
    ];

    /// The wire name, e.g. `LOCAL_EXECUTOR_INVALID_ARGUMENT`.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "LOCAL_EXECUTOR_INVALID_ARGUMENT",
            ErrorKind::PathRefused => "LOCAL_EXECUTOR_PATH_REFUSED",
            ErrorKind::NotFound => "LOCAL_EXECUTOR_NOT_FOUND",
            ErrorKind::NotGranted => "LOCAL_EXECUTOR_NOT_GRANTED",
            ErrorKind::ApprovalDenied => "LOCAL_EXECUTOR_APPROVAL_DENIED",
            ErrorKind::CommandNotAllowed => "LOCAL_EXECUTOR_COMMAND_NOT_ALLOWED",
            ErrorKind::ShellSyntaxDisabled => "LOCAL_EXECUTOR_SHELL_SYNTAX_DISABLED",
            ErrorKind::SpawnFailed => "LOCAL_EXECUTOR_SPAWN_FAILED",
            ErrorKind::Timeout => "LOCAL_EXECUTOR_TIMEOUT",
            ErrorKind::Cancelled => "LOCAL_EXECUTOR_CANCELLED",
            ErrorKind::OutputLimit => "LOCAL_EXECUTOR_OUTPUT_LIMIT",
            ErrorKind::Io => "LOCAL_EXECUTOR_IO",
            ErrorKind::Crashed => "LOCAL_EXECUTOR_CRASHED",
            ErrorKind::BinaryFile => "LOCAL_EXECUTOR_BINARY_FILE",
            ErrorKind::TooLarge => "LOCAL_EXECUTOR_TOO_LARGE",
            ErrorKind::HandshakeTimeout => "LOCAL_EXECUTOR_HANDSHAKE_TIMEOUT",
            ErrorKind::RefreshFailed => "LOCAL_EXECUTOR_REFRESH_FAILED",
            ErrorKind::TransportError => "LOCAL_EXECUTOR_TRANSPORT_ERROR",
        }
    }

    /// Whether a failure of this kind is terminal unless the tool says otherwise.
    pub fn default_terminal(self) -> bool {
        !matches!(
            self,
            ErrorKind::Timeout
                | ErrorKind::Cancelled
                | ErrorKind::OutputLimit
                | ErrorKind::Io
                | ErrorKind::HandshakeTimeout
        )
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_terminal_defaults() {
        // Every kind has the LOCAL_EXECUTOR_ prefix and a unique code.
        let mut codes: Vec<_> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
        assert!(codes.iter().all(|c| c.starts_with("LOCAL_EXECUTOR_")));
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), ErrorKind::ALL.len());
        // The retryable kinds are exactly these five.
        let retryable: Vec<_> = ErrorKind::ALL.iter().filter(|k| !k.default_terminal()).collect();
        assert_eq!(
            retryable,
            [
                &ErrorKind::Timeout,
                &ErrorKind::Cancelled,
                &ErrorKind::OutputLimit,
                &ErrorKind::Io,
                &ErrorKind::HandshakeTimeout
            ]
        );
    }
}
