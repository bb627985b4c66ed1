//! A stand-in for the `memmap2` API subset that gix uses, for `wasm32-wasip2` guests,
//! where there is no `mmap`: a "mapping" is the file read into memory.
//!
//! Written for Cheng's git component and wired in with `[patch.crates-io]` in the
//! plugins' build only. Semantics kept from a read-only private mapping: the bytes are a
//! snapshot of the file when it was mapped; the file's position is left where it was
//! (the read is positioned, and the original offset is restored).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Deref;

/// A read-only "mapping": the file's bytes, owned.
#[derive(Debug, Default)]
pub struct Mmap {
    data: Box<[u8]>,
}

impl Mmap {
    /// Map `file` read-only.
    ///
    /// # Safety
    /// Kept `unsafe` for API compatibility with memmap2; reading into memory has none of
    /// a real mapping's hazards.
    pub unsafe fn map(file: &File) -> io::Result<Mmap> {
        read_all(file)
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Access-pattern advice; the copy in memory has no pages to advise about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// Pages will be read in order.
    Sequential,
    /// Pages will be read in no particular order.
    Random,
    /// No particular expectation.
    Normal,
    /// Pages will be needed soon.
    WillNeed,
}

impl Mmap {
    /// Accept access-pattern advice (a no-op: the contents are already in memory).
    pub fn advise(&self, _advice: Advice) -> std::io::Result<()> {
        Ok(())
    }
}

impl Deref for Mmap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl AsRef<[u8]> for Mmap {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// Options for a mapping; only whole-file read-only mappings are supported.
#[derive(Debug, Clone, Default)]
pub struct MmapOptions {
    offset: u64,
    len: Option<usize>,
}

impl MmapOptions {
    /// Default options: the whole file.
    pub fn new() -> MmapOptions {
        MmapOptions::default()
    }

    /// Start at `offset`.
    pub fn offset(&mut self, offset: u64) -> &mut Self {
        self.offset = offset;
        self
    }

    /// Map `len` bytes.
    pub fn len(&mut self, len: usize) -> &mut Self {
        self.len = Some(len);
        self
    }

    /// Map read-only.
    ///
    /// # Safety
    /// As [`Mmap::map`].
    pub unsafe fn map(&self, file: &File) -> io::Result<Mmap> {
        self.read(file)
    }

    /// Map copy-on-write, read-only (a private snapshot).
    ///
    /// # Safety
    /// As [`Mmap::map`].
    pub unsafe fn map_copy_read_only(&self, file: &File) -> io::Result<Mmap> {
        self.read(file)
    }

    fn read(&self, file: &File) -> io::Result<Mmap> {
        let all = read_range(file, self.offset, self.len)?;
        Ok(Mmap { data: all.into_boxed_slice() })
    }
}

fn read_all(file: &File) -> io::Result<Mmap> {
    Ok(Mmap { data: read_range(file, 0, None)?.into_boxed_slice() })
}

/// Read `len` bytes (or to the end) from `offset`, leaving the file's position as it was.
fn read_range(mut file: &File, offset: u64, len: Option<usize>) -> io::Result<Vec<u8>> {
    let saved = file.stream_position()?;
    let result = (|| {
        file.seek(SeekFrom::Start(offset))?;
        let mut buf = Vec::new();
        match len {
            Some(n) => {
                buf.resize(n, 0);
                file.read_exact(&mut buf)?;
            }
            None => {
                let size = file.metadata().map(|m| m.len().saturating_sub(offset) as usize).unwrap_or(0);
                buf.reserve_exact(size);
                file.read_to_end(&mut buf)?;
            }
        }
        Ok(buf)
    })();
    file.seek(SeekFrom::Start(saved))?;
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn maps_whole_file_and_keeps_position() {
        let dir = std::env::temp_dir().join(format!("mm-shim-{}", std::process::id()));
        let mut f = File::create(&dir).unwrap();
        f.write_all(b"hello world").unwrap();
        drop(f);
        let mut f = File::open(&dir).unwrap();
        f.seek(SeekFrom::Start(3)).unwrap();
        let m = unsafe { MmapOptions::new().map_copy_read_only(&f) }.unwrap();
        assert_eq!(&m[..], b"hello world");
        assert_eq!(f.stream_position().unwrap(), 3);
        let part = unsafe { MmapOptions::new().offset(6).len(5).map(&f) }.unwrap();
        assert_eq!(&part[..], b"world");
        std::fs::remove_file(dir).unwrap();
    }
}
