//! The one way the host replaces its own files (saved settings, per-run data, the
//! component cache): the new content goes to a temporary file with a name no other
//! writer uses, then takes the target's place in one rename. A reader sees the old file
//! or the new one, never a mix; two writers never share a temporary file; a failed
//! write (a full disk) removes its temporary file.
//!
//! # Example
//!
//! ```
//! let dir = std::env::temp_dir().join(format!("atomic-doc-{}", std::process::id()));
//! cheng_core::atomic::write_atomic(&dir.join("settings.json"), b"{}").unwrap();
//! assert_eq!(std::fs::read(dir.join("settings.json")).unwrap(), b"{}");
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Write `data` to `path` (creating its directory) through a temporary file and a rename.
pub fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = temp_name(dir, path);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(data).and_then(|_| f.flush()))
        .and_then(|_| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A temporary name beside `path`, unique to this process and this write.
fn temp_name(dir: &Path, path: &Path) -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.{}.{seq}.tmp", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_writers_never_share_a_temporary_file() {
        let dir = std::env::temp_dir().join(format!("cheng-atomic-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let target = dir.join("state.json");
        // Eight threads write the same file at once, each a whole value.
        std::thread::scope(|s| {
            for i in 0..8u8 {
                let target = &target;
                s.spawn(move || {
                    for _ in 0..50 {
                        write_atomic(target, &[b'0' + i; 4096]).unwrap();
                    }
                });
            }
        });
        // The file holds one writer's value whole, and no temporary file is left.
        let data = std::fs::read(&target).unwrap();
        assert!(data.len() == 4096 && data.iter().all(|b| *b == data[0]));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
