//! `cheng:tool/fs`: reads, directory listings, atomic writes and removals done by the
//! host through the workspace guard — reads only under a mount of the call's grant,
//! writes only under a read-write one and never on a protected path. Every refusal of a
//! right goes into the call's record (and the `cheng::denials` log).

use std::sync::Arc;

use super::generated::cheng::tool::fs::{self as wfs, Host, WriteResult};
use super::generated::cheng::tool::types::{ErrorKind, Failure};
use super::{ChengView, ImportError, failure as fail, refused};
use crate::capability::{self, Refused};
use crate::guard::{Guard, GuardError, ReadError, WriteError};

impl ChengView<'_> {
    /// The first statement of every `fs` function: the capability check — may this
    /// call read (any mount covering `path`) or write (a read-write mount, and not a
    /// protected path) there? A denial goes into the call's record.
    fn fs_access(&self, path: &str, write: bool) -> Result<Arc<Guard>, Failure> {
        let caps = self.caps()?;
        let root = caps.guard.root().to_string_lossy();
        match capability::fs(&caps.mounts, &caps.protected, path, write, &root) {
            Ok(_) => Ok(caps.guard.clone()),
            Err(Refused::Denied(d)) => Err(refused(&caps.scope, d)),
            Err(Refused::Invalid { kind, message }) => Err(fail(kind, message)),
        }
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
        ReadError::IsDir(_) | ReadError::NotRegular(..) => ErrorKind::InvalidArgument,
        ReadError::TooLarge { .. } => ErrorKind::TooLarge,
    };
    Failure { kind, message: e.to_string(), terminal: kind != ErrorKind::Io }
}

/// The most one `read-file` may return, whatever the guest asks.
pub const MAX_READ: u64 = 256 << 20;
/// The most one `read-files` may return in total.
pub const MAX_READ_MANY: u64 = 256 << 20;

impl Host for ChengView<'_> {
    async fn read_file(&mut self, path: String, max_bytes: u64) -> Result<Vec<u8>, ImportError> {
        let guard = self.fs_access(&path, false)?;
        Ok(guard.read(&path, max_bytes.min(MAX_READ)).map_err(read_failure)?)
    }

    async fn read_files(
        &mut self,
        paths: Vec<String>,
        max_bytes_each: u64,
    ) -> wasmtime::Result<Vec<Result<Vec<u8>, Failure>>> {
        let mut total = 0u64;
        let mut out = Vec::with_capacity(paths.len());
        for path in paths {
            let r = self.fs_access(&path, false).and_then(|g| {
                let left = MAX_READ_MANY.saturating_sub(total);
                g.read(&path, max_bytes_each.min(MAX_READ).min(left)).map_err(read_failure)
            });
            if let Ok(d) = &r {
                total += d.len() as u64;
            }
            out.push(r);
        }
        Ok(out)
    }

    async fn write_file(
        &mut self,
        path: String,
        contents: Vec<u8>,
        create_dirs: bool,
        overwrite: bool,
    ) -> Result<WriteResult, ImportError> {
        let guard = self.fs_access(&path, true)?;
        let w = guard.write_atomic(&path, &contents, create_dirs, overwrite).map_err(failure)?;
        Ok(WriteResult { created: w.created, bytes_written: w.bytes })
    }

    async fn may_write(&mut self, paths: Vec<String>) -> Result<(), ImportError> {
        for p in &paths {
            self.fs_access(p, true)?;
        }
        Ok(())
    }

    async fn remove_file(&mut self, path: String) -> Result<(), ImportError> {
        let guard = self.fs_access(&path, true)?;
        Ok(guard.remove_file(&path).map_err(failure)?)
    }

    async fn read_dir(&mut self, path: String, sizes: bool) -> Result<Vec<wfs::DirEntry>, ImportError> {
        let guard = self.fs_access(&path, false)?;
        let entries = guard.read_dir(&path, sizes).map_err(failure)?;
        Ok(entries.into_iter().map(wfs::DirEntry::from).collect())
    }

    async fn stat_dirs(&mut self, paths: Vec<String>) -> wasmtime::Result<Vec<Result<Vec<wfs::EntryStat>, Failure>>> {
        // Grants are checked (and refusals logged) here; the listings, one `lstat` per
        // entry, are spread over a few threads when there are many directories, as git
        // spreads its own stats over threads for a large index. Measured on 2 cores:
        // for 20,000 entries in 801 directories more threads than cores pay off (43 ms
        // on one thread, 35 on two, 27 on four, no less on eight); for 2,000 entries
        // in 41 directories four threads cost more than they save (the workspace_git
        // bench went from 0.9x to 1.1x of git). So: one thread per core, two per core
        // for a large listing.
        let checked: Vec<Result<_, Failure>> = paths.iter().map(|p| self.fs_access(p, false)).collect();
        let list = |i: usize| -> Result<Vec<wfs::EntryStat>, Failure> {
            let guard = checked[i].as_ref().map_err(Clone::clone)?;
            Ok(guard.read_dir_stat(&paths[i]).map_err(failure)?.into_iter().map(|(e, st)| entry_stat(e, &st)).collect())
        };
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let workers = if paths.len() >= 256 { cores * 2 } else { cores }.clamp(2, 8);
        if paths.len() < 8 {
            return Ok((0..paths.len()).map(list).collect());
        }
        let n = paths.len();
        let mut out: Vec<Option<Result<Vec<wfs::EntryStat>, Failure>>> = (0..n).map(|_| None).collect();
        let mut faults = 0;
        std::thread::scope(|s| {
            let list = &list;
            let handles: Vec<_> = (0..workers)
                .map(|w| s.spawn(move || (w..n).step_by(workers).map(|i| (i, list(i))).collect::<Vec<_>>()))
                .collect();
            for h in handles {
                match h.join() {
                    Ok(done) => {
                        for (i, r) in done {
                            out[i] = Some(r);
                        }
                    }
                    Err(_) => faults += 1,
                }
            }
        });
        // A worker only lists and converts; if one panicked anyway, the listing is
        // incomplete, and the guest must not take it for the directories' contents.
        if faults > 0 {
            return Err(super::fault(format!("{faults} stat-dirs worker(s) panicked")));
        }
        Ok(out.into_iter().flatten().collect())
    }
}

// Field widths differ between targets; the casts are the portable spelling.
#[allow(clippy::unnecessary_cast)]
fn entry_stat(e: crate::guard::DirEntry, st: &rustix::fs::Stat) -> wfs::EntryStat {
    wfs::EntryStat {
        name: e.name,
        valid_utf8: e.valid_utf8,
        kind: e.kind.into(),
        mode: st.st_mode as u32,
        size: st.st_size as u64,
        mtime_seconds: st.st_mtime as i64,
        mtime_nanoseconds: st.st_mtime_nsec as u32,
        ctime_seconds: st.st_ctime as i64,
        ctime_nanoseconds: st.st_ctime_nsec as u32,
        device: st.st_dev as u64,
        inode: st.st_ino as u64,
        uid: st.st_uid as u32,
        gid: st.st_gid as u32,
    }
}
