//! Which commands are known to be read-only: the operator's known-safe list
//! (`[process] known_safe`, built-in entries in [`crate::policy::known_safe`]) matched
//! against a command's words.
//!
//! This module only reads words; [`super::Spawner::prepare`] decides whether a command
//! may be matched at all — one program started directly by a bare name, found on the
//! host's `PATH` under that very name, no operator rule about it, no shell, the host's
//! own files not in the workspace, Landlock present — and how it then runs: in the
//! confined tier, read-only, able to execute nothing but the program itself.
//!
//! An entry admits a command when the words after the program (and its subcommand)
//! are each one of the entry's options in a form it names, a value of such an option,
//! or, when the entry allows operands, any word that does not start with `-`. Anything
//! else — an option the entry does not name, an abbreviation of one, an option that
//! takes a value with none given — and the command is not known-safe.

use crate::policy::known_safe::KnownSafeRule;

/// The entries in force (none when `known_safe` is off).
#[derive(Debug, Clone, Default)]
pub(crate) struct KnownSafe {
    entries: Vec<KnownSafeRule>,
}

impl KnownSafe {
    /// The list the operator's settings give.
    pub fn new(cfg: &crate::policy::process::ProcessConfig) -> KnownSafe {
        KnownSafe { entries: cfg.known_safe_entries() }
    }

    /// Whether any entry is in force.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The name of the entry (`ls`, `git status`) that admits `program` run with
    /// `args`, if one does.
    pub fn admits(&self, program: &str, args: &[String]) -> Option<String> {
        self.entries.iter().find(|e| e.program == program && matches(e, args)).map(KnownSafeRule::name)
    }
}

/// How one option word is read against an entry.
enum Opt {
    /// Allowed, standing alone (or carrying its value in the same word).
    Alone,
    /// Allowed, and the next word is its value.
    TakesNext,
}

/// Whether `args` (the words after the program) are forms `e` allows.
pub(crate) fn matches(e: &KnownSafeRule, args: &[String]) -> bool {
    let mut rest = args;
    if let Some(sub) = &e.subcommand {
        match rest.split_first() {
            Some((first, tail)) if first == sub => rest = tail,
            _ => return false,
        }
    }
    // A program with options spelled `-name` reads neither bundles nor `--` as getopt
    // does (`find -- . -delete` deletes).
    let getopt = !e.flags.iter().chain(&e.value_options).any(|o| {
        let o = o.trim_end_matches('=');
        !o.starts_with("--") && o.len() > 2 && o != "-NUM"
    });
    let mut only_operands = false;
    let mut i = 0;
    while i < rest.len() {
        let a = rest[i].as_str();
        i += 1;
        if only_operands || !a.starts_with('-') || a == "-" {
            if !e.operands {
                return false;
            }
            continue;
        }
        if a == "--" && getopt {
            only_operands = true;
            continue;
        }
        match option(e, a, getopt) {
            Some(Opt::Alone) => {}
            Some(Opt::TakesNext) => {
                // The value: whatever the next word is, the program reads it as one.
                if i >= rest.len() {
                    return false;
                }
                i += 1;
            }
            None => return false,
        }
    }
    true
}

fn listed(list: &[String], word: &str) -> bool {
    list.iter().any(|l| l == word)
}

/// `word` (starting with `-`) read as one option of `e`, or `None` when it is not one.
fn option(e: &KnownSafeRule, word: &str, getopt: bool) -> Option<Opt> {
    if listed(&e.flags, word) {
        return Some(Opt::Alone);
    }
    if listed(&e.flags, "-NUM") && word.len() > 1 && word[1..].bytes().all(|b| b.is_ascii_digit()) {
        return Some(Opt::Alone);
    }
    if listed(&e.value_options, word) {
        return Some(Opt::TakesNext);
    }
    // `--name=value`: the name takes a value in either form.
    if word.starts_with("--")
        && let Some((name, _)) = word.split_once('=')
    {
        let attached = format!("{name}=");
        return (listed(&e.value_options, name) || listed(&e.value_options, &attached)).then_some(Opt::Alone);
    }
    // `-name` of a program that does not bundle: only exact forms.
    if !getopt || word.starts_with("--") || word.len() < 3 {
        return None;
    }
    // A bundle of single letters (`-la`); a letter that takes a value takes the rest of
    // the word (`-n5`, `-uno`), or the next word when nothing is left.
    for (at, c) in word.char_indices().skip(1) {
        let short = format!("-{c}");
        let glued_only = format!("{short}=");
        let rest_empty = at + c.len_utf8() == word.len();
        if listed(&e.value_options, &short) {
            return Some(if rest_empty { Opt::TakesNext } else { Opt::Alone });
        }
        if listed(&e.value_options, &glued_only) {
            return Some(Opt::Alone);
        }
        if !listed(&e.flags, &short) {
            return None;
        }
    }
    Some(Opt::Alone)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::known_safe::built_in;

    fn list() -> KnownSafe {
        KnownSafe { entries: built_in() }
    }

    /// The entry admitting a command line (`"git diff --stat"`), split like a shell.
    fn admitted(line: &str) -> Option<String> {
        let words = shlex::split(line).unwrap();
        list().admits(&words[0], &words[1..])
    }

    fn ok(lines: &[&str]) {
        for l in lines {
            assert!(admitted(l).is_some(), "should be known-safe: {l}");
        }
    }

    fn asks(lines: &[&str]) {
        for l in lines {
            assert_eq!(admitted(l), None, "should ask: {l}");
        }
    }

    #[test]
    fn the_entry_is_named() {
        assert_eq!(admitted("ls -la").as_deref(), Some("ls"));
        assert_eq!(admitted("git status --short").as_deref(), Some("git status"));
    }

    #[test]
    fn ls() {
        ok(&[
            "ls",
            "ls -la",
            "ls -lhS --color=never src",
            "ls --sort size",
            "ls --sort=time -r",
            "ls -w 80",
            "ls -1",
            "ls -- -x",
        ]);
        // `--dired`, `--hyperlink`: not listed; an abbreviation of a listed option is not it.
        asks(&["ls --dired", "ls --hyperlink", "ls --recur", "ls -lj", "ls -w"]);
    }

    #[test]
    fn cat_head_tail_wc() {
        ok(&["cat a b", "cat -n a", "cat -A -- -a", "head -n 5 f", "head -n5 f", "head --lines=5 f", "head -20 f"]);
        ok(&["head -c 100 f", "tail -f log", "tail -F -n 3 log", "tail --follow=name log", "tail +5 f"]);
        ok(&["wc -l a b", "wc --total=never -w a", "wc --files0-from list"]);
        asks(&["cat --foo a", "head --output=x f", "head -n", "tail --pid", "wc --tot"]);
    }

    #[test]
    fn grep_and_rg() {
        ok(&["grep -rn pattern src", "grep -E 'a|b' f", "grep -e -exec f", "grep -A3 -B 2 x f", "grep -5 x f"]);
        ok(&["grep --include=*.rs -r x .", "grep -f pats f", "grep --color=never x f", "grep -riwl x ."]);
        ok(&["rg foo", "rg -n -i foo src", "rg -t rust foo", "rg -g '*.rs' foo", "rg --files", "rg -uu foo"]);
        ok(&["rg -r bar foo", "rg --json foo", "rg -e --pre foo", "rg -C2 foo", "rg --no-config foo"]);
        // rg runs a preprocessor with `--pre`, decompressors with `-z`.
        asks(&["rg --pre cat foo", "rg --pre=cat foo", "rg --pre-glob '*' foo", "rg -z foo", "rg --search-zip foo"]);
        asks(&["rg -iz foo", "rg --hostname-bin=x foo", "grep --frobnicate x"]);
        // rg 13 does not take `--pre` as `--engine`'s value: it runs the preprocessor.
        ok(&["rg --engine=auto foo"]);
        asks(&["rg --engine --pre cat foo"]);
    }

    #[test]
    fn find() {
        ok(&["find .", "find . -name '*.rs'", "find src -type f -maxdepth 2 -print", "find . -name -exec"]);
        ok(&["find -L . ( -name a -o -name b ) -print0", "find . ! -path './target/*' -newer Cargo.toml"]);
        ok(&["find . -printf '%p\\n'", "find . -empty -ls"]);
        // Programs, deletions and files written.
        asks(&[
            "find . -exec rm {} ;",
            "find . -execdir rm {} +",
            "find . -ok rm {} ;",
            "find . -okdir rm {} ;",
            "find . -delete",
            "find . -name x -delete",
            "find . -fprint out",
            "find . -fprint0 out",
            "find . -fprintf out %p",
            "find . -fls out",
        ]);
        // `--` does not end find's expression, and nothing bundles.
        asks(&["find -- . -delete", "find . -LP", "find . -name"]);
    }

    #[test]
    fn git() {
        ok(&["git status", "git status --short", "git status -sb", "git status --porcelain=v2 -z", "git status -uno"]);
        ok(&[
            "git status -- src",
            "git log",
            "git log --oneline -n 5",
            "git log -5 --stat",
            "git log --format=%H%x00%s",
        ]);
        ok(&["git log --since=2.weeks --author=me main..HEAD -- src", "git log -p -S foo", "git log -U3"]);
        ok(&["git show HEAD", "git show --stat HEAD~1", "git show HEAD:README.md", "git diff", "git diff --cached"]);
        ok(&["git diff --stat HEAD~3", "git diff -U1 a b", "git diff --name-only main...HEAD", "git diff -- f"]);
        ok(&[
            "git branch",
            "git branch -a",
            "git branch -vv",
            "git branch --show-current",
            "git branch --format=%(refname)",
        ]);
        asks(&[
            // Writes a file.
            "git diff --output=x",
            "git diff --output x",
            "git log --output=x",
            "git log -p --output=x",
            "git diff --outp=x",
            // Runs programs.
            "git diff --ext-diff",
            "git log -p --ext-diff",
            "git show --textconv HEAD:f",
            "git log --show-signature",
            "git diff --submodule=diff",
            // Options before the subcommand.
            "git -c core.pager=sh status",
            "git -C .. status",
            "git --git-dir=x status",
            "git --exec-path=/tmp status",
            "git --no-pager log",
            // Other subcommands, and a branch created, deleted or renamed.
            "git commit -m x",
            "git stash",
            "git branch new",
            "git branch -d old",
            "git branch -m new",
            "git branch --unset-upstream",
            "git branch --edit-description",
            // A value option swallowing the next word is not a way round: git reads it
            // as an option, so the attached-only form refuses.
            "git log --format --output=x",
            "git log --pretty --output=x",
        ]);
    }

    #[test]
    fn the_rest() {
        ok(&["pwd", "pwd -P", "stat -c %s f", "stat --format=%s f", "file -b f"]);
        ok(&["file --mime-type a b", "du -sh .", "du -d 1", "du --max-depth=1 -h", "tree", "tree -L 2 -a src"]);
        ok(&["sort -n f", "sort -k 2 -t , f", "sort -rnu f", "diff -u a b", "diff -ru a b", "diff -U 3 a b"]);
        ok(&["uname -a", "uname -sr"]);
        asks(&["pwd x", "uname x"]);
        // Writes: `file -C` compiles, `tree -o`, `tree -R`, `sort -o`, `sort -T`.
        asks(&["file -C -m magic", "file -z f", "file -Z f", "file -p f", "tree -o out", "tree -R -H x"]);
        asks(&["sort -o out f", "sort -no out f", "sort --output=out f", "sort --out=out f", "sort -T /tmp f"]);
        // Programs: `sort --compress-program`, `diff --paginate`.
        asks(&["sort --compress-program=sh f", "diff -l a b", "diff --paginate a b"]);
    }

    #[test]
    fn a_program_not_listed_is_never_known_safe() {
        // `echo` is left off: it reads nothing, and it is the usual command to ask about.
        for l in [
            "rm -rf x",
            "touch x",
            "sh -c ls",
            "env ls",
            "xargs ls",
            "python3 -c 1",
            "less f",
            "more f",
            "tee f",
            "echo x",
        ] {
            assert_eq!(admitted(l), None, "{l}");
        }
    }

    #[test]
    fn an_operators_entry_reads_like_a_built_in_one() {
        let jq = KnownSafeRule {
            program: "jq".into(),
            subcommand: None,
            flags: vec!["-r".into(), "-c".into()],
            value_options: vec!["--arg".into(), "--indent=".into()],
            operands: true,
        };
        let l = KnownSafe { entries: vec![jq] };
        let w = |s: &str| shlex::split(s).unwrap();
        assert!(l.admits("jq", &w("-rc .a f.json")).is_some());
        assert!(l.admits("jq", &w("--arg x y .")).is_some());
        assert!(l.admits("jq", &w("--indent=4 .")).is_some());
        assert!(l.admits("jq", &w("--indent 4 .")).is_none());
        assert!(l.admits("jq", &w("-n .")).is_none());
        assert!(l.admits("ls", &[]).is_none());
    }
}
