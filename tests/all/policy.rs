//! Operator policy applied by the host: external workspaces, per-tool narrowing and
//! limits, protected paths handed to components.

use cheng_host::grant::{FsGrant, Grant};
use cheng_host::policy::Config;
use cheng_host::{Context, ErrorKind, HostBuilder, Status};
use serde_json::json;

use crate::util;

#[tokio::test(flavor = "multi_thread")]
async fn external_workspaces_can_be_refused() {
    let projects = tempfile::tempdir().unwrap();
    let inside = projects.path().join("p1");
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::write(inside.join("a.txt"), "a").unwrap();
    let outside = util::workspace();
    let cfg = format!("[workspaces]\nroot = {:?}\nallow_external = false\n", projects.path().display().to_string());
    let h = util::host(&cfg, vec![]).await;
    // Inside the workspaces root: fine.
    let r = h.call(&Context::new(&inside), "read_file", json!({"path": "a.txt"})).await;
    assert_eq!(r.status, Status::Ok);
    // Outside it: refused outright, quoting both.
    let r = h.call(&Context::new(outside.path()), "read_file", json!({"path": "inside.txt"})).await;
    assert_eq!(r.status, Status::Denied);
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused));
    assert!(r.output["error"].as_str().unwrap().contains("outside the workspaces root"));
    // With the switch on (the default), the same workspace works.
    let h = util::host(&format!("[workspaces]\nroot = {:?}\n", projects.path().display().to_string()), vec![]).await;
    let r = h.call(&Context::new(outside.path()), "read_file", json!({"path": "inside.txt"})).await;
    assert_eq!(r.status, Status::Ok);
}

#[tokio::test(flavor = "multi_thread")]
async fn config_narrows_a_builtin_and_sets_limits() {
    let ws = util::workspace();
    // read_file with its filesystem narrowed to none cannot read.
    let h = util::host("[tools.read_file]\nfs = \"none\"\n", vec![]).await;
    let r = h.call(&Context::new(ws.path()), "read_file", json!({"path": "inside.txt"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotGranted), "{}", r.output);
    // Control: list_dir, not narrowed, still lists.
    let r = h.call(&Context::new(ws.path()), "list_dir", json!({})).await;
    assert_eq!(r.status, Status::Ok);
    // A per-tool CPU deadline applies to that tool.
    let grant = Grant { fs: FsGrant::None, spawn: false, memory_mb: None, cpu_ms: None, net: vec![] };
    let h = util::host(
        "[roles.t]\ntools = [\"lp__probe\"]\n[tools.lp__probe]\ncpu_ms = 300\n",
        vec![util::plugin("lp", "hostile", grant)],
    )
    .await;
    let r = h.call(&Context::new(ws.path()).role("t"), "lp__probe", json!({"action": "loop"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Timeout));
    assert!(r.output["error"].as_str().unwrap().contains("300 ms"));
}

#[tokio::test(flavor = "multi_thread")]
async fn config_and_state_dir_inside_the_workspace_are_protected() {
    let ws = util::workspace();
    let cfg_path = ws.path().join("cheng.toml");
    std::fs::write(&cfg_path, "[roles.t]\ntools = [\"pp__probe\"]\n").unwrap();
    let mut b = HostBuilder::new();
    b.config(Config::load(&cfg_path).unwrap());
    b.state_dir(ws.path().join(".cheng-state")).cache_dir(util::shared_state().join("cache"));
    b.plugin(util::plugin(
        "pp",
        "hostile",
        Grant { fs: FsGrant::Read, spawn: false, memory_mb: None, cpu_ms: None, net: vec![] },
    ));
    let h = b.build().await.unwrap();
    // Given: a found workspace holding the state directory would be refused outright.
    let cx = Context::new(ws.path()).role("t").given(true);
    let protected = |target: &str| {
        let h = h.clone();
        let cx = cx.clone();
        let target = target.to_string();
        async move {
            h.call(&cx, "pp__probe", json!({"action": "protected", "target": target})).await.output["detail"].clone()
        }
    };
    // The config file, the state dir and anything in it, and .git at any depth.
    assert_eq!(protected("cheng.toml").await, "true");
    assert_eq!(protected(".cheng-state/audit.jsonl").await, "true");
    assert_eq!(protected(".git/config").await, "true");
    assert_eq!(protected("sub/.git/HEAD").await, "true");
    // Control: ordinary files are not.
    assert_eq!(protected("src/main.rs").await, "false");
    assert_eq!(protected("cheng.toml.bak").await, "false");
}
