//! A stand-in for the `filetime` API subset that gix uses, for `wasm32-wasip2` guests
//! (the crate's own wasm backend stops at `unimplemented!`). Times come from std's
//! `Metadata::modified` / `created` / `accessed`, which WASI provides; setting a time
//! uses `File::set_modified`.
//!
//! Written for Cheng's git component and wired in with `[patch.crates-io]` in the
//! plugins' build only.

use std::fmt;
use std::fs::Metadata;
use std::io;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// A point in time: seconds since the Unix epoch and nanoseconds.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FileTime {
    seconds: i64,
    nanos: u32,
}

impl FileTime {
    /// The epoch.
    pub const fn zero() -> FileTime {
        FileTime { seconds: 0, nanos: 0 }
    }

    /// Now.
    pub fn now() -> FileTime {
        FileTime::from_system_time(SystemTime::now())
    }

    /// From seconds and nanoseconds since the epoch.
    pub const fn from_unix_time(seconds: i64, nanos: u32) -> FileTime {
        FileTime { seconds, nanos }
    }

    /// The last modification time in `meta` (the epoch when unavailable).
    pub fn from_last_modification_time(meta: &Metadata) -> FileTime {
        meta.modified().map(FileTime::from_system_time).unwrap_or_else(|_| FileTime::zero())
    }

    /// The last access time in `meta`.
    pub fn from_last_access_time(meta: &Metadata) -> FileTime {
        meta.accessed().map(FileTime::from_system_time).unwrap_or_else(|_| FileTime::zero())
    }

    /// The creation time in `meta`, when the platform records one.
    pub fn from_creation_time(meta: &Metadata) -> Option<FileTime> {
        meta.created().ok().map(FileTime::from_system_time)
    }

    /// From a `SystemTime`.
    pub fn from_system_time(t: SystemTime) -> FileTime {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => FileTime { seconds: d.as_secs() as i64, nanos: d.subsec_nanos() },
            Err(e) => {
                let d = e.duration();
                let (mut s, mut n) = (-(d.as_secs() as i64), d.subsec_nanos());
                if n > 0 {
                    s -= 1;
                    n = 1_000_000_000 - n;
                }
                FileTime { seconds: s, nanos: n }
            }
        }
    }

    /// Seconds since the epoch.
    pub fn unix_seconds(&self) -> i64 {
        self.seconds
    }

    /// Seconds since the epoch (platform-neutral name).
    pub fn seconds(&self) -> i64 {
        self.seconds
    }

    /// The nanoseconds part.
    pub fn nanoseconds(&self) -> u32 {
        self.nanos
    }
}

impl fmt::Debug for FileTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FileTime {{ seconds: {}, nanos: {} }}", self.seconds, self.nanos)
    }
}

impl From<SystemTime> for FileTime {
    fn from(t: SystemTime) -> FileTime {
        FileTime::from_system_time(t)
    }
}

fn to_system_time(t: FileTime) -> SystemTime {
    if t.seconds >= 0 {
        UNIX_EPOCH + std::time::Duration::new(t.seconds as u64, t.nanos)
    } else {
        UNIX_EPOCH - std::time::Duration::from_secs(t.seconds.unsigned_abs())
            + std::time::Duration::from_nanos(t.nanos as u64)
    }
}

/// Set a file's modification time.
pub fn set_file_mtime(p: impl AsRef<Path>, mtime: FileTime) -> io::Result<()> {
    std::fs::OpenOptions::new().write(true).open(p)?.set_modified(to_system_time(mtime))
}

/// Set a file's access and modification times (only the modification time can be set
/// portably; the access time is left alone).
pub fn set_file_times(p: impl AsRef<Path>, _atime: FileTime, mtime: FileTime) -> io::Result<()> {
    set_file_mtime(p, mtime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_orders() {
        let a = FileTime::from_unix_time(1_700_000_000, 5);
        assert_eq!((a.unix_seconds(), a.nanoseconds()), (1_700_000_000, 5));
        assert!(FileTime::from_unix_time(-1, 0) < FileTime::zero());
        assert_eq!(FileTime::from_system_time(to_system_time(a)), a);
        let b = FileTime::from_system_time(UNIX_EPOCH - std::time::Duration::from_millis(1500));
        assert_eq!((b.unix_seconds(), b.nanoseconds()), (-2, 500_000_000));
    }
}
