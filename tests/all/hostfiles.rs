//! The host's own files under attack, through the real `cheng` binary: for each kind
//! (configuration and the CA file it names, tokens, settings, plugin components and
//! signatures, the component cache, MCP pins, the OCI store's index and blobs, run
//! state) a FIFO, `/dev/zero` behind a symbolic link, and a file over the kind's cap.
//! Every run must end within a time limit (a hang fails the test, the child killed) with
//! its peak memory bounded (a child past 1 GiB is killed and fails the test), and say
//! which file and why. A plugin, signature, pin, store or cache entry is refused on its
//! own while the other plugins stay callable; a file the host cannot run without stops
//! the start. Each test has a positive control: the same run with the file as it should
//! be.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cheng_host::policy::hostfile::{self, Limit};
use serde_json::{Value, json};

use crate::util;

/// Longest a run may take before it counts as hung.
const TIME_LIMIT: Duration = Duration::from_secs(60);
/// Peak memory past which a run is killed (an endless read would take all there is).
const RSS_LIMIT: u64 = 1 << 30;
/// How much more memory than its control a refused run may use: far below what reading
/// the oversized file (its cap plus 512 MiB) would take.
const RSS_SLACK: u64 = 128 << 20;

/// What one run of `cheng` did.
#[derive(Debug)]
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
    /// Peak resident memory in bytes, as `/proc` showed it while the run went on.
    peak_rss: u64,
}

impl Ran {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }
}

/// The peak resident memory of `pid` so far (its `VmHWM`, bytes), 0 when it cannot be
/// read. Not `wait4`'s `ru_maxrss`: that starts from the spawning process's own peak (the
/// test binary's, with every test in it), which would hide the child's.
fn vm_hwm(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.split_whitespace().next());
    kib.and_then(|k| k.parse::<u64>().ok()).unwrap_or(0) * 1024
}

/// Run `cmd` to its end, failing (the child killed) when it takes longer than
/// [`TIME_LIMIT`] or grows past [`RSS_LIMIT`].
fn run(cmd: &mut Command) -> Ran {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let t = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let pid = child.id() as i32;
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let mut watched = 0;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        watched = watched.max(vm_hwm(pid));
        if t.elapsed() > TIME_LIMIT || watched > RSS_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
            panic!(
                "{cmd:?} killed after {:?} at {} MiB resident (limits {TIME_LIMIT:?}, {} MiB)\n\
                 stdout: {stdout}\nstderr: {stderr}",
                t.elapsed(),
                watched >> 20,
                RSS_LIMIT >> 20
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = t.elapsed();
    let code = status.code();
    Ran { code, stdout: out.join().unwrap(), stderr: err.join().unwrap(), took, peak_rss: watched }
}

/// One way to plant a file the host must not read.
#[derive(Debug, Clone, Copy)]
enum Attack {
    /// A FIFO no one writes to: a plain open blocks forever.
    Fifo,
    /// A symbolic link to `/dev/zero`: a plain read never ends.
    ZeroLink,
    /// A sparse file of this many bytes, over the kind's cap.
    OverCap(u64),
}

/// The three attacks on a file of the kind capped at `cap`.
fn attacks(cap: Limit) -> [Attack; 3] {
    [Attack::Fifo, Attack::ZeroLink, Attack::OverCap(cap.bytes + (512 << 20))]
}

/// Replace whatever is at `path` with `attack`.
fn plant(path: &Path, attack: Attack) {
    let _ = std::fs::remove_file(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    match attack {
        Attack::Fifo => {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
        }
        Attack::ZeroLink => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
        Attack::OverCap(size) => std::fs::File::create(path).unwrap().set_len(size).unwrap(),
    }
}

/// What a refusal of `attack` on a file of kind `cap` says.
fn reason(attack: Attack, cap: Limit) -> String {
    match attack {
        Attack::Fifo => "is a FIFO (named pipe), not a regular file".into(),
        Attack::ZeroLink => "is a character device, not a regular file".into(),
        Attack::OverCap(_) => format!("limit for {}", cap.kind),
    }
}

/// `text` names `path` and says why `attack` was refused.
fn says(text: &str, path: &Path, attack: Attack, cap: Limit) {
    let why = reason(attack, cap);
    let shown = path.display().to_string();
    assert!(text.contains(&shown) && text.contains(&why), "{attack:?} on {shown}: expected \"{why}\" in: {text}");
    if let Attack::OverCap(_) = attack {
        assert!(text.contains(", over the "), "{text}");
    }
}

/// A refused run ended within the limits and used no more memory than its control.
fn bounded(ran: &Ran, control: &Ran, what: &str) {
    eprintln!(
        "{what}: ended in {:?}, peak {} MiB (control: {:?}, {} MiB)",
        ran.took,
        ran.peak_rss >> 20,
        control.took,
        control.peak_rss >> 20
    );
    assert!(
        ran.peak_rss < control.peak_rss + RSS_SLACK,
        "{what}: peak {} MiB against the control's {} MiB",
        ran.peak_rss >> 20,
        control.peak_rss >> 20
    );
}

/// `cheng` with its own state directory and `config`.
fn cheng(ws: &Path, state: &Path, config: &Path) -> Command {
    let mut c = util::cheng_in(ws, state);
    c.arg("--config").arg(config);
    c
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// A pinned entry for the `noop` component at `file` (a copy is made there).
fn noop_entry(id: &str, file: &Path) -> String {
    let wasm = util::program("noop");
    std::fs::write(file, &wasm).unwrap();
    format!("[[plugins]]\nid = {id:?}\npath = {:?}\nsha256 = \"{}\"\n", file.display().to_string(), sha256_hex(&wasm))
}

const ROLE: &str =
    "default_role = \"t\"\n[roles.t]\ntools = [\"good__noop\", \"p__noop\", \"read_file\", \"todo_write\"]\n";

/// `good__noop` answered and the host said nothing about plugins but `not_loaded`.
fn good_answers(ran: &Ran, not_loaded: &[&str]) {
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert_eq!(ran.json(), json!({"ok": true}), "{ran:?}");
    for id in not_loaded {
        assert!(ran.stderr.contains(&format!("cheng: plugin not loaded: plugin \"{id}\"")), "{id}: {ran:?}");
    }
    assert_eq!(ran.stderr.matches("plugin not loaded: plugin \"").count(), not_loaded.len(), "{ran:?}");
}

#[test]
fn a_plugin_component_that_breaks_the_rule_is_refused_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = (util::workspace(), tempfile::tempdir().unwrap());
    let bad = dir.path().join("bad.wasm");
    let cfg = dir.path().join("cheng.toml");
    let toml = format!("{ROLE}{}{}", noop_entry("good", &dir.path().join("good.wasm")), noop_entry("bad", &bad));
    std::fs::write(&cfg, toml).unwrap();
    let call = || run(cheng(ws.path(), state.path(), &cfg).args(["call", "good__noop", "{}"]));
    // Control: both load.
    let control = call();
    good_answers(&control, &[]);
    let inspect = run(util::cheng_in(ws.path(), state.path()).args(["plugin", "inspect"]).arg(&bad));
    assert_eq!(inspect.code, Some(0), "{inspect:?}");
    for attack in attacks(hostfile::PLUGIN_WASM) {
        plant(&bad, attack);
        let ran = call();
        good_answers(&ran, &["bad"]);
        says(&ran.stderr, &bad, attack, hostfile::PLUGIN_WASM);
        bounded(&ran, &control, &format!("{attack:?}"));
        let inspect = run(util::cheng_in(ws.path(), state.path()).args(["plugin", "inspect"]).arg(&bad));
        assert_eq!(inspect.code, Some(1), "{inspect:?}");
        says(&inspect.stderr, &bad, attack, hostfile::PLUGIN_WASM);
    }
}

#[test]
fn a_plugin_signature_that_breaks_the_rule_is_refused_alone() {
    if !util::require("the minisign program", Command::new("minisign").arg("-v").output().is_ok()) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ws, state) = (util::workspace(), tempfile::tempdir().unwrap());
    let key = crate::signatures::keypair(d, "alice");
    let mut toml = String::from(ROLE);
    for id in ["good", "bad"] {
        let file = d.join(format!("{id}.wasm"));
        std::fs::write(&file, util::program("noop")).unwrap();
        crate::signatures::sign(d, "alice", &file, "release 1.0", false);
        toml.push_str(&format!(
            "[[plugins]]\nid = {id:?}\npath = {:?}\nsigned_by = [{key:?}]\n",
            file.display().to_string()
        ));
    }
    let cfg = d.join("cheng.toml");
    std::fs::write(&cfg, toml).unwrap();
    let bad = d.join("bad.wasm");
    let sig = cheng_host::plugin_signature_path(&bad);
    let call = || run(cheng(ws.path(), state.path(), &cfg).args(["call", "good__noop", "{}"]));
    let inspect = || run(util::cheng_in(ws.path(), state.path()).args(["plugin", "inspect"]).arg(&bad));
    // Control: both signatures verified, both plugins load; inspect reads the signature.
    let control = call();
    good_answers(&control, &[]);
    assert_eq!(inspect().json()["signature"]["trusted_comment"], "release 1.0");
    for attack in attacks(hostfile::SIGNATURE) {
        plant(&sig, attack);
        let ran = call();
        good_answers(&ran, &["bad"]);
        says(&ran.stderr, &sig, attack, hostfile::SIGNATURE);
        assert!(ran.stderr.contains("refusing to load it"), "{ran:?}");
        bounded(&ran, &control, &format!("{attack:?}"));
        // inspect says so in its report, and still reports the component.
        let shown = inspect();
        assert_eq!(shown.code, Some(0), "{shown:?}");
        let report = shown.json();
        says(report["signature"]["error"].as_str().unwrap_or_default(), &sig, attack, hostfile::SIGNATURE);
        assert!(report["tools"].to_string().contains("noop"), "{report}");
    }
}

#[test]
fn a_configuration_that_breaks_the_rule_stops_the_start_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = (util::workspace(), tempfile::tempdir().unwrap());
    let cfg = dir.path().join("cheng.toml");
    let read = |c: &mut Command| run(c.args(["call", "read_file", r#"{"path":"inside.txt"}"#]));
    // Given with --config, with $CHENG_CONFIG, and found in the config directory.
    let xdg = dir.path().join("xdg");
    let found = xdg.join("cheng").join("cheng.toml");
    type Way<'a> = (&'a Path, Box<dyn Fn() -> Command + 'a>);
    let ways: [Way; 3] = [
        (&cfg, Box::new(|| cheng(ws.path(), state.path(), &cfg))),
        (&cfg, {
            Box::new(|| {
                let mut c = util::cheng_in(ws.path(), state.path());
                c.env("CHENG_CONFIG", &cfg);
                c
            })
        }),
        (&found, {
            Box::new(|| {
                let mut c = util::cheng_in(ws.path(), state.path());
                c.env("XDG_CONFIG_HOME", &xdg);
                c
            })
        }),
    ];
    for (path, command) in &ways {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "default_role = \"recon\"\n").unwrap();
        let control = read(&mut command());
        assert_eq!(control.code, Some(0), "{control:?}");
        assert_eq!(control.json()["content"], "inside", "{control:?}");
        for attack in attacks(hostfile::CONFIG) {
            plant(path, attack);
            let ran = read(&mut command());
            assert_eq!(ran.code, Some(64), "a usage error: {ran:?}");
            assert!(ran.stderr.contains("invalid configuration"), "{ran:?}");
            says(&ran.stderr, path, attack, hostfile::CONFIG);
            bounded(&ran, &control, &format!("{attack:?} at {}", path.display()));
        }
        std::fs::remove_file(path).unwrap();
    }

    // The CA file the configuration names: the host does not start.
    let pem = dir.path().join("ca.pem");
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(&pem, cert.cert.pem()).unwrap();
    std::fs::write(&cfg, "[web]\nca_file = \"ca.pem\"\n").unwrap();
    let control = read(&mut cheng(ws.path(), state.path(), &cfg));
    assert_eq!(control.code, Some(0), "{control:?}");
    for attack in attacks(hostfile::CA_FILE) {
        plant(&pem, attack);
        let ran = read(&mut cheng(ws.path(), state.path(), &cfg));
        assert_ne!(ran.code, Some(0), "{ran:?}");
        assert!(ran.stderr.contains("ca_file"), "{ran:?}");
        says(&ran.stderr, &pem, attack, hostfile::CA_FILE);
        bounded(&ran, &control, &format!("{attack:?} on the CA file"));
    }
}

#[test]
fn a_tokens_file_that_breaks_the_rule_stops_the_server_by_name() {
    let (ws, state) = (util::workspace(), tempfile::tempdir().unwrap());
    let cheng = || util::cheng_in(ws.path(), state.path());
    let tokens = state.path().join("tokens.json");
    let added = run(cheng().args(["token", "add", "--name", "ci", "--role", "recon"]));
    assert_eq!(added.code, Some(0), "{added:?}");
    let control = run(cheng().args(["token", "list"]));
    assert_eq!(control.code, Some(0), "{control:?}");
    assert!(control.stdout.contains("\"ci\""), "{control:?}");
    // Control for the server: with the file as written, it serves (and is stopped here).
    let mut server = cheng()
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(server.stderr.take().unwrap()));
    let serving = lines.any(|l| l.is_ok_and(|l| l.contains("serving MCP over HTTP")));
    let _ = server.kill();
    let _ = server.wait();
    assert!(serving, "the control server did not serve");
    for attack in attacks(hostfile::TOKENS) {
        plant(&tokens, attack);
        let ran = run(cheng().args(["token", "list"]));
        assert_ne!(ran.code, Some(0), "{ran:?}");
        says(&ran.stderr, &tokens, attack, hostfile::TOKENS);
        bounded(&ran, &control, &format!("{attack:?}: token list"));
        let ran = run(cheng().args(["serve", "--http", "127.0.0.1:0"]));
        assert_ne!(ran.code, Some(0), "{ran:?}");
        assert!(!ran.stderr.contains("serving MCP over HTTP"), "{ran:?}");
        says(&ran.stderr, &tokens, attack, hostfile::TOKENS);
        bounded(&ran, &control, &format!("{attack:?}: serve"));
    }
    // Its lock file: a FIFO there stops `token add` at once, by name.
    std::fs::remove_file(&tokens).unwrap();
    let lock = state.path().join("tokens.json.lock");
    plant(&lock, Attack::Fifo);
    let ran = run(cheng().args(["token", "add", "--name", "ci2", "--role", "recon"]));
    assert_ne!(ran.code, Some(0), "{ran:?}");
    says(&ran.stderr, &lock, Attack::Fifo, hostfile::TOKENS);
}

#[test]
fn a_settings_file_that_breaks_the_rule_stops_the_start_by_name() {
    let (ws, state) = (util::workspace(), tempfile::tempdir().unwrap());
    let cheng = || util::cheng_in(ws.path(), state.path());
    let settings = state.path().join("settings.json");
    let control = run(cheng().args(["settings"]));
    assert_eq!(control.code, Some(0), "{control:?}");
    assert!(settings.is_file());
    for attack in attacks(hostfile::SETTINGS) {
        plant(&settings, attack);
        for args in [&["settings"][..], &["call", "read_file", r#"{"path":"inside.txt"}"#]] {
            let ran = run(cheng().args(args));
            assert_ne!(ran.code, Some(0), "{ran:?}");
            says(&ran.stderr, &settings, attack, hostfile::SETTINGS);
            bounded(&ran, &control, &format!("{attack:?}: {args:?}"));
        }
    }
}

#[test]
fn a_component_cache_entry_that_breaks_the_rule_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = (util::workspace(), tempfile::tempdir().unwrap());
    let cfg = dir.path().join("cheng.toml");
    std::fs::write(&cfg, format!("{ROLE}{}", noop_entry("good", &dir.path().join("good.wasm")))).unwrap();
    let call = || run(cheng(ws.path(), state.path(), &cfg).args(["call", "good__noop", "{}"]));
    // Control: compiled and cached by the first call, loaded from the cache by the next.
    good_answers(&call(), &[]);
    let control = call();
    good_answers(&control, &[]);
    assert!(!control.stderr.contains("compiling"), "{control:?}");
    let cache = state.path().join("cache");
    let sha = sha256_hex(&util::program("noop"));
    let files: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&sha))
        .collect();
    for ext in ["cwasm", "check", "json"] {
        let Some(file) = files.iter().find(|p| p.extension().is_some_and(|e| e == ext)) else {
            panic!("no .{ext} entry for the plugin in {files:?}")
        };
        let cap = if ext == "cwasm" { hostfile::CACHE_ENTRY } else { hostfile::CACHE_META };
        for attack in attacks(cap) {
            plant(file, attack);
            let ran = call();
            good_answers(&ran, &[]);
            bounded(&ran, &control, &format!("{attack:?} on {}", file.display()));
            // Missed and written again (the description is recorded again).
            assert!(std::fs::symlink_metadata(file).unwrap().is_file(), "{attack:?}: {} not rewritten", file.display());
            assert!(std::fs::metadata(file).unwrap().len() < cap.bytes);
        }
    }
}

#[test]
fn mcp_pins_that_break_the_rule_refuse_that_server_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = (util::workspace(), tempfile::tempdir().unwrap());
    let cfg = dir.path().join("cheng.toml");
    // The server is never started: its pins are there, so its tools are known.
    std::fs::write(
        &cfg,
        format!(
            "{ROLE}{}[[mcp_servers]]\nid = \"srv\"\ncommand = \"/bin/false\"\n",
            noop_entry("good", &dir.path().join("good.wasm"))
        ),
    )
    .unwrap();
    let pins = state.path().join("mcp").join("srv.json");
    std::fs::create_dir_all(pins.parent().unwrap()).unwrap();
    std::fs::write(&pins, r#"{"tools": {}}"#).unwrap();
    let call = || run(cheng(ws.path(), state.path(), &cfg).args(["call", "good__noop", "{}"]));
    let control = call();
    good_answers(&control, &[]);
    assert!(!control.stderr.contains("MCP server"), "{control:?}");
    for attack in attacks(hostfile::MCP_PINS) {
        plant(&pins, attack);
        let ran = call();
        assert_eq!(ran.code, Some(0), "{ran:?}");
        assert_eq!(ran.json(), json!({"ok": true}), "{ran:?}");
        assert!(ran.stderr.contains("MCP server \"srv\""), "{ran:?}");
        says(&ran.stderr, &pins, attack, hostfile::MCP_PINS);
        bounded(&ran, &control, &format!("{attack:?}"));
    }
}

#[test]
fn an_oci_store_file_that_breaks_the_rule_refuses_that_plugin_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (ws, state) = (util::workspace(), tempfile::tempdir().unwrap());
    let cfg = dir.path().join("cheng.toml");
    let source = "oci://127.0.0.1:9/x/noop:1";
    std::fs::write(
        &cfg,
        format!(
            "{ROLE}{}[[plugins]]\nid = \"p\"\nsource = \"{source}\"\n",
            noop_entry("good", &dir.path().join("good.wasm"))
        ),
    )
    .unwrap();
    // The store as a pull leaves it: the index and the component's blob.
    let wasm = util::program("noop");
    let sha = sha256_hex(&wasm);
    let oci = state.path().join("oci");
    let index = oci.join("plugins.json");
    let blob = oci.join("blobs").join("sha256").join(&sha);
    let index_text = json!({"plugins": {"p": {"source": source, "accepted": {
        "sha256": sha, "manifest": format!("sha256:{}", "0".repeat(64)), "size": wasm.len(), "pulled_ms": 0}}}});
    let restore = || {
        std::fs::create_dir_all(blob.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&index);
        let _ = std::fs::remove_file(&blob);
        std::fs::write(&index, index_text.to_string()).unwrap();
        std::fs::write(&blob, &wasm).unwrap();
    };
    restore();
    let call = |tool: &str| run(cheng(ws.path(), state.path(), &cfg).args(["call", tool, "{}"]));
    let control = call("p__noop");
    assert_eq!(control.code, Some(0), "{control:?}");
    assert_eq!(control.json(), json!({"ok": true}));
    assert!(!control.stderr.contains("not loaded"), "{control:?}");
    let blob_cap = Limit::new(cheng_host::oci::MAX_LAYER_BYTES, "a stored OCI component");
    for (file, cap) in [(&index, hostfile::OCI_INDEX), (&blob, blob_cap)] {
        for attack in attacks(cap) {
            restore();
            plant(file, attack);
            let ran = call("good__noop");
            good_answers(&ran, &["p"]);
            says(&ran.stderr, file, attack, cap);
            bounded(&ran, &control, &format!("{attack:?} on {}", file.display()));
        }
    }
}

#[test]
fn run_state_that_breaks_the_rule_starts_the_run_afresh() {
    let (ws, state) = (util::workspace(), tempfile::tempdir().unwrap());
    let todo = |run_id: &str, content: &str| {
        let input = json!({"todos": [{"id": "1", "content": content, "status": "pending"}]}).to_string();
        run(util::cheng_in(ws.path(), state.path()).args(["--run", run_id, "call", "todo_write", &input]))
    };
    // Control: the second call of a run sees the first's plan.
    assert_eq!(todo("r0", "first").code, Some(0));
    let control = todo("r0", "second");
    assert_eq!(control.code, Some(0), "{control:?}");
    assert_eq!(control.json()["previous"][0]["content"], "first", "{control:?}");
    let files: Vec<PathBuf> =
        std::fs::read_dir(state.path().join("runs").join("r0")).unwrap().flatten().map(|e| e.path()).collect();
    let file_name = files
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap_or_else(|| panic!("no run state file in {files:?}"))
        .file_name()
        .unwrap()
        .to_owned();
    for (i, attack) in attacks(hostfile::RUN_STATE).into_iter().enumerate() {
        let run_id = format!("r{}", i + 1);
        let file = state.path().join("runs").join(&run_id).join(&file_name);
        plant(&file, attack);
        let ran = todo(&run_id, "after");
        assert_eq!(ran.code, Some(0), "{attack:?}: {ran:?}");
        assert_eq!(ran.json()["previous"], json!([]), "{attack:?}: {ran:?}");
        bounded(&ran, &control, &format!("{attack:?}"));
        // The call's plan replaced the planted file.
        assert!(std::fs::symlink_metadata(&file).unwrap().is_file());
        assert_eq!(todo(&run_id, "again").json()["previous"][0]["content"], "after");
    }
}
