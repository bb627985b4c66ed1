//! Every conversion between the WIT types and the host's, in one place, each an
//! exhaustive `match`: a kind added on either side fails to compile here instead of
//! crossing the boundary as something else.

use super::generated::cheng::tool::approval::Decision as WitDecision;
use super::generated::cheng::tool::fs::{DirEntry as WitDirEntry, EntryKind as WitEntryKind};
use super::generated::cheng::tool::git::WriteOutcome;
use super::generated::cheng::tool::process::{
    CommandOutcome as WitOutcome, CommandRequest as WitRequest, Termination as WitTermination,
};
use super::types::{ErrorKind as WitKind, Failure, FsAccess as WitFsAccess};
use crate::approvals::Decision;
use cheng_contract::entries::{DirEntry, EntryKind};
use cheng_contract::process::{CommandOutcome, CommandRequest, Termination};
use cheng_contract::{ErrorKind, FsAccess};

impl From<ErrorKind> for WitKind {
    fn from(k: ErrorKind) -> WitKind {
        match k {
            ErrorKind::InvalidArgument => WitKind::InvalidArgument,
            ErrorKind::PathRefused => WitKind::PathRefused,
            ErrorKind::NotFound => WitKind::NotFound,
            ErrorKind::NotGranted => WitKind::NotGranted,
            ErrorKind::ApprovalDenied => WitKind::ApprovalDenied,
            ErrorKind::CommandNotAllowed => WitKind::CommandNotAllowed,
            ErrorKind::ShellSyntaxDisabled => WitKind::ShellSyntaxDisabled,
            ErrorKind::SpawnFailed => WitKind::SpawnFailed,
            ErrorKind::Timeout => WitKind::Timeout,
            ErrorKind::Cancelled => WitKind::Cancelled,
            ErrorKind::OutputLimit => WitKind::OutputLimit,
            ErrorKind::Io => WitKind::Io,
            ErrorKind::Crashed => WitKind::Crashed,
            ErrorKind::BinaryFile => WitKind::BinaryFile,
            ErrorKind::TooLarge => WitKind::TooLarge,
            // Host-only kinds (MCP servers) have no WIT case: each crosses as the nearest one.
            ErrorKind::HandshakeTimeout => WitKind::Timeout,
            ErrorKind::RefreshFailed => WitKind::Crashed,
            ErrorKind::TransportError => WitKind::Io,
        }
    }
}

impl From<WitKind> for ErrorKind {
    fn from(k: WitKind) -> ErrorKind {
        match k {
            WitKind::InvalidArgument => ErrorKind::InvalidArgument,
            WitKind::PathRefused => ErrorKind::PathRefused,
            WitKind::NotFound => ErrorKind::NotFound,
            WitKind::NotGranted => ErrorKind::NotGranted,
            WitKind::ApprovalDenied => ErrorKind::ApprovalDenied,
            WitKind::CommandNotAllowed => ErrorKind::CommandNotAllowed,
            WitKind::ShellSyntaxDisabled => ErrorKind::ShellSyntaxDisabled,
            WitKind::SpawnFailed => ErrorKind::SpawnFailed,
            WitKind::Timeout => ErrorKind::Timeout,
            WitKind::Cancelled => ErrorKind::Cancelled,
            WitKind::OutputLimit => ErrorKind::OutputLimit,
            WitKind::Io => ErrorKind::Io,
            WitKind::Crashed => ErrorKind::Crashed,
            WitKind::BinaryFile => ErrorKind::BinaryFile,
            WitKind::TooLarge => ErrorKind::TooLarge,
        }
    }
}

impl From<WitFsAccess> for FsAccess {
    fn from(a: WitFsAccess) -> FsAccess {
        match a {
            WitFsAccess::None => FsAccess::None,
            WitFsAccess::Read => FsAccess::Read,
            WitFsAccess::Write => FsAccess::Write,
        }
    }
}

impl From<Termination> for WitTermination {
    fn from(t: Termination) -> WitTermination {
        match t {
            Termination::Exited => WitTermination::Exited,
            Termination::TimedOut => WitTermination::TimedOut,
            Termination::Cancelled => WitTermination::Cancelled,
            Termination::Signalled => WitTermination::Signalled,
            Termination::SpawnFailed => WitTermination::SpawnFailed,
        }
    }
}

impl From<EntryKind> for WitEntryKind {
    fn from(k: EntryKind) -> WitEntryKind {
        match k {
            EntryKind::File => WitEntryKind::File,
            EntryKind::Dir => WitEntryKind::Dir,
            EntryKind::Symlink => WitEntryKind::Symlink,
            EntryKind::Other => WitEntryKind::Other,
        }
    }
}

impl From<DirEntry> for WitDirEntry {
    fn from(e: DirEntry) -> WitDirEntry {
        let DirEntry { name, valid_utf8, kind, size } = e;
        WitDirEntry { name, valid_utf8, kind: kind.into(), size }
    }
}

impl From<WitRequest> for CommandRequest {
    fn from(r: WitRequest) -> CommandRequest {
        let WitRequest { command, args, shell_string, cwd, env, timeout_ms, purpose } = r;
        CommandRequest { command, args, shell_string, cwd, env, timeout_ms, purpose }
    }
}

impl From<CommandOutcome> for WitOutcome {
    fn from(o: CommandOutcome) -> WitOutcome {
        let CommandOutcome {
            command_display,
            cwd,
            exit_code,
            termination,
            duration_ms,
            timeout_ms,
            stdout,
            stdout_truncated,
            stderr,
            stderr_truncated,
            signal,
            error,
        } = o;
        WitOutcome {
            command_display,
            cwd,
            exit_code,
            termination: termination.into(),
            duration_ms,
            timeout_ms,
            stdout,
            stdout_truncated,
            stderr,
            stderr_truncated,
            signal,
            error,
        }
    }
}

/// A git write's outcome: the command's, in the repository at `repository` (relative to
/// the workspace), with the branch and head after it.
pub(crate) fn write_outcome(
    o: CommandOutcome,
    repository: String,
    branch: Option<String>,
    head: Option<String>,
) -> WriteOutcome {
    // Destructured whole: a field added to the outcome must be placed here too.
    let CommandOutcome {
        command_display,
        cwd: _,
        exit_code,
        termination,
        duration_ms,
        timeout_ms,
        stdout,
        stdout_truncated,
        stderr,
        stderr_truncated,
        signal,
        error,
    } = o;
    WriteOutcome {
        command_display,
        repository,
        exit_code,
        termination: termination.into(),
        signal,
        duration_ms,
        timeout_ms,
        stdout,
        stdout_truncated,
        stderr,
        stderr_truncated,
        error,
        branch,
        head,
    }
}

impl From<Decision> for WitDecision {
    fn from(d: Decision) -> WitDecision {
        match d {
            Decision::Approved | Decision::AutoApproved => WitDecision::Approved,
            Decision::TimedOut => WitDecision::TimedOut,
            Decision::Declined | Decision::NoApprover | Decision::Withdrawn => WitDecision::Declined,
        }
    }
}

/// A failure of `kind` with its default terminal flag.
pub(crate) fn failure(kind: ErrorKind, message: impl Into<String>) -> Failure {
    Failure { kind: kind.into(), message: message.into(), terminal: kind.default_terminal() }
}
