//! The lexical half of the workspace path rules, used by both the host's workspace guard
//! and the guest SDK, and the rule for paths no tool may write.
//!
//! A path a model sends is first judged on its text alone: NUL bytes, Windows drive and
//! UNC prefixes, absolute paths outside the workspace root and `..` segments that leave
//! a directory are refused before anything is opened. What survives is a
//! [`RelPath`]: a path relative to the workspace root that never climbs above it. The
//! other half of the rules (no symlink, junction or mount point between the root and the
//! target) needs the filesystem and lives with whoever opens the path.
//!
//! # Example
//!
//! ```
//! use cheng_contract::paths::{lexical, Refusal};
//!
//! let rel = lexical("src/../README.md", "/w/proj").unwrap();
//! assert_eq!(rel.as_str(), "src/../README.md");
//! assert_eq!(lexical("/w/proj/a.txt", "/w/proj").unwrap().as_str(), "a.txt");
//! assert_eq!(lexical("../proj2/x", "/w/proj").unwrap_err(), Refusal::Escapes);
//! assert_eq!(lexical("C:foo", "/w/proj").unwrap_err(), Refusal::DriveRelative);
//! ```

use std::fmt;

/// Why a path was refused on its text alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The path contains a NUL byte.
    Nul,
    /// A drive-relative Windows form such as `C:foo`, resolved by Windows against the
    /// drive's current directory rather than the workspace root.
    DriveRelative,
    /// Another Windows prefix: a drive-absolute path (`C:\x`), UNC (`\\server\share`),
    /// or a device or verbatim prefix (`\\?\`, `\\.\`).
    WindowsPrefix,
    /// The path leaves the workspace root: an absolute path outside it, or a `..` that
    /// climbs above the root at any point (even if later segments come back in).
    Escapes,
}

impl Refusal {
    /// The message a model sees, quoting the path and the run's workspace root.
    pub fn message(&self, path: &str, root: &str) -> String {
        let shown = display_path(path);
        match self {
            Refusal::Nul => {
                format!("Refusing path \"{shown}\": it contains a NUL byte")
            }
            Refusal::DriveRelative => format!("Refusing drive-relative path \"{shown}\""),
            Refusal::WindowsPrefix => format!(
                "Refusing path \"{shown}\": Windows drive and UNC prefixes are not accepted; \
                 use a path relative to the workspace root \"{root}\""
            ),
            Refusal::Escapes => {
                format!("Refusing path \"{shown}\": it escapes the workspace root \"{root}\"")
            }
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refusal::Nul => "the path contains a NUL byte",
            Refusal::DriveRelative => "the path is drive-relative",
            Refusal::WindowsPrefix => "the path has a Windows prefix",
            Refusal::Escapes => "the path escapes the workspace root",
        })
    }
}

impl std::error::Error for Refusal {}

/// The message for a path that passed every rule but names nothing.
pub fn not_found_message(path: &str) -> String {
    format!("File does not exist: {}", display_path(path))
}

/// The message for a path that reaches its target through a symbolic link.
pub fn symlink_message(path: &str, link: &str, root: &str) -> String {
    format!(
        "Refusing path \"{}\": it passes through the symbolic link \"{}\" inside the workspace \
         root \"{root}\"; name the link's target by its real path instead",
        display_path(path),
        display_path(link)
    )
}

/// A path shown in a message: control characters (NUL included) escaped so that the
/// message stays one readable line.
pub fn display_path(path: &str) -> String {
    crate::text::escape_line(path)
}

/// Characters some file systems ignore in names (HFS+ drops these when it compares
/// names, so `.g\u{200c}it` is `.git` there).
fn ignorable(c: char) -> bool {
    matches!(c as u32, 0x200C..=0x200F | 0x202A..=0x202E | 0x206A..=0x206F | 0xFEFF)
}

/// Whether one path segment names a git directory on some file system a workspace may
/// live on: `.git` compared without regard to case (macOS and Windows volumes), with
/// trailing dots and spaces dropped (Windows strips them), characters HFS+ ignores
/// removed, an NTFS stream suffix (`.git::$INDEX_ALLOCATION`) cut off, and the 8.3
/// short name `GIT~1`.
pub fn is_git_dir_name(segment: &str) -> bool {
    let cleaned: String = segment.chars().filter(|c| !ignorable(*c)).collect();
    let name = cleaned.split(':').next().unwrap_or("");
    let name = name.trim_end_matches(['.', ' ']);
    name.eq_ignore_ascii_case(".git") || name.eq_ignore_ascii_case("git~1")
}

/// Whether no tool may write the normalized workspace-relative path `rel`: it is, or
/// lies under, a git directory at any depth ([`is_git_dir_name`]), or one of `protected`
/// (the host's configuration files and state directory, relative to the workspace),
/// compared without regard to case.
pub fn is_protected<S: AsRef<str>>(rel: &str, protected: &[S]) -> bool {
    let lower = rel.to_lowercase();
    rel.split('/').any(is_git_dir_name)
        || protected
            .iter()
            .map(|p| p.as_ref().to_lowercase())
            .any(|p| lower == p || lower.starts_with(&format!("{p}/")))
}

/// A path relative to the workspace root that passed the lexical rules.
///
/// Its segments are the path's own, minus `.` and empty segments; `..` segments are
/// kept (they never climb above the root) so that whoever opens the path can check each
/// directory a `..` leaves for symlinks, as the kernel would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelPath {
    segments: Vec<String>,
    joined: String,
    trailing_slash: bool,
}

impl RelPath {
    /// The segments, in order; empty for the root itself.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The path joined with `/`; `.` for the root itself.
    pub fn as_str(&self) -> &str {
        &self.joined
    }

    /// True for the workspace root itself.
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    /// True when the original text ended in `/` (the target must be a directory).
    pub fn trailing_slash(&self) -> bool {
        self.trailing_slash
    }

    /// True when a `..` segment remains.
    pub fn has_parent_segments(&self) -> bool {
        self.segments.iter().any(|s| s == "..")
    }

    /// The path with `..` segments folded into the segment they undo. Only sound once
    /// every directory a `..` leaves is known not to be a symlink.
    pub fn normalized(&self) -> String {
        let mut out: Vec<&str> = Vec::new();
        for s in &self.segments {
            if s == ".." {
                out.pop();
            } else {
                out.push(s);
            }
        }
        if out.is_empty() { ".".to_string() } else { out.join("/") }
    }
}

/// Is `path` of the drive-letter form (`C:` followed by anything but a separator)?
fn drive_prefix(path: &str) -> Option<bool> {
    let b = path.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        // `C:\x` and `C:/x` are drive-absolute; `C:x` and `C:` are drive-relative.
        let absolute = matches!(b.get(2), Some(b'\\') | Some(b'/'));
        return Some(absolute);
    }
    None
}

/// Apply the lexical rules to `path`, against the workspace `root` (an absolute path,
/// as the host resolved it).
///
/// Relative paths are taken against the root. An absolute path is accepted only when
/// its text lies inside `root` (compared segment by segment, so `/w/proj2` is not inside
/// `/w/proj`), and is returned relative to it. An empty path means the root.
pub fn lexical(path: &str, root: &str) -> Result<RelPath, Refusal> {
    lexical_with_aliases(path, &[root])
}

/// Like [`lexical`], with several spellings of the same root: an absolute path inside
/// any of them is accepted (e.g. the host's path and the component's mount point).
pub fn lexical_with_aliases(path: &str, roots: &[&str]) -> Result<RelPath, Refusal> {
    // NUL first: nothing after a NUL byte can be trusted to mean what it says.
    if path.contains('\0') {
        return Err(Refusal::Nul);
    }
    // Windows forms are decided before resolving anything, whatever the host OS.
    match drive_prefix(path) {
        Some(false) => return Err(Refusal::DriveRelative),
        Some(true) => return Err(Refusal::WindowsPrefix),
        None => {}
    }
    if path.starts_with("\\\\") || path.starts_with("//?/") || path.starts_with("//./") {
        return Err(Refusal::WindowsPrefix);
    }
    let trailing_slash = path.len() > 1 && path.ends_with('/');

    let rest: std::borrow::Cow<'_, str> = if path.starts_with('/') {
        // Absolute: only inside one of the roots.
        let rest = roots.iter().find_map(|root| strip_root(path, root));
        rest.ok_or(Refusal::Escapes)?.into()
    } else {
        path.into()
    };

    let mut segments: Vec<String> = Vec::new();
    let mut depth: usize = 0;
    for seg in rest.split('/') {
        match seg {
            "" | "." => continue,
            ".." => {
                // A `..` that would climb above the root is an escape, even when later
                // segments would come back in (`../proj/x`).
                if depth == 0 {
                    return Err(Refusal::Escapes);
                }
                depth -= 1;
                segments.push(seg.to_string());
            }
            _ => {
                depth += 1;
                segments.push(seg.to_string());
            }
        }
    }
    let joined = if segments.is_empty() { ".".to_string() } else { segments.join("/") };
    Ok(RelPath { segments, joined, trailing_slash })
}

/// If absolute `path` lies inside absolute `root`, the rest of it (possibly empty).
/// Compared segment by segment, ignoring repeated separators and `.` segments, so that
/// `/w//proj/./a` is inside `/w/proj` and `/w/proj2` is not.
fn strip_root(path: &str, root: &str) -> Option<String> {
    let mut p = path.split('/').filter(|s| !s.is_empty() && *s != ".");
    for rs in root.split('/').filter(|s| !s.is_empty() && *s != ".") {
        if p.next() != Some(rs) {
            return None;
        }
    }
    Some(p.collect::<Vec<_>>().join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "/w/proj";

    fn ok(p: &str) -> String {
        lexical(p, ROOT).unwrap().as_str().to_string()
    }

    #[test]
    fn relative_paths_pass() {
        // Plain relative paths keep their segments.
        assert_eq!(ok("src/main.rs"), "src/main.rs");
        // `.` and repeated separators are dropped.
        assert_eq!(ok("./src//main.rs"), "src/main.rs");
        // An empty path and `.` mean the root.
        assert_eq!(ok(""), ".");
        assert_eq!(ok("."), ".");
        // A `..` that stays inside is kept for the opener to check.
        assert_eq!(ok("a/../b"), "a/../b");
        assert_eq!(lexical("a/../b", ROOT).unwrap().normalized(), "b");
        // Names with spaces, trailing dots and look-alike Unicode are just names.
        assert_eq!(ok("my file.txt"), "my file.txt");
        assert_eq!(ok("a.../b.."), "a.../b..");
        assert_eq!(ok("\u{2024}\u{2024}/x"), "\u{2024}\u{2024}/x");
        // Backslashes are literal characters on this side, not separators.
        assert_eq!(ok("..\\x"), "..\\x");
    }

    #[test]
    fn escapes_are_refused() {
        // A parent segment at the root escapes.
        assert_eq!(lexical("..", ROOT), Err(Refusal::Escapes));
        // Even when it comes back in.
        assert_eq!(lexical("../proj/x", ROOT), Err(Refusal::Escapes));
        assert_eq!(lexical("a/../../proj/b", ROOT), Err(Refusal::Escapes));
        // Absolute paths outside the root, including a sibling with the same prefix.
        assert_eq!(lexical("/etc/passwd", ROOT), Err(Refusal::Escapes));
        assert_eq!(lexical("/w/proj2/x", ROOT), Err(Refusal::Escapes));
        assert_eq!(lexical("/w/proj/../proj2", ROOT), Err(Refusal::Escapes));
    }

    #[test]
    fn absolute_inside_root_becomes_relative() {
        // The root itself.
        assert_eq!(ok("/w/proj"), ".");
        assert_eq!(ok("/w/proj/"), ".");
        // Inside it.
        assert_eq!(ok("/w/proj/src/a.rs"), "src/a.rs");
        assert_eq!(ok("/w//proj/./src/a.rs"), "src/a.rs");
        // An alias root (the component's mount point) works too.
        let rel = lexical_with_aliases("/workspace/a", &[ROOT, "/workspace"]).unwrap();
        assert_eq!(rel.as_str(), "a");
    }

    #[test]
    fn windows_forms_and_nul_are_refused() {
        // Drive-relative.
        assert_eq!(lexical("C:foo", ROOT), Err(Refusal::DriveRelative));
        assert_eq!(lexical("c:", ROOT), Err(Refusal::DriveRelative));
        // Drive-absolute, UNC, verbatim and device prefixes.
        assert_eq!(lexical("C:\\x", ROOT), Err(Refusal::WindowsPrefix));
        assert_eq!(lexical("C:/x", ROOT), Err(Refusal::WindowsPrefix));
        assert_eq!(lexical("\\\\server\\share", ROOT), Err(Refusal::WindowsPrefix));
        assert_eq!(lexical("\\\\?\\C:\\x", ROOT), Err(Refusal::WindowsPrefix));
        // NUL anywhere.
        assert_eq!(lexical("a\0b", ROOT), Err(Refusal::Nul));
    }

    #[test]
    fn messages_quote_path_and_root() {
        // The escape message names both.
        assert_eq!(
            Refusal::Escapes.message("../x", ROOT),
            "Refusing path \"../x\": it escapes the workspace root \"/w/proj\""
        );
        // The drive-relative message names the path.
        assert_eq!(Refusal::DriveRelative.message("C:foo", ROOT), "Refusing drive-relative path \"C:foo\"");
        // A missing file is a different fact with a different message.
        assert_eq!(not_found_message("a.txt"), "File does not exist: a.txt");
        // NUL is shown escaped.
        assert!(Refusal::Nul.message("a\0b", ROOT).contains("a\\u{0}b"));
    }

    #[test]
    fn trailing_slash_is_noted() {
        // The opener must then find a directory.
        assert!(lexical("src/", ROOT).unwrap().trailing_slash());
        assert!(!lexical("src", ROOT).unwrap().trailing_slash());
    }

    #[test]
    fn very_deep_paths() {
        // Deep but inside: fine.
        let deep = vec!["d"; 5000].join("/");
        assert_eq!(lexical(&deep, ROOT).unwrap().segments().len(), 5000);
        // Deep and then one `..` too many: refused.
        let up = format!("{}/{}", deep, vec![".."; 5001].join("/"));
        assert_eq!(lexical(&up, ROOT), Err(Refusal::Escapes));
    }

    #[test]
    fn git_directories_in_every_spelling_are_protected() {
        // `.git` at any depth, and its spellings on case-folding or dot-stripping file systems.
        for rel in [
            ".git",
            ".git/config",
            "sub/.git/hooks/x",
            ".GIT/hooks/x",
            ".git /x",
            ".git./x",
            ".Git.. /x",
            "GIT~1/x",
            ".git::$INDEX_ALLOCATION/x",
            ".g\u{200c}it/x",
        ] {
            assert!(is_protected::<&str>(rel, &[]), "{rel}");
        }
        // Names that merely contain the letters are not.
        for rel in [".gitignore", "a.git", "git/x", ".github/workflows/ci.yml", ".gitmodules"] {
            assert!(!is_protected::<&str>(rel, &[]), "{rel}");
        }
        // Listed paths and everything beneath them, in any case.
        assert!(is_protected(".cheng/state/x", &[".cheng/state"]));
        assert!(is_protected("Cheng.toml", &["cheng.toml"]));
        assert!(!is_protected("cheng.toml.bak", &["cheng.toml"]));
    }
}
