//! Components from OCI registries: a real registry (Debian's `docker-registry`, the CNCF
//! distribution server) started on loopback, components pushed by a real client (`oras`
//! from PyPI), pulled with `cheng plugin pull` by tag and by digest, with and without
//! credentials; a tag moved to other bytes kept out until accepted; and a registry
//! that lies (tests/fixtures/oci/hostile.py): a layer that is not its digest, a huge
//! layer, a flood past the manifest's size, a fat manifest, an index, no wasm layer,
//! the bearer-token exchange behind a redirect. Unreachable and unguarded registries
//! are refused while the host and its other plugins keep working.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use cheng_host::policy::Config;
use cheng_host::{Context, HostBuilder, Status};
use serde_json::{Value, json};

use crate::util;

fn fixture(name: &str) -> PathBuf {
    util::repo().join("tests/fixtures/oci").join(name)
}

fn tools_here() -> bool {
    let registry = Command::new("docker-registry").arg("--version").output().is_ok_and(|o| o.status.success());
    let oras = Command::new("python3").args(["-c", "import oras.client"]).output().is_ok_and(|o| o.status.success());
    let htpasswd = Command::new("htpasswd").arg("-h").output().is_ok();
    util::require("docker-registry, htpasswd (apache2-utils) and oras (PyPI)", registry && oras && htpasswd)
}

/// A process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A registry on loopback storing in `dir`, with basic auth when `auth` holds a user
/// and password; its `127.0.0.1:port`.
fn registry(dir: &Path, auth: Option<(&str, &str)>) -> (Running, String) {
    let mut config = format!(
        "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:0\n",
        dir.join("data").display()
    );
    if let Some((user, password)) = auth {
        let out = Command::new("htpasswd").args(["-Bbn", user, password]).output().unwrap();
        assert!(out.status.success());
        std::fs::write(dir.join("htpasswd"), &out.stdout).unwrap();
        config
            .push_str(&format!("auth:\n  htpasswd:\n    realm: test\n    path: {}\n", dir.join("htpasswd").display()));
    }
    std::fs::write(dir.join("config.yml"), config).unwrap();
    let mut child = Command::new("docker-registry")
        .arg("serve")
        .arg(dir.join("config.yml"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(stderr).lines();
    let address = loop {
        let line = lines.next().expect("the registry exited before listening").unwrap();
        if let Some(at) = line.find("listening on ") {
            let rest = &line[at + "listening on ".len()..];
            break rest.split(|c: char| c == '"' || c.is_whitespace()).next().unwrap().to_string();
        }
    };
    // Keep draining its log so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (Running(child), address)
}

/// A registry in `d/reg` (basic auth with `auth`), and a copy of the `noop` component at
/// `d/v1.wasm` to push to it.
fn registry_with_noop(d: &Path, auth: Option<(&str, &str)>) -> (Running, String, PathBuf) {
    std::fs::create_dir_all(d.join("reg")).unwrap();
    let (running, addr) = registry(&d.join("reg"), auth);
    let v1 = d.join("v1.wasm");
    std::fs::copy(util::program_path("noop"), &v1).unwrap();
    (running, addr, v1)
}

/// Push `wasm` to `registry` as `target` with oras; the manifest's digest.
fn push(registry: &str, target: &str, wasm: &Path, auth: Option<(&str, &str)>) -> String {
    let mut c = Command::new("python3");
    c.arg(fixture("push.py")).args([registry, target]).arg(wasm);
    if let Some((u, p)) = auth {
        c.arg("--auth").args([u, p]);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "oras push failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn sha256_hex(path: &Path) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

/// `cheng --config cfg plugin ARGS…` with state `state`: exit code and stdout as JSON.
fn cheng_plugin(cfg: &Path, state: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, Value) {
    let ws = util::workspace();
    let mut c = util::cheng_in(ws.path(), state);
    c.arg("--config").arg(cfg).arg("plugin").args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let doc = serde_json::from_str(&stdout)
        .unwrap_or_else(|_| json!({"stdout": stdout, "stderr": String::from_utf8_lossy(&out.stderr)}));
    (out.status.code().unwrap_or(-1), doc)
}

async fn host_of(cfg: &Path, state: &Path) -> cheng_host::Host {
    let mut b = HostBuilder::new();
    b.config(Config::load(cfg).unwrap());
    b.state_dir(state).cache_dir(util::shared_state().join("cache"));
    b.build().await.unwrap()
}

fn tool_names(h: &cheng_host::Host) -> Vec<String> {
    h.tools().into_iter().map(|t| t.name).collect()
}

const OPEN_LOOPBACK: &str = "[web]\nallow_private = [\"127.0.0.1/32\"]\n";

#[tokio::test(flavor = "multi_thread")]
async fn pulled_by_tag_and_digest_a_moved_tag_waits_for_acceptance() {
    if !tools_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_registry, addr, v1) = registry_with_noop(d, None);
    let v2 = d.join("v2.wasm");
    std::fs::copy(util::program_path("hostile"), &v2).unwrap();
    let manifest1 = push(&addr, "tools/noop:1.0", &v1, None);
    assert!(manifest1.starts_with("sha256:"), "{manifest1}");

    let cfg = d.join("cheng.toml");
    let entries = format!(
        "{OPEN_LOOPBACK}[[plugins]]\nid = \"tagged\"\nsource = \"oci://{addr}/tools/noop:1.0\"\n\
         [[plugins]]\nid = \"bydigest\"\nsource = \"oci://{addr}/tools/noop@{manifest1}\"\n\
         [roles.t]\ntools = [\"tagged__noop\", \"bydigest__noop\", \"read_file\"]\n"
    );
    std::fs::write(&cfg, &entries).unwrap();
    let state = tempfile::tempdir().unwrap();

    // Before any pull: refused with the command that pulls it; the built-ins work.
    let h = host_of(&cfg, state.path()).await;
    let errors = h.load_errors().join("\n");
    assert!(errors.contains("plugin \"tagged\"") && errors.contains("cheng plugin pull tagged"), "{errors}");
    let ws = util::workspace();
    let cx = Context::new(ws.path()).role("t");
    assert_eq!(h.call(&cx, "read_file", json!({"path": "inside.txt"})).await.status, Status::Ok);
    drop(h);

    // The first pull of each is accepted; by tag and by digest, the same component.
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[]);
    assert_eq!(code, 0, "{doc}");
    let want = sha256_hex(&v1);
    for (i, id) in ["tagged", "bydigest"].iter().enumerate() {
        assert_eq!(doc[i]["id"], *id, "{doc}");
        assert_eq!(doc[i]["outcome"], "accepted", "{doc}");
        assert_eq!(doc[i]["pulled"]["sha256"], want.as_str(), "{doc}");
        assert_eq!(doc[i]["pulled"]["manifest"], manifest1.as_str(), "{doc}");
    }
    // Content-addressed in the state directory.
    let blob = state.path().join("oci/blobs/sha256").join(&want);
    assert_eq!(sha256_hex(&blob), want);
    let h = host_of(&cfg, state.path()).await;
    assert!(h.load_errors().is_empty(), "{:?}", h.load_errors());
    for t in ["tagged__noop", "bydigest__noop"] {
        let r = h.call(&cx, t, json!({})).await;
        assert_eq!(r.status, Status::Ok, "{t}: {}", r.output);
    }
    drop(h);
    // Pulling again changes nothing.
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull", "tagged"], &[]);
    assert_eq!((code, doc[0]["outcome"].as_str()), (0, Some("unchanged")), "{doc}");

    // The tag moves to other bytes: stored as pending, exit 1, the accepted one loads.
    let manifest2 = push(&addr, "tools/noop:1.0", &v2, None);
    assert_ne!(manifest1, manifest2);
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[]);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(doc[0]["outcome"], "moved", "{doc}");
    assert_eq!(doc[0]["pulled"]["sha256"], sha256_hex(&v2).as_str(), "{doc}");
    assert_eq!(doc[0]["accepted"]["sha256"], want.as_str(), "{doc}");
    // The digest reference does not move.
    assert_eq!(doc[1]["outcome"], "unchanged", "{doc}");
    let h = host_of(&cfg, state.path()).await;
    let names = tool_names(&h);
    assert!(names.iter().any(|n| n == "tagged__noop"), "{names:?}");
    assert!(!names.iter().any(|n| n == "tagged__probe"), "{names:?}");
    drop(h);
    // diff shows both and the tools that changed, exit 1; accept takes the new one.
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["diff", "tagged"], &[]);
    assert_eq!(code, 1, "{doc}");
    assert_eq!(doc["accepted"]["sha256"], want.as_str(), "{doc}");
    assert_eq!(doc["pending"]["sha256"], sha256_hex(&v2).as_str(), "{doc}");
    let added: Vec<&str> = doc["tools"]["added"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let removed: Vec<&str> = doc["tools"]["removed"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(added.contains(&"probe") && removed.contains(&"noop"), "{doc}");
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["accept", "tagged"], &[]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["accepted"]["sha256"], sha256_hex(&v2).as_str(), "{doc}");
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["diff", "tagged"], &[]);
    assert_eq!((code, &doc["pending"]), (0, &Value::Null), "{doc}");
    let h = host_of(&cfg, state.path()).await;
    let names = tool_names(&h);
    assert!(names.iter().any(|n| n == "tagged__probe") && !names.iter().any(|n| n == "tagged__noop"), "{names:?}");
    drop(h);

    // A stored component edited on disk is refused by name, not loaded.
    let accepted = state.path().join("oci/blobs/sha256").join(sha256_hex(&v2));
    let mut bytes = std::fs::read(&accepted).unwrap();
    bytes.push(0);
    std::fs::write(&accepted, bytes).unwrap();
    let h = host_of(&cfg, state.path()).await;
    let errors = h.load_errors().join("\n");
    assert!(errors.contains("damaged"), "{errors}");
    assert!(tool_names(&h).iter().any(|n| n == "bydigest__noop"));
    drop(h);

    // A sha256 pin accepts exactly its bytes: a pull of other bytes is refused.
    let pinned = format!(
        "{OPEN_LOOPBACK}[[plugins]]\nid = \"pinned\"\nsource = \"oci://{addr}/tools/noop:1.0\"\nsha256 = \"{want}\"\n"
    );
    std::fs::write(&cfg, &pinned).unwrap();
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[]);
    assert_eq!(code, 1, "{doc}");
    assert!(doc[0]["error"].as_str().unwrap().contains("pins"), "{doc}");

    // A reference pulled on its own: stored, its digest and path printed.
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull", &format!("oci://{addr}/tools/noop@{manifest1}")], &[]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc["sha256"], want.as_str(), "{doc}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_guard_credentials_and_an_unreachable_registry() {
    if !tools_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_registry, addr, v1) = registry_with_noop(d, Some(("testuser", "testpass")));
    push(&addr, "private/noop:1", &v1, Some(("testuser", "testpass")));
    let state = tempfile::tempdir().unwrap();
    let cfg = d.join("cheng.toml");

    // Loopback is refused by the egress guard unless [web] allow_private opens it.
    let entry = format!("[[plugins]]\nid = \"p\"\nsource = \"oci://{addr}/private/noop:1\"\nauth_env = \"REG_AUTH\"\n");
    std::fs::write(&cfg, &entry).unwrap();
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[("REG_AUTH", "testuser:testpass")]);
    assert_eq!(code, 1, "{doc}");
    assert!(doc[0]["error"].as_str().unwrap().contains("loopback"), "{doc}");

    // No credentials in the entry: the registry's challenge is explained.
    let bare = entry.replace("auth_env = \"REG_AUTH\"\n", "");
    std::fs::write(&cfg, format!("{OPEN_LOOPBACK}{bare}")).unwrap();
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[]);
    assert_eq!(code, 1, "{doc}");
    assert!(doc[0]["error"].as_str().unwrap().contains("asks for credentials"), "{doc}");
    // The variable the entry names, unset.
    std::fs::write(&cfg, format!("{OPEN_LOOPBACK}{entry}")).unwrap();
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[]);
    assert_eq!(code, 1, "{doc}");
    assert!(doc[0]["error"].as_str().unwrap().contains("REG_AUTH, which is not set"), "{doc}");
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[("REG_AUTH", "testuser:wrong")]);
    assert_eq!(code, 1, "{doc}");
    assert!(doc[0]["error"].as_str().unwrap().contains("refused the credentials"), "{doc}");
    // Positive control: the right ones.
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[("REG_AUTH", "testuser:testpass")]);
    assert_eq!(code, 0, "{doc}");
    assert_eq!(doc[0]["pulled"]["sha256"], sha256_hex(&v1).as_str(), "{doc}");

    // An unreachable registry (a closed port): the pull fails by name; the host starts
    // and its other plugins work, the pulled one from the store.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    std::fs::write(
        &cfg,
        format!(
            "{OPEN_LOOPBACK}{entry}[[plugins]]\nid = \"gone\"\nsource = \"oci://{closed}/x/y:1\"\n\
             [roles.t]\ntools = [\"p__noop\", \"read_file\"]\n"
        ),
    )
    .unwrap();
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull", "gone"], &[]);
    assert_eq!(code, 1, "{doc}");
    assert!(doc[0]["error"].as_str().unwrap().contains("cannot connect"), "{doc}");
    let h = host_of(&cfg, state.path()).await;
    let errors = h.load_errors().join("\n");
    assert!(errors.contains("plugin \"gone\"") && errors.contains("cheng plugin pull gone"), "{errors}");
    let ws = util::workspace();
    let cx = Context::new(ws.path()).role("t");
    assert_eq!(h.call(&cx, "p__noop", json!({})).await.status, Status::Ok);
    assert_eq!(h.call(&cx, "read_file", json!({"path": "inside.txt"})).await.status, Status::Ok);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lying_registry_gets_nothing_stored() {
    if !tools_here() {
        return;
    }
    let wasm = util::program_path("noop");
    let mut server =
        Command::new("python3").arg(fixture("hostile.py")).arg(&wasm).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let _server = Running(server);
    let addr = format!("127.0.0.1:{}", line.trim());
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("cheng.toml");
    let state = tempfile::tempdir().unwrap();
    let mut toml = String::from(OPEN_LOOPBACK);
    for repo in ["lie", "huge", "flood", "fat", "index", "nowasm", "tok"] {
        toml.push_str(&format!("[[plugins]]\nid = \"{repo}\"\nsource = \"oci://{addr}/{repo}:1\"\n"));
    }
    toml.push_str("auth_env = \"TOK_AUTH\"\n");
    std::fs::write(&cfg, &toml).unwrap();
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[("TOK_AUTH", "testuser:testpass")]);
    assert_eq!(code, 1, "{doc}");
    let error = |i: usize| doc[i]["error"].as_str().unwrap_or_else(|| panic!("{i}: {doc}")).to_string();
    assert!(error(0).contains("whose digest is"), "{doc}");
    assert!(error(1).contains("over the"), "{doc}");
    assert!(error(2).contains("more than 1000 bytes"), "{doc}");
    assert!(error(3).contains("over the 4194304-byte cap"), "{doc}");
    assert!(error(4).contains("not an OCI image manifest"), "{doc}");
    assert!(error(5).contains("no application/wasm layer"), "{doc}");
    // Positive control: the same server's honest repository, behind the token exchange
    // and a redirect, pulls.
    assert_eq!(doc[6]["outcome"], "accepted", "{doc}");
    assert_eq!(doc[6]["pulled"]["sha256"], sha256_hex(&wasm).as_str(), "{doc}");
    // Nothing but the honest component was stored.
    let blobs: Vec<_> = std::fs::read_dir(state.path().join("oci/blobs/sha256")).unwrap().collect();
    assert_eq!(blobs.len(), 1);
    // Without the credentials the token service refuses.
    let state2 = tempfile::tempdir().unwrap();
    let (code, doc) = cheng_plugin(&cfg, state2.path(), &["pull", "tok"], &[]);
    assert_eq!(code, 1, "{doc}");
    assert!(doc[0]["error"].as_str().unwrap().contains("TOK_AUTH"), "{doc}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signature_in_the_registry_rolls_out_new_versions_by_the_same_key() {
    if !tools_here() || !util::require("the minisign program", Command::new("minisign").arg("-v").output().is_ok()) {
        return;
    }
    use crate::signatures::{keypair, sign};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_registry, addr, v1) = registry_with_noop(d, None);
    let alice = keypair(d, "alice");
    keypair(d, "mallory");
    let v2 = d.join("v2.wasm");
    std::fs::copy(util::program_path("hostile"), &v2).unwrap();
    sign(d, "alice", &v1, "tools 1.0", false);
    sign(d, "alice", &v2, "tools 2.0", false);
    let push_signed = |wasm: &Path, tag: &str| {
        let sig = cheng_host::plugin_signature_path(wasm);
        let out = Command::new("python3")
            .arg(fixture("push.py"))
            .args([&addr, tag])
            .arg(wasm)
            .arg("--signature")
            .arg(&sig)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    push_signed(&v1, "tools/signed:1");
    let cfg = d.join("cheng.toml");
    std::fs::write(
        &cfg,
        format!(
            "{OPEN_LOOPBACK}[[plugins]]\nid = \"s\"\nsource = \"oci://{addr}/tools/signed:1\"\nsigned_by = [\"{alice}\"]\n"
        ),
    )
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[]);
    assert_eq!((code, doc[0]["outcome"].as_str()), (0, Some("accepted")), "{doc}");
    let blob = state.path().join("oci/blobs/sha256").join(sha256_hex(&v1));
    // inspect shows who signed the stored component.
    let (_, report) = cheng_plugin(&cfg, state.path(), &["inspect", blob.to_str().unwrap()], &[]);
    assert_eq!(report["signature"]["trusted_comment"], "tools 1.0", "{report}");
    let h = host_of(&cfg, state.path()).await;
    assert!(h.load_errors().is_empty(), "{:?}", h.load_errors());
    assert!(tool_names(&h).iter().any(|n| n == "s__noop"));
    drop(h);

    // A new version signed by the same key: accepted by its signature, no pin edited.
    push_signed(&v2, "tools/signed:1");
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[]);
    assert_eq!((code, doc[0]["outcome"].as_str()), (0, Some("accepted")), "{doc}");
    let h = host_of(&cfg, state.path()).await;
    assert!(tool_names(&h).iter().any(|n| n == "s__probe"), "{:?}", h.load_errors());
    drop(h);

    // Signed by a key the entry does not list: not pulled; the accepted one stays.
    let v3 = d.join("v3.wasm");
    std::fs::copy(&v1, &v3).unwrap();
    let mut bytes = std::fs::read(&v3).unwrap();
    bytes.extend_from_slice(b"\0\x08trailing\0");
    std::fs::write(&v3, bytes).unwrap();
    sign(d, "mallory", &v3, "tools 3.0", false);
    push_signed(&v3, "tools/signed:1");
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[]);
    assert_eq!(code, 1, "{doc}");
    assert!(doc[0]["error"].as_str().unwrap().contains("not pulled"), "{doc}");
    assert!(!state.path().join("oci/blobs/sha256").join(sha256_hex(&v3)).exists());
    // Unsigned (other bytes, so no earlier signature refers to its manifest): refused.
    let v4 = d.join("v4.wasm");
    let mut bytes = std::fs::read(&v1).unwrap();
    bytes.extend_from_slice(b"\0\x08unsigned\0");
    std::fs::write(&v4, bytes).unwrap();
    push(&addr, "tools/signed:1", &v4, None);
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[]);
    assert_eq!(code, 1, "{doc}");
    assert!(doc[0]["error"].as_str().unwrap().contains("signed_by needs"), "{doc}");
    let h = host_of(&cfg, state.path()).await;
    assert!(tool_names(&h).iter().any(|n| n == "s__probe"), "{:?}", h.load_errors());
}

#[tokio::test(flavor = "multi_thread")]
async fn pulls_in_parallel_processes_lose_no_entry() {
    if !tools_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_registry, addr, v1) = registry_with_noop(d, None);
    push(&addr, "tools/noop:1", &v1, None);
    let ids: Vec<String> = (0..12).map(|i| format!("c{i}")).collect();
    let mut toml = String::from(OPEN_LOOPBACK);
    for id in &ids {
        toml.push_str(&format!("[[plugins]]\nid = \"{id}\"\nsource = \"oci://{addr}/tools/noop:1\"\n"));
    }
    let cfg = d.join("cheng.toml");
    std::fs::write(&cfg, &toml).unwrap();
    let ws = util::workspace();
    // Twelve `cheng plugin pull ID` at once, each recording its entry in the one index;
    // four rounds, each on a fresh state directory (without the index's lock, eight
    // processes lost an entry in one round of four when this was measured).
    for _round in 0..4 {
        let state = tempfile::tempdir().unwrap();
        let children: Vec<_> = ids
            .iter()
            .map(|id| {
                let mut c = util::cheng_in(ws.path(), state.path());
                c.arg("--config").arg(&cfg).args(["plugin", "pull", id]).stdout(Stdio::null()).stderr(Stdio::piped());
                c.spawn().unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        let index: Value =
            serde_json::from_slice(&std::fs::read(state.path().join("oci/plugins.json")).unwrap()).unwrap();
        let recorded = index["plugins"].as_object().map(|m| m.len()).unwrap_or(0);
        assert_eq!(recorded, ids.len(), "{index}");
    }
    // And a host loads every one of them.
    let state = tempfile::tempdir().unwrap();
    let (code, doc) = cheng_plugin(&cfg, state.path(), &["pull"], &[]);
    assert_eq!(code, 0, "{doc}");
    let h = host_of(&cfg, state.path()).await;
    assert!(h.load_errors().is_empty(), "{:?}", h.load_errors());
    let names = tool_names(&h);
    for id in &ids {
        assert!(names.iter().any(|n| *n == format!("{id}__noop")), "{id} in {names:?}");
    }
}
