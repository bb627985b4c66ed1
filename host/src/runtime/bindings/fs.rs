//! `cheng:tool/fs`: atomic writes and removals done by the host, through the workspace
//! guard, only under a read-write mount of the call's grant and never on a protected
//! path. Every refusal is logged at `cheng::denials`.

use super::generated::cheng::tool::fs::{self as wfs, Host, WriteResult};
use super::generated::cheng::tool::types::{ErrorKind, Failure};
use crate::guard::{GuardError, ReadError, WriteError};
use crate::runtime::store::StoreState;

fn refuse(kind: ErrorKind, message: String) -> Failure {
    Failure { kind, message, terminal: true }
}

impl StoreState {
    /// The first statement of every `fs` function: may this call read (any mount
    /// covering `path`) or write (a read-write mount, and not a protected path) there?
    fn check_access(&self, path: &str, write: bool) -> Result<std::sync::Arc<crate::guard::Guard>, Failure> {
        let Some(guard) = self.call.guard.clone() else {
            return Err(refuse(ErrorKind::NotGranted, "this component has no access to the workspace".into()));
        };
        let root = guard.root().to_string_lossy().into_owned();
        let rel = match cheng_path_rules::lexical(path, &root) {
            Ok(r) => r.normalized(),
            Err(r) => return Err(refuse(ErrorKind::PathRefused, r.message(path, &root))),
        };
        let under = |m: &crate::grant::Mount| m.rel == "." || rel == m.rel || rel.starts_with(&format!("{}/", m.rel));
        if !self.call.mounts.iter().any(|m| (m.write || !write) && under(m)) {
            let what = if write { "write" } else { "read" };
            tracing::warn!(target: "cheng::denials", component = %self.call.component, tool = %self.call.tool, path, "{what} outside the grant refused");
            return Err(refuse(ErrorKind::NotGranted, format!("refused: \"{rel}\" is outside this tool's {what} grant")));
        }
        let protected = rel.split('/').any(|s| s == ".git")
            || self.call.protected.iter().any(|p| rel == *p || rel.starts_with(&format!("{p}/")));
        if write && protected {
            tracing::warn!(target: "cheng::denials", component = %self.call.component, tool = %self.call.tool, path, "write to a protected path refused");
            return Err(refuse(
                ErrorKind::PathRefused,
                format!("Refusing to write \"{rel}\": .git, the host's configuration and its state directory are never written by tools"),
            ));
        }
        Ok(guard)
    }
}

fn failure(e: WriteError) -> Failure {
    let kind = match &e {
        WriteError::Guard(g) => match g {
            GuardError::NotFound { .. } => ErrorKind::NotFound,
            GuardError::Io { .. } => ErrorKind::Io,
            _ => ErrorKind::PathRefused,
        },
        WriteError::Exists(_) | WriteError::Invalid(_) => ErrorKind::InvalidArgument,
        WriteError::Io(_) => ErrorKind::Io,
    };
    Failure { kind, message: e.to_string(), terminal: kind != ErrorKind::Io }
}

fn read_failure(e: ReadError) -> Failure {
    let kind = match &e {
        ReadError::Guard(GuardError::NotFound { .. }) => ErrorKind::NotFound,
        ReadError::Guard(GuardError::Io { .. }) | ReadError::Io(_) => ErrorKind::Io,
        ReadError::Guard(_) => ErrorKind::PathRefused,
        ReadError::IsDir(_) => ErrorKind::InvalidArgument,
        ReadError::TooLarge { .. } => ErrorKind::TooLarge,
    };
    Failure { kind, message: e.to_string(), terminal: kind != ErrorKind::Io }
}

/// The most one `read-file` may return, whatever the guest asks.
pub const MAX_READ: u64 = 256 << 20;
/// The most one `read-files` may return in total.
pub const MAX_READ_MANY: u64 = 256 << 20;

impl Host for StoreState {
    async fn read_file(&mut self, path: String, max_bytes: u64) -> Result<Vec<u8>, Failure> {
        let guard = self.check_access(&path, false)?;
        guard.read(&path, max_bytes.min(MAX_READ)).map_err(read_failure)
    }

    async fn read_files(&mut self, paths: Vec<String>, max_bytes_each: u64) -> Vec<Result<Vec<u8>, Failure>> {
        let mut total = 0u64;
        let mut out = Vec::with_capacity(paths.len());
        for path in paths {
            let r = self.check_access(&path, false).and_then(|g| {
                let left = MAX_READ_MANY.saturating_sub(total);
                g.read(&path, max_bytes_each.min(MAX_READ).min(left)).map_err(read_failure)
            });
            if let Ok(d) = &r {
                total += d.len() as u64;
            }
            out.push(r);
        }
        out
    }

    async fn write_file(&mut self, path: String, contents: Vec<u8>, create_dirs: bool, overwrite: bool) -> Result<WriteResult, Failure> {
        let guard = self.check_access(&path, true)?;
        let w = guard.write_atomic(&path, &contents, create_dirs, overwrite).map_err(failure)?;
        Ok(WriteResult { created: w.created, bytes_written: w.bytes })
    }

    async fn remove_file(&mut self, path: String) -> Result<(), Failure> {
        let guard = self.check_access(&path, true)?;
        guard.remove_file(&path).map_err(failure)
    }

    async fn read_dir(&mut self, path: String, sizes: bool) -> Result<Vec<wfs::DirEntry>, Failure> {
        let guard = self.check_access(&path, false)?;
        let entries = guard.read_dir(&path, sizes).map_err(failure)?;
        Ok(entries
            .into_iter()
            .map(|e| wfs::DirEntry {
                name: e.name,
                valid_utf8: e.valid_utf8,
                kind: match e.kind {
                    crate::guard::EntryKind::File => wfs::EntryKind::File,
                    crate::guard::EntryKind::Dir => wfs::EntryKind::Dir,
                    crate::guard::EntryKind::Symlink => wfs::EntryKind::Symlink,
                    crate::guard::EntryKind::Other => wfs::EntryKind::Other,
                },
                size: e.size,
            })
            .collect())
    }
}
