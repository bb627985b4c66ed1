//! Running a prepared command: its private temporary directory, its containment, its
//! Landlock ruleset at the tier its approval earned, the child itself, its output, and
//! stopping whatever is left of its tree.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{Outcome, Prepared, Spawner, Termination, Tier, capture, contain, sandbox, spawn};
use crate::policy::process::ContainmentChoice;

impl Spawner {
    /// Run a prepared command to its end, its timeout, or `cancel`.
    pub async fn run(&self, p: Prepared, tier: Tier, cancel: &CancellationToken) -> Outcome {
        let started = Instant::now();
        let mut outcome = Outcome {
            command_display: p.display.clone(),
            cwd: p.cwd_rel.clone(),
            exit_code: None,
            termination: Termination::SpawnFailed,
            signal: None,
            duration_ms: 0,
            timeout_ms: p.timeout.as_millis() as u64,
            stdout: String::new(),
            stdout_truncated: false,
            stderr: String::new(),
            stderr_truncated: false,
            error: None,
        };
        if let Some(why) = p.missing {
            outcome.error = Some(why);
            return outcome;
        }
        let id = crate::new_id();
        // A private temporary directory, removed afterwards.
        let tmp = std::env::temp_dir().join(format!("cheng-cmd-{}-{id}", std::process::id()));
        if let Err(e) = std::fs::create_dir(&tmp) {
            outcome.error = Some(format!("cannot create the command's temporary directory: {e}"));
            return outcome;
        }
        let _tmp_guard = RemoveDir(tmp.clone());
        let mech = match self.cfg.containment {
            ContainmentChoice::Auto => contain::detect(),
            ContainmentChoice::Walk => &contain::Mechanism::Walk,
        };
        let cgroup = match contain::prepare(mech, &id) {
            Ok(c) => c,
            Err(e) => {
                outcome.error = Some(format!("cannot set up process containment: {e}"));
                return outcome;
            }
        };
        let mut ruleset = None;
        if self.cfg.landlock && sandbox::abi_version().is_some() {
            let mut writable = vec![p.root.clone(), tmp.clone()];
            writable.extend(self.writable.iter().cloned());
            if let Some(c) = &self.caches {
                let dir = c.join(super::workspace_key(&p.root));
                let _ = std::fs::create_dir_all(&dir);
                writable.push(dir);
            }
            let plan = match (&p.plan, tier) {
                // A plan of its own (the host's git): only its temp dir is added.
                (Some(own), _) => {
                    let mut own = own.clone();
                    own.writable.push(tmp.clone());
                    own
                }
                (None, Tier::Approved) => {
                    sandbox::Plan { writable, readable: None, network: true, system: None, execute: None }
                }
                (None, Tier::Unasked { network }) => {
                    // The program itself runs from where it was found (a rule named it).
                    let home = p.program.parent().map(std::path::Path::to_path_buf);
                    let readable = writable.iter().chain(&self.readable).chain(home.as_ref()).cloned().collect();
                    sandbox::Plan { writable, readable: Some(readable), network, system: None, execute: None }
                }
            };
            match sandbox::ruleset(&plan) {
                Ok(rs) => ruleset = Some(rs),
                Err(e) => {
                    outcome.error = Some(format!("cannot build the Landlock ruleset: {e}"));
                    return outcome;
                }
            }
        }

        let mut argv = vec![p.argv0.clone()];
        argv.extend(p.args.iter().cloned());
        let mut env = p.env.clone();
        env.push(("TMPDIR".into(), tmp.to_string_lossy().into_owned()));
        let landlock_fd: Option<OwnedFd> = ruleset.and_then(|rs| rs.into());
        let spec = spawn::ChildSpec {
            program: &p.program,
            argv: &argv,
            env: &env,
            cwd: p.cwd_fd.as_raw_fd(),
            cgroup_procs: contain::procs_fd(&cgroup),
            landlock: landlock_fd.as_ref().map(|f| f.as_raw_fd()),
            stdin: None,
            netns: false,
            die_with_host: false,
        };
        let child = match spawn::spawn(&spec) {
            Ok(c) => c,
            Err(e) => {
                let hint = match e.raw_os_error() {
                    Some(libc::EACCES) => " (is it executable?)",
                    Some(libc::ENOEXEC) => " (not a program this machine can run)",
                    _ => "",
                };
                outcome.error = Some(format!("`{}` could not be started: {e}{hint}", p.display));
                outcome.duration_ms = started.elapsed().as_millis() as u64;
                return outcome;
            }
        };
        drop(landlock_fd);
        let mut reaper = Reaper::new(child.pidfd);
        let mut tree = contain::Tree::new(child.pid, cgroup);
        let cap = self.cfg.output_bytes;
        let out = capture_pipe(child.stdout, cap);
        let err = capture_pipe(child.stderr, cap);
        let grace = Duration::from_millis(self.cfg.kill_grace_ms);

        enum Ended {
            Exit(Option<spawn::Exit>),
            TimedOut,
            Cancelled,
        }
        let ended = match reaper.fd.as_ref() {
            Some(fd) => tokio::select! {
                s = spawn::wait(fd) => Ended::Exit(s.ok()),
                _ = tokio::time::sleep(p.timeout) => Ended::TimedOut,
                _ = cancel.cancelled() => Ended::Cancelled,
            },
            None => Ended::Exit(None),
        };
        if let Ended::Exit(Some(_)) = ended {
            reaper.reaped = true;
        }
        // Stop whatever is left of the tree: everything on timeout or cancel; after a
        // normal exit, what the command left running in the background (given a moment
        // to finish writing first).
        let (mut out, mut err) = (out, err);
        let mut captured = None;
        let leftovers = match ended {
            Ended::Exit(_) => {
                let both = async { ((&mut out).await, (&mut err).await) };
                match tokio::time::timeout(Duration::from_millis(50), both).await {
                    Ok((Ok(o), Ok(e))) => {
                        captured = Some((o.finish(), e.finish()));
                        let left = !tree.members().is_empty();
                        if !left {
                            tree.mark_empty();
                        }
                        left
                    }
                    _ => true,
                }
            }
            _ => true,
        };
        if leftovers {
            tree = tokio::task::spawn_blocking(move || {
                tree.terminate(grace);
                tree
            })
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        }
        let collect = |h: tokio::task::JoinHandle<capture::HeadTail>| async move {
            match tokio::time::timeout(Duration::from_secs(2), h).await {
                Ok(Ok(ht)) => ht.finish(),
                _ => (String::new(), false),
            }
        };
        let ((so, st), (se, et)) = match captured {
            Some(c) => c,
            None => tokio::join!(collect(out), collect(err)),
        };
        drop(tree);
        let exit = match ended {
            Ended::Exit(e) => e,
            _ => None,
        };
        drop(reaper);
        outcome.stdout = so;
        outcome.stdout_truncated = st;
        outcome.stderr = se;
        outcome.stderr_truncated = et;
        outcome.duration_ms = started.elapsed().as_millis() as u64;
        outcome.termination = match ended {
            Ended::TimedOut => Termination::TimedOut,
            Ended::Cancelled => Termination::Cancelled,
            Ended::Exit(_) => match exit {
                Some(spawn::Exit::Code(c)) => {
                    outcome.exit_code = Some(c);
                    Termination::Exited
                }
                Some(spawn::Exit::Signal(sig)) => {
                    outcome.signal = Some(sig);
                    Termination::Signalled
                }
                None => Termination::Signalled,
            },
        };
        outcome
    }
}

/// Read a pipe's read end to its end into a head+tail buffer, in a task.
fn capture_pipe(fd: OwnedFd, cap: usize) -> tokio::task::JoinHandle<capture::HeadTail> {
    // The receiver sets O_NONBLOCK, so no runtime thread blocks on the read.
    match tokio::net::unix::pipe::Receiver::from_owned_fd(fd) {
        Ok(r) => tokio::spawn(capture::drain(r, cap)),
        Err(e) => {
            tracing::warn!(target: "cheng::process", "cannot read the command's output: {e}");
            tokio::spawn(async move { capture::HeadTail::new(cap) })
        }
    }
}

/// Owns the child's pidfd; reaps the child on drop if nobody did (a dropped call), in
/// the background so that drop never blocks.
pub(super) struct Reaper {
    pub(super) fd: Option<tokio::io::unix::AsyncFd<OwnedFd>>,
    pub(super) reaped: bool,
}

impl Reaper {
    pub(super) fn new(pidfd: OwnedFd) -> Self {
        // SAFETY: the pidfd is owned by the AsyncFd for as long as it is registered.
        let fd = unsafe { tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) };
        Reaper { fd: fd.ok(), reaped: false }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        if let Some(fd) = self.fd.take() {
            let fd = fd.into_inner();
            if let Ok(Some(_)) = spawn::try_reap(fd.as_raw_fd()) {
                return;
            }
            std::thread::spawn(move || {
                // SAFETY: the pidfd is owned by this closure; a blocking wait reaps it.
                unsafe {
                    let mut info: libc::siginfo_t = std::mem::zeroed();
                    libc::waitid(libc::P_PIDFD, fd.as_raw_fd() as libc::id_t, &mut info, libc::WEXITED);
                }
            });
        }
    }
}

pub(super) struct RemoveDir(pub(super) PathBuf);
impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
