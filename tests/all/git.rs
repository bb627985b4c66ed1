//! workspace_git against the git CLI on repositories made here: each operation's output
//! compared with the named git command (status --porcelain=v1 -uall, log, branch, show,
//! diff HEAD — which must also `git apply` back to the working tree), on loose and
//! packed objects and refs, a detached HEAD, an empty repository, ignored and excluded
//! files, names with spaces and tabs, binary files, renames (status, diff and show), a
//! submodule, a linked worktree, modes, symlinks, line-ending filters, conflicts; and
//! every refusal.

use std::path::Path;
use std::process::Command;

use cheng_host::{Context, ErrorKind, Host, Status};
use serde_json::{Value, json};

use crate::util;

/// `git` in `dir` with a fixed identity and no system or user configuration; `date`
/// sets the author and committer dates.
fn git_cmd(dir: &Path, date: Option<&str>) -> Command {
    let mut c = util::git(dir);
    if let Some(d) = date {
        c.env("GIT_AUTHOR_DATE", d).env("GIT_COMMITTER_DATE", d);
    }
    c
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = git_cmd(dir, None).args(args).output().unwrap();
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn commit(dir: &Path, msg: &str, date: &str) {
    let o = git_cmd(dir, Some(date)).args(["commit", "-q", "-m", msg]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn write(dir: &Path, path: &str, text: &[u8]) {
    let p = dir.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A repository with history, branches, and every kind of working-tree change.
fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    git(p, &["init", "-q", "-b", "main"]);
    write(p, "a.txt", b"one\ntwo\nthree\n");
    write(p, "src/lib.rs", b"fn main() {}\n");
    write(p, "dir with space/file name.txt", b"spaced\n");
    write(p, "bin.dat", b"\x00\x01\x02binary");
    write(p, "gone.txt", b"soon deleted\n");
    write(p, "moved.txt", b"will move\nacross\nlines\n");
    write(p, ".gitignore", b"*.log\n");
    git(p, &["add", "-A"]);
    commit(p, "First commit\n\nWith a body line.", "2026-01-02T03:04:05+0100");
    for i in 1..=4 {
        write(p, "a.txt", format!("one\ntwo\nthree\nchange {i}\n").as_bytes());
        git(p, &["add", "a.txt"]);
        commit(p, &format!("Change {i}"), &format!("2026-01-0{}T10:00:00-0500", i + 2));
    }
    git(p, &["branch", "feature"]);
    git(p, &["branch", "zeta"]);
    // Working-tree state.
    write(p, "a.txt", b"one\nTWO\nthree\nchange 4\nmore\n");
    write(p, "src/new.rs", b"// staged new file\n");
    git(p, &["add", "src/new.rs"]);
    std::fs::remove_file(p.join("gone.txt")).unwrap();
    write(p, "bin.dat", b"\x00\x01\x03binary changed");
    write(p, "untracked dir/x.txt", b"x\n");
    write(p, "debug.log", b"ignored\n");
    write(p, "excluded.tmp", b"excluded\n");
    write(p, ".git/info/exclude", b"*.tmp\n");
    write(p, "dir with space/file name.txt", b"spaced\nedited\n");
    d
}

/// An empty repository on branch `main`.
fn new_repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    git(d.path(), &["init", "-q", "-b", "main"]);
    d
}

async fn host() -> Host {
    util::host("", vec![]).await
}

async fn call(h: &Host, ws: &Path, input: Value) -> Value {
    let r = h.call(&Context::new(ws).role("recon"), "workspace_git", input).await;
    assert_eq!(r.status, Status::Ok, "{}", r.output);
    r.output
}

#[tokio::test(flavor = "multi_thread")]
async fn status_matches_git_with_loose_and_packed_storage() {
    let h = host().await;
    let d = repo();
    let p = d.path();
    let o = call(&h, p, json!({"operation": "status"})).await;
    assert_eq!(o["stdout"], git(p, &["status", "--porcelain=v1", "-uall"]), "{o}");
    let files = o["files"].as_array().unwrap();
    assert!(files.iter().any(|f| f["path"] == "src/new.rs" && f["index"] == "A"));
    assert!(
        !o["stdout"].as_str().unwrap().contains("debug.log") && !o["stdout"].as_str().unwrap().contains("excluded.tmp")
    );
    // After gc and pack-refs everything is packed: same answers.
    git(p, &["gc", "-q"]);
    git(p, &["pack-refs", "--all"]);
    assert!(!p.join(".git/refs/heads/feature").exists());
    let o = call(&h, p, json!({"operation": "status"})).await;
    assert_eq!(o["stdout"], git(p, &["status", "--porcelain=v1", "-uall"]));
    let o = call(&h, p, json!({"operation": "branch"})).await;
    assert_eq!(o["stdout"], git(p, &["branch", "--no-color"]));
    // pathspecs narrow it.
    let o = call(&h, p, json!({"operation": "status", "pathspecs": ["src"]})).await;
    assert_eq!(o["stdout"], git(p, &["status", "--porcelain=v1", "-uall", "--", "src"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn log_branch_and_show_match_git() {
    let h = host().await;
    let d = repo();
    let p = d.path();
    let o = call(&h, p, json!({"operation": "log"})).await;
    assert_eq!(o["stdout"], git(p, &["log", "--no-color", "-n", "20"]), "{o}");
    let ids = git(p, &["log", "--format=%H"]);
    let got: Vec<&str> = o["commits"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(got, ids.lines().collect::<Vec<_>>());
    // Capped: head and tail of git's output, within max_bytes.
    let whole = git(p, &["log", "--no-color", "-n", "20"]);
    let o = call(&h, p, json!({"operation": "log", "max_bytes": 300})).await;
    let cut = o["stdout"].as_str().unwrap();
    assert!(o["stdout_truncated"] == true && cut.len() <= 300, "{}: {cut}", cut.len());
    assert!(
        whole.starts_with(&cut[..100]) && whole.ends_with(&cut[cut.len() - 100..]) && cut.contains("bytes omitted"),
        "{cut}"
    );
    let o = call(&h, p, json!({"operation": "log", "revision": "HEAD~2", "max_count": 2})).await;
    assert_eq!(o["stdout"], git(p, &["log", "--no-color", "-n", "2", "HEAD~2"]));
    let o = call(&h, p, json!({"operation": "branch"})).await;
    assert_eq!(o["stdout"], git(p, &["branch", "--no-color"]));
    assert_eq!(o["current_branch"], "main");
    let o = call(&h, p, json!({"operation": "show"})).await;
    assert_eq!(o["stdout"], git(p, &["show", "--no-color", "HEAD"]), "{o}");
    // The root commit: every file added, the binary one too.
    let root = git(p, &["rev-list", "--max-parents=0", "HEAD"]).trim().to_string();
    let o = call(&h, p, json!({"operation": "show", "revision": root})).await;
    assert_eq!(o["stdout"], git(p, &["show", "--no-color", &root]), "{o}");
    // Detached HEAD.
    git(p, &["checkout", "-q", "-f", "--detach", "HEAD~1"]);
    let o = call(&h, p, json!({"operation": "branch"})).await;
    assert_eq!(o["stdout"], git(p, &["branch", "--no-color"]));
    assert_eq!(o["current_branch"], Value::Null);
}

#[tokio::test(flavor = "multi_thread")]
async fn diff_matches_git_and_applies_back() {
    let h = host().await;
    let d = repo();
    let p = d.path();
    let o = call(&h, p, json!({"operation": "diff"})).await;
    let ours = o["stdout"].as_str().unwrap().to_string();
    let theirs = git(p, &["diff", "--no-color", "HEAD"]);
    let headers = |s: &str| {
        s.lines()
            .filter(|l| {
                l.starts_with("diff --git")
                    || l.starts_with("index ")
                    || l.starts_with("new file")
                    || l.starts_with("deleted file")
                    || l.starts_with("---")
                    || l.starts_with("+++")
            })
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(headers(&ours), headers(&theirs), "{ours}");
    // Applied to a clean checkout of HEAD it reproduces the working tree.
    let clone = tempfile::tempdir().unwrap();
    git(clone.path(), &["clone", "-q", p.to_str().unwrap(), "c"]);
    let c = clone.path().join("c");
    std::fs::write(clone.path().join("patch"), &ours).unwrap();
    // (A "Binary files … differ" entry carries no data, for git as here: left out.)
    git(&c, &["apply", "--exclude=bin.dat", clone.path().join("patch").to_str().unwrap()]);
    for f in ["a.txt", "src/new.rs", "dir with space/file name.txt"] {
        assert_eq!(std::fs::read(c.join(f)).unwrap(), std::fs::read(p.join(f)).unwrap(), "{f}");
    }
    assert!(!c.join("gone.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn empty_and_unborn_repositories() {
    let h = host().await;
    let d = tempfile::tempdir().unwrap();
    git(d.path(), &["init", "-q", "-b", "trunk"]);
    let o = call(&h, d.path(), json!({"operation": "log"})).await;
    assert_eq!((o["stdout"].as_str(), o["commits"].as_array().map(Vec::len)), (Some(""), Some(0)));
    let o = call(&h, d.path(), json!({"operation": "branch"})).await;
    assert_eq!(o["stdout"], "");
    assert_eq!(o["current_branch"], "trunk");
    write(d.path(), "new.txt", b"x\n");
    let o = call(&h, d.path(), json!({"operation": "status"})).await;
    assert_eq!(o["stdout"], git(d.path(), &["status", "--porcelain=v1", "-uall"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals() {
    let h = host().await;
    let d = repo();
    let p = d.path();
    let before = git(p, &["status", "--porcelain=v1", "-uall"]);
    let err = |r: &cheng_host::ToolResult| r.output["error"].as_str().unwrap_or_default().to_string();
    let cx = Context::new(p).role("recon");
    for (input, kind, words) in [
        (json!({"operation": "status", "pathspecs": ["/etc"]}), ErrorKind::PathRefused, "absolute"),
        (json!({"operation": "status", "pathspecs": ["../x"]}), ErrorKind::PathRefused, ".."),
        (json!({"operation": "log", "revision": "no-such-branch"}), ErrorKind::NotFound, "unknown revision"),
        (json!({"operation": "log", "revision": "--all"}), ErrorKind::NotFound, "unknown revision"),
        (json!({"operation": "show", "revision": "-n1"}), ErrorKind::NotFound, "unknown revision"),
        (json!({"operation": "push"}), ErrorKind::InvalidArgument, ""),
    ] {
        let r = h.call(&cx, "workspace_git", input.clone()).await;
        assert_eq!(r.error_kind, Some(kind), "{input}: {}", r.output);
        assert!(err(&r).contains(words), "{input}: {}", err(&r));
        assert_eq!(r.output["terminal"], true);
    }
    // Not a repository.
    let plain = tempfile::tempdir().unwrap();
    let r = h.call(&Context::new(plain.path()).role("recon"), "workspace_git", json!({"operation": "status"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::NotFound), "{}", r.output);
    assert!(err(&r).contains("not a git repository"));
    // A .git file pointing outside the workspace.
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join(".git"), format!("gitdir: {}\n", p.join(".git").display())).unwrap();
    let r = h.call(&Context::new(ws.path()).role("recon"), "workspace_git", json!({"operation": "log"})).await;
    assert_eq!(r.error_kind, Some(ErrorKind::PathRefused), "{}", r.output);
    assert!(err(&r).contains(".git file"), "{}", err(&r));
    // Nothing was changed by any of it.
    assert_eq!(git(p, &["status", "--porcelain=v1", "-uall"]), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn renames_submodules_worktrees_and_odd_names() {
    let h = host().await;
    let ws = tempfile::tempdir().unwrap();
    let p = ws.path().join("main");
    std::fs::create_dir(&p).unwrap();
    git(&p, &["init", "-q", "-b", "main"]);
    write(&p, "moved.txt", b"will move\nacross\nlines\n");
    write(&p, "keep.txt", b"keep\n");
    git(&p, &["add", "-A"]);
    commit(&p, "base", "2026-02-01T00:00:00+0000");
    // A staged rename.
    git(&p, &["mv", "moved.txt", "renamed.txt"]);
    // A submodule: listed by git, not entered.
    let sub = ws.path().join("subsrc");
    std::fs::create_dir(&sub).unwrap();
    git(&sub, &["init", "-q", "-b", "main"]);
    write(&sub, "s.txt", b"s\n");
    git(&sub, &["add", "-A"]);
    commit(&sub, "sub", "2026-02-01T00:00:00+0000");
    git(&p, &["-c", "protocol.file.allow=always", "submodule", "add", "-q", sub.to_str().unwrap(), "vendor/sub"]);
    // A name that is not UTF-8 (untracked), one with a tab, an ignored directory, and a
    // nested repository (listed as a directory, not entered).
    {
        use std::os::unix::ffi::OsStrExt;
        std::fs::write(p.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")), b"x").unwrap();
    }
    write(&p, "tab\there.txt", b"t\n");
    write(&p, ".gitignore", b"build/\n");
    write(&p, "build/out.o", b"o");
    write(&p, "notes/empty-but-ignored/x.log", b"l");
    write(&p, "nested/inner.txt", b"i\n");
    git(&p.join("nested"), &["init", "-q"]);
    let o = call(&h, ws.path(), json!({"operation": "status", "cwd": "main"})).await;
    assert_eq!(o["stdout"], git(&p, &["status", "--porcelain=v1", "-uall"]), "{o}");
    // diff and show pair the rename (same content) as git does, and show the submodule
    // as the commit it records.
    let o = call(&h, ws.path(), json!({"operation": "diff", "cwd": "main"})).await;
    assert_eq!(o["stdout"], git(&p, &["diff", "--no-color", "HEAD"]), "{o}");
    assert!(o["stdout"].as_str().unwrap().contains("rename from moved.txt\nrename to renamed.txt\n"), "{o}");
    commit(&p, "more", "2026-02-02T00:00:00+0000");
    let o = call(&h, ws.path(), json!({"operation": "show", "cwd": "main"})).await;
    assert_eq!(o["stdout"], git(&p, &["show", "--no-color", "HEAD"]), "{o}");
    assert!(o["files"].as_array().unwrap().iter().any(|f| f["index"] == "R" && f["from"] == "moved.txt"), "{o}");
    // A submodule whose checkout moved on: modified, and diff shows both commits.
    let checkout = p.join("vendor/sub");
    write(&checkout, "s.txt", b"s2\n");
    git(&checkout, &["add", "-A"]);
    commit(&checkout, "sub moves", "2026-02-03T00:00:00+0000");
    let o = call(&h, ws.path(), json!({"operation": "status", "cwd": "main"})).await;
    let theirs = git(&p, &["status", "--porcelain=v1", "-uall"]);
    assert_eq!(o["stdout"], theirs, "{o}");
    assert!(theirs.lines().any(|l| l == " M vendor/sub"), "{theirs}");
    let o = call(&h, ws.path(), json!({"operation": "diff", "cwd": "main"})).await;
    assert_eq!(o["stdout"], git(&p, &["diff", "--no-color", "HEAD"]), "{o}");
    // A linked worktree inside the workspace is followed.
    git(&p, &["worktree", "add", "-q", "../wt", "-b", "side"]);
    let wt = ws.path().join("wt");
    write(&wt, "keep.txt", b"changed in the worktree\n");
    let o = call(&h, ws.path(), json!({"operation": "status", "cwd": "wt"})).await;
    assert_eq!(o["stdout"], git(&wt, &["status", "--porcelain=v1", "-uall"]), "{o}");
    let o = call(&h, ws.path(), json!({"operation": "branch", "cwd": "wt"})).await;
    assert_eq!(o["stdout"], git(&wt, &["branch", "--no-color"]), "{o}");
    assert_eq!(o["current_branch"], "side");
    let o = call(&h, ws.path(), json!({"operation": "log", "cwd": "wt", "max_count": 5})).await;
    assert_eq!(o["stdout"], git(&wt, &["log", "--no-color", "-n", "5"]), "{o}");
}

/// Working-tree changes decided from the host's stats, against git: an executable bit,
/// a file turned symlink and back, a touched but unchanged file, a same-size edit with
/// its modification time put back (only the change time tells), directories replaced
/// by a file and by a symlink, a line-ending filter, an intent-to-add entry, a tracked
/// name that is not UTF-8; then `diff` on the same tree.
#[tokio::test(flavor = "multi_thread")]
async fn working_tree_changes_match_git() {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{PermissionsExt, symlink};
    let h = host().await;
    let d = new_repo();
    let p = d.path();
    git(p, &["config", "core.autocrlf", "input"]);
    for f in ["plain.txt", "exec.sh", "touched.txt", "samesize.txt", "dir/x.txt", "dir2/y.txt", "keep/k.txt"] {
        write(p, f, format!("content of {f}\n").as_bytes());
    }
    std::fs::set_permissions(p.join("exec.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    symlink("plain.txt", p.join("link")).unwrap();
    write(p, "crlf.txt", b"one\r\ntwo\r\n");
    let odd = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(p.join(odd), b"odd\n").unwrap();
    git(p, &["add", "-A"]);
    commit(p, "base", "2026-03-01T00:00:00+0000");
    // Let the index's time pass the files' (git rewrites it on the next status), so that
    // the stats alone decide.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    git(p, &["status", "--porcelain"]);
    let same_mtime = std::fs::metadata(p.join("samesize.txt")).unwrap().modified().unwrap();
    std::fs::set_permissions(p.join("plain.txt"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::remove_file(p.join("exec.sh")).unwrap();
    symlink("keep/k.txt", p.join("exec.sh")).unwrap();
    std::fs::remove_file(p.join("link")).unwrap();
    write(p, "link", b"now a file\n");
    let f = std::fs::OpenOptions::new().append(true).open(p.join("touched.txt")).unwrap();
    f.set_modified(std::time::SystemTime::now()).unwrap();
    drop(f);
    write(p, "samesize.txt", b"CONTENT OF samesize.txt\n");
    std::fs::File::options().write(true).open(p.join("samesize.txt")).unwrap().set_modified(same_mtime).unwrap();
    std::fs::remove_dir_all(p.join("dir")).unwrap();
    write(p, "dir", b"a file where a directory was\n");
    std::fs::remove_dir_all(p.join("dir2")).unwrap();
    symlink("keep", p.join("dir2")).unwrap();
    // Touched: its stat changes, its content after the filter does not.
    let f = std::fs::OpenOptions::new().append(true).open(p.join("crlf.txt")).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(2)).unwrap();
    drop(f);
    write(p, "new.txt", b"intended\n");
    git(p, &["add", "-N", "new.txt"]);
    std::fs::write(p.join(odd), b"odd and longer\n").unwrap();
    let o = call(&h, p, json!({"operation": "status"})).await;
    let theirs = git(p, &["status", "--porcelain=v1", "-uall"]);
    assert_eq!(o["stdout"], theirs, "{o}");
    for line in [
        " M plain.txt",
        " T exec.sh",
        " T link",
        " M samesize.txt",
        " D dir/x.txt",
        " D dir2/y.txt",
        " A new.txt",
        "?? dir",
        "?? dir2",
    ] {
        assert!(theirs.lines().any(|l| l == line), "{line} in {theirs}");
    }
    assert!(!theirs.contains("touched.txt") && !theirs.contains("crlf.txt"), "{theirs}");
    // The same working tree through diff: headers as git's. The name that is not UTF-8
    // cannot be opened in the sandbox: left out with a warning.
    let o = call(&h, p, json!({"operation": "diff"})).await;
    let ours = o["stdout"].as_str().unwrap().to_string();
    assert!(
        o["stderr"].as_str().unwrap().contains("caf\u{fffd}.txt\" is left out of the patch: its name is not UTF-8"),
        "{o}"
    );
    let theirs = git(p, &["diff", "--no-color", "HEAD", "--", ".", ":!caf*"]);
    let headers = |s: &str| {
        s.lines()
            .filter(|l| {
                ["diff --git", "index ", "new file", "deleted file", "old mode", "new mode", "---", "+++"]
                    .iter()
                    .any(|h| l.starts_with(h))
            })
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(headers(&ours), headers(&theirs), "ours:\n{ours}\ntheirs:\n{theirs}");
    assert!(ours.contains("old mode 100644\nnew mode 100755\ndiff --git"), "{ours}");
    assert!(ours.contains("new file mode 120000"), "{ours}");
}

/// Merge conflicts show git's two-letter codes.
#[tokio::test(flavor = "multi_thread")]
async fn conflicts_match_git() {
    let h = host().await;
    let d = new_repo();
    let p = d.path();
    for f in ["both.txt", "ours-deleted.txt", "theirs-deleted.txt", "calm.txt"] {
        write(p, f, b"base\n");
    }
    git(p, &["add", "-A"]);
    commit(p, "base", "2026-03-01T00:00:00+0000");
    git(p, &["checkout", "-q", "-b", "other"]);
    write(p, "both.txt", b"theirs\n");
    write(p, "added.txt", b"theirs\n");
    write(p, "ours-deleted.txt", b"theirs\n");
    std::fs::remove_file(p.join("theirs-deleted.txt")).unwrap();
    git(p, &["add", "-A"]);
    commit(p, "other", "2026-03-02T00:00:00+0000");
    git(p, &["checkout", "-q", "main"]);
    write(p, "both.txt", b"ours\n");
    write(p, "added.txt", b"ours\n");
    std::fs::remove_file(p.join("ours-deleted.txt")).unwrap();
    write(p, "theirs-deleted.txt", b"ours\n");
    write(p, "calm.txt", b"staged\n");
    git(p, &["add", "-A"]);
    commit(p, "main", "2026-03-03T00:00:00+0000");
    let o = git_cmd(p, None).args(["merge", "-q", "other"]).output().unwrap();
    assert!(!o.status.success(), "the merge conflicts");
    let o = call(&h, p, json!({"operation": "status"})).await;
    let theirs = git(p, &["status", "--porcelain=v1", "-uall"]);
    assert_eq!(o["stdout"], theirs, "{o}");
    for line in ["UU both.txt", "AA added.txt", "DU ours-deleted.txt", "UD theirs-deleted.txt"] {
        assert!(theirs.lines().any(|l| l == line), "{line} in {theirs}");
    }
}

/// `log` narrowed by pathspecs keeps the commits git keeps, merges included.
#[tokio::test(flavor = "multi_thread")]
async fn log_with_pathspecs_matches_git() {
    let h = host().await;
    let d = new_repo();
    let p = d.path();
    write(p, "a.txt", b"a1\n");
    write(p, "lib/b.txt", b"b1\n");
    git(p, &["add", "-A"]);
    commit(p, "both", "2026-04-01T00:00:00+0000");
    write(p, "a.txt", b"a2\n");
    git(p, &["add", "-A"]);
    commit(p, "a only", "2026-04-02T00:00:00+0000");
    git(p, &["checkout", "-q", "-b", "side"]);
    write(p, "lib/b.txt", b"b2\n");
    git(p, &["add", "-A"]);
    commit(p, "b on the side", "2026-04-03T00:00:00+0000");
    git(p, &["checkout", "-q", "main"]);
    write(p, "lib/c.txt", b"c\n");
    git(p, &["add", "-A"]);
    commit(p, "c on main", "2026-04-04T00:00:00+0000");
    let o = git_cmd(p, Some("2026-04-05T00:00:00+0000"))
        .args(["merge", "-q", "--no-ff", "-m", "merge side", "side"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for specs in [vec!["a.txt"], vec!["lib"], vec!["lib/b.txt"], vec!["lib/c.txt", "a.txt"], vec!["missing"], vec!["."]]
    {
        let o = call(&h, p, json!({"operation": "log", "pathspecs": specs})).await;
        let mut args = vec!["log", "--no-color", "-n", "20", "--"];
        args.extend(specs.iter().copied());
        assert_eq!(o["stdout"], git(p, &args), "{specs:?}: {o}");
    }
    let o = call(&h, p, json!({"operation": "log", "pathspecs": ["lib/b.txt"]})).await;
    let summaries: Vec<&str> =
        o["commits"].as_array().unwrap().iter().map(|c| c["summary"].as_str().unwrap()).collect();
    // The merge takes lib/b.txt from the side branch unchanged: left out, as git does.
    assert_eq!(summaries, ["b on the side", "both"]);
    // show on a clean merge: its header, no patch (no path differs from both parents).
    let o = call(&h, p, json!({"operation": "show"})).await;
    assert_eq!(o["stdout"], git(p, &["show", "--no-color", "HEAD"]), "{o}");
    assert_eq!(o["files"], json!([]));
    // HEAD moved back under an index whose cached tree was made for the merge: staged
    // changes where the trees differ, nothing where they agree.
    git(p, &["reset", "-q", "--soft", "HEAD~2"]);
    let o = call(&h, p, json!({"operation": "status"})).await;
    let theirs = git(p, &["status", "--porcelain=v1", "-uall"]);
    assert_eq!(o["stdout"], theirs, "{o}");
    assert_eq!(theirs, "M  lib/b.txt\nA  lib/c.txt\n");
}

/// Staged renames as git reports them: the same content, content edited after the move
/// (paired by similarity), and none with `status.renames` off; in a repository whose
/// other directories the index's cached tree vouches for.
#[tokio::test(flavor = "multi_thread")]
async fn staged_renames_match_git() {
    let h = host().await;
    let d = new_repo();
    let p = d.path();
    let body = |name: &str| (0..20).map(|i| format!("{name} line {i}\n")).collect::<String>();
    for f in ["a/same.txt", "a/edited.txt", "b/gone.txt", "c/keep.txt", "d/keep.txt"] {
        write(p, f, body(f).as_bytes());
    }
    git(p, &["add", "-A"]);
    commit(p, "base", "2026-05-01T00:00:00+0000");
    git(p, &["mv", "a/same.txt", "a/same-moved.txt"]);
    git(p, &["mv", "a/edited.txt", "c/edited-moved.txt"]);
    write(p, "c/edited-moved.txt", format!("{}one more line\n", body("a/edited.txt")).as_bytes());
    git(p, &["rm", "-q", "b/gone.txt"]);
    write(p, "b/new.txt", b"unrelated\n");
    git(p, &["add", "-A"]);
    let o = call(&h, p, json!({"operation": "status"})).await;
    let theirs = git(p, &["status", "--porcelain=v1", "-uall"]);
    assert_eq!(o["stdout"], theirs, "{o}");
    for line in
        ["R  a/same.txt -> a/same-moved.txt", "R  a/edited.txt -> c/edited-moved.txt", "D  b/gone.txt", "A  b/new.txt"]
    {
        assert!(theirs.lines().any(|l| l == line), "{line} in {theirs}");
    }
    git(p, &["config", "status.renames", "false"]);
    let o = call(&h, p, json!({"operation": "status"})).await;
    let theirs = git(p, &["status", "--porcelain=v1", "-uall"]);
    assert_eq!(o["stdout"], theirs, "{o}");
    assert!(theirs.lines().any(|l| l == "D  a/same.txt"), "{theirs}");
}
