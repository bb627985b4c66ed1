//! read_file and list_dir on real files: ranges, caps, binary refusal, symlinks, skips.

use std::os::unix::fs::symlink;

use cheng_host::{Context, ErrorKind, Host, Status};
use serde_json::{Value, json};

use crate::util;

async fn host() -> Host {
    util::host("", vec![]).await
}

async fn call(h: &Host, ws: &std::path::Path, tool: &str, input: Value) -> cheng_host::ToolResult {
    h.call(&Context::new(ws), tool, input).await
}

#[tokio::test(flavor = "multi_thread")]
async fn read_file_ranges_and_counts() {
    let h = host().await;
    let ws = util::workspace();
    std::fs::write(ws.path().join("f.txt"), "a\nb\nc\nd").unwrap();
    // Whole file; a last line without newline counts.
    let r = call(&h, ws.path(), "read_file", json!({"path": "f.txt"})).await;
    assert_eq!(r.output["content"], "a\nb\nc\nd");
    assert_eq!(r.output["total_lines"], 4);
    assert_eq!(r.output["summary"], "Read all 4 lines of f.txt");
    // A range.
    let r = call(&h, ws.path(), "read_file", json!({"path": "f.txt", "start_line": 2, "end_line": 3})).await;
    assert_eq!(r.output["content"], "b\nc\n");
    assert_eq!(r.output["summary"], "Read lines 2-3 of 4 of f.txt");
    // An end past the end is clamped.
    let r = call(&h, ws.path(), "read_file", json!({"path": "f.txt", "start_line": 3, "end_line": 99})).await;
    assert_eq!(r.output["content"], "c\nd");
    assert_eq!(r.output["end_line"], 4);
    // A start past the end is an error that says how long the file is.
    let r = call(&h, ws.path(), "read_file", json!({"path": "f.txt", "start_line": 9})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgument));
    assert!(r.output["error"].as_str().unwrap().contains("has 4 lines"));
    // CRLF line endings are kept as they are.
    std::fs::write(ws.path().join("crlf.txt"), "x\r\ny\r\n").unwrap();
    let r = call(&h, ws.path(), "read_file", json!({"path": "crlf.txt", "start_line": 2})).await;
    assert_eq!(r.output["content"], "y\r\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn read_file_caps_and_binary() {
    let h = host().await;
    let ws = util::workspace();
    let big: String = (1..=1000).map(|i| format!("line {i:04}\n")).collect();
    std::fs::write(ws.path().join("big.txt"), &big).unwrap();
    // max_bytes cuts at a line boundary and says where to continue.
    let r = call(&h, ws.path(), "read_file", json!({"path": "big.txt", "max_bytes": 95})).await;
    assert_eq!(r.output["truncated"], true);
    assert_eq!(r.output["end_line"], 9);
    assert_eq!(r.output["content"].as_str().unwrap().len(), 90);
    assert!(r.output["summary"].as_str().unwrap().contains("Continue with start_line=10"), "{}", r.output);
    // Above the maximum is a bad argument naming the field.
    let r = call(&h, ws.path(), "read_file", json!({"path": "big.txt", "max_bytes": 2_000_000})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::InvalidArgument));
    assert!(r.output["error"].as_str().unwrap().contains("max_bytes"), "{}", r.output);
    // A NUL byte in the first 8 KiB: refused as binary.
    let mut bin = vec![b'a'; 8000];
    bin.push(0);
    std::fs::write(ws.path().join("bin.dat"), &bin).unwrap();
    let r = call(&h, ws.path(), "read_file", json!({"path": "bin.dat"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::BinaryFile), "{}", r.output);
    // A NUL after the first 8 KiB is not sniffed.
    let mut late = vec![b'a'; 9000];
    late.push(0);
    std::fs::write(ws.path().join("late.dat"), &late).unwrap();
    let r = call(&h, ws.path(), "read_file", json!({"path": "late.dat"})).await;
    assert_eq!(r.status, Status::Ok);
    // A single huge line is cut inside the line, and the summary says so.
    std::fs::write(ws.path().join("long.txt"), "y".repeat(5000)).unwrap();
    let r = call(&h, ws.path(), "read_file", json!({"path": "long.txt", "max_bytes": 1000})).await;
    assert_eq!(r.output["content"].as_str().unwrap().len(), 1000);
    assert!(r.output["summary"].as_str().unwrap().contains("alone is longer than max_bytes"));
    // A directory is not a file.
    let r = call(&h, ws.path(), "read_file", json!({"path": "docs"})).await;
    assert!(r.output["error"].as_str().unwrap().contains("use list_dir"));
}

#[tokio::test(flavor = "multi_thread")]
async fn read_file_paths_follow_the_guard() {
    let h = host().await;
    let ws = util::workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("s.txt"), "secret").unwrap();
    symlink(outside.path().join("s.txt"), ws.path().join("out_link")).unwrap();
    symlink("inside.txt", ws.path().join("in_link")).unwrap();
    let root = std::fs::canonicalize(ws.path()).unwrap().display().to_string();
    // Escapes quote the root.
    let r = call(&h, ws.path(), "read_file", json!({"path": "../x"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused));
    assert_eq!(r.output["error"], format!("Refusing path \"../x\": it escapes the workspace root \"{root}\""));
    // Symlinks are refused, pointing out or in.
    for p in ["out_link", "in_link"] {
        let r = call(&h, ws.path(), "read_file", json!({"path": p})).await;
        assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{p}: {}", r.output);
        assert!(r.output["error"].as_str().unwrap().contains("symbolic link"));
    }
    // Absolute paths inside the root work; drive-relative forms do not.
    let r = call(&h, ws.path(), "read_file", json!({"path": format!("{root}/inside.txt")})).await;
    assert_eq!(r.output["content"], "inside");
    let r = call(&h, ws.path(), "read_file", json!({"path": "C:foo"})).await;
    assert_eq!(r.output["error"], "Refusing drive-relative path \"C:foo\"");
    // Names with spaces are fine.
    std::fs::write(ws.path().join("a b.txt"), "spaced").unwrap();
    let r = call(&h, ws.path(), "read_file", json!({"path": "a b.txt"})).await;
    assert_eq!(r.output["content"], "spaced");
}

#[tokio::test(flavor = "multi_thread")]
async fn list_dir_depth_caps_and_skips() {
    let h = host().await;
    let ws = util::workspace();
    std::fs::create_dir_all(ws.path().join(".git/objects")).unwrap();
    std::fs::create_dir_all(ws.path().join("node_modules/x")).unwrap();
    std::fs::create_dir_all(ws.path().join("src/a/b")).unwrap();
    std::fs::write(ws.path().join("src/a/b/deep.rs"), "x").unwrap();
    std::fs::write(ws.path().join(".hidden"), "h").unwrap();
    symlink("inside.txt", ws.path().join("link")).unwrap();
    // One level, sorted, with kinds and sizes; .git and node_modules skipped and named.
    let r = call(&h, ws.path(), "list_dir", json!({})).await;
    let names: Vec<&str> =
        r.output["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, [".hidden", "docs", "inside.txt", "link", "out", "src"]);
    assert_eq!(r.output["skipped"], json!([".git", "node_modules"]));
    let inside = r.output["entries"].as_array().unwrap().iter().find(|e| e["name"] == "inside.txt").unwrap();
    assert_eq!(inside["kind"], "file");
    assert_eq!(inside["size"], 6);
    let link = r.output["entries"].as_array().unwrap().iter().find(|e| e["name"] == "link").unwrap();
    assert_eq!(link["kind"], "symlink");
    // Hidden names can be left out.
    let r = call(&h, ws.path(), "list_dir", json!({"include_hidden": false})).await;
    assert!(!r.output.to_string().contains(".hidden"));
    // Deeper listings name entries by relative path.
    let r = call(&h, ws.path(), "list_dir", json!({"path": "src", "max_depth": 3})).await;
    let names: Vec<&str> =
        r.output["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "a/b", "a/b/deep.rs"]);
    // max_entries truncates and says what to do.
    let r = call(&h, ws.path(), "list_dir", json!({"max_entries": 2})).await;
    assert_eq!(r.output["entries"].as_array().unwrap().len(), 2);
    assert_eq!(r.output["truncated"], true);
    assert!(r.output["summary"].as_str().unwrap().contains("list a subdirectory"));
    // Depth above 8 is refused naming the field.
    let r = call(&h, ws.path(), "list_dir", json!({"max_depth": 9})).await;
    assert!(r.output["error"].as_str().unwrap().contains("max_depth"), "{}", r.output);
    // Listing a file is not listing a directory.
    let r = call(&h, ws.path(), "list_dir", json!({"path": "inside.txt"})).await;
    assert!(r.output["error"].as_str().unwrap().contains("use read_file"));
}
