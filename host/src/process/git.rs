//! Git started by the host, in any form (`git status` allowed by a rule, `git` under a
//! launcher, a test runner's git): the repository's executable settings neutralised.
//!
//! A repository's configuration is text the workspace's commands can write, and many
//! of its settings name programs git runs on its own: `core.fsmonitor` on every
//! `status`, hooks, clean and smudge filters, diff and merge drivers, the pager, the
//! editor, signing programs. The host passes overrides in git's own `GIT_CONFIG_COUNT`
//! form, which take precedence over every configuration file (includes included):
//! fixed settings switched off, and every filter, diff and merge driver the
//! repository's configuration files define (found by reading them, includes followed)
//! emptied. Bare repositories found by discovery are refused (`safe.bareRepository =
//! explicit`), so a directory dressed as a repository is not used, and discovery stops
//! at the workspace's parent (`GIT_CEILING_DIRECTORIES`).
//!
//! Those files are read by the guard's rules ([`repo_files`](super::repo_files)): a
//! FIFO, a device or a file over the cap among them — the configuration, an include
//! inside or outside the workspace, a `.git` file, a `commondir` — refuses the call with
//! an error naming it, before anyone is asked, instead of blocking the host or reading
//! without end. Git does not run with a configuration the host could not read.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::Refusal;
use super::repo_files::{self, COMMONDIR, CONFIG, DOTGIT, INCLUDED, MAX_FILES};
use crate::ErrorKind;
use crate::guard::Guard;

/// Settings overridden for every git the host starts.
const FIXED: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("sequence.editor", "false"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("core.gitProxy", ""),
    ("core.alternateRefsCommand", ""),
    ("credential.helper", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("gpg.program", "false"),
    ("gpg.openpgp.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("protocol.ext.allow", "never"),
    ("safe.bareRepository", "explicit"),
    ("uploadpack.packObjectsHook", ""),
];

/// Per-driver keys that name programs.
const DRIVER_KEYS: &[(&str, &[&str])] =
    &[("filter", &["clean", "smudge", "process"]), ("diff", &["textconv", "command"]), ("merge", &["driver"])];

/// The environment entries that neutralise a repository's programs for a git started
/// in `cwd` (absolute) inside the guard's workspace.
/// `extra` settings are added to the fixed ones. Refused when one of the repository's
/// files cannot be read by the guard's rules.
pub fn neutralising_env(guard: &Guard, cwd: &Path, extra: &[(&str, &str)]) -> Result<Vec<(String, String)>, Refusal> {
    let workspace = guard.root();
    let mut pairs: Vec<(String, String)> =
        FIXED.iter().chain(extra).map(|(k, v)| (k.to_string(), v.to_string())).collect();
    for (section, name) in drivers(guard, &config_files(guard, cwd)?)? {
        if section == "diff.external" {
            // The repository names an external diff program: it is replaced by one that
            // fails, so git stops with "external diff died" instead of running it.
            pairs.push(("diff.external".into(), "false".into()));
            continue;
        }
        if let Some((_, keys)) = DRIVER_KEYS.iter().find(|(s, _)| *s == section) {
            for key in *keys {
                pairs.push((format!("{section}.{name}.{key}"), String::new()));
            }
            if section == "filter" {
                pairs.push((format!("filter.{name}.required"), "false".into()));
            }
        }
    }
    let mut env = vec![("GIT_CONFIG_COUNT".to_string(), pairs.len().to_string())];
    for (i, (k, v)) in pairs.into_iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}"), k));
        env.push((format!("GIT_CONFIG_VALUE_{i}"), v));
    }
    if let Some(parent) = workspace.parent() {
        env.push(("GIT_CEILING_DIRECTORIES".into(), parent.to_string_lossy().into_owned()));
    }
    Ok(env)
}

/// The configuration files of repositories git could find from `cwd` up to the
/// workspace root: `.git/config` and `.git/config.worktree` (and a linked worktree's
/// or submodule's, through a `.git` file, with its common directory's), or a bare
/// repository's `config`.
fn config_files(guard: &Guard, cwd: &Path) -> Result<Vec<PathBuf>, Refusal> {
    let workspace = guard.root();
    let mut out = Vec::new();
    let mut dir = Some(cwd);
    while let Some(d) = dir {
        let dotgit = d.join(".git");
        if dotgit.is_dir() {
            out.extend([dotgit.join("config"), dotgit.join("config.worktree")]);
        } else if let Some(text) = repo_files::read(guard, &dotgit, DOTGIT)?
            && let Some(gitdir) = text.trim().strip_prefix("gitdir:")
        {
            let gitdir = d.join(gitdir.trim());
            out.extend([gitdir.join("config"), gitdir.join("config.worktree")]);
            if let Some(common) = repo_files::read(guard, &gitdir.join("commondir"), COMMONDIR)? {
                out.push(gitdir.join(common.trim()).join("config"));
            }
        }
        if d.join("HEAD").is_file() && d.join("objects").is_dir() {
            out.push(d.join("config"));
        }
        if d == workspace {
            break;
        }
        dir = d.parent().filter(|p| p.starts_with(workspace));
    }
    Ok(out)
}

/// Every entry of `files` and the files they include (all of them, whatever an
/// `includeIf` condition says), in the order git reads them, each file read by the
/// guard's rules.
fn all_entries(guard: &Guard, files: &[PathBuf]) -> Result<Vec<ConfigEntry>, Refusal> {
    let mut out = Vec::new();
    let mut queue: Vec<(PathBuf, usize)> = files.iter().rev().map(|f| (f.clone(), 0)).collect();
    let mut seen = BTreeSet::new();
    while let Some((file, depth)) = queue.pop() {
        if depth > 10 || !seen.insert(file.clone()) {
            continue;
        }
        if seen.len() > MAX_FILES {
            return Err(Refusal::new(
                ErrorKind::PathRefused,
                format!(
                    "git cannot run here: the repository's configuration includes more than {MAX_FILES} files, which \
                     the host reads before it runs git. Nothing ran. Remove the includes (or ask the person to), then \
                     try again"
                ),
            ));
        }
        let kind = if depth == 0 { CONFIG } else { INCLUDED };
        let Some(text) = repo_files::read(guard, &file, kind)? else { continue };
        for e in entries(&text) {
            // `[include] path` and `[includeIf "<condition>"] path`.
            if (e.section == "include" || (e.section == "includeif" && e.sub.is_some())) && e.key == "path" {
                queue.push((include_target(&file, &e.value), depth + 1));
            }
            out.push(e);
        }
    }
    Ok(out)
}

/// The `(section, name)` of every `[filter "x"]`, `[diff "x"]` and `[merge "x"]`
/// defined in `files` or the files they include.
fn drivers(guard: &Guard, files: &[PathBuf]) -> Result<BTreeSet<(String, String)>, Refusal> {
    let mut found = BTreeSet::new();
    for e in all_entries(guard, files)? {
        if let Some(name) = &e.sub
            && DRIVER_KEYS.iter().any(|(s, _)| *s == e.section)
        {
            found.insert((e.section.clone(), name.clone()));
        }
        // `diff.external` cannot be emptied (git would try to run a program named
        // ""), so it is overridden only where the repository sets it.
        if e.section == "diff" && e.sub.is_none() && e.key == "external" {
            found.insert(("diff.external".into(), String::new()));
        }
    }
    Ok(found)
}

/// Subcommands that reach a remote named in their arguments (or `origin`).
const REMOTE_SUBCOMMANDS: &[&str] = &["fetch", "pull", "push", "ls-remote", "remote", "submodule"];

/// The URLs of the remotes a git command (`args`, after `git`) started in `cwd` would
/// reach, read from the repository's configuration (includes followed), never by
/// running git: the remotes its arguments name, else `origin`, else the only remote;
/// `url.<base>.insteadOf` applied. Empty when the command reaches no remote or the
/// configuration cannot be read.
pub(crate) fn remote_urls(guard: &Guard, cwd: &Path, args: &[String]) -> Vec<String> {
    let Some(sub) = args.iter().find(|a| !a.starts_with('-')) else { return Vec::new() };
    if !REMOTE_SUBCOMMANDS.contains(&sub.as_str()) {
        return Vec::new();
    }
    let Ok(all) = config_files(guard, cwd).and_then(|files| all_entries(guard, &files)) else {
        return Vec::new();
    };
    let pushing = sub == "push";
    let mut urls: Vec<(String, String)> = Vec::new();
    let mut rewrites: Vec<(String, String)> = Vec::new();
    for e in &all {
        match (e.section.as_str(), &e.sub, e.key.as_str()) {
            ("remote", Some(name), "url") => urls.push((name.clone(), e.value.clone())),
            ("remote", Some(name), "pushurl") if pushing => urls.push((name.clone(), e.value.clone())),
            ("url", Some(base), "insteadof") => rewrites.push((e.value.clone(), base.clone())),
            ("url", Some(base), "pushinsteadof") if pushing => rewrites.push((e.value.clone(), base.clone())),
            _ => {}
        }
    }
    let names: BTreeSet<&str> = urls.iter().map(|(n, _)| n.as_str()).collect();
    let named: Vec<&str> = args.iter().filter_map(|a| names.get(a.as_str()).copied()).collect();
    let chosen: Vec<&str> = match (named.is_empty(), names.len()) {
        (false, _) => named,
        (true, 1) => names.into_iter().collect(),
        (true, _) => vec!["origin"],
    };
    let rewrite = |url: &str| -> String {
        // The longest matching prefix wins, as in git.
        match rewrites.iter().filter(|(from, _)| url.starts_with(from.as_str())).max_by_key(|(from, _)| from.len()) {
            Some((from, to)) => format!("{to}{}", &url[from.len()..]),
            None => url.to_string(),
        }
    };
    urls.iter().filter(|(n, _)| chosen.contains(&n.as_str())).map(|(_, u)| rewrite(u)).collect()
}

/// One `key = value` of a git configuration file, under its section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigEntry {
    /// The section, lower-cased (`filter`, `includeif`).
    pub section: String,
    /// The subsection (`"lfs"` in `[filter "lfs"]`), as written.
    pub sub: Option<String>,
    /// The key, lower-cased.
    pub key: String,
    /// The value: quotes removed, a trailing comment cut; `true` for a bare key.
    pub value: String,
}

/// The entries of a configuration file's text, read the way git reads the common
/// forms (sections, subsections, quoted values, `#` and `;` comments). A section
/// header with nothing under it still yields an entry with an empty key, so that a
/// bare `[include]` is seen.
pub(crate) fn entries(text: &str) -> Vec<ConfigEntry> {
    let mut out = Vec::new();
    let mut section: Option<(String, Option<String>)> = None;
    for line in text.lines() {
        let mut line = line.trim();
        if let Some(rest) = line.strip_prefix('[') {
            let Some((header, after)) = rest.split_once(']') else { continue };
            let (sec, sub) = parse_header(header);
            out.push(ConfigEntry { section: sec.clone(), sub: sub.clone(), key: String::new(), value: String::new() });
            section = Some((sec, sub));
            // `[section] key = value` on one line.
            line = after.trim();
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let Some((sec, sub)) = &section else { continue };
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), value_of(v)),
            None => (line.split([' ', '\t', '#', ';']).next().unwrap_or(""), "true".to_string()),
        };
        out.push(ConfigEntry { section: sec.clone(), sub: sub.clone(), key: key.to_ascii_lowercase(), value });
    }
    out
}

/// A value as git reads it: quoted parts unquoted (with `\"`, `\\`, `\n`, `\t`), a
/// comment outside quotes cut, surrounding space trimmed.
fn value_of(raw: &str) -> String {
    let mut out = String::new();
    let (mut quoted, mut chars) = (false, raw.trim().chars());
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => {}
            },
            '#' | ';' if !quoted => break,
            _ => out.push(c),
        }
    }
    out.trim_end().to_string()
}

/// `[section "sub"]` or `[section.sub]`, the section lower-cased.
fn parse_header(header: &str) -> (String, Option<String>) {
    let header = header.trim();
    if let Some((sec, rest)) = header.split_once(char::is_whitespace) {
        let sub = rest.trim().trim_matches('"').to_string();
        return (sec.to_ascii_lowercase(), Some(sub));
    }
    match header.split_once('.') {
        Some((sec, sub)) => (sec.to_ascii_lowercase(), Some(sub.to_ascii_lowercase())),
        None => (header.to_ascii_lowercase(), None),
    }
}

/// The file an include's `path` value in `from` names (relative to `from`'s directory).
fn include_target(from: &Path, value: &str) -> PathBuf {
    let value = match value.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(rest),
        None => PathBuf::from(value),
    };
    from.parent().unwrap_or(Path::new("/")).join(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drivers_are_found_through_includes() {
        let dir = std::env::temp_dir().join(format!("cheng-gitcfg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(
            dir.join(".git/config"),
            "[core]\n\tfsmonitor = touch x\n[filter \"lfs\"]\n\tclean = evil\n[include]\n\tpath = ../extra.cfg\n",
        )
        .unwrap();
        std::fs::write(dir.join("extra.cfg"), "[diff \"pic\"]\n\ttextconv = evil2\n[merge.ours]\n\tdriver = evil3\n")
            .unwrap();
        let guard = Guard::new(&dir).unwrap();
        let env = neutralising_env(&guard, guard.root(), &[]).unwrap();
        let text: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        // Fixed settings are switched off.
        assert!(text.iter().any(|t| t.ends_with("=core.fsmonitor")), "{text:?}");
        // Every driver the repository defines, included files too, is emptied.
        for key in ["filter.lfs.clean", "filter.lfs.process", "diff.pic.textconv", "merge.ours.driver"] {
            assert!(text.iter().any(|t| t.ends_with(&format!("={key}"))), "{key}: {text:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn remotes_are_read_from_the_configuration_never_run() {
        let dir = std::env::temp_dir().join(format!("cheng-gitremote-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(
            dir.join(".git/config"),
            "[remote \"origin\"]\n\turl = https://code.example/a.git\n\tpushurl = https://push.example/a.git\n\
             [remote \"mirror\"]\n\turl = gh:b/c\n[include]\n\tpath = ../more.cfg\n",
        )
        .unwrap();
        std::fs::write(dir.join("more.cfg"), "[url \"https://github.com/\"]\n\tinsteadOf = gh:\n").unwrap();
        let guard = Guard::new(&dir).unwrap();
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let sub = dir.join("sub");
        assert_eq!(remote_urls(&guard, &sub, &w(&["fetch"])), ["https://code.example/a.git"]);
        assert_eq!(remote_urls(&guard, &sub, &w(&["pull", "mirror", "main"])), ["https://github.com/b/c"]);
        assert_eq!(
            remote_urls(&guard, &sub, &w(&["push", "origin"])),
            ["https://code.example/a.git", "https://push.example/a.git"]
        );
        assert!(remote_urls(&guard, &sub, &w(&["status"])).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Real git with the neutralising environment: a plain repository's `git diff`
    /// prints its patch (an emptied `diff.external` made git try to run a program named
    /// ""), and one whose configuration names an external diff program does not run it.
    #[test]
    fn git_diff_prints_a_patch_and_never_runs_the_repositorys_external_diff() {
        if std::process::Command::new("git").arg("--version").output().is_err() {
            panic!("git is needed by this test");
        }
        let dir = std::env::temp_dir().join(format!("cheng-gitdiff-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let git = |args: &[&str], env: &[(String, String)]| {
            std::process::Command::new("git")
                .args(args)
                .current_dir(&dir)
                .env_remove("GIT_EXTERNAL_DIFF")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", &dir)
                .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .output()
                .unwrap()
        };
        git(&["init", "-q"], &[]);
        std::fs::write(dir.join("f.txt"), "one\n").unwrap();
        git(&["add", "f.txt"], &[]);
        git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], &[]);
        std::fs::write(dir.join("f.txt"), "two\n").unwrap();
        let guard = Guard::new(&dir).unwrap();

        let env = neutralising_env(&guard, guard.root(), &[]).unwrap();
        let out = git(&["diff"], &env);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("+two"));

        let config = std::fs::read_to_string(dir.join(".git/config")).unwrap();
        std::fs::write(dir.join(".git/config"), format!("{config}[diff]\n\texternal = touch pwned\n")).unwrap();
        // The control: without the host's settings git runs the repository's program.
        git(&["diff"], &[]);
        assert!(dir.join("pwned").exists(), "control: git runs diff.external");
        std::fs::remove_file(dir.join("pwned")).unwrap();
        let env = neutralising_env(&guard, guard.root(), &[]).unwrap();
        let out = git(&["diff"], &env);
        assert!(!out.status.success());
        assert!(!dir.join("pwned").exists(), "the repository's external diff ran");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn entries_read_sections_quotes_and_comments() {
        let text = "[core]\n\tfsmonitor = \"touch x\" # run me\n[user]\n  name = A \\\"B\\\" C ; c\n\temail=a@b\n\
                    [include]\n[includeIf \"gitdir:/x/\"]\n\tpath = /tmp/evil\n[remote.origin]\n\tbare\n";
        let e = entries(text);
        let find = |s: &str, k: &str| e.iter().find(|x| x.section == s && x.key == k).map(|x| x.value.clone());
        assert_eq!(find("core", "fsmonitor").as_deref(), Some("touch x"));
        assert_eq!(find("user", "name").as_deref(), Some("A \"B\" C"));
        assert_eq!(find("user", "email").as_deref(), Some("a@b"));
        // A bare [include] header is seen, and includeIf's path with its condition.
        assert!(e.iter().any(|x| x.section == "include" && x.key.is_empty()));
        let inc = e.iter().find(|x| x.section == "includeif").unwrap();
        assert_eq!(inc.sub.as_deref(), Some("gitdir:/x/"));
        assert_eq!(find("includeif", "path").as_deref(), Some("/tmp/evil"));
        assert_eq!(find("remote", "bare").as_deref(), Some("true"));
    }
}
