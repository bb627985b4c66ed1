//! Which executable a command will run: the host's `PATH` (each entry resolved, symlinks
//! followed, and never one that lands in the workspace), or a relative path the
//! workspace guard accepts. Programs are compared by what the kernel will execute —
//! their canonical path, and for multi-call binaries (busybox, toybox) the name they
//! are started by — so `touch`, `/usr/bin/touch` and a symlink to it are one program.

use std::path::{Path, PathBuf};

/// Multi-call binaries: one file that acts as whichever program its `argv[0]` names.
const MULTICALL: &[&str] = &["busybox", "toybox"];

/// What a program is, as far as rules are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProgramId {
    /// The executable's canonical path.
    pub path: PathBuf,
    /// For a multi-call binary, the program it acts as (its `argv[0]`'s file name).
    pub applet: Option<String>,
}

impl ProgramId {
    /// The identity of the executable at `resolved` when started as `argv0`.
    pub fn of(resolved: &Path, argv0: &str) -> Option<ProgramId> {
        let path = std::fs::canonicalize(resolved).ok()?;
        let file = path.file_name()?.to_str()?.to_string();
        let applet = MULTICALL.contains(&file.as_str()).then(|| basename(argv0).to_string());
        // Started under its own name, a multi-call binary is itself (`busybox rm x`).
        let applet = applet.filter(|a| !MULTICALL.contains(&a.as_str()));
        Some(ProgramId { path, applet })
    }

    /// The program's name: the applet of a multi-call binary, else the file's name.
    pub fn name(&self) -> &str {
        match &self.applet {
            Some(a) => a,
            None => self.path.file_name().and_then(|n| n.to_str()).unwrap_or(""),
        }
    }
}

/// The last path segment of `word`.
pub(crate) fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// The host's program search path: its `PATH`'s absolute entries, each resolved once.
#[derive(Debug, Clone)]
pub(crate) struct SearchPath {
    dirs: Vec<PathBuf>,
}

impl SearchPath {
    /// From the host's `PATH` (a minimal one when it is unset). Relative entries are
    /// dropped (they would mean the command's working directory); each entry is
    /// resolved, so a link pointing into a workspace is seen as the workspace.
    pub fn from_env() -> SearchPath {
        let raw: Vec<PathBuf> = match std::env::var_os("PATH") {
            Some(p) => std::env::split_paths(&p).collect(),
            None => ["/usr/local/bin", "/usr/bin", "/bin"].into_iter().map(PathBuf::from).collect(),
        };
        let mut dirs: Vec<PathBuf> = Vec::new();
        for d in raw.into_iter().filter(|d| d.is_absolute()) {
            if let Ok(real) = std::fs::canonicalize(&d)
                && !dirs.contains(&real)
            {
                dirs.push(real);
            }
        }
        SearchPath { dirs }
    }

    /// The entries a command in `workspace` may use: none inside it.
    pub fn outside<'a>(&'a self, workspace: &'a Path) -> impl Iterator<Item = &'a Path> + 'a {
        self.dirs.iter().map(PathBuf::as_path).filter(move |d| !d.starts_with(workspace))
    }

    /// The `PATH` value for a command in `workspace`.
    pub fn env_value(&self, workspace: &Path) -> String {
        std::env::join_paths(self.outside(workspace)).ok().and_then(|p| p.into_string().ok()).unwrap_or_default()
    }

    /// Find `name` (no `/` in it) on the path: the first executable file whose real
    /// location is outside `workspace` (a link from a system directory into the
    /// workspace is passed over).
    pub fn lookup(&self, name: &str, workspace: &Path) -> Option<PathBuf> {
        self.outside(workspace)
            .map(|d| d.join(name))
            .filter(|p| is_executable(p))
            .find(|p| std::fs::canonicalize(p).is_ok_and(|real| !real.starts_with(workspace)))
    }
}

/// Whether `p` is an executable regular file (following links).
pub(crate) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_program_however_it_is_named() {
        let dir = std::env::temp_dir().join(format!("cheng-resolve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let sp = SearchPath::from_env();
        let touch = sp.lookup("touch", &dir).expect("touch is installed");
        let by_name = ProgramId::of(&touch, "touch").unwrap();
        // The absolute path is the same program.
        assert_eq!(ProgramId::of(Path::new(&touch), "/usr/bin/touch").unwrap(), by_name);
        // So is a link to it, under another name.
        std::os::unix::fs::symlink(&touch, dir.join("mytouch")).unwrap();
        assert_eq!(ProgramId::of(&dir.join("mytouch"), "mytouch").unwrap(), by_name);
        // A different program is not.
        let ls = sp.lookup("ls", &dir).unwrap();
        assert_ne!(ProgramId::of(&ls, "ls").unwrap(), by_name);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn path_entries_that_resolve_into_the_workspace_are_skipped() {
        let base = std::env::temp_dir().join(format!("cheng-resolve-ws-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let ws = base.join("ws");
        std::fs::create_dir_all(ws.join("bin")).unwrap();
        std::os::unix::fs::symlink(&ws, base.join("link")).unwrap();
        // A PATH entry reaching the workspace through a link is the workspace.
        let sp = SearchPath { dirs: vec![std::fs::canonicalize(base.join("link/bin")).unwrap(), "/usr/bin".into()] };
        assert_eq!(sp.outside(&std::fs::canonicalize(&ws).unwrap()).count(), 1);
        let _ = std::fs::remove_dir_all(&base);
    }
}
