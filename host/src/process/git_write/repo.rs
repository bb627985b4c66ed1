//! The repository a request names, found and checked before anything runs: its work
//! tree and git directory inside the workspace (a `.git` file or `commondir` pointing
//! outside is refused), its configuration read for what the host must know (includes,
//! which are refused; the identity), and afterwards its `HEAD`.

use std::path::{Path, PathBuf};

use crate::ErrorKind;
use crate::process::Refusal;
use crate::process::git::{ConfigEntry, entries};

/// A repository inside the workspace.
#[derive(Debug, Clone)]
pub(crate) struct Repo {
    /// The work tree's top, absolute.
    pub top: PathBuf,
    /// The work tree's top, workspace-relative (`.` for the root).
    pub top_rel: String,
    /// The git directory (`.git`, or a linked worktree's).
    pub git_dir: PathBuf,
    /// Where refs and objects live (the git directory, or a worktree's common one).
    pub common: PathBuf,
}

fn refused(message: String) -> Refusal {
    Refusal::new(ErrorKind::PathRefused, message)
}

/// The repository whose work tree holds `cwd` (absolute, inside `root`).
pub(crate) fn find(cwd: &Path, root: &Path) -> Result<Repo, Refusal> {
    let mut dir = cwd.to_path_buf();
    loop {
        let dotgit = dir.join(".git");
        if let Ok(meta) = std::fs::symlink_metadata(&dotgit) {
            let rel = |p: &Path| p.strip_prefix(root).map(|r| r.display().to_string()).unwrap_or_default();
            let git_dir = if meta.file_type().is_symlink() {
                return Err(refused(format!(
                    "\"{}\" is a symbolic link; this tool works only on a .git directory or a .git file inside the workspace",
                    rel(&dotgit)
                )));
            } else if meta.is_file() {
                let text = std::fs::read_to_string(&dotgit)
                    .map_err(|e| Refusal::new(ErrorKind::Io, format!("cannot read \"{}\": {e}", rel(&dotgit))))?;
                let target = text.trim().strip_prefix("gitdir:").map(str::trim).unwrap_or("");
                inside(&dir.join(target), root).ok_or_else(|| {
                    refused(format!(
                        "\"{}\" is a .git file pointing to \"{target}\", outside the workspace; this tool changes only \
                         repositories inside it",
                        rel(&dotgit)
                    ))
                })?
            } else {
                inside(&dotgit, root)
                    .ok_or_else(|| refused(format!("\"{}\" lies outside the workspace", rel(&dotgit))))?
            };
            let common = match std::fs::read_to_string(git_dir.join("commondir")) {
                Ok(c) => inside(&git_dir.join(c.trim()), root).ok_or_else(|| {
                    refused(format!(
                        "the repository at \"{}\" keeps its objects and refs outside the workspace (commondir); \
                         this tool changes only repositories inside it",
                        rel(&dir)
                    ))
                })?,
                Err(_) => git_dir.clone(),
            };
            let top_rel = match dir.strip_prefix(root) {
                Ok(r) if r.as_os_str().is_empty() => ".".to_string(),
                Ok(r) => r.to_string_lossy().into_owned(),
                Err(_) => ".".to_string(),
            };
            return Ok(Repo { top: dir, top_rel, git_dir, common });
        }
        if dir == root || !dir.pop() || !dir.starts_with(root) {
            break;
        }
    }
    Err(Refusal::new(
        ErrorKind::NotFound,
        "not a git repository: no .git in this directory or any parent within the workspace",
    ))
}

/// `p` resolved (symlinks followed), when it exists and lies inside `root`.
fn inside(p: &Path, root: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(p).ok()?;
    let root = std::fs::canonicalize(root).ok()?;
    real.starts_with(&root).then_some(real)
}

/// What the host reads from a repository's configuration files.
#[derive(Debug, Default)]
pub(crate) struct RepoConfig {
    /// `user.name`.
    pub user_name: Option<String>,
    /// `user.email`.
    pub user_email: Option<String>,
}

impl Repo {
    /// The configuration files git reads for this repository (the global and system
    /// ones are switched off).
    fn config_files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.common.join("config")];
        if self.git_dir != self.common {
            files.push(self.git_dir.join("config.worktree"));
        }
        files
    }

    /// Read the repository's configuration, refusing one that includes other files:
    /// git would read them, and the host runs git only with configuration it has read.
    pub fn config(&self, root: &Path) -> Result<RepoConfig, Refusal> {
        let mut out = RepoConfig::default();
        for file in self.config_files() {
            let Ok(text) = std::fs::read_to_string(&file) else { continue };
            for ConfigEntry { section, key, value, .. } in entries(&text) {
                if section == "include" || section == "includeif" {
                    let shown = file.strip_prefix(root).unwrap_or(&file).display().to_string();
                    return Err(Refusal::new(
                        ErrorKind::CommandNotAllowed,
                        format!(
                            "the repository's configuration ({shown}) includes another file ({section}.{key} = {value}); \
                             workspace_git_write runs git only with configuration the host has read, so it does not run \
                             here. Ask the person to remove the include or to run this git operation themselves"
                        ),
                    ));
                }
                match (section.as_str(), key.as_str()) {
                    ("user", "name") => out.user_name = Some(value),
                    ("user", "email") => out.user_email = Some(value),
                    _ => {}
                }
            }
        }
        Ok(out)
    }

    /// The current branch (`None` when `HEAD` is detached) and the commit `HEAD` names
    /// (`None` before the first commit), read from the files.
    pub fn head(&self) -> (Option<String>, Option<String>) {
        let Ok(text) = std::fs::read_to_string(self.git_dir.join("HEAD")) else { return (None, None) };
        let text = text.trim();
        match text.strip_prefix("ref:").map(str::trim) {
            Some(r) => (r.strip_prefix("refs/heads/").map(str::to_string), self.resolve(r)),
            None => (None, Some(text.to_string()).filter(|h| h.len() >= 40)),
        }
    }

    /// The hash `name` (a full ref name) points at: a loose ref, else `packed-refs`.
    fn resolve(&self, name: &str) -> Option<String> {
        if let Ok(t) = std::fs::read_to_string(self.common.join(name)) {
            let t = t.trim();
            return match t.strip_prefix("ref:") {
                Some(next) => self.resolve(next.trim()),
                None => Some(t.to_string()),
            };
        }
        let packed = std::fs::read_to_string(self.common.join("packed-refs")).ok()?;
        packed.lines().find_map(|l| {
            let (hash, r) = l.split_once(' ')?;
            (r == name).then(|| hash.to_string())
        })
    }

    /// Whether the branch `name` exists (a loose ref or a packed one).
    pub fn has_branch(&self, name: &str) -> bool {
        self.resolve(&format!("refs/heads/{name}")).is_some()
    }
}

/// The git the host runs: the program found on the host's `PATH` (outside the
/// workspace), and what it must be allowed to execute: itself, its helper directory
/// (`git --exec-path`) and its ELF interpreter — nothing else.
#[derive(Debug, Clone)]
pub(crate) struct GitBinary {
    /// The program.
    pub program: PathBuf,
    /// Files and directories it may execute.
    pub execute: Vec<PathBuf>,
}

impl GitBinary {
    /// Find git on `PATH`; the reason when it cannot be used.
    pub fn find(path: &super::super::resolve::SearchPath, root: &Path) -> Result<GitBinary, String> {
        let program = path.lookup("git", root).ok_or("git was not found on the host's PATH")?;
        let real = std::fs::canonicalize(&program).map_err(|e| format!("{}: {e}", program.display()))?;
        let head = std::fs::read(&real).map_err(|e| format!("cannot read {}: {e}", real.display()))?;
        if head.starts_with(b"#!") {
            return Err(format!(
                "{} is a script, not a program; it would need a shell, which git runs without here",
                real.display()
            ));
        }
        let mut execute = vec![real.clone()];
        if let Some(interp) = elf_interpreter(&head) {
            execute.push(std::fs::canonicalize(&interp).unwrap_or(interp));
        }
        // `git --exec-path` reads no configuration; it prints a compiled-in directory.
        let out = std::process::Command::new(&real)
            .arg("--exec-path")
            .env_clear()
            .current_dir("/")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {} --exec-path: {e}", real.display()))?;
        let exec_path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if exec_path.is_absolute() && exec_path.is_dir() {
            execute.push(std::fs::canonicalize(&exec_path).unwrap_or(exec_path));
        }
        Ok(GitBinary { program, execute })
    }
}

/// The `PT_INTERP` path of a 64-bit little-endian ELF file's bytes.
fn elf_interpreter(elf: &[u8]) -> Option<PathBuf> {
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?) as usize);
    let u64_at = |o: usize| Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?) as usize);
    let (phoff, phentsize, phnum) = (u64_at(0x20)?, u16_at(0x36)?, u16_at(0x38)?);
    (0..phnum).find_map(|i| {
        let ph = phoff.checked_add(i.checked_mul(phentsize)?)?;
        let kind = u32::from_le_bytes(elf.get(ph..ph + 4)?.try_into().ok()?);
        if kind != 3 {
            return None;
        }
        let (off, size) = (u64_at(ph + 8)?, u64_at(ph + 32)?);
        let raw = elf.get(off..off.checked_add(size)?)?;
        let raw = raw.strip_suffix(b"\0").unwrap_or(raw);
        Some(PathBuf::from(String::from_utf8_lossy(raw).into_owned()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_git_and_its_interpreter_are_found() {
        let path = super::super::super::resolve::SearchPath::from_env();
        let git = GitBinary::find(&path, Path::new("/nonexistent-workspace")).unwrap();
        assert!(git.execute.len() >= 2, "{:?}", git.execute);
        // The interpreter of a dynamically linked git is an ld.so.
        let bytes = std::fs::read(&git.execute[0]).unwrap();
        if let Some(i) = elf_interpreter(&bytes) {
            assert!(i.to_string_lossy().contains("ld"), "{i:?}");
        }
    }
}
