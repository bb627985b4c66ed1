//! find_files and search_files list and match exactly what ripgrep does on a generated
//! tree with ignore files at several levels (`rg --no-ignore-global`, sorted by path).

use cheng_host::{Context, Status};
use serde_json::json;

use crate::util;

fn tree() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let p = ws.path();
    let w = |rel: &str, body: &str| {
        let path = p.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    };
    std::fs::create_dir_all(p.join(".git/info")).unwrap();
    w(".git/HEAD", "ref: refs/heads/main\n");
    // Anchored rules are relative to the directory they apply to: the repository's
    // root for `.git/info/exclude`, the file's own directory for a `.gitignore`.
    w(".git/info/exclude", "*.secret\n/src/m09/f2.rs\n");
    w(".gitignore", "*.log\nbuild/\n!keep.log\n/rootonly.txt\n");
    w(".ignore", "vendor/\n");
    w("rootonly.txt", "needle\n");
    w("keep.log", "needle\n");
    w("drop.log", "needle\n");
    w("a.secret", "needle\n");
    w("vendor/lib.rs", "needle\n");
    w("build/out.rs", "needle\n");
    w(".hidden/x.rs", "needle\n");
    for d in 0..12 {
        for f in 0..8 {
            let body = if (d + f) % 3 == 0 { format!("line\nNeedle {d} {f}\nneedle\n") } else { "nothing\n".into() };
            w(&format!("src/m{d:02}/f{f}.rs"), &body);
        }
        w(&format!("src/m{d:02}/sub/rootonly.txt"), "needle here\n");
    }
    // Deeper rules override shallower ones.
    w("src/m03/.gitignore", "*.rs\n!f1.rs\n");
    w("src/m05/.ignore", "sub/\n");
    w("src/m04/.gitignore", "/f3.rs\nsub/rootonly.txt\n");
    w("src/m07/notes.log", "needle\n");
    ws
}

/// Whether ripgrep is here. CI installs it and requires it (`.ci/run`); on a machine
/// without it these comparisons are skipped, loudly.
fn have_rg() -> bool {
    let ok = std::process::Command::new("rg").arg("--version").output().is_ok_and(|o| o.status.success());
    util::require("ripgrep (rg), the reference for the equivalence checks", ok)
}

fn rg(dir: &std::path::Path, args: &[&str]) -> Vec<String> {
    let out = std::process::Command::new("rg")
        .args(["--no-ignore-global", "--sort", "path", "--no-config"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("ripgrep (rg) is installed: .ci/run installs it");
    String::from_utf8(out.stdout).unwrap().lines().map(|l| l.trim_start_matches("./").to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn find_files_lists_what_ripgrep_lists() {
    if !have_rg() {
        return;
    }
    let ws = tree();
    let h = util::host("", vec![]).await;
    let r = h.call(&Context::new(ws.path()), "find_files", json!({"pattern": "**/*"})).await;
    assert_eq!(r.status, Status::Ok);
    let ours: Vec<String> =
        r.output["paths"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect();
    let theirs = rg(ws.path(), &["--files"]);
    assert!(theirs.len() > 90, "{theirs:?}");
    assert_eq!(ours, theirs);
    // From a directory below the root: the ignore files above it apply too, anchored
    // rules from their own directories.
    for base in ["src", "src/m04"] {
        let r = h.call(&Context::new(ws.path()), "find_files", json!({"pattern": "**/*", "path": base})).await;
        let ours: Vec<String> =
            r.output["paths"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect();
        // `.git/info/exclude` names src/m09/f2.rs from the repository's root: an anchored
        // rule of a parent, which rg does not apply below its search root (see the git
        // reference below); git, and this walk, ignore the file.
        let mut theirs = rg(ws.path(), &["--files", base]);
        theirs.retain(|p| p != "src/m09/f2.rs");
        assert!(!theirs.iter().any(|p| p == "src/m04/f3.rs"), "{theirs:?}");
        assert!(theirs.iter().any(|p| p == "src/m04/f4.rs"), "{theirs:?}");
        assert_eq!(ours, theirs, "under {base}");
    }
    // An anchored rule in a parent's ignore file, naming a path below the searched
    // directory: git ignores the file; rg does not apply such a rule below its search
    // root, so the git CLI is the reference here.
    std::fs::write(ws.path().join(".gitignore"), "*.log\nbuild/\n!keep.log\n/rootonly.txt\n/src/m04/f5.rs\n").unwrap();
    let git = tempfile::tempdir().unwrap();
    let g = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).current_dir(git.path()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    g(&["init", "-q"]);
    std::fs::copy(ws.path().join(".gitignore"), git.path().join(".gitignore")).unwrap();
    std::fs::create_dir_all(git.path().join("src/m04")).unwrap();
    std::fs::copy(ws.path().join("src/m04/.gitignore"), git.path().join("src/m04/.gitignore")).unwrap();
    for f in ["f3.rs", "f4.rs", "f5.rs"] {
        std::fs::write(git.path().join("src/m04").join(f), "x\n").unwrap();
    }
    let untracked = g(&["ls-files", "--others", "--exclude-standard", "src/m04"]);
    let listed: Vec<&str> = untracked.lines().filter(|l| l.ends_with(".rs")).collect();
    assert_eq!(listed, ["src/m04/f4.rs"], "git's reference");
    let r = h.call(&Context::new(ws.path()), "find_files", json!({"pattern": "*.rs", "path": "src/m04"})).await;
    let ours: Vec<&str> = r.output["paths"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert!(
        ours.contains(&"src/m04/f4.rs") && !ours.contains(&"src/m04/f5.rs") && !ours.contains(&"src/m04/f3.rs"),
        "{ours:?}"
    );
    // With ignore rules off, both list the ignored files too (hidden ones still skipped).
    let r =
        h.call(&Context::new(ws.path()), "find_files", json!({"pattern": "**/*", "respect_gitignore": false})).await;
    let ours: Vec<String> =
        r.output["paths"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect();
    assert_eq!(ours, rg(ws.path(), &["--files", "--no-ignore"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn search_files_matches_what_ripgrep_matches() {
    if !have_rg() {
        return;
    }
    let ws = tree();
    let h = util::host("", vec![]).await;
    for (input, args) in [
        (
            json!({"pattern": "needle", "literal": true, "max_matches": 2000}),
            vec!["-n", "--no-heading", "-F", "needle"],
        ),
        (json!({"pattern": r"[Nn]eedle \d+", "max_matches": 2000}), vec!["-n", "--no-heading", r"[Nn]eedle \d+"]),
        // ripgrep's -g is an override (it can bring ignored files back); our glob only
        // narrows, so compare with ripgrep's unfiltered matches narrowed to *.rs.
        (
            json!({"pattern": "NEEDLE", "case_insensitive": true, "glob": "*.rs", "max_matches": 2000}),
            vec!["-n", "--no-heading", "-i", "NEEDLE"],
        ),
    ] {
        let r = h.call(&Context::new(ws.path()), "search_files", input.clone()).await;
        assert_eq!(r.status, Status::Ok, "{}", r.output);
        let ours: Vec<String> = r.output["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| format!("{}:{}:{}", m["path"].as_str().unwrap(), m["line"], m["text"].as_str().unwrap()))
            .collect();
        let mut theirs = rg(ws.path(), &args);
        if input.get("glob").is_some() {
            theirs.retain(|l| l.split(':').next().is_some_and(|p| p.ends_with(".rs")));
        }
        assert!(!theirs.is_empty());
        assert_eq!(ours, theirs, "{input}");
    }
}
