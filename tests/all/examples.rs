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
        assert_eq!(
            readme_block(&readme, file),
            std::fs::read_to_string(example.join(file)).unwrap(),
            "{file} differs from the README"
        );
    }
    // The lib.rs is small: hello world in at most ten lines, as rustfmt formats them.
    let lib = readme_block(&readme, "src/lib.rs");
    assert!(lib.lines().count() <= 10 && lib.lines().all(|l| l.len() <= 100), "{lib}");
    // Build it as an author would (into the shared guest target directory).
    let wasm = util::program_path("hello-tool");
    // Inspect gives the pin; load it under that pin with a role that names it.
    let ws = util::workspace();
    let out = util::cheng(ws.path()).arg("plugin").arg("inspect").arg(&wasm).output().unwrap();
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
    let out = util::cheng(ws.path())
        .arg("--config")
        .arg(&cfg)
        .args(["--role", "greeter", "call", "hello__hello", r#"{"name":"Ada"}"#])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["greeting"], "Hello, Ada!", "{}", String::from_utf8_lossy(&out.stderr));
    // `cheng tools` lists it under its registered name.
    let out = util::cheng(ws.path()).arg("--config").arg(&cfg).args(["tools"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("hello__hello"));
    // Bad input names the field, as for the built-ins.
    let h = util::host("[roles.g]\ntools = [\"hello__hello\"]\n", vec![util::plugin_file("hello", &wasm)]).await;
    let r = h.call(&Context::new(ws.path()).role("g"), "hello__hello", json!({"name": 5})).await;
    assert_eq!(r.status, Status::Error);
    assert!(r.output["error"].as_str().unwrap().contains("field `name`"), "{}", r.output);
    // A field the function does not take is refused, not ignored.
    let r = h.call(&Context::new(ws.path()).role("g"), "hello__hello", json!({"name": "Ada", "nmae": "x"})).await;
    assert_eq!(r.status, Status::Error);
    assert!(r.output["error"].as_str().unwrap().contains("nmae"), "{}", r.output);
    // The description is the function's doc comment.
    let info = h.tools().into_iter().find(|t| t.name == "hello__hello").unwrap();
    assert_eq!(info.description, "Greets someone by name.");
    // Without a role naming it, nobody holds it.
    let r = h.call(&Context::new(ws.path()), "hello__hello", json!({"name": "x"})).await;
    assert_eq!(r.status, Status::Denied);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_embed_example_shows_ok_denied_and_approval_outcomes() {
    let wasm = util::program_path("hello-tool");
    let ws = util::workspace();
    let out = cheng_embed_example::run(ws.path(), &wasm).await.unwrap();
    let by = |label: &str| &out.iter().find(|o| o.label == label).unwrap().result;
    assert_eq!(by("plugin tool, granted").output["greeting"], "Hello, Ada!");
    assert_eq!(by("built-in, granted").status, Status::Ok);
    assert_eq!(by("not in the role").status, Status::Denied);
    let approved = by("approved by OnlyLs");
    assert_eq!(
        (approved.status, approved.output["termination"].as_str()),
        (Status::Ok, Some("exited")),
        "{}",
        approved.output
    );
    assert!(approved.output["stdout"].as_str().unwrap().contains("inside.txt"));
    let declined = by("declined by OnlyLs");
    assert_eq!(declined.error_kind, Some(cheng_host::ErrorKind::ApprovalDenied));
    assert!(!ws.path().join("made-by-shell").exists());
}

/// A new plugin author follows the README in a fresh directory outside the repository:
/// the three files (the SDK path pointed at this checkout, as the README says), `cargo
/// build --release`, `cheng plugin inspect` for the pin, the `cheng.toml` of step 3, and
/// the call — each step as a command, with default state locations under a fresh home.
#[test]
fn a_new_user_follows_the_readme_from_nothing_to_a_called_tool() {
    let repo = util::repo();
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("my-first-tool");
    // Step 1: the three files.
    for file in ["Cargo.toml", ".cargo/config.toml", "src/lib.rs"] {
        let mut text = readme_block(&readme, file);
        if file == "Cargo.toml" {
            assert!(text.contains("path = \"../../sdk\""), "the README's SDK path changed");
            text = text.replace("../../sdk", &repo.join("sdk").display().to_string());
        }
        std::fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
        std::fs::write(dir.join(file), text).unwrap();
    }
    // The user's own build, in their directory (deps come from the registry cache).
    let mut build = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cheng_guest_build::clean_env(&mut build);
    let out = build.args(["build", "--release"]).current_dir(&dir).output().unwrap();
    assert!(out.status.success(), "cargo build failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let wasm = dir.join("target/wasm32-wasip2/release/hello_tool.wasm");
    assert!(wasm.exists(), "step 2's path");
    let cheng = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_cheng"))
            .args(args)
            .current_dir(&dir)
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join(".config"))
            .env("XDG_STATE_HOME", home.path().join(".local/state"))
            .env("XDG_CACHE_HOME", home.path().join(".cache"))
            .env("XDG_DATA_HOME", home.path().join(".local/share"))
            .env_remove("CHENG_CONFIG")
            .env_remove("CHENG_AUTO_APPROVE")
            .env("CHENG_LOG", "error")
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    // Step 2: the pin.
    let (code, stdout, stderr) = cheng(&["plugin", "inspect", "target/wasm32-wasip2/release/hello_tool.wasm"]);
    assert_eq!(code, Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let sha = report["sha256"].as_str().unwrap();
    // Step 3: the README's cheng.toml with the pin filled in, and the call.
    let toml_at = readme.find("[roles.greeter]").unwrap();
    let block = &readme[toml_at..];
    let block = &block[..block.find("```").unwrap()];
    assert!(block.contains("<the sha256 from step 2>"));
    std::fs::write(dir.join("cheng.toml"), block.replace("<the sha256 from step 2>", sha)).unwrap();
    let line = readme.lines().find(|l| l.contains("cheng --config cheng.toml")).unwrap();
    let cmd = line.trim().trim_matches('`');
    let words = shlex_words(cmd);
    assert_eq!(words[0], "cheng");
    let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
    let (code, stdout, stderr) = cheng(&args);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let doc: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(doc["greeting"], "Hello, Ada!");
    // The host's state went to the fresh home's default locations, not into the project.
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, [".cargo", "Cargo.lock", "Cargo.toml", "cheng.toml", "src", "target"]);
}

/// Split a README command line into words (single quotes only, as the README uses).
fn shlex_words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in s.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

/// The README's configuration reference is a file the host accepts: every key it shows
/// exists where it shows it, with a value of the right shape.
#[test]
fn the_readme_configuration_reference_parses() {
    let readme = std::fs::read_to_string(util::repo().join("README.md")).unwrap();
    let at = readme.find("## Configuration (`cheng.toml`)").expect("the README has a configuration section");
    let rest = &readme[at..];
    let start = rest.find("```toml\n").unwrap() + "```toml\n".len();
    let block = &rest[start..start + rest[start..].find("```").unwrap()];
    assert!(block.contains("[web]") && block.contains("[web.search]") && block.contains("net = "));
    if let Err(e) = cheng_host::policy::Config::from_toml_str(block, "README.md") {
        panic!("the README's configuration does not parse: {e}");
    }
}
