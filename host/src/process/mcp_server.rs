//! Starting a long-lived server process (an MCP server) through the same spawn path as
//! every command, confined tighter than any command:
//! - nothing of the host's environment but the locale, `TERM`, `TZ` and the names the
//!   operator listed; `PATH` is the host's (workspace entries removed), `HOME` and
//!   `TMPDIR` a private temporary directory removed when the process ends;
//! - its own process group and cgroup (or the `/proc` walk), killed when the handle is
//!   dropped, and a parent-death signal so it does not outlive the host;
//! - Landlock on reads as well as writes: it reads and executes only beneath `/usr`,
//!   `/bin`, `/sbin`, `/lib*`, `/nix/store`, `/snap`, `/etc` minus its secrets
//!   ([`crate::policy::mcp::ETC_WITHHELD`]), its installation (found from the program
//!   and its file arguments, or listed), and the workspace as its grant says; it writes
//!   only its temp dir and the workspace folders its grant makes writable;
//! - without the network: a fresh user and network namespace holding only loopback,
//!   plus Landlock's TCP rules (or those alone where namespaces are unavailable).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::run::RemoveDir;
use super::spawn::Reaper;
use super::{Spawner, contain, sandbox, spawn};
use crate::grant::FsGrant;
use crate::policy::process::ContainmentChoice;

/// The system trees a server reads and executes from (besides `/etc`, filtered).
const SERVER_SYSTEM: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/nix/store", "/snap"];

/// What to start.
#[derive(Debug, Clone)]
pub struct ServerLaunch {
    /// The program as written (a bare name is looked up on the host's `PATH`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Names passed from the host's environment.
    pub env: Vec<String>,
    /// The workspace: its working directory.
    pub root: PathBuf,
    /// What of the workspace it reads and writes.
    pub fs: FsGrant,
    /// Whether it keeps the network.
    pub net: bool,
    /// More directories it reads and executes from.
    pub read: Vec<PathBuf>,
    /// Paths under `/etc` it never reads.
    pub etc_withheld: Vec<String>,
}

/// A running server process. Dropping it kills its whole tree.
pub struct ServerProcess {
    /// Its pid.
    pub pid: i32,
    /// Its stdin (taken by whoever talks to it).
    pub stdin: Option<tokio::net::unix::pipe::Sender>,
    /// Its stdout.
    pub stdout: Option<tokio::net::unix::pipe::Receiver>,
    /// Its stderr.
    pub stderr: Option<tokio::net::unix::pipe::Receiver>,
    /// What it may read (for diagnostics).
    pub readable: Vec<PathBuf>,
    reaper: Reaper,
    _tree: contain::Tree,
    _tmp: RemoveDir,
}

impl ServerProcess {
    /// Wait for the process to exit (its exit code, or `None` for a signal).
    pub async fn exited(&mut self) -> Option<i32> {
        match self.reaper.wait().await.ok() {
            Some(spawn::Exit::Code(c)) => Some(c),
            _ => None,
        }
    }
}

/// Whether this machine lets the host give a process a network namespace of its own
/// (unprivileged user namespaces), probed once by starting `/bin/true` in one.
pub fn netns_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| match spawn::start_true(true, false) {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(target: "cheng::mcp",
                "no network namespaces here ({e}): MCP servers without the network are kept off TCP by Landlock only");
            false
        }
    })
}

/// How servers are kept off the network here, in words (for `cheng settings`).
pub fn describe_network() -> String {
    if netns_available() {
        "a network namespace with only loopback, and Landlock's TCP rules".into()
    } else if sandbox::effective_abi().is_some_and(|v| v >= 4) {
        "Landlock's TCP rules only (no user namespaces here: UDP and Unix sockets stay open)".into()
    } else {
        "nothing: neither network namespaces nor Landlock TCP rules are available on this machine".into()
    }
}

/// The children of `root` except the `withheld` paths (relative to `root`), descending
/// into a child only where a withheld path lies beneath it.
fn tree_except(root: &Path, withheld: &[String], prefix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
        if withheld.contains(&rel) {
            continue;
        }
        let inner = format!("{rel}/");
        if withheld.iter().any(|w| w.starts_with(&inner)) && entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(tree_except(&entry.path(), withheld, &rel));
        } else {
            out.push(entry.path());
        }
    }
    out
}

fn is_system(p: &Path) -> bool {
    SERVER_SYSTEM.iter().any(|s| p.starts_with(s)) || p.starts_with("/etc")
}

/// Where a server is installed, as far as its program and file arguments tell: the
/// program's directory (and the one above a `bin`), and for each argument that is a
/// file, its outermost `node_modules` ancestor or else its directory. System trees are
/// readable anyway and not repeated; a directory argument (such as `/`) never counts.
pub fn installation(program: &Path, args: &[String]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let mut add = |p: PathBuf| {
        if !is_system(&p) && p != Path::new("/") && !dirs.contains(&p) {
            dirs.push(p);
        }
    };
    for prog in [program.to_path_buf(), std::fs::canonicalize(program).unwrap_or_default()] {
        if let Some(dir) = prog.parent().filter(|d| !d.as_os_str().is_empty()) {
            add(dir.to_path_buf());
            if dir.file_name().is_some_and(|n| n == "bin")
                && let Some(up) = dir.parent()
            {
                add(up.to_path_buf());
            }
        }
    }
    for arg in args.iter().filter(|a| a.starts_with('/')) {
        let Ok(real) = std::fs::canonicalize(arg) else { continue };
        if !real.is_file() {
            continue;
        }
        let outer_modules = real.ancestors().filter(|a| a.file_name().is_some_and(|n| n == "node_modules")).last();
        match outer_modules {
            Some(m) => add(m.to_path_buf()),
            None => {
                if let Some(d) = real.parent() {
                    add(d.to_path_buf());
                }
            }
        }
    }
    dirs
}

/// Why a server was not started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Its command is not one the host starts: not found, not executable, inside the
    /// workspace, or granted writes where the host's own files are.
    #[error("{0}")]
    Refused(String),
    /// The host could not set up its confinement or its pipes, or the start failed.
    #[error("{0}")]
    Setup(String),
}

impl Spawner {
    /// Start a server process as `launch` says. The error says why it could not start.
    pub fn start_server(&self, launch: &ServerLaunch) -> Result<ServerProcess, StartError> {
        let root = &launch.root;
        let program = if launch.command.contains('/') {
            let p = PathBuf::from(&launch.command);
            if !p.is_absolute() {
                return Err(StartError::Refused(format!(
                    "\"{}\" must be a bare name or an absolute path",
                    launch.command
                )));
            }
            if std::fs::canonicalize(&p).is_ok_and(|real| real.starts_with(root)) || p.starts_with(root) {
                return Err(StartError::Refused(format!(
                    "\"{}\" lies in the workspace; a server is never started from it",
                    launch.command
                )));
            }
            p
        } else {
            self.path.lookup(&launch.command, root).ok_or_else(|| {
                StartError::Refused(format!("\"{}\" was not found on the host's PATH", launch.command))
            })?
        };
        if !super::resolve::is_executable(&program) {
            return Err(StartError::Refused(format!("\"{}\" is not an executable file", program.display())));
        }
        let writes_root = matches!(launch.fs, FsGrant::Write);
        let writes = |p: &Path| match &launch.fs {
            FsGrant::Write => p.starts_with(root),
            FsGrant::Scoped { write, .. } => write.iter().any(|w| p.starts_with(root.join(w))),
            _ => false,
        };
        if let Some(p) = self.protected.iter().find(|p| writes(p)) {
            return Err(StartError::Refused(format!(
                "the host's configuration or state ({}) lies where this server could write; it is not started in this \
                 workspace with that grant",
                p.display()
            )));
        }
        if writes_root {
            tracing::warn!(target: "cheng::mcp", workspace = %root.display(),
                "an MCP server with fs = \"write\" can write the whole workspace, .git included");
        }
        let id = crate::new_id();
        let tmp = std::env::temp_dir().join(format!("cheng-mcp-{}-{id}", std::process::id()));
        let tmp_guard = RemoveDir::create(&tmp)
            .map_err(|e| StartError::Setup(format!("cannot create its temporary directory: {e}")))?;
        let mech = match self.cfg.containment {
            ContainmentChoice::Auto => contain::detect(),
            ContainmentChoice::Walk => &contain::Mechanism::Walk,
        };
        let cgroup = contain::prepare(mech, &id)
            .map_err(|e| StartError::Setup(format!("cannot set up process containment: {e}")))?;

        // What it reads and writes.
        let mut writable = vec![tmp.clone()];
        let mut readable = vec![tmp.clone()];
        match &launch.fs {
            FsGrant::None => {}
            FsGrant::Read => readable.push(root.clone()),
            FsGrant::Write => writable.push(root.clone()),
            FsGrant::Scoped { read, write } => {
                readable.extend(read.iter().map(|r| root.join(r)));
                writable.extend(write.iter().map(|w| root.join(w)));
            }
        }
        readable.extend(installation(&program, &launch.args));
        readable.extend(launch.read.iter().cloned());
        readable.extend(writable.iter().cloned());
        let mut system: Vec<PathBuf> = SERVER_SYSTEM.iter().map(PathBuf::from).collect();
        system.extend(tree_except(Path::new("/etc"), &launch.etc_withheld, ""));
        let netns = !launch.net && netns_available();
        let mut landlock_fd: Option<OwnedFd> = None;
        if self.cfg.landlock && sandbox::abi_version().is_some() {
            let plan = sandbox::Plan {
                writable: writable.clone(),
                readable: Some(readable.clone()),
                network: launch.net,
                system: Some(system),
                connect: Vec::new(),
                execute: None,
            };
            let rs = sandbox::ruleset(&plan)
                .map_err(|e| StartError::Setup(format!("cannot build the Landlock ruleset: {e}")))?;
            landlock_fd = rs.into();
        }

        // Its environment.
        let mut env: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| {
                k == "LANG" || k.starts_with("LC_") || k == "TERM" || k == "TZ" || launch.env.iter().any(|n| n == k)
            })
            .filter(|(k, _)| !super::environment::host_owned(k))
            .collect();
        let tmp_s = tmp.to_string_lossy().into_owned();
        env.push(("PATH".into(), self.path.env_value(root)));
        env.push(("HOME".into(), tmp_s.clone()));
        env.push(("TMPDIR".into(), tmp_s));

        let cwd = std::fs::File::open(root)
            .map_err(|e| StartError::Setup(format!("cannot open the workspace {}: {e}", root.display())))?;
        // The path rules' carve-outs, for a server granted any of the workspace.
        let carves = match (&self.file_rules, &launch.fs) {
            (_, FsGrant::None) => Vec::new(),
            (Some(rules), _) if spawn::isolation() => super::carve::plan(rules, root).carves,
            _ => Vec::new(),
        };
        let carve_c = super::carve::c_paths(&carves, ".");
        let (stdin_r, stdin_w) = spawn::pipe().map_err(|e| StartError::Setup(format!("cannot make its stdin: {e}")))?;
        let mut argv = vec![launch.command.clone()];
        argv.extend(launch.args.iter().cloned());
        let spec = spawn::ChildSpec {
            program: &program,
            argv: &argv,
            env: &env,
            cwd: cwd.as_raw_fd(),
            cgroup_procs: contain::procs_fd(&cgroup),
            landlock: landlock_fd.as_ref().map(|f| f.as_raw_fd()),
            proc_rights: 0,
            stdin: Some(stdin_r.as_raw_fd()),
            netns,
            proxy: None,
            die_with_host: true,
            carve: &carve_c,
            enter: None,
        };
        let child = spawn::spawn(&spec)
            .map_err(|e| StartError::Setup(format!("`{}` could not be started: {e}", launch.command)))?;
        drop((stdin_r, landlock_fd, cwd));
        let reaper = Reaper::new(child.pidfd, child.init);
        let tree = contain::Tree::new(child.pid, cgroup);
        let io = |e: std::io::Error| StartError::Setup(format!("cannot talk to the server: {e}"));
        Ok(ServerProcess {
            pid: child.pid,
            stdin: Some(tokio::net::unix::pipe::Sender::from_owned_fd(stdin_w).map_err(io)?),
            stdout: Some(tokio::net::unix::pipe::Receiver::from_owned_fd(child.stdout).map_err(io)?),
            stderr: Some(tokio::net::unix::pipe::Receiver::from_owned_fd(child.stderr).map_err(io)?),
            readable,
            reaper,
            _tree: tree,
            _tmp: tmp_guard,
        })
    }
}
