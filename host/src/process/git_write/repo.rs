//! The repository a request names, found and checked before anything runs: its work
//! tree and git directory inside the workspace (a `.git` file or `commondir` pointing
//! outside is refused), its configuration read for what the host must know (includes,
//! which are refused; the identity), and afterwards its `HEAD`. Every file is read by
//! the guard's rules ([`repo_files`]): a FIFO, a device or a file over the cap refuses
//! the operation with an error naming it.
//!
//! Also the git the host runs ([`GitBinary`]): found on the host's `PATH`, and what it
//! must be allowed to execute, learnt from the few bytes of its ELF header that say
//! (the file is never read whole).

use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use crate::ErrorKind;
use crate::guard::Guard;
use crate::policy::hostfile;
use crate::process::Refusal;
use crate::process::git::{ConfigEntry, entries};
use crate::process::repo_files::{self, COMMONDIR, CONFIG, DOTGIT, HEAD, PACKED_REFS, REF};

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

/// The repository whose work tree holds `cwd` (absolute, inside the guard's root).
pub(crate) fn find(guard: &Guard, cwd: &Path) -> Result<Repo, Refusal> {
    let root = guard.root();
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
            } else if !meta.is_dir() {
                // A .git file (a FIFO or a device there is refused by the read).
                let text = repo_files::read(guard, &dotgit, DOTGIT)?.ok_or_else(|| {
                    Refusal::new(ErrorKind::Io, format!("\"{}\" vanished while it was read", rel(&dotgit)))
                })?;
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
            let common = match repo_files::read(guard, &git_dir.join("commondir"), COMMONDIR)? {
                Some(c) => inside(&git_dir.join(c.trim()), root).ok_or_else(|| {
                    refused(format!(
                        "the repository at \"{}\" keeps its objects and refs outside the workspace (commondir); \
                         this tool changes only repositories inside it",
                        rel(&dir)
                    ))
                })?,
                None => git_dir.clone(),
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
    pub fn config(&self, guard: &Guard) -> Result<RepoConfig, Refusal> {
        let root = guard.root();
        let mut out = RepoConfig::default();
        for file in self.config_files() {
            let Some(text) = repo_files::read(guard, &file, CONFIG)? else { continue };
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
    pub fn head(&self, guard: &Guard) -> Result<(Option<String>, Option<String>), Refusal> {
        let Some(text) = repo_files::read(guard, &self.git_dir.join("HEAD"), HEAD)? else { return Ok((None, None)) };
        let text = text.trim();
        Ok(match text.strip_prefix("ref:").map(str::trim) {
            Some(r) => (r.strip_prefix("refs/heads/").map(str::to_string), self.resolve(guard, r, 0)?),
            None => (None, object_id(text)),
        })
    }

    /// The hash `name` (a full ref name) points at: a loose ref, else `packed-refs`.
    /// Only names under `refs/` are looked up (a `HEAD` of `ref: /etc/passwd` names no
    /// file), only object ids are returned, and symbolic refs are followed five deep.
    fn resolve(&self, guard: &Guard, name: &str, depth: usize) -> Result<Option<String>, Refusal> {
        let safe = name.starts_with("refs/") && name.split('/').all(|s| !s.is_empty() && s != "." && s != "..");
        if !safe || depth > 5 {
            return Ok(None);
        }
        if let Some(t) = repo_files::read(guard, &self.common.join(name), REF)? {
            let t = t.trim();
            return match t.strip_prefix("ref:") {
                Some(next) => self.resolve(guard, next.trim(), depth + 1),
                None => Ok(object_id(t)),
            };
        }
        let Some(packed) = repo_files::read(guard, &self.common.join("packed-refs"), PACKED_REFS)? else {
            return Ok(None);
        };
        Ok(packed.lines().find_map(|l| {
            let (hash, r) = l.split_once(' ')?;
            if r == name { object_id(hash) } else { None }
        }))
    }

    /// Whether the branch `name` exists (a loose ref or a packed one).
    pub fn has_branch(&self, guard: &Guard, name: &str) -> Result<bool, Refusal> {
        Ok(self.resolve(guard, &format!("refs/heads/{name}"), 0)?.is_some())
    }
}

/// `text` when it is an object id (40 or 64 hexadecimal digits).
fn object_id(text: &str) -> Option<String> {
    ((text.len() == 40 || text.len() == 64) && text.bytes().all(|b| b.is_ascii_hexdigit())).then(|| text.to_string())
}

/// The git the host runs: the program found on the host's `PATH` (outside the
/// workspace), and what it must be allowed to execute: itself, its ELF interpreter and
/// its helper directory (`git --exec-path`, which [`super::git_binary`] asks git
/// through the spawn path and adds) — nothing else.
#[derive(Debug, Clone)]
pub(crate) struct GitBinary {
    /// The program.
    pub program: PathBuf,
    /// Files and directories it may execute.
    pub execute: Vec<PathBuf>,
}

impl GitBinary {
    /// Find git on `PATH`, with itself and its interpreter to execute; the reason when
    /// it cannot be used.
    pub fn locate(path: &super::super::resolve::SearchPath, root: &Path) -> Result<GitBinary, String> {
        let program = path.lookup("git", root).ok_or("git was not found on the host's PATH")?;
        let real = std::fs::canonicalize(&program).map_err(|e| format!("{}: {e}", program.display()))?;
        let execute = executable(&real)?;
        Ok(GitBinary { program, execute })
    }
}

/// What running the program at `real` (resolved) executes: the file itself and, for a
/// dynamically linked ELF program, its interpreter. A script is refused (it would need
/// a shell). Only the bytes that tell are read — the first two, the ELF header, the
/// program headers and the interpreter's name — never the whole file; it is opened
/// without blocking and must be a regular file.
pub(crate) fn executable(real: &Path) -> Result<Vec<PathBuf>, String> {
    let file = hostfile::open(real, hostfile::Limit::new(u64::MAX, "a program")).map_err(|e| e.to_string())?;
    let mut magic = [0u8; 2];
    if file.read_exact_at(&mut magic, 0).is_ok() && &magic == b"#!" {
        return Err(format!(
            "{} is a script, not a program; it would need a shell, which git runs without here",
            real.display()
        ));
    }
    let mut execute = vec![real.to_path_buf()];
    if let Some(interp) = elf_interpreter_of(&file) {
        execute.push(std::fs::canonicalize(&interp).unwrap_or(interp));
    }
    Ok(execute)
}

/// The `PT_INTERP` path of a 64-bit little-endian ELF file, read in pieces: the
/// header, the program header table (at most 64 KiB) and the name (at most 4 KiB).
fn elf_interpreter_of(file: &std::fs::File) -> Option<PathBuf> {
    interpreter(|offset, len| {
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, offset as u64).ok()?;
        Some(buf)
    })
}

/// The `PT_INTERP` path of a 64-bit little-endian ELF file whose bytes `at(offset,
/// len)` gives.
fn interpreter(at: impl Fn(usize, usize) -> Option<Vec<u8>>) -> Option<PathBuf> {
    let head = at(0, 64)?;
    if head.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let u16_at = |b: &[u8], o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?) as usize);
    let u32_at = |b: &[u8], o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |b: &[u8], o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?) as usize);
    let (phoff, phentsize, phnum) = (u64_at(&head, 0x20)?, u16_at(&head, 0x36)?, u16_at(&head, 0x38)?);
    let table_len = phentsize.checked_mul(phnum)?;
    if phentsize < 0x38 || table_len > 64 << 10 {
        return None;
    }
    let table = at(phoff, table_len)?;
    table.chunks_exact(phentsize).find_map(|ph| {
        if u32_at(ph, 0)? != 3 {
            return None;
        }
        let (off, size) = (u64_at(ph, 8)?, u64_at(ph, 32)?);
        if size > 4 << 10 {
            return None;
        }
        let raw = at(off, size)?;
        let raw = raw.strip_suffix(b"\0").unwrap_or(&raw);
        Some(PathBuf::from(String::from_utf8_lossy(raw).into_owned()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_git_and_its_interpreter_are_found() {
        let path = super::super::super::resolve::SearchPath::from_env();
        let git = GitBinary::locate(&path, Path::new("/nonexistent-workspace")).unwrap();
        assert!(git.execute.len() >= 2, "{:?}", git.execute);
        // The interpreter of a dynamically linked git is an ld.so.
        assert!(git.execute[1].to_string_lossy().contains("ld"), "{:?}", git.execute);
    }

    /// A program of 8 GiB (sparse): its interpreter is found from its first bytes at
    /// once, where reading it whole would take gigabytes; a script is refused.
    #[test]
    fn only_the_bytes_that_tell_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("prog");
        let interp = b"/nonexistent/ld-test.so\0";
        let mut elf = vec![0u8; 64 + 56];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        elf[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        elf[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        elf[64..68].copy_from_slice(&3u32.to_le_bytes());
        elf[72..80].copy_from_slice(&120u64.to_le_bytes());
        elf[96..104].copy_from_slice(&(interp.len() as u64).to_le_bytes());
        elf.extend_from_slice(interp);
        std::fs::write(&prog, &elf).unwrap();
        std::fs::File::options().write(true).open(&prog).unwrap().set_len(8 << 30).unwrap();
        let started = std::time::Instant::now();
        let exec = executable(&prog).unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(exec, vec![prog.clone(), PathBuf::from("/nonexistent/ld-test.so")]);
        // A script, and a FIFO (refused without blocking).
        std::fs::write(&prog, "#!/bin/sh\necho hi\n").unwrap();
        assert!(executable(&prog).unwrap_err().contains("is a script"));
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o700) }, 0);
        assert!(executable(&fifo).unwrap_err().contains("FIFO"));
    }
}
