//! The README's plugin walkthrough: `examples/hello-tool` is the README's code,
//! verbatim, and it builds, inspects, loads under a pin and answers a call.

use cheng_host::{Context, Status};
use serde_json::json;

use crate::util;

/// The fenced block that follows the line naming `file` in the README.
fn readme_block(readme: &str, file: &str) -> String {
    let marker = format!("`{file}`:");
    let at = readme.find(&marker).unwrap_or_else(|| panic!("the README shows {file}"));
    let rest = &readme[at..];
    let start = rest.find("```").unwrap();
    let body = &rest[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    body[..body.find("```").unwrap()].to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_hello_tool_builds_loads_and_answers() {
    let repo = util::repo();
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let example = repo.join("examples/hello-tool");
    for file in ["Cargo.toml", ".cargo/config.toml", "src/lib.rs"] {
        assert_eq!(readme_block(&readme, file), std::fs::read_to_string(example.join(file)).unwrap(), "{file} differs from the README");
    }
    // The lib.rs is small: hello world in about ten lines.
    assert!(readme_block(&readme, "src/lib.rs").lines().filter(|l| !l.trim().is_empty()).count() <= 13);
    // Build it as an author would (into the shared guest target directory).
    let built = cheng_guest_build::GuestBuild::at(&example).compile(&util::target_dir().join("guests")).expect("the example builds");
    let wasm = &built.iter().find(|g| g.package == "hello-tool").unwrap().wasm;
    // Inspect gives the pin; load it under that pin with a role that names it.
    let ws = util::workspace();
    let out = util::cheng(ws.path()).arg("plugin").arg("inspect").arg(wasm).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["tools"][0]["name"], "hello");
    let cfg = ws.path().join("cheng.toml");
    std::fs::write(
        &cfg,
        format!(
            "[roles.greeter]\ninherits = \"recon\"\ntools = [\"hello__hello\"]\n[[plugins]]\nid = \"hello\"\npath = {:?}\nsha256 = {}\n",
            wasm.display().to_string(),
            report["sha256"]
        ),
    )
    .unwrap();
    let out = util::cheng(ws.path()).arg("--config").arg(&cfg).args(["--role", "greeter", "call", "hello__hello", r#"{"name":"Ada"}"#]).output().unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["greeting"], "Hello, Ada!", "{}", String::from_utf8_lossy(&out.stderr));
    // `cheng tools` lists it under its registered name.
    let out = util::cheng(ws.path()).arg("--config").arg(&cfg).args(["tools"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("hello__hello"));
    // Bad input names the field, as for the built-ins.
    let h = util::host("[roles.g]\ntools = [\"hello__hello\"]\n", vec![util::plugin_file("hello", wasm)]).await;
    let r = h.call(&Context::new(ws.path()).role("g"), "hello__hello", json!({"name": 5})).await;
    assert_eq!(r.status, Status::Error);
    assert!(r.output["error"].as_str().unwrap().contains("field `name`"), "{}", r.output);
    // Without a role naming it, nobody holds it.
    let r = h.call(&Context::new(ws.path()), "hello__hello", json!({"name": "x"})).await;
    assert_eq!(r.status, Status::Denied);
}
