//! A directory entry as the host lists it for a component (`read-dir` in
//! `wit/fs.wit`): the host's guard produces these, the SDK hands them to components.

/// What a directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed).
    Symlink,
    /// Anything else.
    Other,
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The name; bytes that are not UTF-8 are escaped as `\xNN`.
    pub name: String,
    /// False when the name had to be escaped: such an entry cannot be opened by name.
    pub valid_utf8: bool,
    /// What it is.
    pub kind: EntryKind,
    /// File size in bytes (when asked for; 0 for others).
    pub size: u64,
}
