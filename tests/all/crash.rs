//! Killing the host in the middle of a write or a multi-file patch, at every point of
//! the write path, over 200 times: each file is afterwards entirely old or entirely new,
//! and no temporary file outlives the next write.

use std::io::Write as _;
use std::process::Stdio;

use crate::util;

const POINTS: [&str; 5] = ["tmpfile", "written", "synced", "linked", "renamed"];

/// Run `cheng call TOOL -` with `input` on stdin and a failpoint armed; true when the
/// process was killed (rather than finishing).
fn killed_call(ws: &std::path::Path, tool: &str, input: &serde_json::Value, failpoint: &str) -> bool {
    let mut child = util::cheng(ws)
        .args(["call", tool, "-"])
        .env("CHENG_FAILPOINT", failpoint)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    let status = child.wait().unwrap();
    !status.success() && status.code().is_none()
}

fn temps(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("cheng-tmp"))
        .collect()
}

#[test]
fn killed_writes_leave_old_or_new_never_a_mix() {
    let ws = util::workspace();
    let path = ws.path().join("data.txt");
    let old = "a".repeat(200_000);
    let new = "b".repeat(200_000);
    let mut kills = 0;
    for round in 0..30 {
        for point in POINTS {
            std::fs::write(&path, &old).unwrap();
            let input = serde_json::json!({"path": "data.txt", "content": new});
            assert!(killed_call(ws.path(), "write_file", &input, point), "{point}: the failpoint fired");
            kills += 1;
            let now = std::fs::read_to_string(&path).unwrap();
            assert!(now == old || now == new, "round {round}, {point}: a mixed file of {} bytes", now.len());
            // Before the rename the old file stands; after it, the new one.
            assert_eq!(now == new, point == "renamed", "{point}");
            // Only a kill between staging and renaming can leave the staged name...
            let left = temps(ws.path());
            assert!(left.is_empty() || point == "linked", "{point}: {left:?}");
            // ...and the next write of the same file clears it.
            let input = serde_json::json!({"path": "data.txt", "content": "done"});
            assert!(
                util::cheng(ws.path())
                    .args(["call", "write_file", &input.to_string()])
                    .output()
                    .unwrap()
                    .status
                    .success()
            );
            assert!(temps(ws.path()).is_empty());
        }
    }
    assert!(kills >= 150);
}

#[test]
fn killed_patches_leave_each_file_old_or_new() {
    let ws = util::workspace();
    let names = ["p1.txt", "p2.txt", "p3.txt"];
    let old: Vec<String> = (0..3).map(|i| format!("line {i}\n").repeat(5000)).collect();
    let mut patch = String::new();
    for (i, n) in names.iter().enumerate() {
        patch.push_str(&format!("--- a/{n}\n+++ b/{n}\n@@ -1,2 +1,2 @@\n-line {i}\n+LINE {i}\n line {i}\n"));
    }
    let input = serde_json::json!({"patch": patch});
    let mut kills = 0;
    for round in 0..5 {
        for point in POINTS {
            for nth in 1..=3 {
                for (n, content) in names.iter().zip(&old) {
                    std::fs::write(ws.path().join(n), content).unwrap();
                }
                assert!(killed_call(ws.path(), "apply_patch", &input, &format!("{point}:{nth}")), "{point}:{nth}");
                kills += 1;
                let mut new_files = 0;
                for (i, n) in names.iter().enumerate() {
                    let now = std::fs::read_to_string(ws.path().join(n)).unwrap();
                    let new = old[i].replacen(&format!("line {i}\n"), &format!("LINE {i}\n"), 1);
                    assert!(now == old[i] || now == new, "round {round}, {point}:{nth}: {n} is mixed");
                    new_files += usize::from(now == new);
                }
                // Files are written in order: those before the killed one are new.
                let expect = if point == "renamed" { nth } else { nth - 1 };
                assert_eq!(new_files, expect, "{point}:{nth}");
            }
        }
    }
    assert!(kills >= 75);
}
