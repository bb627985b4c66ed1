//! Running a prepared command: its private temporary directory, its containment, its
//! Landlock ruleset at the tier its approval earned, the child itself, its output, and
//! stopping whatever is left of its tree.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::{Net, Outcome, Prepared, Spawner, Termination, Tier, capture, carve, contain, proxy, sandbox, spawn};
use crate::policy::process::ContainmentChoice;

/// What a command's call record holds beyond its outcome.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// The network targets its proxy refused.
    pub refused: Vec<proxy::Refused>,
    /// The carve-outs it ran into, as its error output shows them.
    pub carve_hits: Vec<carve::Hit>,
}

impl Spawner {
    /// Run a prepared command to its end, its timeout, or `cancel`.
    pub async fn run(&self, p: Prepared, tier: Tier, cancel: &CancellationToken) -> Outcome {
        self.run_reporting(p, tier, cancel).await.0
    }

    /// [`Spawner::run`], with what its call's record is to hold: the network targets
    /// its proxy refused (a command granted named hosts) and the carve-outs it ran into.
    pub async fn run_reporting(&self, p: Prepared, tier: Tier, cancel: &CancellationToken) -> (Outcome, Report) {
        let started = Instant::now();
        let full = tier == Tier::Full;
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
            return (outcome, Report::default());
        }
        // Named hosts: a network namespace of its own, whose only way out is the proxy.
        let hosts = match (&tier, &p.plan) {
            (Tier::Confined { net: Net::Hosts(h) }, None) => {
                if spawn::isolation() && self.egress.is_some() {
                    Some(h.clone())
                } else {
                    tracing::warn!(target: "cheng::process",
                        "named hosts cannot be enforced here (no user namespaces): the command runs without network");
                    None
                }
            }
            _ => None,
        };
        let id = crate::new_id();
        // A private temporary directory, removed afterwards.
        let tmp = std::env::temp_dir().join(format!("cheng-cmd-{}-{id}", std::process::id()));
        let _tmp_guard = match RemoveDir::create(&tmp) {
            Ok(g) => g,
            Err(e) => {
                outcome.error = Some(format!("cannot create the command's temporary directory: {e}"));
                return (outcome, Report::default());
            }
        };
        let mech = match self.cfg.containment {
            ContainmentChoice::Auto => contain::detect(),
            ContainmentChoice::Walk => &contain::Mechanism::Walk,
        };
        let cgroup = match contain::prepare(mech, &id) {
            Ok(c) => c,
            Err(e) => {
                outcome.error = Some(format!("cannot set up process containment: {e}"));
                return (outcome, Report::default());
            }
        };
        let mut ruleset = None;
        let mut proc_rights = 0;
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
                (None, Tier::Full) => sandbox::Plan {
                    writable,
                    readable: None,
                    network: true,
                    connect: Vec::new(),
                    system: None,
                    execute: None,
                },
                (None, Tier::Confined { net }) => {
                    // The program itself runs from where it was found (a rule named it).
                    let home = p.program.parent().map(std::path::Path::to_path_buf);
                    let readable = writable.iter().chain(&self.readable).chain(home.as_ref()).cloned().collect();
                    sandbox::Plan {
                        writable,
                        readable: Some(readable),
                        network: matches!(net, Net::All),
                        connect: if hosts.is_some() { vec![proxy::PORT] } else { Vec::new() },
                        system: None,
                        execute: None,
                    }
                }
            };
            proc_rights = sandbox::proc_rights(&plan);
            match sandbox::ruleset(&plan) {
                Ok(rs) => ruleset = Some(rs),
                Err(e) => {
                    outcome.error = Some(format!("cannot build the Landlock ruleset: {e}"));
                    return (outcome, Report::default());
                }
            }
        }

        let mut argv = vec![p.argv0.clone()];
        argv.extend(p.args.iter().cloned());
        let mut env: Vec<(String, String)> =
            p.env.iter().filter(|(k, _)| !crate::policy::process::proxy_env(k)).cloned().collect();
        env.push(("TMPDIR".into(), tmp.to_string_lossy().into_owned()));
        let handover = match hosts.as_ref().map(|_| proxy::handover()).transpose() {
            Ok(h) => h,
            Err(e) => {
                outcome.error = Some(format!("cannot set up the command's network proxy: {e}"));
                return (outcome, Report::default());
            }
        };
        if hosts.is_some() {
            env.extend(proxy::env());
        }
        let landlock_fd: Option<OwnedFd> = ruleset.and_then(|rs| rs.into());
        // The path rules' carve-outs, below full access, where the child gets a mount
        // namespace of its own.
        let walk = match p.carve.as_ref().filter(|_| !full && spawn::isolation()) {
            Some(rules) => Some(self.trees.get(rules, &p.root).await),
            None => None,
        };
        let (plan, namespace) = match walk.as_ref() {
            Some(t) => {
                let mut t = t.lock().unwrap_or_else(|e| e.into_inner());
                t.refresh();
                let plan = t.plan();
                let ns = t.namespace(&plan);
                (Some(plan), ns)
            }
            None => (None, None),
        };
        let carve_c = plan.as_ref().map(|plan| carve::c_paths(&plan.carves, &p.cwd_rel)).unwrap_or_default();
        // The working directory's path, for entering the namespace (checked there to be
        // the guard's directory).
        let cwd_path =
            namespace.as_ref().and_then(|_| std::ffi::CString::new(p.cwd_abs().into_os_string().into_vec()).ok());
        let spec = spawn::ChildSpec {
            program: &p.program,
            argv: &argv,
            env: &env,
            cwd: p.cwd_fd.as_raw_fd(),
            cgroup_procs: contain::procs_fd(&cgroup),
            landlock: landlock_fd.as_ref().map(|f| f.as_raw_fd()),
            proc_rights,
            stdin: None,
            netns: hosts.is_some(),
            proxy: handover.as_ref().map(|(_, theirs)| theirs.as_raw_fd()),
            die_with_host: false,
            carve: &carve_c,
            enter: namespace.as_deref().zip(cwd_path.as_deref()),
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
                return (outcome, Report::default());
            }
        };
        drop(landlock_fd);
        // The proxy, on the socket the init opened in the command's namespace.
        let proxy = match (handover, hosts, &self.egress) {
            (Some((ours, theirs)), Some(hosts), Some(egress)) => {
                drop(theirs);
                match proxy::receive(&ours).and_then(|l| proxy::Proxy::start(l, egress.clone(), &hosts)) {
                    Ok(px) => Some(px),
                    Err(e) => {
                        tracing::warn!(target: "cheng::process", "the command's proxy could not start: {e}; it has no network");
                        None
                    }
                }
            }
            _ => None,
        };
        let mut reaper = spawn::Reaper::new(child.pidfd, child.init);
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
        let ended = match reaper.fd.is_some() {
            true => tokio::select! {
                s = reaper.wait() => Ended::Exit(s.ok()),
                _ = tokio::time::sleep(p.timeout) => Ended::TimedOut,
                _ = cancel.cancelled() => Ended::Cancelled,
            },
            false => Ended::Exit(None),
        };
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
        let mut report = Report::default();
        if let (Some(walk), Some(plan)) = (&walk, &plan) {
            // Protected paths the command made, which did not exist for a carve-out to
            // keep: said in its result (and so its record).
            let made = walk.lock().unwrap_or_else(|e| e.into_inner()).refresh();
            if !made.is_empty() {
                tracing::warn!(target: "cheng::process", command = %p.display, paths = ?made,
                    "a command created files the path rules protect");
                outcome.stderr.push_str(&format!(
                    "\n[cheng] This command created {} which the path rules protect (another program may run or \
                     load them later); the person should review them.\n",
                    made.join(", ")
                ));
            }
            if plan.incomplete {
                outcome.stderr.push_str(&format!(
                    "\n[cheng] The path rules were applied to the first {} directories of this workspace and {} \
                     paths; protected files beyond them were not kept from this command.\n",
                    carve::MAX_DIRS,
                    carve::MAX
                ));
            }
            if let Some(rules) = &p.carve {
                report.carve_hits = carve::hits(rules, &plan.carves, &outcome.stderr);
            }
        }
        report.refused = proxy.map(|px| px.refused()).unwrap_or_default();
        (outcome, report)
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

/// A child's private temporary directory (mode 0700): removed when dropped, and by the
/// host's exit, whichever comes first — a process that exits does not run destructors,
/// so every live one is also listed for an `atexit` handler. (After `kill -9` of the
/// host, the next host to start removes it: [`super::contain::reap_stale`].)
pub(super) struct RemoveDir(PathBuf);

/// The live temporary directories, for the exit handler.
static LIVE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

extern "C" fn remove_live_dirs() {
    // Another thread may hold the lock while the process exits: a few tries, then give
    // up rather than hang the exit (the next host removes what is left).
    for _ in 0..50 {
        if let Ok(mut live) = LIVE.try_lock() {
            for dir in live.drain(..) {
                let _ = std::fs::remove_dir_all(dir);
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl RemoveDir {
    /// Create `dir`, readable by this user alone, and own it.
    pub(super) fn create(dir: &std::path::Path) -> std::io::Result<RemoveDir> {
        use std::os::unix::fs::DirBuilderExt;
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(|| {
            // SAFETY: registering a handler that only takes a lock and removes files.
            unsafe { libc::atexit(remove_live_dirs) };
        });
        std::fs::DirBuilder::new().mode(0o700).create(dir)?;
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).push(dir.to_path_buf());
        Ok(RemoveDir(dir.to_path_buf()))
    }
}

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        LIVE.lock().unwrap_or_else(|e| e.into_inner()).retain(|d| d != &self.0);
    }
}
