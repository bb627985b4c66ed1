//! Guard tests on real trees with real symlinks, and a property test against the
//! kernel's own `openat2` as the oracle.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::*;

/// A temporary directory removed on drop.
struct TempTree(PathBuf);

impl TempTree {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("cheng-guard-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempTree(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// /w/proj with files, a sibling /w/proj2 and /w/outside, and links of every kind.
fn fixture(tag: &str) -> (TempTree, PathBuf) {
    let t = TempTree::new(tag);
    let w = t.path();
    let proj = w.join("proj");
    for d in ["proj/src/deep", "proj/docs", "proj2", "outside"] {
        std::fs::create_dir_all(w.join(d)).unwrap();
    }
    std::fs::write(proj.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(proj.join("src/deep/x.txt"), "x").unwrap();
    std::fs::write(proj.join("my file.txt"), "spaces").unwrap();
    std::fs::write(proj.join("trailing."), "dot").unwrap();
    std::fs::write(w.join("proj2/secret"), "s").unwrap();
    std::fs::write(w.join("outside/secret"), "s").unwrap();
    // Pointing out: relative and absolute, to a dir and to a file.
    symlink("../outside", proj.join("rel_out")).unwrap();
    symlink(w.join("outside"), proj.join("abs_out")).unwrap();
    symlink("../../outside/secret", proj.join("src/file_out")).unwrap();
    // Pointing in: still refused (no symlink between root and target).
    symlink("src", proj.join("in_dir")).unwrap();
    symlink("main.rs", proj.join("src/in_file")).unwrap();
    // Chained and looping.
    symlink("in_dir", proj.join("chain")).unwrap();
    symlink("loop_b", proj.join("loop_a")).unwrap();
    symlink("loop_a", proj.join("loop_b")).unwrap();
    // Dangling.
    symlink("nowhere", proj.join("dangling")).unwrap();
    (t, proj)
}

fn refused(g: &Guard, p: &str) -> GuardError {
    g.open(p).expect_err(p)
}

#[test]
fn plain_paths_resolve() {
    let (_t, proj) = fixture("plain");
    let g = Guard::new(&proj).unwrap();
    // Relative paths, names with spaces and trailing dots.
    assert_eq!(g.open("src/main.rs").unwrap().rel, "src/main.rs");
    assert_eq!(g.open("my file.txt").unwrap().rel, "my file.txt");
    assert_eq!(g.open("trailing.").unwrap().rel, "trailing.");
    // `..` that stays inside.
    assert_eq!(g.open("src/deep/../main.rs").unwrap().rel, "src/main.rs");
    // Absolute inside the root.
    let abs = format!("{}/src/main.rs", g.root().display());
    assert_eq!(g.open(&abs).unwrap().rel, "src/main.rs");
    // The root itself, and a directory with a trailing slash.
    assert_eq!(g.open(".").unwrap().rel, ".");
    assert!(g.open("src/").is_ok());
}

#[test]
fn escapes_and_forms_are_refused_with_the_root_quoted() {
    let (_t, proj) = fixture("escape");
    let g = Guard::new(&proj).unwrap();
    let root = g.root().display().to_string();
    // Parent escapes, even when they come back in.
    let e = refused(&g, "../proj/src/main.rs");
    assert_eq!(
        e.to_string(),
        format!("Refusing path \"../proj/src/main.rs\": it escapes the workspace root \"{root}\"")
    );
    // A sibling with the same prefix is outside.
    let sibling = format!("{}2/secret", root);
    assert!(matches!(refused(&g, &sibling), GuardError::Lexical { refusal: Refusal::Escapes, .. }));
    // Absolute outside.
    assert!(matches!(refused(&g, "/etc/passwd"), GuardError::Lexical { .. }));
    // Drive-relative and UNC forms, NUL bytes.
    assert_eq!(refused(&g, "C:foo").to_string(), "Refusing drive-relative path \"C:foo\"");
    assert!(matches!(refused(&g, "\\\\srv\\share"), GuardError::Lexical { refusal: Refusal::WindowsPrefix, .. }));
    assert!(matches!(refused(&g, "src\0/main.rs"), GuardError::Lexical { refusal: Refusal::Nul, .. }));
}

#[test]
fn every_symlink_is_refused() {
    let (_t, proj) = fixture("links");
    let g = Guard::new(&proj).unwrap();
    // Pointing out, relative and absolute, as the last component and in the middle.
    for p in ["rel_out", "abs_out", "rel_out/secret", "abs_out/secret", "src/file_out"] {
        assert!(matches!(refused(&g, p), GuardError::Symlink { .. }), "{p}");
    }
    // Pointing in, chained, looping, dangling: all refused, with the link named.
    for (p, link) in [
        ("in_dir/main.rs", "in_dir"),
        ("src/in_file", "src/in_file"),
        ("chain/main.rs", "chain"),
        ("loop_a", "loop_a"),
        ("dangling", "dangling"),
    ] {
        let e = refused(&g, p);
        assert!(matches!(e, GuardError::Symlink { .. }), "{p}: {e}");
        assert!(e.to_string().contains(&format!("symbolic link \"{link}\"")), "{e}");
    }
    // A trailing slash does not help.
    assert!(matches!(refused(&g, "in_dir/"), GuardError::Symlink { .. }));
    // A `..` after a symlink is refused too (the kernel would follow the link first).
    assert!(matches!(refused(&g, "rel_out/../src"), GuardError::Symlink { .. }));
}

#[test]
fn missing_files_are_a_different_fact() {
    let (_t, proj) = fixture("missing");
    let g = Guard::new(&proj).unwrap();
    // Missing inside the workspace.
    assert_eq!(refused(&g, "nope.txt").to_string(), "File does not exist: nope.txt");
    // A file used as a directory.
    assert!(matches!(refused(&g, "src/main.rs/x"), GuardError::NotFound { .. }));
    // A file with a trailing slash.
    assert!(matches!(refused(&g, "src/main.rs/"), GuardError::NotFound { .. }));
}

#[test]
fn root_behind_a_symlink_is_resolved_once() {
    let (t, proj) = fixture("rootlink");
    let alias = t.path().join("alias");
    symlink(&proj, &alias).unwrap();
    let g = Guard::new(&alias).unwrap();
    // The root is the real directory, and paths under it resolve.
    assert_eq!(g.root(), std::fs::canonicalize(&proj).unwrap());
    assert!(g.open("src/main.rs").is_ok());
    // Refusals quote the resolved root.
    assert!(refused(&g, "..").to_string().contains(&g.root().display().to_string()));
}

#[test]
fn very_deep_paths() {
    let t = TempTree::new("deep");
    let mut p = t.path().to_path_buf();
    for _ in 0..200 {
        p.push("d");
    }
    std::fs::create_dir_all(&p).unwrap();
    let g = Guard::new(t.path()).unwrap();
    // 200 levels down resolves.
    assert!(g.open(&vec!["d"; 200].join("/")).is_ok());
    // And one level too many is just missing.
    assert!(matches!(refused(&g, &vec!["d"; 201].join("/")), GuardError::NotFound { .. }));
}

/// A small deterministic generator (xorshift64*), so the property test is repeatable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

/// The number of cases the property test runs (fixed; see BENCHMARKS.md for a longer run
/// with `CHENG_GUARD_CASES`).
const CASES: usize = 20_000;

#[test]
fn property_guard_agrees_with_the_kernel() {
    let (_t, proj) = fixture("prop");
    let g = Guard::new(&proj).unwrap();
    let cases: usize = std::env::var("CHENG_GUARD_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES);
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);
    let segs = [
        "src",
        "deep",
        "main.rs",
        "x.txt",
        "docs",
        "..",
        ".",
        "rel_out",
        "abs_out",
        "in_dir",
        "chain",
        "loop_a",
        "dangling",
        "file_out",
        "in_file",
        "secret",
        "nope",
        "my file.txt",
        "trailing.",
        "",
    ];
    let mut disagreements = Vec::new();
    for _ in 0..cases {
        let n = 1 + (rng.next() % 6) as usize;
        let path: Vec<&str> = (0..n).map(|_| rng.pick(&segs)).collect();
        let path = path.join("/");
        let ours = g.open(&path);
        // The oracle: the lexical rules decide their own forms; what they pass, the
        // kernel resolves with the guard's flags.
        let oracle = match lexical(&path, &g.root_str) {
            Err(_) => None,
            Ok(rel) => {
                // Keep a trailing slash: the kernel then insists on a directory.
                let text = if rel.trailing_slash() { format!("{}/", rel.as_str()) } else { rel.as_str().to_string() };
                let r = rustix::fs::openat2(
                    g.root_fd.as_fd(),
                    text.as_str(),
                    OFlags::PATH | OFlags::CLOEXEC,
                    Mode::empty(),
                    rustix::fs::ResolveFlags::BENEATH
                        | rustix::fs::ResolveFlags::NO_SYMLINKS
                        | rustix::fs::ResolveFlags::NO_XDEV
                        | rustix::fs::ResolveFlags::NO_MAGICLINKS,
                );
                Some(r.is_ok())
            }
        };
        let lexical_refused = matches!(ours, Err(GuardError::Lexical { .. }));
        match oracle {
            None => {
                if !lexical_refused {
                    disagreements.push(format!("{path:?}: lexical rules refuse it, guard did not"));
                }
            }
            Some(kernel_ok) => {
                if kernel_ok != ours.is_ok() {
                    disagreements.push(format!("{path:?}: kernel ok={kernel_ok}, guard={ours:?}"));
                }
                // The portable walk agrees with the kernel as well.
                let rel = lexical(&path, &g.root_str).unwrap();
                let text = if rel.trailing_slash() { format!("{}/.", rel.as_str()) } else { rel.as_str().to_string() };
                let walked = walk_beneath(g.root_fd.as_fd(), &text).is_ok();
                if walked != kernel_ok {
                    disagreements.push(format!("{path:?}: kernel ok={kernel_ok}, walk ok={walked}"));
                }
            }
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements of {cases}:\n{}",
        disagreements.len(),
        disagreements[..disagreements.len().min(20)].join("\n")
    );
}

#[test]
fn a_read_gets_the_file_judged_even_when_its_path_was_swapped() {
    let t = TempTree::new("swap");
    std::fs::write(t.path().join("judged.txt"), "the file that was judged").unwrap();
    std::fs::write(t.path().join("other.txt"), "another file").unwrap();
    let g = Guard::new(t.path()).unwrap();
    // Positive control: the path still names the judged file.
    let opened = g.open("judged.txt").unwrap();
    let st = rustix::fs::fstat(&opened.fd).unwrap();
    let (file, size) = g.open_for_reading(&opened, &st).unwrap();
    assert_eq!(size, 24);
    assert_eq!(std::io::read_to_string(file).unwrap(), "the file that was judged");
    // The path now names another file (as if renamed over it after the check): what is
    // read is still the file behind the handle that was judged.
    let swapped = Opened { fd: opened.fd, rel: "other.txt".into() };
    let (file, size) = g.open_for_reading(&swapped, &st).unwrap();
    assert_eq!(size, 24);
    assert_eq!(std::io::read_to_string(file).unwrap(), "the file that was judged");
    // A FIFO renamed in under the path is opened without blocking and never read.
    assert!(std::process::Command::new("mkfifo").arg(t.path().join("fifo")).status().unwrap().success());
    let swapped = Opened { fd: g.open("judged.txt").unwrap().fd, rel: "fifo".into() };
    let (file, _) = g.open_for_reading(&swapped, &st).unwrap();
    assert_eq!(std::io::read_to_string(file).unwrap(), "the file that was judged");
    // And `read` refuses the FIFO itself by its handle, before any open for reading.
    assert!(matches!(g.read("fifo", 100), Err(ReadError::NotRegular(..))));
}

#[test]
fn a_sized_read_gets_the_whole_file_whatever_size_it_was_told() {
    let t = TempTree::new("sized");
    let text: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(t.path().join("f"), &text).unwrap();
    let open = || std::fs::File::open(t.path().join("f")).unwrap();
    // The size it has (one read), sizes it had before growing or shrinking, none.
    for told in [100_000, 99_999, 1, 0, 150_000, 4096, 8192] {
        assert_eq!(read_sized(&open(), told, 1 << 20).unwrap(), text, "told {told}");
    }
    // Past `max`: more than `max` bytes come back (the caller refuses them), never
    // the whole of a larger file.
    for (told, max) in [(10, 50_000), (0, 0), (100_000, 99_999)] {
        let got = read_sized(&open(), told, max).unwrap();
        assert!(got.len() as u64 > max && got.len() <= 100_000, "told {told} max {max}: {}", got.len());
        assert_eq!(got[..], text[..got.len()]);
    }
    // Empty file.
    std::fs::write(t.path().join("e"), b"").unwrap();
    assert!(read_sized(&std::fs::File::open(t.path().join("e")).unwrap(), 0, 10).unwrap().is_empty());
    // Through the guard: exact limit, one byte under it.
    let g = Guard::new(t.path()).unwrap();
    assert_eq!(g.read("f", 100_000).unwrap(), text);
    assert!(matches!(g.read("f", 99_999), Err(ReadError::TooLarge { size: 100_000, .. })));
}

#[test]
fn listing_a_file_or_a_symlinked_directory_is_refused_by_name() {
    let t = TempTree::new("listing");
    std::fs::create_dir(t.path().join("d")).unwrap();
    std::fs::write(t.path().join("d/x"), "x").unwrap();
    std::os::unix::fs::symlink("d", t.path().join("link")).unwrap();
    let g = Guard::new(t.path()).unwrap();
    // Positive control: the directory itself, and the root.
    let names: Vec<String> = g.read_dir("d", true).unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["x"]);
    assert_eq!(g.read_dir("d", true).unwrap()[0].size, 1);
    assert!(g.read_dir(".", false).unwrap().iter().any(|e| e.name == "link"));
    assert!(matches!(g.read_dir("d/x", false), Err(WriteError::Invalid(m)) if m.contains("not a directory")));
    assert!(matches!(g.read_dir("link", false), Err(WriteError::Guard(GuardError::Symlink { .. }))));
    assert!(matches!(g.read_dir("nope", false), Err(WriteError::Guard(GuardError::NotFound { .. }))));
    assert!(matches!(g.read_dir("../", false), Err(WriteError::Guard(GuardError::Lexical { .. }))));
}
