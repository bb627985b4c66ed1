//! Loading third-party components from cheng.toml: pins, ids, grants, broken files and
//! roles that name tools a plugin does not declare — each reported at load, while the
//! host and the other plugins keep working; `cheng plugin inspect`.

use cheng_host::policy::Config;
use cheng_host::{Context, HostBuilder, Status};
use serde_json::{Value, json};

use crate::util;

fn sha256_of(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("x");
    std::fs::write(&f, bytes).unwrap();
    let out = std::process::Command::new("sha256sum").arg(&f).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string()
}

async fn host_from(toml: &str, dir: &std::path::Path) -> cheng_host::Host {
    let cfg = dir.join("cheng.toml");
    std::fs::write(&cfg, toml).unwrap();
    let mut b = HostBuilder::new();
    b.config(Config::load(&cfg).unwrap());
    b.state_dir(util::shared_state());
    b.build().await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn broken_and_mismatched_plugins_are_refused_and_the_rest_work() {
    let dir = tempfile::tempdir().unwrap();
    let good = util::program("hostile");
    let sha = sha256_of(&good);
    std::fs::write(dir.path().join("good.wasm"), &good).unwrap();
    std::fs::write(dir.path().join("truncated.wasm"), &good[..good.len() / 2]).unwrap();
    std::fs::write(dir.path().join("junk.wasm"), b"not a component").unwrap();
    let toml = format!(
        r#"
[roles.t]
tools = ["good__probe", "good__missing", "gone__probe"]
[[plugins]]
id = "good"
path = "good.wasm"
sha256 = "{sha}"
fs = "read"
[[plugins]]
id = "pinned"
path = "good.wasm"
sha256 = "{bad}"
[[plugins]]
id = "cut"
path = "truncated.wasm"
sha256 = "{cut}"
[[plugins]]
id = "junk"
path = "junk.wasm"
sha256 = "{junk}"
[[plugins]]
id = "unpinned"
path = "good.wasm"
[[plugins]]
id = "net"
path = "good.wasm"
sha256 = "{sha}"
net = ["*.127.0.0.1"]
[[plugins]]
id = "Bad_Id"
path = "good.wasm"
sha256 = "{sha}"
[[plugins]]
id = "wide"
path = "good.wasm"
sha256 = "{sha}"
fs = {{ write = ["."] }}
"#,
        bad = "0".repeat(64),
        cut = sha256_of(&good[..good.len() / 2]),
        junk = sha256_of(b"not a component"),
    );
    let h = host_from(&toml, dir.path()).await;
    let errors = h.load_errors().join("\n");
    // A pin mismatch names both hashes.
    assert!(errors.contains(&format!("has sha256 {sha}, but cheng.toml pins {}", "0".repeat(64))), "{errors}");
    // Truncated and junk files: one clear error each, naming the file.
    assert!(errors.contains("plugin \"cut\"") && errors.contains("truncated.wasm"), "{errors}");
    assert!(errors.contains("plugin \"junk\"") && errors.contains("junk.wasm"), "{errors}");
    // No pin, a bad net grant, a bad id, write on the whole workspace: refused at load.
    assert!(errors.contains("plugin \"unpinned\": no sha256 pin"), "{errors}");
    assert!(
        errors.contains("plugin \"net\": net: host pattern \"*.127.0.0.1\" puts a wildcard on an address"),
        "{errors}"
    );
    assert!(errors.contains("plugin id \"Bad_Id\" must match"), "{errors}");
    assert!(errors.contains("never gets write access to the whole workspace"), "{errors}");
    // Roles naming tools a plugin does not declare are reported now, not at call time.
    assert!(errors.contains("names \"good__missing\", which plugin \"good\" does not declare; it declares: good__probe, good__probe_read"), "{errors}");
    assert!(errors.contains("names \"gone__probe\", but no plugin \"gone\" is loaded"), "{errors}");
    // The good plugin and the built-ins still work.
    let ws = util::workspace();
    let r = h
        .call(&Context::new(ws.path()).role("t"), "good__probe", json!({"action": "read", "target": "inside.txt"}))
        .await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    let r = h.call(&Context::new(ws.path()), "read_file", json!({"path": "inside.txt"})).await;
    assert_eq!(r.status, Status::Ok);
    // A plugin's tools are granted to nobody by default.
    let r = h.call(&Context::new(ws.path()), "good__probe", json!({"action": "env"})).await;
    assert_eq!(r.status, Status::Denied);
}

#[test]
fn plugin_inspect_shows_pin_imports_and_tools() {
    let ws = util::workspace();
    let wasm = util::program_path("hostile");
    let out = util::cheng(ws.path()).arg("plugin").arg("inspect").arg(&wasm).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["sha256"], sha256_of(&std::fs::read(&wasm).unwrap()));
    let tools: Vec<&str> = doc["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(tools, ["probe", "probe_read"]);
    assert_eq!(doc["tools"][0]["needs"]["fs"], "write");
    assert_eq!(doc["tools"][1]["needs"]["fs"], "read");
    assert!(doc["imports"].as_array().unwrap().iter().any(|i| i.as_str().unwrap().starts_with("cheng:tool/approval")));
    assert_eq!(doc["refused_imports"], json!([]));
    // A file that is not a component: one clear error naming it.
    let junk = ws.path().join("junk.wasm");
    std::fs::write(&junk, b"\0asm junk").unwrap();
    let out = util::cheng(ws.path()).arg("plugin").arg("inspect").arg(&junk).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("junk.wasm"));
}

#[tokio::test(flavor = "multi_thread")]
async fn wordcount_reads_only_its_granted_folder_and_the_log_shows_it() {
    use cheng_host::grant::{FsGrant, Grant};
    let wasm = util::program_path("wordcount");
    // `cheng plugin inspect` on the example: one tool, read-only.
    let ws = util::workspace();
    let out = util::cheng(ws.path()).arg("plugin").arg("inspect").arg(&wasm).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["tools"][0]["name"], "count");
    assert_eq!(report["tools"][0]["needs"]["fs"], "read");
    // Granted read on docs/ only.
    let state = tempfile::tempdir().unwrap();
    let mut b = HostBuilder::new();
    b.config(Config::from_toml_str("[roles.t]\ntools = [\"wc__count\"]\n", "t.toml").unwrap());
    b.state_dir(state.path()).cache_dir(util::shared_state().join("cache"));
    let mut spec = util::plugin_file("wc", &wasm);
    spec.grant = Grant {
        fs: FsGrant::Scoped { read: vec!["docs".into()], write: vec![] },
        spawn: false,
        memory_mb: None,
        cpu_ms: None,
        net: vec![],
    };
    b.plugin(spec);
    let h = b.build().await.unwrap();
    let cx = Context::new(ws.path()).role("t").run("wc");
    // Control: inside its folder it counts.
    let r = h.call(&cx, "wc__count", json!({"path": "docs"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output["files"][0]["path"], "docs/a.md");
    assert_eq!(r.output["total"]["words"], 2);
    // Outside it: the workspace root, a file beside docs, a `..` out of docs.
    for path in [".", "inside.txt", "docs/../inside.txt"] {
        let r = h.call(&cx, "wc__count", json!({"path": path})).await;
        assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::NotGranted), "{path}: {}", r.output);
        assert!(!r.output.to_string().contains("\"inside\""));
    }
    // The audit log has the refusals with their kind, and the allowed call.
    drop(h);
    let recs = cheng_host::records::read_log(&state.path().join("audit.jsonl"), &Default::default()).unwrap();
    let kinds: Vec<Option<&str>> = recs.iter().map(|r| r.error_kind.as_deref()).collect();
    assert_eq!(
        kinds,
        [
            None,
            Some("LOCAL_EXECUTOR_NOT_GRANTED"),
            Some("LOCAL_EXECUTOR_NOT_GRANTED"),
            Some("LOCAL_EXECUTOR_NOT_GRANTED")
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_grant_cannot_link_in_or_symlink_out_and_the_log_shows_it() {
    use cheng_host::grant::{FsGrant, Grant};
    let ws = util::workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "TOPSECRET").unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut b = HostBuilder::new();
    b.config(
        Config::from_toml_str("[roles.t]\ntools = [\"w__probe\", \"read_file\", \"write_file\"]\n", "t.toml").unwrap(),
    );
    b.state_dir(state.path()).cache_dir(util::shared_state().join("cache"));
    let grant = Grant {
        fs: FsGrant::Scoped { read: vec![], write: vec!["out".into()] },
        spawn: false,
        memory_mb: None,
        cpu_ms: None,
        net: vec![],
    };
    b.plugin(util::plugin("w", "hostile", grant));
    let h = b.build().await.unwrap();
    let cx = Context::new(ws.path()).role("t").run("links");
    let probe = |input: Value| {
        let (h, cx) = (&h, &cx);
        async move { h.call(cx, "w__probe", input).await }
    };
    let secret = outside.path().join("secret.txt");
    // Hard links: from a workspace file outside the grant, and from a host path, into out/.
    for from in ["/workspace/inside.txt", secret.to_str().unwrap()] {
        let r = probe(json!({"action": "hardlink", "target": from, "to": "/workspace/out/linked"})).await;
        assert_eq!(r.status, Status::Error, "{from}: {}", r.output);
        assert!(!ws.path().join("out/linked").exists());
    }
    // Control: a hard link inside the grant works.
    std::fs::write(ws.path().join("out/mine.txt"), "mine").unwrap();
    let r = probe(json!({"action": "hardlink", "target": "/workspace/out/mine.txt", "to": "/workspace/out/mine2.txt"}))
        .await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    // A symlink the component makes, pointing out of the workspace.
    let rel_out = format!("../../../../../../../..{}", secret.display());
    let r = probe(json!({"action": "symlink", "target": "/workspace/out/evil", "to": rel_out})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    // Control: the link exists on disk and points at the secret.
    assert_eq!(std::fs::read_to_string(ws.path().join("out/evil")).unwrap(), "TOPSECRET");
    // Nothing in Cheng follows it: the component itself through WASI, the host's read
    // for the component, the built-in reader, and the built-in writer.
    let r = probe(json!({"action": "read", "target": "/workspace/out/evil"})).await;
    assert_eq!(r.status, Status::Error, "{}", r.output);
    let r = probe(json!({"action": "host_read", "target": "out/evil"})).await;
    assert_eq!(r.status, Status::Error, "{}", r.output);
    let r = h.call(&cx, "read_file", json!({"path": "out/evil"})).await;
    assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::PathRefused), "{}", r.output);
    let r = h.call(&cx, "write_file", json!({"path": "out/evil", "content": "pwned"})).await;
    assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::PathRefused), "{}", r.output);
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "TOPSECRET");
    assert!(!r.output.to_string().contains("TOPSECRET"));
    // .git is never in a grant: a write there fails, through WASI and through the host.
    std::fs::create_dir_all(ws.path().join(".git")).unwrap();
    std::fs::write(ws.path().join(".git/config"), "[core]\n").unwrap();
    let r = probe(json!({"action": "write", "target": "/workspace/.git/config"})).await;
    assert_eq!(r.status, Status::Error, "{}", r.output);
    let r = probe(json!({"action": "host_write", "target": ".git/config"})).await;
    assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::NotGranted), "{}", r.output);
    assert_eq!(std::fs::read_to_string(ws.path().join(".git/config")).unwrap(), "[core]\n");
    // No spawn grant: the process import refuses, and says so.
    let r = probe(json!({"action": "spawn"})).await;
    assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::NotGranted), "{}", r.output);
    // The audit log holds every one of these calls with its outcome.
    drop(h);
    let recs = cheng_host::records::read_log(&state.path().join("audit.jsonl"), &Default::default()).unwrap();
    let summary: Vec<(String, String)> = recs.iter().map(|r| (r.tool.clone(), format!("{:?}", r.status))).collect();
    assert_eq!(recs.len(), 11, "{summary:?}");
    let failed = recs.iter().filter(|r| r.status != Status::Ok).count();
    assert_eq!(failed, 9, "{summary:?}");
    let last = recs.last().unwrap();
    assert_eq!(
        (last.status, last.error_kind.as_deref()),
        (Status::Denied, Some("LOCAL_EXECUTOR_NOT_GRANTED")),
        "the spawn refusal is a recorded denial"
    );
    assert!(
        recs.iter()
            .filter(|r| r.tool == "read_file" || r.tool == "write_file")
            .all(|r| r.error_kind.as_deref() == Some("LOCAL_EXECUTOR_PATH_REFUSED"))
    );
    assert!(!std::fs::read_to_string(state.path().join("audit.jsonl")).unwrap().contains("TOPSECRET"));
}

/// The WIT contract is language-neutral: a component written by hand in the
/// WebAssembly text format (tests/programs/wat-echo/echo.wat), with no Rust, SDK or
/// bindings generator, is inspected, loaded, granted and called like any other.
#[tokio::test(flavor = "multi_thread")]
async fn a_component_written_in_wat_is_a_tool() {
    let text = std::fs::read_to_string(util::repo().join("tests/programs/wat-echo/echo.wat")).unwrap();
    let wasm = wat::parse_str(&text).expect("the WAT parses into a component");
    let report = cheng_host::inspect(&wasm, "echo.wat").await.unwrap();
    assert_eq!(report.tools.len(), 1);
    assert_eq!(report.tools[0].name, "wat_echo");
    assert!(report.imports.is_empty(), "{:?}", report.imports);
    let h = util::host(
        "[roles.t]\ntools = [\"wat__wat_echo\"]\n",
        vec![cheng_host::PluginSpec {
            id: "wat".into(),
            wasm,
            origin: "echo.wat".into(),
            grant: cheng_host::grant::Grant::none(),
        }],
    )
    .await;
    assert!(h.load_errors().is_empty(), "{:?}", h.load_errors());
    let ws = util::workspace();
    let cx = Context::new(ws.path()).role("t");
    let r = h.call(&cx, "wat__wat_echo", json!({"text": "héllo"})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(r.output, json!({"success": true, "echo": {"text": "héllo"}}));
    // Its input schema is enforced by the host like any tool's.
    let r = h.call(&cx, "wat__wat_echo", json!({"text": 5})).await;
    assert_eq!(r.error_kind, Some(cheng_host::ErrorKind::InvalidArgument), "{}", r.output);
    // A large input makes it grow its memory.
    let big = "x".repeat(200_000);
    let r = h.call(&cx, "wat__wat_echo", json!({"text": big})).await;
    assert_eq!(r.output["echo"]["text"].as_str().map(str::len), Some(200_000));
}
