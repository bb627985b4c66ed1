//! The file toolset on real files: find_files, read_files, search_files, write_file,
//! edit_file, apply_patch, and the pathless think and todo_write.

use std::os::unix::fs::{PermissionsExt, symlink};

use cheng_host::{Context, ErrorKind, Host, Status, ToolResult};
use serde_json::{Value, json};

use crate::util;

async fn host() -> Host {
    util::host("", vec![]).await
}

async fn call(h: &Host, ws: &std::path::Path, tool: &str, input: Value) -> ToolResult {
    h.call(&Context::new(ws), tool, input).await
}

fn err(r: &ToolResult) -> &str {
    r.output["error"].as_str().unwrap_or_default()
}

/// A small git-like project: sources, an ignored build dir, a hidden dir.
fn project() -> tempfile::TempDir {
    let ws = util::workspace();
    let p = ws.path();
    for d in ["src/util", "target/debug", ".github", ".git/info"] {
        std::fs::create_dir_all(p.join(d)).unwrap();
    }
    std::fs::write(p.join(".gitignore"), "target/\n*.log\n").unwrap();
    std::fs::write(p.join(".git/info/exclude"), "secret.txt\n").unwrap();
    std::fs::write(p.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(p.join("src/main.rs"), "fn main() {\n    let answer = 42;\n    println!(\"{answer}\");\n}\n")
        .unwrap();
    std::fs::write(p.join("src/util/mod.rs"), "pub fn helper() -> u32 {\n    42\n}\n").unwrap();
    std::fs::write(p.join("target/debug/gen.rs"), "fn generated() {}\n").unwrap();
    std::fs::write(p.join("build.log"), "answer 42\n").unwrap();
    std::fs::write(p.join("secret.txt"), "answer 42\n").unwrap();
    std::fs::write(p.join(".github/ci.yml"), "answer: 42\n").unwrap();
    std::fs::write(p.join("my notes.md"), "# Notes\nThe answer is 42.\n").unwrap();
    ws
}

fn paths(r: &ToolResult) -> Vec<String> {
    r.output["paths"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn find_files_globs_and_ignore_rules() {
    let h = host().await;
    let ws = project();
    // **/*.rs, honouring .gitignore (target/) in a git repository.
    let r = call(&h, ws.path(), "find_files", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(paths(&r), ["src/main.rs", "src/util/mod.rs"], "{}", r.output);
    // A pattern without "/" matches names at any depth.
    let r = call(&h, ws.path(), "find_files", json!({"pattern": "mod.rs"})).await;
    assert_eq!(paths(&r), ["src/util/mod.rs"]);
    // Ignore rules off: the ignored files appear; .git never does.
    let r = call(&h, ws.path(), "find_files", json!({"pattern": "*", "respect_gitignore": false})).await;
    let all = paths(&r);
    assert!(
        all.contains(&"target/debug/gen.rs".to_string())
            && all.contains(&"build.log".to_string())
            && all.contains(&"secret.txt".to_string()),
        "{all:?}"
    );
    assert!(!all.iter().any(|p| p.starts_with(".git/")), "{all:?}");
    // .git/info/exclude and *.log are honoured by default; hidden files only on request.
    let r = call(&h, ws.path(), "find_files", json!({"pattern": "*"})).await;
    let all = paths(&r);
    assert!(!all.contains(&"secret.txt".to_string()) && !all.contains(&"build.log".to_string()));
    assert!(!all.contains(&".github/ci.yml".to_string()));
    let r = call(&h, ws.path(), "find_files", json!({"pattern": "*.yml", "include_hidden": true})).await;
    assert_eq!(paths(&r), [".github/ci.yml"]);
    // Under a sub-path; names with spaces.
    let r = call(&h, ws.path(), "find_files", json!({"pattern": "*.md"})).await;
    assert_eq!(paths(&r), ["docs/a.md", "my notes.md"]);
    let r = call(&h, ws.path(), "find_files", json!({"pattern": "*.rs", "path": "src/util"})).await;
    assert_eq!(paths(&r), ["src/util/mod.rs"]);
    // max_results truncates and says how to narrow.
    let r = call(&h, ws.path(), "find_files", json!({"pattern": "**/*", "max_results": 2})).await;
    assert_eq!(paths(&r).len(), 2);
    assert_eq!(r.output["truncated"], true);
    assert!(r.output["summary"].as_str().unwrap().contains("Narrow the pattern"));
    // A bad glob is a bad argument naming the field.
    let r = call(&h, ws.path(), "find_files", json!({"pattern": "a[b"})).await;
    assert!(err(&r).starts_with("pattern \"a[b\" is not a valid glob"), "{}", r.output);
}

#[tokio::test(flavor = "multi_thread")]
async fn search_files_regex_literal_context_and_caps() {
    let h = host().await;
    let ws = project();
    // A regex, with the ignore rules: only the non-ignored, non-hidden hits.
    let r = call(&h, ws.path(), "search_files", json!({"pattern": r"\b42\b"})).await;
    let hits: Vec<(String, u64, u64)> = r.output["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["path"].as_str().unwrap().to_string(), m["line"].as_u64().unwrap(), m["column"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        hits,
        [("my notes.md".to_string(), 2, 15), ("src/main.rs".to_string(), 2, 18), ("src/util/mod.rs".to_string(), 2, 5)],
        "{}",
        r.output
    );
    // Context lines before and after.
    let r =
        call(&h, ws.path(), "search_files", json!({"pattern": "let answer", "context_lines": 1, "glob": "*.rs"})).await;
    let m = &r.output["matches"][0];
    assert_eq!(m["before"], json!(["fn main() {"]));
    assert_eq!(m["after"], json!(["    println!(\"{answer}\");"]));
    // Literal mode: regex metacharacters are plain text.
    let r = call(&h, ws.path(), "search_files", json!({"pattern": "{answer}", "literal": true})).await;
    assert_eq!(r.output["matches"].as_array().unwrap().len(), 1);
    // Case-insensitive.
    let r = call(&h, ws.path(), "search_files", json!({"pattern": "NOTES", "case_insensitive": true})).await;
    assert_eq!(r.output["matches"][0]["path"], "my notes.md");
    // max_matches stops the search and says so.
    let r = call(&h, ws.path(), "search_files", json!({"pattern": "4", "max_matches": 1})).await;
    assert_eq!(r.output["truncated"], true);
    assert!(r.output["summary"].as_str().unwrap().contains("max_matches"));
    // Large files are skipped and counted; binary files are not matched.
    std::fs::write(ws.path().join("big.txt"), "42\n".repeat(1000)).unwrap();
    let mut bin = b"42\0".to_vec();
    bin.extend_from_slice(b"42\n");
    std::fs::write(ws.path().join("bin.dat"), &bin).unwrap();
    let r = call(&h, ws.path(), "search_files", json!({"pattern": "42", "max_file_bytes": 1000})).await;
    assert_eq!(r.output["files_skipped_large"], 1);
    assert!(!r.output.to_string().contains("bin.dat"), "{}", r.output);
    // Files on both sides of what one batch reads of each file (64 KiB), in path order;
    // what is over max_file_bytes (1 MiB by default) is skipped and counted.
    let sz = ws.path().join("sz");
    std::fs::create_dir(&sz).unwrap();
    std::fs::write(sz.join("a.txt"), "zz_boundary\n").unwrap();
    std::fs::write(sz.join("b.txt"), "x\n".repeat(100_000) + "zz_boundary\n").unwrap();
    std::fs::write(sz.join("c.txt"), "zz_boundary\n").unwrap();
    std::fs::write(sz.join("d.txt"), "x\n".repeat(600_000) + "zz_boundary\n").unwrap();
    let r = call(&h, ws.path(), "search_files", json!({"pattern": "zz_boundary", "path": "sz"})).await;
    let hits: Vec<(&str, u64)> = r.output["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["path"].as_str().unwrap(), m["line"].as_u64().unwrap()))
        .collect();
    assert_eq!(hits, [("sz/a.txt", 1), ("sz/b.txt", 100_001), ("sz/c.txt", 1)], "{}", r.output);
    assert_eq!((r.output["files_searched"].as_u64(), r.output["files_skipped_large"].as_u64()), (Some(3), Some(1)));
    let r = call(
        &h,
        ws.path(),
        "search_files",
        json!({"pattern": "zz_boundary", "path": "sz", "max_file_bytes": 2_000_000}),
    )
    .await;
    assert_eq!(r.output["matches"].as_array().unwrap().len(), 4, "{}", r.output);
    let r =
        call(&h, ws.path(), "search_files", json!({"pattern": "zz_boundary", "path": "sz", "max_file_bytes": 100_000}))
            .await;
    assert_eq!(r.output["files_skipped_large"], 2, "{}", r.output);
    // An invalid regex says how to search for it literally.
    let r = call(&h, ws.path(), "search_files", json!({"pattern": "fn main("})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgument));
    assert!(err(&r).contains("literal=true"));
    // Context above 5 is refused naming the field.
    let r = call(&h, ws.path(), "search_files", json!({"pattern": "x", "context_lines": 6})).await;
    assert!(err(&r).contains("context_lines"));
}

#[tokio::test(flavor = "multi_thread")]
async fn search_files_patterns_match_within_one_line() {
    let h = host().await;
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("split.txt"), "alpha foo\nbar omega\n  gamma\nété end\n").unwrap();
    std::fs::write(ws.path().join("joined.txt"), "x\nalpha foo  bar omega\n").unwrap();
    let hits = |r: &ToolResult| -> Vec<(String, u64, u64)> {
        r.output["matches"]
            .as_array()
            .unwrap_or_else(|| panic!("{}", r.output))
            .iter()
            .map(|m| {
                (m["path"].as_str().unwrap().to_string(), m["line"].as_u64().unwrap(), m["column"].as_u64().unwrap())
            })
            .collect()
    };
    let search = |input: Value| call(&h, ws.path(), "search_files", input);
    // Whitespace, negated classes and a dot that matches line breaks stay within a line:
    // only the file where the words share a line matches.
    for pattern in [r"foo\s+bar", r"foo[^x]+bar", r"(?s)foo.+bar", r"foo[\s\S]*bar"] {
        let r = search(json!({"pattern": pattern})).await;
        assert_eq!(hits(&r), [("joined.txt".to_string(), 2, 7)], "{pattern}: {}", r.output);
    }
    // ^ and $ hold at every line's start and end, \A and \z too.
    for pattern in [r"^\s+gamma$", r"\A\s+gamma\z"] {
        let r = search(json!({"pattern": pattern})).await;
        assert_eq!(hits(&r), [("split.txt".to_string(), 3, 1)], "{pattern}: {}", r.output);
    }
    let r = search(json!({"pattern": r"omega$"})).await;
    assert_eq!(hits(&r), [("joined.txt".to_string(), 2, 16), ("split.txt".to_string(), 2, 5)], "{}", r.output);
    // Unicode classes and case folding.
    let r = search(json!({"pattern": r"^\w+ END", "case_insensitive": true})).await;
    assert_eq!(hits(&r), [("split.txt".to_string(), 4, 1)], "{}", r.output);
    let r = search(json!({"pattern": "ÉTÉ", "case_insensitive": true, "literal": true})).await;
    assert_eq!(hits(&r), [("split.txt".to_string(), 4, 1)], "{}", r.output);
    // A pattern that spells out a line break can never match one line: refused, saying so.
    for input in [
        json!({"pattern": "foo\nbar"}),
        json!({"pattern": r"foo\nbar"}),
        json!({"pattern": "foo\nbar", "literal": true}),
    ] {
        let r = search(input.clone()).await;
        assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgument), "{input}: {}", r.output);
        assert!(err(&r).contains("line break"), "{input}: {}", r.output);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn read_files_isolates_failures_and_applies_caps() {
    let h = host().await;
    let ws = project();
    std::fs::write(ws.path().join("bin.dat"), b"\0\0").unwrap();
    let r = call(
        &h,
        ws.path(),
        "read_files",
        json!({"paths": ["src/main.rs", "nope.rs", "bin.dat", "../x", "src/util/mod.rs"]}),
    )
    .await;
    assert_eq!(r.status, Status::Ok);
    let files = r.output["files"].as_array().unwrap();
    assert_eq!(files[0]["content"].as_str().unwrap().lines().count(), 4);
    assert_eq!(files[1]["error_kind"], "LOCAL_EXECUTOR_NOT_FOUND");
    assert_eq!(files[2]["error_kind"], "LOCAL_EXECUTOR_BINARY_FILE");
    assert_eq!(files[3]["error_kind"], "LOCAL_EXECUTOR_PATH_REFUSED");
    assert_eq!(files[4]["total_lines"], 3);
    assert!(r.output["summary"].as_str().unwrap().contains("3 could not be read"));
    // Per-file and total caps cut at line boundaries.
    let r = call(
        &h,
        ws.path(),
        "read_files",
        json!({"paths": ["src/main.rs", "src/util/mod.rs"], "max_bytes_per_file": 20, "max_total_bytes": 30}),
    )
    .await;
    let files = r.output["files"].as_array().unwrap();
    assert_eq!(files[0]["content"], "fn main() {\n");
    assert_eq!(files[0]["truncated"], true);
    assert!(files[1]["content"].as_str().unwrap().len() <= 18);
    // More than 50 paths is refused.
    let many: Vec<String> = (0..51).map(|i| format!("f{i}")).collect();
    let r = call(&h, ws.path(), "read_files", json!({"paths": many})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgument));
}

#[tokio::test(flavor = "multi_thread")]
async fn write_file_creates_replaces_and_refuses() {
    let h = host().await;
    let ws = project();
    let p = ws.path();
    // Create, replace, refuse to overwrite.
    let r = call(&h, p, "write_file", json!({"path": "new.txt", "content": "one\n"})).await;
    assert_eq!(r.output["created"], true, "{}", r.output);
    assert_eq!(r.output["bytes_written"], 4);
    let r = call(&h, p, "write_file", json!({"path": "new.txt", "content": "two\n"})).await;
    assert_eq!(r.output["created"], false);
    assert_eq!(std::fs::read_to_string(p.join("new.txt")).unwrap(), "two\n");
    let r = call(&h, p, "write_file", json!({"path": "new.txt", "content": "three", "overwrite": false})).await;
    assert!(err(&r).contains("overwrite=true"), "{}", r.output);
    assert_eq!(std::fs::read_to_string(p.join("new.txt")).unwrap(), "two\n");
    // Missing directories only with create_dirs.
    let r = call(&h, p, "write_file", json!({"path": "a b/c/d.txt", "content": "x"})).await;
    assert!(err(&r).contains("create_dirs=true"), "{}", r.output);
    let r = call(&h, p, "write_file", json!({"path": "a b/c/d.txt", "content": "x", "create_dirs": true})).await;
    assert_eq!(r.status, Status::Ok);
    // An executable keeps its mode.
    std::fs::write(p.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(p.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    call(&h, p, "write_file", json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"})).await;
    assert_eq!(std::fs::metadata(p.join("run.sh")).unwrap().permissions().mode() & 0o777, 0o755);
    // .git is never written, at any depth; nor through a symlink; nor outside.
    for path in [".git/config", "sub/.git/HEAD"] {
        let r = call(&h, p, "write_file", json!({"path": path, "content": "x", "create_dirs": true})).await;
        assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{path}: {}", r.output);
    }
    assert!(!p.join("sub/.git").exists());
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), p.join("out_link")).unwrap();
    let r = call(&h, p, "write_file", json!({"path": "out_link/x.txt", "content": "x"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused));
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
    let r = call(&h, p, "write_file", json!({"path": "../escape.txt", "content": "x"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused));
    // No temporary file is left behind.
    let names = walk_names(p);
    assert!(!names.iter().any(|n| n.contains("cheng-tmp")), "{names:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_config_and_state_dir_in_use_are_never_written() {
    let ws = project();
    let cfg = ws.path().join("cheng.toml");
    std::fs::write(&cfg, "").unwrap();
    let mut b = cheng_host::HostBuilder::new();
    b.config(cheng_host::policy::Config::load(&cfg).unwrap());
    b.state_dir(ws.path().join("state")).cache_dir(util::shared_state().join("cache"));
    let h = b.build().await.unwrap();
    // Given: a found workspace holding the state directory would be refused outright.
    let cx = cheng_host::Context::new(ws.path()).given(true);
    for path in ["cheng.toml", "state/settings.json", "state/audit.jsonl"] {
        let r = h.call(&cx, "write_file", json!({"path": path, "content": "pwned"})).await;
        assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{path}: {}", r.output);
    }
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), "");
    // Control: an ordinary file next to them is written.
    let r = h.call(&cx, "write_file", json!({"path": "cheng.toml.txt", "content": "fine"})).await;
    assert_eq!(r.status, Status::Ok);
}

#[tokio::test(flavor = "multi_thread")]
async fn edit_file_exact_unique_or_all() {
    let h = host().await;
    let ws = project();
    let p = ws.path();
    std::fs::write(p.join("e.txt"), "alpha\nbeta\nalpha\ngamma\n").unwrap();
    // Several matches: refused with the lines and both routes; nothing changes.
    let r = call(&h, p, "edit_file", json!({"path": "e.txt", "old_text": "alpha", "new_text": "A"})).await;
    assert!(
        err(&r).contains("appears 2 times") && err(&r).contains("lines 1, 3") && err(&r).contains("replace_all"),
        "{}",
        r.output
    );
    assert_eq!(std::fs::read_to_string(p.join("e.txt")).unwrap(), "alpha\nbeta\nalpha\ngamma\n");
    // Unique with more context.
    let r =
        call(&h, p, "edit_file", json!({"path": "e.txt", "old_text": "beta\nalpha", "new_text": "beta\nALPHA"})).await;
    assert_eq!(r.output["replacements"], 1);
    assert_eq!(r.output["lines"], json!([2]));
    // replace_all.
    let r =
        call(&h, p, "edit_file", json!({"path": "e.txt", "old_text": "a\n", "new_text": "a!\n", "replace_all": true}))
            .await;
    assert_eq!(r.output["replacements"], 3, "{}", r.output);
    assert_eq!(r.output["lines"], json!([1, 2, 4]));
    assert_eq!(std::fs::read_to_string(p.join("e.txt")).unwrap(), "alpha!\nbeta!\nALPHA\ngamma!\n");
    // Not found: hints at CRLF and at whitespace.
    std::fs::write(p.join("crlf.txt"), "one\r\ntwo\r\n").unwrap();
    let r = call(&h, p, "edit_file", json!({"path": "crlf.txt", "old_text": "one\ntwo", "new_text": "x"})).await;
    assert!(err(&r).contains("CRLF"), "{}", r.output);
    let r = call(&h, p, "edit_file", json!({"path": "src/main.rs", "old_text": "let  answer = 42;", "new_text": "x"}))
        .await;
    assert!(err(&r).contains("whitespace"), "{}", r.output);
    // Binary and missing files.
    std::fs::write(p.join("b.bin"), b"a\0b").unwrap();
    let r = call(&h, p, "edit_file", json!({"path": "b.bin", "old_text": "a", "new_text": "b"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::BinaryFile));
    let r = call(&h, p, "edit_file", json!({"path": "gone.txt", "old_text": "a", "new_text": "b"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotFound));
    // The executable bit survives an edit.
    std::fs::write(p.join("x.sh"), "echo a\n").unwrap();
    std::fs::set_permissions(p.join("x.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    call(&h, p, "edit_file", json!({"path": "x.sh", "old_text": "a", "new_text": "b"})).await;
    assert_eq!(std::fs::metadata(p.join("x.sh")).unwrap().permissions().mode() & 0o777, 0o750);
}

const GOOD_PATCH: &str = "diff --git a/src/main.rs b/src/main.rs
index 1111111..2222222 100644
--- a/src/main.rs
+++ b/src/main.rs
@@ -1,4 +1,4 @@
 fn main() {
-    let answer = 42;
+    let answer = 43;
     println!(\"{answer}\");
 }
diff --git a/added.txt b/added.txt
new file mode 100644
--- /dev/null
+++ b/added.txt
@@ -0,0 +1,2 @@
+new
+file
diff --git a/my notes.md b/my notes.md
deleted file mode 100644
--- a/my notes.md
+++ /dev/null
@@ -1,2 +0,0 @@
-# Notes
-The answer is 42.
";

#[tokio::test(flavor = "multi_thread")]
async fn apply_patch_is_all_or_nothing() {
    let h = host().await;
    let ws = project();
    let p = ws.path();
    // Modify, add and delete in one patch.
    let r = call(&h, p, "apply_patch", json!({"patch": GOOD_PATCH})).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    assert_eq!(
        r.output["files"],
        json!([
            {"path": "src/main.rs", "action": "modified", "hunks": 1},
            {"path": "added.txt", "action": "added", "hunks": 1},
            {"path": "my notes.md", "action": "deleted", "hunks": 1},
        ])
    );
    assert!(std::fs::read_to_string(p.join("src/main.rs")).unwrap().contains("43"));
    assert_eq!(std::fs::read_to_string(p.join("added.txt")).unwrap(), "new\nfile\n");
    assert!(!p.join("my notes.md").exists());
    // A second file whose hunk does not apply: nothing changes, and the message names it.
    let bad = "--- a/src/util/mod.rs\n+++ b/src/util/mod.rs\n@@ -1,3 +1,3 @@\n pub fn helper() -> u32 {\n-    42\n+    7\n }\n--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1,2 +1,2 @@\n fn main() {\n-    let answer = 1000;\n+    let answer = 0;\n";
    let before_util = std::fs::read_to_string(p.join("src/util/mod.rs")).unwrap();
    let r = call(&h, p, "apply_patch", json!({"patch": bad})).await;
    assert!(err(&r).contains("hunk #1 for src/main.rs") && err(&r).contains("No file was changed"), "{}", r.output);
    assert_eq!(std::fs::read_to_string(p.join("src/util/mod.rs")).unwrap(), before_util);
    // A header naming a path outside the workspace is refused; so is .git.
    let out = "--- /dev/null\n+++ ../evil.txt\n@@ -0,0 +1 @@\n+x\n";
    let r = call(&h, p, "apply_patch", json!({"patch": out})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{}", r.output);
    let git = "--- /dev/null\n+++ b/.git/hooks/post-commit\n@@ -0,0 +1 @@\n+x\n";
    let r = call(&h, p, "apply_patch", json!({"patch": git})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{}", r.output);
    // Not a patch at all.
    let r = call(&h, p, "apply_patch", json!({"patch": "hello"})).await;
    assert!(err(&r).contains("no file patches found"));
}

#[tokio::test(flavor = "multi_thread")]
async fn think_and_todo_write_per_run() {
    let h = host().await;
    let ws = util::workspace();
    let r =
        h.call(&Context::new(ws.path()), "think", json!({"thought": "first read the README, then the tests"})).await;
    assert_eq!(r.output["summary"], "Noted a thought of 7 words");
    let run_a = Context::new(ws.path()).run("plan-a");
    let plan = json!({"todos": [{"id": "1", "content": "read", "status": "completed"}, {"id": "2", "content": "fix", "status": "in_progress"}]});
    let r = h.call(&run_a, "todo_write", plan.clone()).await;
    assert_eq!(r.output["previous"], json!([]));
    assert!(r.output["summary"].as_str().unwrap().contains("1 in progress, 1 completed"));
    // The next call of the same run sees the stored plan as previous.
    let r = h.call(&run_a, "todo_write", json!({"todos": []})).await;
    assert_eq!(r.output["previous"], plan["todos"]);
    // Another run has its own plan.
    let r = h.call(&Context::new(ws.path()).run("plan-b"), "todo_write", json!({"todos": []})).await;
    assert_eq!(r.output["previous"], json!([]));
    // Duplicate ids are refused.
    let r = h.call(&run_a, "todo_write", json!({"todos": [{"id": "1", "content": "a", "status": "pending"}, {"id": "1", "content": "b", "status": "pending"}]})).await;
    assert!(err(&r).contains("appears twice"));
    // Nothing was written into the workspace.
    assert!(!walk_names(ws.path()).iter().any(|n| n.contains("plan")));
}

#[tokio::test(flavor = "multi_thread")]
async fn names_that_are_not_utf8_are_listed_escaped_and_refused_by_readers() {
    use std::os::unix::ffi::OsStrExt;
    let h = host().await;
    let ws = util::workspace();
    let bad = std::ffi::OsStr::from_bytes(b"bad\xffname.txt");
    std::fs::write(ws.path().join("docs").join(bad), "x").unwrap();
    let r = call(&h, ws.path(), "list_dir", json!({"path": "docs"})).await;
    let names: Vec<&str> =
        r.output["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    // Both entries listed; the bad one escaped and flagged, without failing the call.
    assert_eq!(names, ["a.md", "bad\\xFFname.txt"], "{}", r.output);
    assert_eq!(r.output["not_utf8"], json!(["bad\\xFFname.txt"]));
    // The walkers skip it by name and still see every other file of the directory.
    for i in 0..5 {
        std::fs::write(ws.path().join(format!("docs/f{i}.md")), "findme\n").unwrap();
    }
    let r = call(&h, ws.path(), "find_files", json!({"pattern": "*.md"})).await;
    assert_eq!(paths(&r).len(), 6, "{}", r.output);
    assert_eq!(r.output["skipped"], json!(["docs/bad\\xFFname.txt: the name is not valid UTF-8"]));
    let r = call(&h, ws.path(), "search_files", json!({"pattern": "findme"})).await;
    assert_eq!(r.output["matches"].as_array().unwrap().len(), 5, "{}", r.output);
    // A reader given the escaped name says it does not exist rather than failing oddly.
    let r = call(&h, ws.path(), "read_file", json!({"path": "docs/bad\\xFFname.txt"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotFound));
}

fn walk_names(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        out.push(e.file_name().to_string_lossy().into_owned());
        if e.file_type().unwrap().is_dir() {
            out.extend(walk_names(&e.path()));
        }
    }
    out
}
