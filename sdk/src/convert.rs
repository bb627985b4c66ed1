//! Every conversion between the guest's generated WIT bindings and the contract's Rust
//! types, in one place, each written out whole: a field or case added on either side
//! fails to compile here instead of crossing the boundary as something else.

use cheng_contract::entries::{DirEntry, EntryKind};
use cheng_contract::process::{CommandOutcome, CommandRequest, Termination};

use crate::wit::cheng::tool::{fs as wfs, process as wp};

impl From<wfs::EntryKind> for EntryKind {
    fn from(k: wfs::EntryKind) -> EntryKind {
        match k {
            wfs::EntryKind::File => EntryKind::File,
            wfs::EntryKind::Dir => EntryKind::Dir,
            wfs::EntryKind::Symlink => EntryKind::Symlink,
            wfs::EntryKind::Other => EntryKind::Other,
        }
    }
}

impl From<wfs::DirEntry> for DirEntry {
    fn from(e: wfs::DirEntry) -> DirEntry {
        let wfs::DirEntry { name, valid_utf8, kind, size } = e;
        DirEntry { name, valid_utf8, kind: kind.into(), size }
    }
}

impl From<wp::Termination> for Termination {
    fn from(t: wp::Termination) -> Termination {
        match t {
            wp::Termination::Exited => Termination::Exited,
            wp::Termination::TimedOut => Termination::TimedOut,
            wp::Termination::Cancelled => Termination::Cancelled,
            wp::Termination::Signalled => Termination::Signalled,
            wp::Termination::SpawnFailed => Termination::SpawnFailed,
        }
    }
}

impl From<CommandRequest> for wp::CommandRequest {
    fn from(r: CommandRequest) -> wp::CommandRequest {
        let CommandRequest { command, args, shell_string, cwd, env, timeout_ms, purpose } = r;
        wp::CommandRequest { command, args, shell_string, cwd, env, timeout_ms, purpose }
    }
}

impl From<wp::CommandOutcome> for CommandOutcome {
    fn from(o: wp::CommandOutcome) -> CommandOutcome {
        let wp::CommandOutcome {
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
        CommandOutcome {
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
