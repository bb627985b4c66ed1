//! Signed plugins: components signed with the real `minisign` program, loaded only when
//! a key their entry lists signed exactly these bytes. Each refusal names the plugin and
//! the reason, and the host and its other plugins keep working.

use std::path::{Path, PathBuf};
use std::process::Command;

use cheng_host::policy::Config;
use cheng_host::{Context, HostBuilder, Status};
use serde_json::{Value, json};

use crate::util;

fn minisign() -> bool {
    util::require("the minisign program", Command::new("minisign").arg("-v").output().is_ok())
}

/// A key pair in `dir/name.{pub,key}` (no password); its public key's base64 line.
pub(crate) fn keypair(dir: &Path, name: &str) -> String {
    let (public, secret) = (dir.join(format!("{name}.pub")), dir.join(format!("{name}.key")));
    let out =
        Command::new("minisign").arg("-G").arg("-W").arg("-p").arg(&public).arg("-s").arg(&secret).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(&public).unwrap().lines().nth(1).unwrap().trim().to_string()
}

/// The key id minisign wrote in `dir/name.pub`'s comment (`untrusted comment: minisign
/// public key <ID>`), as it wrote it: upper-case hex without leading zeros.
fn pub_key_id(dir: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(dir.join(format!("{name}.pub"))).unwrap();
    let comment = text.lines().next().unwrap_or_default();
    let id = comment.strip_prefix("untrusted comment: minisign public key ").unwrap_or_else(|| panic!("{text}"));
    id.trim().to_string()
}

/// A key id (hex) as the number it is: ids are compared as numbers, never as text.
fn id_number(hex: &str) -> u64 {
    u64::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("key id {hex:?} is not hex: {e}"))
}

/// Sign `file` with `dir/name.key` (`legacy`: minisign's -l), trusted comment `comment`.
pub(crate) fn sign(dir: &Path, name: &str, file: &Path, comment: &str, legacy: bool) {
    let mut c = Command::new("minisign");
    c.arg("-S").arg("-s").arg(dir.join(format!("{name}.key"))).arg("-m").arg(file).arg("-t").arg(comment);
    if legacy {
        c.arg("-l");
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A copy of the `noop` test component at `dir/<name>.wasm`.
fn component(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(format!("{name}.wasm"));
    std::fs::copy(util::program_path("noop"), &p).unwrap();
    p
}

fn entry(id: &str, file: &Path, keys: &[&str], sha256: Option<&str>) -> String {
    let keys: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
    let pin = sha256.map(|s| format!("sha256 = {s:?}\n")).unwrap_or_default();
    format!(
        "[[plugins]]\nid = {id:?}\npath = {:?}\n{pin}signed_by = [{}]\n",
        file.display().to_string(),
        keys.join(", ")
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn only_a_listed_key_signing_these_very_bytes_loads_a_plugin() {
    if !minisign() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let alice = keypair(d, "alice");
    let mallory = keypair(d, "mallory");

    // Good: signed by alice, prehashed (minisign's default), no sha256 pin needed.
    let good = component(d, "good");
    sign(d, "alice", &good, "release 1.0", false);
    // Wrong key: signed by mallory, only alice listed.
    let wrong = component(d, "wrong");
    sign(d, "mallory", &wrong, "release 1.0", false);
    // Edited file: signed, then one byte appended.
    let edited = component(d, "edited");
    sign(d, "alice", &edited, "release 1.0", false);
    let mut bytes = std::fs::read(&edited).unwrap();
    bytes.push(0);
    std::fs::write(&edited, bytes).unwrap();
    // Edited trusted comment.
    let comment = component(d, "comment");
    sign(d, "alice", &comment, "release 1.0", false);
    let sig = cheng_host::plugin_signature_path(&comment);
    let text = std::fs::read_to_string(&sig).unwrap().replace("release 1.0", "release 9.9");
    std::fs::write(&sig, text).unwrap();
    // Missing signature.
    let unsigned = component(d, "unsigned");
    // Legacy signature.
    let legacy = component(d, "legacy");
    sign(d, "alice", &legacy, "release 1.0", true);

    let mut toml = String::new();
    for (id, file) in [
        ("good", &good),
        ("wrong", &wrong),
        ("edited", &edited),
        ("comment", &comment),
        ("unsigned", &unsigned),
        ("legacy", &legacy),
    ] {
        toml.push_str(&entry(id, file, &[&alice], None));
    }
    // Two keys, the second one signed: loads.
    let either = component(d, "either");
    sign(d, "mallory", &either, "release 1.0", false);
    toml.push_str(&entry("either", &either, &[&alice, &mallory], None));
    toml.push_str("[roles.t]\ntools = [\"good__noop\", \"either__noop\", \"read_file\"]\n");
    let cfg_path = d.join("cheng.toml");
    std::fs::write(&cfg_path, &toml).unwrap();

    let state = tempfile::tempdir().unwrap();
    let mut b = HostBuilder::new();
    b.config(Config::load(&cfg_path).unwrap());
    b.state_dir(state.path()).cache_dir(util::shared_state().join("cache"));
    let h = b.build().await.unwrap();
    let errors = h.load_errors().join("\n");
    let refused = |id: &str, why: &str| {
        let line = h.load_errors().iter().find(|e| e.contains(&format!("plugin \"{id}\""))).cloned();
        let line = line.unwrap_or_else(|| panic!("plugin {id} was not refused: {errors}"));
        assert!(line.contains(why) && line.contains("refusing to load it"), "{id}: {line}");
    };
    refused("wrong", "which signed_by does not list");
    refused("edited", "does not match");
    refused("comment", "does not match");
    refused("unsigned", "there is no signature file");
    refused("legacy", "legacy");
    assert_eq!(h.load_errors().len(), 5, "{errors}");
    // The signed ones load and run; so do the built-in tools.
    let ws = util::workspace();
    let cx = Context::new(ws.path()).role("t");
    let tools: Vec<String> = h.tools().into_iter().map(|t| t.name).collect();
    for t in ["good__noop", "either__noop"] {
        assert!(tools.iter().any(|n| n == t), "{t} in {tools:?}");
    }
    assert!(!tools.iter().any(|n| n.starts_with("wrong__") || n.starts_with("edited__")), "{tools:?}");
    let r = h.call(&cx, "read_file", json!({"path": "inside.txt"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);

    // `cheng plugin inspect` shows who signed and what they wrote.
    let out = util::cheng(ws.path()).args(["plugin", "inspect"]).arg(&good).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["signature"]["trusted_comment"], "release 1.0");
    let key_id = report["signature"]["key_id"].as_str().unwrap();
    let minisigns = pub_key_id(d, "alice");
    assert_eq!(id_number(key_id), id_number(&minisigns), "minisign names the key {minisigns} in its .pub: {report}");
}

/// minisign prints a key id without leading zeros (`%" PRIX64`): a key whose id starts
/// with a zero nibble (one in sixteen) is `882A9B965100048` in its `.pub`, and Cheng
/// names it the same way, in `cheng plugin inspect` and in a refusal, so it can be found
/// there as written. Keys are made until one such turns up (at most 400 tries; all 400
/// missing has odds of about 1 in 10^11), with a full-width one as the control.
#[tokio::test(flavor = "multi_thread")]
async fn a_key_id_is_named_as_minisign_prints_it_even_with_a_leading_zero() {
    if !minisign() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (mut short, mut full) = (None, None);
    for i in 0..400 {
        let name = format!("k{i}");
        let key = keypair(d, &name);
        let id = pub_key_id(d, &name);
        let slot = if id.len() < 16 { &mut short } else { &mut full };
        slot.get_or_insert((name, key, id));
        if short.is_some() && full.is_some() {
            break;
        }
    }
    let (short, full) = (short.expect("no key id with a leading zero in 400 keys"), full.unwrap());
    let ws = util::workspace();
    for (name, _, id) in [&short, &full] {
        let file = component(d, name);
        sign(d, name, &file, "release 1.0", false);
        let out = util::cheng(ws.path()).args(["plugin", "inspect"]).arg(&file).output().unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["signature"]["key_id"], id.as_str(), "minisign's .pub names it {id}: {report}");
    }
    // Signed by the short-id key, only the other listed: the refusal names the signer as
    // minisign does.
    let file = d.join(format!("{}.wasm", short.0));
    let cfg_path = d.join("cheng.toml");
    std::fs::write(&cfg_path, entry("tool", &file, &[&full.1], None)).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut b = HostBuilder::new();
    b.config(Config::load(&cfg_path).unwrap());
    b.state_dir(state.path()).cache_dir(util::shared_state().join("cache"));
    let errors = b.build().await.unwrap().load_errors().to_vec();
    let named = format!("signed by key {},", short.2);
    assert!(errors.len() == 1 && errors[0].contains(&named), "{named} in {errors:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_version_signed_by_the_same_key_rolls_out_without_editing_the_entry() {
    if !minisign() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = keypair(d, "release");
    let file = component(d, "tool");
    sign(d, "release", &file, "v1", false);
    let cfg_path = d.join("cheng.toml");
    std::fs::write(&cfg_path, entry("tool", &file, &[&key], None)).unwrap();
    let load = || async {
        let state = tempfile::tempdir().unwrap();
        let mut b = HostBuilder::new();
        b.config(Config::load(&cfg_path).unwrap());
        b.state_dir(state.path()).cache_dir(util::shared_state().join("cache"));
        b.build().await.unwrap().load_errors().to_vec()
    };
    assert!(load().await.is_empty());
    // v2: other bytes (a custom section appended is still a valid component), signed
    // by the same key: loads, the entry untouched.
    let mut v2 = std::fs::read(&file).unwrap();
    v2.extend_from_slice(&[0, 6, 5, b'n', b'o', b't', b'e', b'2']);
    std::fs::write(&file, &v2).unwrap();
    let stale = load().await;
    assert!(stale.len() == 1 && stale[0].contains("does not match"), "the old signature does not cover v2: {stale:?}");
    sign(d, "release", &file, "v2", false);
    assert!(load().await.is_empty());

    // With a sha256 pin as well, both must hold.
    std::fs::write(&cfg_path, entry("tool", &file, &[&key], Some(&"0".repeat(64)))).unwrap();
    let pinned = load().await;
    assert!(pinned.len() == 1 && pinned[0].contains("cheng.toml pins"), "{pinned:?}");

    // A key listed twice, or something that is not a key: refused by name.
    std::fs::write(&cfg_path, entry("tool", &file, &[&key, &key], None)).unwrap();
    let twice = load().await;
    assert!(twice.len() == 1 && twice[0].contains("twice"), "{twice:?}");
    std::fs::write(&cfg_path, entry("tool", &file, &["RWQnot-a-key"], None)).unwrap();
    let bad = load().await;
    assert!(bad.len() == 1 && bad[0].contains("is not a minisign public key"), "{bad:?}");
}
