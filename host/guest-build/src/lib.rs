//! Build-script helper that compiles a cargo workspace of guest crates for
//! `wasm32-wasip2` in a nested cargo, so that the outer `cargo build` carries its
//! components.
//!
//! The nested build uses the release profile, one shared target directory
//! (`<outer target>/guests`), and an environment cleaned of the outer cargo's
//! `CARGO_*`, `RUSTFLAGS` and build-script variables (they describe the host build, not
//! the guest one). When the `wasm32-wasip2` target is missing it is added through
//! rustup; when that is impossible the build stops with one sentence naming the command.
//!
//! # Example
//!
//! ```no_run
//! // build.rs
//! let guests = cheng_guest_build::GuestBuild::new("../plugins")
//!     .watch("../sdk")
//!     .build();
//! for g in &guests {
//!     println!("{} -> {}", g.package, g.wasm.display());
//! }
//! ```

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The guest target.
pub const TARGET: &str = "wasm32-wasip2";

/// One built component.
#[derive(Debug, Clone)]
pub struct Guest {
    /// The cargo package name.
    pub package: String,
    /// The `.wasm` component file.
    pub wasm: PathBuf,
}

impl Guest {
    /// The lower-case hex SHA-256 of the component file (computed at build time, so the
    /// host need not hash its embedded components at every start).
    pub fn sha256(&self) -> std::io::Result<String> {
        use sha2::Digest;
        Ok(hex::encode(sha2::Sha256::digest(std::fs::read(&self.wasm)?)))
    }
}

/// A nested build of one guest workspace.
#[derive(Debug)]
pub struct GuestBuild {
    workspace: PathBuf,
    watch: Vec<PathBuf>,
    exclude: Vec<String>,
}

impl GuestBuild {
    /// A build of the cargo workspace in `dir` (relative to the calling crate's manifest).
    pub fn new(dir: impl AsRef<Path>) -> Self {
        let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("run from build.rs"));
        GuestBuild { workspace: manifest_dir.join(dir), watch: Vec::new(), exclude: Vec::new() }
    }

    /// A build of the cargo workspace in `dir` (an absolute path), for use outside build
    /// scripts (e.g. tests that build guest programs on demand with [`GuestBuild::compile`]).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        GuestBuild { workspace: dir.into(), watch: Vec::new(), exclude: Vec::new() }
    }

    /// Also rebuild when anything under `path` (relative to the calling crate) changes.
    pub fn watch(mut self, path: impl AsRef<Path>) -> Self {
        let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("run from build.rs"));
        self.watch.push(manifest_dir.join(path));
        self
    }

    /// Leave the workspace member `package` out of the build (cargo's `--exclude`).
    pub fn exclude(mut self, package: impl Into<String>) -> Self {
        self.exclude.push(package.into());
        self
    }

    /// Build every cdylib in the workspace and return the components, in package-name
    /// order. For build scripts: prints `rerun-if-changed` lines, and on failure a
    /// `cargo::error` line, then exits the build script.
    pub fn build(self) -> Vec<Guest> {
        for p in self.watch_list() {
            println!("cargo::rerun-if-changed={}", p.display());
        }
        if let Err(msg) = ensure_target() {
            fail(&msg);
        }
        match self.compile(&guest_target_dir()) {
            Ok(guests) => guests,
            Err(msg) => fail(&msg),
        }
    }

    /// Build every cdylib in the workspace into `target_dir` and return the components,
    /// in package-name order; the compiler's diagnostics go to stderr.
    pub fn compile(&self, target_dir: &Path) -> Result<Vec<Guest>, String> {
        ensure_target()?;
        let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let mut cmd = Command::new(&cargo);
        cmd.current_dir(&self.workspace)
            .args(["build", "--release", "--workspace", "--locked", "--target", TARGET])
            .args(self.exclude.iter().flat_map(|p| ["--exclude", p.as_str()]))
            .arg("--message-format=json-render-diagnostics")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        clean_env(&mut cmd);
        cmd.env("CARGO_TARGET_DIR", target_dir);
        let out = cmd.output().map_err(|e| format!("could not run `{cargo} build` for the guest components: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "building the guest components in {} failed (see the compiler output above)",
                self.workspace.display()
            ));
        }
        let mut guests = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else { continue };
            if msg["reason"] != "compiler-artifact" {
                continue;
            }
            let kinds = msg["target"]["kind"].as_array().cloned().unwrap_or_default();
            if !kinds.iter().any(|k| k == "cdylib") {
                continue;
            }
            let package = msg["target"]["name"].as_str().unwrap_or_default().replace('_', "-");
            for f in msg["filenames"].as_array().cloned().unwrap_or_default() {
                if let Some(f) = f.as_str().filter(|f| f.ends_with(".wasm")) {
                    guests.push(Guest { package: package.clone(), wasm: PathBuf::from(f) });
                }
            }
        }
        guests.sort_by(|a, b| a.package.cmp(&b.package));
        Ok(guests)
    }

    /// Every path whose change should re-run the build: the workspace's manifests and
    /// lock file, each member's manifest and sources, and the extra watched paths. The
    /// workspace directory itself is not watched whole, so a stray `target/` inside it
    /// cannot cause rebuilds.
    fn watch_list(&self) -> Vec<PathBuf> {
        let mut list =
            vec![self.workspace.join("Cargo.toml"), self.workspace.join("Cargo.lock"), self.workspace.join(".cargo")];
        if let Ok(entries) = std::fs::read_dir(&self.workspace) {
            let mut members: Vec<PathBuf> =
                entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.join("Cargo.toml").is_file()).collect();
            members.sort();
            for m in members {
                list.push(m.join("Cargo.toml"));
                list.push(m.join("src"));
                if m.join("build.rs").exists() {
                    list.push(m.join("build.rs"));
                }
            }
        }
        list.extend(self.watch.iter().cloned());
        list
    }
}

/// `<outer target dir>/guests`: one nested target dir shared by every guest build
/// (for build scripts; tests pass their own to [`GuestBuild::compile`]).
pub fn guest_target_dir() -> PathBuf {
    if let Ok(dir) = env::var("CARGO_TARGET_DIR") {
        return PathBuf::from(dir).join("guests");
    }
    // OUT_DIR is <target>/[<triple>/]<profile>/build/<pkg>-<hash>/out; the target dir is
    // the ancestor that holds a `CACHEDIR.TAG` (cargo writes one at its root).
    let out = PathBuf::from(env::var("OUT_DIR").expect("run from build.rs"));
    for dir in out.ancestors() {
        if dir.join("CACHEDIR.TAG").is_file() {
            return dir.join("guests");
        }
    }
    out.join("guests")
}

/// Remove what the outer cargo set for the host build (for a nested `cargo` run).
pub fn clean_env(cmd: &mut Command) {
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let outer = (key.starts_with("CARGO") && key != "CARGO_HOME")
            || key.starts_with("DEP_")
            || key.starts_with("RUSTC")
            || matches!(
                key,
                "RUSTFLAGS"
                    | "RUSTDOC"
                    | "RUSTDOCFLAGS"
                    | "TARGET"
                    | "HOST"
                    | "OUT_DIR"
                    | "OPT_LEVEL"
                    | "PROFILE"
                    | "DEBUG"
                    | "NUM_JOBS"
                    | "CC"
                    | "CFLAGS"
                    | "CXX"
                    | "CXXFLAGS"
            );
        if outer {
            cmd.env_remove(key);
        }
    }
}

/// Make sure the standard library for `wasm32-wasip2` is installed, adding it through
/// rustup if needed; the error is one sentence naming the command to run.
pub fn ensure_target() -> Result<(), String> {
    if target_installed() {
        return Ok(());
    }
    let toolchain = env::var("RUSTUP_TOOLCHAIN").ok();
    let mut add = Command::new("rustup");
    add.args(["target", "add", TARGET]);
    if let Some(t) = &toolchain {
        add.args(["--toolchain", t]);
    }
    add.stdout(Stdio::null()).stderr(Stdio::null());
    let added = add.status().map(|s| s.success()).unwrap_or(false);
    if !added || !target_installed() {
        let cmd = match toolchain {
            Some(t) => format!("rustup target add {TARGET} --toolchain {t}"),
            None => format!("rustup target add {TARGET}"),
        };
        return Err(format!(
            "the {TARGET} target is not installed and could not be added; run `{cmd}` and build again"
        ));
    }
    Ok(())
}

fn target_installed() -> bool {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let out = Command::new(rustc).args(["--print", "target-libdir", "--target", TARGET]).output();
    match out {
        Ok(o) if o.status.success() => {
            let dir = String::from_utf8_lossy(&o.stdout).trim().to_string();
            Path::new(&dir).is_dir() && std::fs::read_dir(&dir).map(|mut d| d.next().is_some()).unwrap_or(false)
        }
        _ => false,
    }
}

/// Stop the build with one sentence.
fn fail(msg: &str) -> ! {
    println!("cargo::error={msg}");
    std::process::exit(0)
}
