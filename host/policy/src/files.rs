//! Path rules (`[files]`, `[[files.rules]]`): which workspace files a tool, a command or
//! an MCP server may read or write without a person's answer. Two kinds of file are
//! protected by default: files another program runs or loads later, outside every
//! sandbox (an editor's tasks, an agent client's settings, direnv's `.envrc`, a shell's
//! rc files, CI workflows, git hooks), whose writing asks; and files that likely hold a
//! secret (`.env`, private keys, registry credentials), whose reading asks. `.git` stays
//! forbidden to the file tools in every spelling, whatever the rules say.
//!
//! Each operator rule names globs (`paths`) and says `read`, `write` or both: `"allow"`,
//! `"prompt"` or `"forbid"`. For one path and one access:
//!
//! - among the operator's rules that match and speak for that access, the strictest
//!   wins (`forbid` > `prompt` > `allow`);
//! - when one of them does, the built-in rules are not consulted for that access (so an
//!   operator loosens a default by naming its files, `paths = [".env"]`, `read = "allow"`);
//! - otherwise the strictest matching built-in rule decides; with none, the access is
//!   allowed;
//! - two floors no rule lowers: `.git` is forbidden for both accesses, and the host's own
//!   configuration and state in the workspace (given when the rules are made) ask before
//!   every write.
//!
//! A pattern matches at any depth unless it starts with `/`, which anchors it to the
//! workspace root; `*` stays within one part of the path, `**` crosses parts. A rule
//! matching a directory covers everything beneath it, so `.husky`, `.husky/**` and
//! `/**/.husky` all cover `.husky/pre-commit`. Every rule, built-in or the operator's, is
//! matched without regard to case, and against the name some file systems read (trailing
//! dots and spaces dropped, an NTFS stream suffix cut off, characters HFS+ ignores
//! removed) as well as the name as written; the stricter answer counts.
//!
//! The rules are compiled once into one [`globset::GlobSet`]. A path of plain ASCII names
//! is first read in one pass, without allocating, for `.git` and for the literal pieces
//! every pattern needs (`.vscode`, `.pem`, `id_rsa`); a path holding none of them is
//! allowed without asking the set, which is most paths of a source tree.
//!
//! # Example
//!
//! ```
//! use cheng_policy::files::{Access, FilesConfig};
//! use cheng_policy::process::RuleDecision;
//!
//! let cfg: FilesConfig = toml::from_str(r#"
//!     [[rules]]
//!     paths = [".env"]
//!     read = "allow"
//!     [[rules]]
//!     paths = ["secrets/**"]
//!     read = "forbid"
//! "#).unwrap();
//! let rules = cfg.read(&["cheng.toml"]).unwrap();
//! assert_eq!(rules.check(".env", Access::Read).decision, RuleDecision::Allow);
//! assert_eq!(rules.check("app/.env.local", Access::Read).decision, RuleDecision::Prompt);
//! assert_eq!(rules.check("secrets/db.txt", Access::Read).decision, RuleDecision::Forbid);
//! assert_eq!(rules.check(".vscode/tasks.json", Access::Write).decision, RuleDecision::Prompt);
//! assert_eq!(rules.check("cheng.toml", Access::Write).decision, RuleDecision::Prompt);
//! assert_eq!(rules.check("src/main.rs", Access::Write).decision, RuleDecision::Allow);
//! ```

use std::borrow::Cow;
use std::fmt;

use globset::{GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};
use serde::Deserialize;

use crate::SettingError;
use crate::process::RuleDecision;

/// Reading a file's contents, or changing it (writing, creating, removing, renaming).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Reading contents.
    Read,
    /// Writing, creating, removing or renaming.
    Write,
}

impl Access {
    /// The key that speaks for this access in a rule: `read` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[files]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesConfig {
    /// The operator's path rules (`[[files.rules]]`), in order.
    #[serde(default)]
    pub rules: Vec<FileRuleConfig>,
}

/// One `[[files.rules]]` entry as written; [`FilesConfig::read`] checks it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRuleConfig {
    /// Globs: at any depth unless the pattern starts with `/` (the workspace root).
    #[serde(default)]
    pub paths: Vec<String>,
    /// `"allow"`, `"prompt"` or `"forbid"` for reading; absent: this rule does not
    /// speak for reading.
    #[serde(default)]
    pub read: Option<String>,
    /// `"allow"`, `"prompt"` or `"forbid"` for writing; absent: this rule does not
    /// speak for writing.
    #[serde(default)]
    pub write: Option<String>,
}

/// One built-in rule: a pattern (matched like an operator's), what it says for each
/// access ([`RuleDecision::Allow`]: nothing), and why.
#[derive(Debug, PartialEq, Eq)]
pub struct BuiltIn {
    /// The pattern, as an operator would write it.
    pub pattern: &'static str,
    /// What it says for reading.
    pub read: RuleDecision,
    /// What it says for writing.
    pub write: RuleDecision,
    /// Why the files are protected.
    pub reason: &'static str,
    /// Names (compared without regard to case) the pattern would match but the rule
    /// leaves alone.
    pub except: &'static [&'static str],
}

impl BuiltIn {
    /// What the rule says for `access`.
    pub fn decision(&self, access: Access) -> RuleDecision {
        match access {
            Access::Read => self.read,
            Access::Write => self.write,
        }
    }

    /// Whether this is the `.git` rule, which no operator's rule changes.
    pub fn is_git(&self) -> bool {
        self.pattern == BUILT_IN[0].pattern
    }
}

/// Why a file another program runs or loads later is protected.
pub const RUN_LATER: &str = "run or loaded later by another program (an editor, an agent client, direnv, a shell, CI)";
/// Why a file that may hold a secret is protected.
pub const SECRET: &str = "likely holds a secret";
/// Why `.git` is closed.
pub const GIT: &str = "git runs its hooks and reads its configuration later, outside every sandbox; the repository \
                       changes only through workspace_git_write";

const fn write_prompt(pattern: &'static str) -> BuiltIn {
    BuiltIn { pattern, read: RuleDecision::Allow, write: RuleDecision::Prompt, reason: RUN_LATER, except: &[] }
}

const fn read_prompt(pattern: &'static str) -> BuiltIn {
    BuiltIn { pattern, read: RuleDecision::Prompt, write: RuleDecision::Allow, reason: SECRET, except: &[] }
}

/// The built-in rules, `.git` first. Listed by `cheng settings` and the README.
static BUILT_IN: &[BuiltIn] = &[
    BuiltIn { pattern: ".git", read: RuleDecision::Forbid, write: RuleDecision::Forbid, reason: GIT, except: &[] },
    // Files other programs run or load later: editors and agent clients read their
    // settings, tasks and MCP servers from these when they open the folder.
    write_prompt(".vscode/**"),
    write_prompt(".idea/**"),
    write_prompt(".zed/**"),
    write_prompt(".claude/**"),
    write_prompt(".cursor/**"),
    write_prompt(".codex/**"),
    write_prompt(".mcp.json"),
    // direnv runs it on entering the directory.
    write_prompt(".envrc"),
    // CI and git hook managers.
    write_prompt(".github/workflows/**"),
    write_prompt(".gitlab-ci.yml"),
    write_prompt(".pre-commit-config.yaml"),
    write_prompt(".husky/**"),
    write_prompt(".devcontainer/**"),
    // Shell rc and profile files, for a workspace that is (or holds) a home directory.
    write_prompt(".bashrc"),
    write_prompt(".bash_profile"),
    write_prompt(".bash_login"),
    write_prompt(".bash_logout"),
    write_prompt(".bash_aliases"),
    write_prompt(".profile"),
    write_prompt(".zshrc"),
    write_prompt(".zshenv"),
    write_prompt(".zprofile"),
    write_prompt(".zlogin"),
    write_prompt(".zlogout"),
    write_prompt(".cshrc"),
    write_prompt(".tcshrc"),
    write_prompt(".login"),
    write_prompt(".kshrc"),
    write_prompt(".config/fish/**"),
    // Likely secrets.
    read_prompt(".env"),
    // Templates committed for others to copy hold no secret: `.env.example`,
    // `.env.sample` and `.env.template` are read without asking.
    BuiltIn {
        pattern: ".env.*",
        read: RuleDecision::Prompt,
        write: RuleDecision::Allow,
        reason: SECRET,
        except: &[".env.example", ".env.sample", ".env.template"],
    },
    read_prompt("*.pem"),
    read_prompt("*.key"),
    // Public halves (`id_rsa.pub`) match too, as the list is written.
    read_prompt("id_rsa*"),
    read_prompt("id_ed25519*"),
    read_prompt("id_ecdsa*"),
    read_prompt("id_dsa*"),
    read_prompt(".npmrc"),
    read_prompt(".pypirc"),
    read_prompt(".netrc"),
    read_prompt("*.p12"),
    read_prompt(".aws/credentials*"),
    read_prompt(".docker/config.json"),
];

/// The built-in rules, `.git` first: each with its pattern, what it says for reading
/// and for writing ([`RuleDecision::Allow`]: nothing), and its reason.
pub fn built_in() -> &'static [BuiltIn] {
    BUILT_IN
}

/// The rule that decided a [`Verdict`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecidingRule<'a> {
    /// A built-in rule.
    BuiltIn(&'static BuiltIn),
    /// `[[files.rules]]` number `number` (counting from 1), through its pattern `pattern`.
    Operator {
        /// Its place among `[[files.rules]]`, from 1.
        number: usize,
        /// The pattern that matched, as written.
        pattern: &'a str,
    },
    /// The host's own configuration or state, at `path` (relative to the workspace).
    HostFile {
        /// The protected path, as given.
        path: &'a str,
    },
}

impl fmt::Display for DecidingRule<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecidingRule::BuiltIn(b) => write!(f, "the built-in rule {} ({})", quote(b.pattern), b.reason),
            DecidingRule::Operator { number, pattern } => {
                write!(f, "[[files.rules]] number {number} ({})", quote(pattern))
            }
            DecidingRule::HostFile { path } => {
                write!(f, "the host's own configuration or state ({})", quote(path))
            }
        }
    }
}

/// What the rules say of one access to one path, and which rule said it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict<'a> {
    /// Allow, ask a person, or refuse.
    pub decision: RuleDecision,
    /// The rule that decided; `None` when no rule matched (the access is allowed).
    pub rule: Option<DecidingRule<'a>>,
}

impl Verdict<'_> {
    const ALLOW: Verdict<'static> = Verdict { decision: RuleDecision::Allow, rule: None };

    /// How the operator changes this answer for `rel` (the path checked), as a
    /// sentence of its own.
    pub fn how_to_change(&self, rel: &str, access: Access) -> String {
        let a = access.as_str();
        let this = quote(&anchored(rel));
        match self.rule {
            None => format!(
                "To protect it, add a [[files.rules]] entry with paths = [{this}] and {a} = \"prompt\" (or \"forbid\") \
                 to cheng.toml."
            ),
            Some(DecidingRule::BuiltIn(b)) if b.is_git() => "No rule changes this: .git stays closed to the file \
                                                             tools in every spelling; the repository changes through \
                                                             workspace_git_write."
                .to_string(),
            Some(DecidingRule::BuiltIn(b)) => format!(
                "To change it, add a [[files.rules]] entry with paths = [{this}] (this path) or [{}] (every path the \
                 built-in rule covers) and {a} = \"allow\" to cheng.toml.",
                quote(b.pattern)
            ),
            Some(DecidingRule::Operator { number, .. }) => format!(
                "To change it, change {a} in [[files.rules]] number {number} of cheng.toml, or remove that rule (the \
                 strictest matching rule decides)."
            ),
            Some(DecidingRule::HostFile { .. }) => "No rule loosens this: a person answers every write to the host's \
                                                    own configuration and state, and a [[files.rules]] entry can only \
                                                    make it stricter."
                .to_string(),
        }
    }

    /// What happens to `access` of `rel`, which rule says so and how to change it: the
    /// text of a refusal or an approval card.
    pub fn message(&self, rel: &str, access: Access) -> String {
        let path = quote(rel);
        let what = match self.decision {
            RuleDecision::Allow => "is allowed",
            RuleDecision::Prompt => "asks a person first",
            RuleDecision::Forbid => "is refused",
        };
        let verb = match access {
            Access::Read => "Reading",
            Access::Write => "Writing",
        };
        match self.rule {
            Some(rule) => format!("{verb} {path} {what}: {rule}. {}", self.how_to_change(rel, access)),
            None => format!("{verb} {path} {what}."),
        }
    }
}

/// A `[files]` table, checked and compiled: what [`FilesConfig::read`] returns.
#[derive(Debug, Clone)]
pub struct FileRules {
    /// Every glob of every rule; a glob's index leads to its pattern through `globs`.
    set: GlobSet,
    /// Passes every path the set could match, and turns most others away cheaply.
    prefilter: Prefilter,
    /// For each glob of `set`, the pattern it came from (an index into `patterns`).
    globs: Vec<usize>,
    /// Every pattern: the operator's rules' first, in order, then the built-in rules'.
    patterns: Vec<Pattern>,
    /// The host's own files (as given, and folded to lower case).
    host_files: Vec<(String, String)>,
    /// Per access (read, write): whether no path outside `.git` gets anything but allow.
    quiet: [bool; 2],
}

#[derive(Debug, Clone)]
struct Pattern {
    /// As written.
    text: String,
    /// Which rule: an operator's (its number, from 1) or a built-in one.
    origin: Origin,
    read: Option<RuleDecision>,
    write: Option<RuleDecision>,
    /// The built-in rule's exceptions, with a matcher for one part of a path.
    except: Option<(&'static [&'static str], GlobMatcher)>,
}

#[derive(Debug, Clone, Copy)]
enum Origin {
    Operator(usize),
    BuiltIn(&'static BuiltIn),
}

impl Pattern {
    fn says(&self, access: Access) -> Option<RuleDecision> {
        match access {
            Access::Read => self.read,
            Access::Write => self.write,
        }
    }

    /// Whether a match stands once the exceptions are applied: some part of the path
    /// matches the (one-part) pattern and is not an exception.
    fn stands(&self, path: &str) -> bool {
        match &self.except {
            None => true,
            Some((names, one)) => {
                path.split('/').any(|part| one.is_match(part) && !names.iter().any(|n| n.eq_ignore_ascii_case(part)))
            }
        }
    }

    fn rule(&self) -> DecidingRule<'_> {
        match self.origin {
            Origin::Operator(number) => DecidingRule::Operator { number, pattern: &self.text },
            Origin::BuiltIn(b) => DecidingRule::BuiltIn(b),
        }
    }
}

/// A pattern turned into globs for the set.
struct Compiled {
    globs: Vec<String>,
    /// It matches every path.
    everything: bool,
}

/// Turn one pattern into the globs that match a path it names or any path beneath one.
fn compile(pattern: &str) -> Result<Compiled, String> {
    if pattern.is_empty() {
        return Err("is empty".into());
    }
    let (anchored, body) = match pattern.strip_prefix('/') {
        Some(rest) => (true, rest),
        None => (false, pattern),
    };
    let mut body = body.strip_suffix('/').unwrap_or(body);
    if body.is_empty() {
        return Err("names the workspace root itself; \"**\" matches every path".into());
    }
    if body.split('/').any(|part| part.is_empty() || part == "." || part == "..") {
        return Err("has an empty, `.` or `..` part; paths are matched as the workspace guard normalizes them".into());
    }
    // `X/**` covers what `X` covers: X itself and everything beneath it.
    while let Some(rest) = body.strip_suffix("/**") {
        body = rest;
    }
    let everything = matches!(body, "**" | "*" | "**/*");
    if body == "**" {
        return Ok(Compiled { globs: vec!["**".into()], everything });
    }
    let full = if anchored || body.starts_with("**/") { body.to_string() } else { format!("**/{body}") };
    let under = format!("{full}/**");
    for g in [&full, &under] {
        glob(g).map_err(|e| format!("is not a pattern: {}", e.kind()))?;
    }
    Ok(Compiled { globs: vec![full, under], everything })
}

fn glob(text: &str) -> Result<globset::Glob, globset::Error> {
    GlobBuilder::new(text).case_insensitive(true).literal_separator(true).build()
}

fn decision(value: &str) -> Option<RuleDecision> {
    match value {
        "allow" => Some(RuleDecision::Allow),
        "prompt" => Some(RuleDecision::Prompt),
        "forbid" => Some(RuleDecision::Forbid),
        _ => None,
    }
}

impl FilesConfig {
    /// Check the rules and compile them with the built-in ones. `host_files` are the
    /// host's own configuration and state that lie in the workspace, relative to it
    /// (`cheng.toml`, `.cheng/state`): writing them asks, whatever the rules say. The
    /// message names the rule (from 1) and its key.
    pub fn read<S: AsRef<str>>(&self, host_files: &[S]) -> Result<FileRules, SettingError> {
        let mut patterns = Vec::new();
        let mut builder = GlobSetBuilder::new();
        let mut globs = Vec::new();
        let mut add = |p: Pattern, compiled: Compiled, patterns: &mut Vec<Pattern>| -> Result<(), globset::Error> {
            for g in &compiled.globs {
                builder.add(glob(g)?);
                globs.push(patterns.len());
            }
            patterns.push(p);
            Ok(())
        };
        // Per access: whether every operator rule speaking for it allows, and one of
        // them matches every path.
        let mut allows_all = [false; 2];
        let mut stricter = [false; 2];
        for (i, rule) in self.rules.iter().enumerate() {
            let number = i + 1;
            let at = |key: &str| format!("[[files.rules]] number {number} {key}");
            let mut said = [None, None];
            for (slot, key, value) in [(0, "read", &rule.read), (1, "write", &rule.write)] {
                if let Some(v) = value {
                    said[slot] = Some(decision(v).ok_or_else(|| {
                        SettingError(format!(
                            "{} = {}: expected \"allow\", \"prompt\" or \"forbid\"",
                            at(key),
                            quote(v)
                        ))
                    })?);
                }
            }
            if said == [None, None] {
                return Err(SettingError(format!(
                    "[[files.rules]] number {number} says nothing: give read, write or both (\"allow\", \"prompt\" \
                     or \"forbid\")"
                )));
            }
            if rule.paths.is_empty() {
                return Err(SettingError(format!("{} is empty: name at least one pattern", at("paths"))));
            }
            for text in &rule.paths {
                let compiled =
                    compile(text).map_err(|why| SettingError(format!("{}: {} {why}", at("paths"), quote(text))))?;
                let names_git = text.split('/').any(cheng_contract::paths::is_git_dir_name);
                if names_git && said.iter().flatten().any(|d| *d != RuleDecision::Forbid) {
                    return Err(SettingError(format!(
                        "{}: {} names .git, which stays forbidden to the file tools whatever the rules say",
                        at("paths"),
                        quote(text)
                    )));
                }
                for slot in 0..2 {
                    match said[slot] {
                        Some(RuleDecision::Allow) if compiled.everything => allows_all[slot] = true,
                        Some(RuleDecision::Allow) | None => {}
                        Some(_) => stricter[slot] = true,
                    }
                }
                let p = Pattern {
                    text: text.clone(),
                    origin: Origin::Operator(number),
                    read: said[0],
                    write: said[1],
                    except: None,
                };
                add(p, compiled, &mut patterns).map_err(|e| {
                    SettingError(format!("{}: {} is not a pattern: {}", at("paths"), quote(text), e.kind()))
                })?;
            }
        }
        // `.git` is checked on its own, in every spelling, before the set is asked.
        for b in &BUILT_IN[1..] {
            let compiled = compile(b.pattern).expect("built-in patterns compile");
            let says = |d: RuleDecision| (d != RuleDecision::Allow).then_some(d);
            let except =
                (!b.except.is_empty()).then(|| (b.except, glob(b.pattern).expect("compiles").compile_matcher()));
            let p = Pattern {
                text: b.pattern.to_string(),
                origin: Origin::BuiltIn(b),
                read: says(b.read),
                write: says(b.write),
                except,
            };
            add(p, compiled, &mut patterns).expect("built-in patterns compile");
        }
        let set = builder.build().map_err(|e| SettingError(format!("[[files.rules]]: {e}")))?;
        let mut host = Vec::new();
        for p in host_files {
            let p = p.as_ref().trim_start_matches("./").trim_end_matches('/');
            if p.is_empty() || p == "." {
                continue;
            }
            host.push((p.to_string(), fold(p).to_lowercase()));
        }
        let quiet = [allows_all[0] && !stricter[0], allows_all[1] && !stricter[1] && host.is_empty()];
        let prefilter = Prefilter::new(patterns.iter().map(|p| p.text.as_str()));
        Ok(FileRules { set, prefilter, globs, patterns, host_files: host, quiet })
    }
}

impl FileRules {
    /// The built-in rules alone (no `[files]` table, no host files in the workspace).
    pub fn defaults() -> FileRules {
        FilesConfig::default().read::<&str>(&[]).expect("built-in rules compile")
    }

    /// Whether no path outside `.git` gets anything but allow for `access` (the
    /// operator allowed it everywhere): a caller may skip its per-path work, keeping
    /// only its own `.git` refusal.
    pub fn is_quiet(&self, access: Access) -> bool {
        self.quiet[access as usize]
    }

    /// What the rules say of `access` to `rel`, a workspace-relative path as the path
    /// guard normalizes it (forward slashes, no `.` or `..` parts).
    pub fn check(&self, rel: &str, access: Access) -> Verdict<'_> {
        if let Some(plain) = self.scan(rel) {
            let verdict = match plain {
                Plain::Git => return Self::git(access),
                Plain::Other { maybe: false } => Verdict::ALLOW,
                Plain::Other { maybe: true } => self.consult_set(rel, access),
            };
            return self.host_floor(rel, access, verdict);
        }
        let folded = fold(rel);
        let verdict = self.check_one(&folded, access);
        if folded == rel {
            return verdict;
        }
        let raw = self.check_one(rel, access);
        if raw.decision > verdict.decision { raw } else { verdict }
    }

    fn git(access: Access) -> Verdict<'static> {
        Verdict { decision: BUILT_IN[0].decision(access), rule: Some(DecidingRule::BuiltIn(&BUILT_IN[0])) }
    }

    /// One pass over a path of plain ASCII names: whether a part is `.git` (or `GIT~1`),
    /// and whether the prefilter lets it through to the set. `None` for a path a
    /// folding file system could read differently (a character beyond ASCII, a `:`, a
    /// part ending in a dot or a space): [`fold`] and both readings for it.
    fn scan(&self, path: &str) -> Option<Plain> {
        let b = path.as_bytes();
        let f = &self.prefilter;
        let mut maybe = f.always;
        let mut start = 0;
        for i in 0..=b.len() {
            let c = b.get(i).copied().unwrap_or(b'/');
            if c == b'/' {
                let part = &b[start..i];
                if part.last().is_some_and(|l| matches!(l, b'.' | b' ')) {
                    return None;
                }
                if part.eq_ignore_ascii_case(b".git") || part.eq_ignore_ascii_case(b"git~1") {
                    return Some(Plain::Git);
                }
                start = i + 1;
            } else if c >= 0x80 || c == b':' {
                return None;
            } else if !maybe && let Some(&next) = b.get(i + 1) {
                maybe = f.starts_run(c, next) && f.run_at(&b[i..]);
            }
        }
        Some(Plain::Other { maybe })
    }

    fn check_one(&self, path: &str, access: Access) -> Verdict<'_> {
        if path.split('/').any(git_part) {
            return Self::git(access);
        }
        let verdict = if self.prefilter.may_match(path) { self.consult_set(path, access) } else { Verdict::ALLOW };
        self.host_floor(path, access, verdict)
    }

    fn consult_set(&self, path: &str, access: Access) -> Verdict<'_> {
        if self.set.is_match(path) { self.decide(path, access) } else { Verdict::ALLOW }
    }

    /// A write to the host's own files asks at least.
    fn host_floor<'a>(&'a self, path: &str, access: Access, verdict: Verdict<'a>) -> Verdict<'a> {
        if access == Access::Read || verdict.decision > RuleDecision::Prompt {
            return verdict;
        }
        let under = |p: &str| {
            let head = match (path.is_ascii() && p.is_ascii(), path.get(..p.len())) {
                (true, Some(head)) => head.eq_ignore_ascii_case(p),
                (true, None) => false,
                (false, _) => {
                    let lower = path.to_lowercase();
                    return lower.strip_prefix(p).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
                }
            };
            head && matches!(path.as_bytes().get(p.len()), None | Some(b'/'))
        };
        match self.host_files.iter().find(|(_, p)| under(p)) {
            Some((given, _)) => {
                Verdict { decision: RuleDecision::Prompt, rule: Some(DecidingRule::HostFile { path: given }) }
            }
            None => verdict,
        }
    }

    /// The strictest matching operator rule for `access`, else the strictest matching
    /// built-in one; the first listed among equals.
    fn decide(&self, path: &str, access: Access) -> Verdict<'_> {
        let mut hits = Vec::new();
        self.set.matches_into(path, &mut hits);
        let mut operator: Option<(RuleDecision, usize)> = None;
        let mut built_in: Option<(RuleDecision, usize)> = None;
        let mut last = usize::MAX;
        for g in hits {
            let at = self.globs[g];
            if at == last {
                continue;
            }
            last = at;
            let p = &self.patterns[at];
            let Some(d) = p.says(access) else { continue };
            if !p.stands(path) {
                continue;
            }
            let slot = match p.origin {
                Origin::Operator(_) => &mut operator,
                Origin::BuiltIn(_) => &mut built_in,
            };
            // Hits come in ascending order, so the first of equals stays.
            if slot.is_none_or(|(best, _)| d > best) {
                *slot = Some((d, at));
            }
        }
        match operator.or(built_in) {
            Some((decision, at)) => Verdict { decision, rule: Some(self.patterns[at].rule()) },
            None => Verdict::ALLOW,
        }
    }
}

/// What one pass over a plain path found.
enum Plain {
    /// A part names `.git`.
    Git,
    /// Otherwise; `maybe`: the prefilter lets it through to the set.
    Other { maybe: bool },
}

/// A quick test before the set is asked: every pattern needs some run of literal
/// characters (`.vscode`, `.pem`, `id_rsa`) to appear in a path it matches, so a path
/// holding none of them matches nothing. Runs are compared without regard to ASCII
/// case, two bytes at a time through a table of the pairs that start one. A path with
/// other than ASCII characters, or a pattern without a literal run of two ASCII
/// characters, always goes to the set (Unicode case folding matches more than ASCII's).
#[derive(Debug, Clone)]
struct Prefilter {
    /// Some pattern has no usable run: every path goes to the set.
    always: bool,
    /// One bit per (lower-cased) byte pair that starts a run.
    pairs: Box<[u64; 1024]>,
    /// One required run per pattern, lower-cased, deduplicated.
    runs: Vec<Vec<u8>>,
}

impl Prefilter {
    fn new<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Prefilter {
        let mut f = Prefilter { always: false, pairs: Box::new([0; 1024]), runs: Vec::new() };
        for p in patterns {
            match literal_run(p) {
                Some(run) => {
                    let run = run.to_ascii_lowercase().into_bytes();
                    let pair = Self::pair(run[0], run[1]);
                    f.pairs[pair / 64] |= 1 << (pair % 64);
                    if !f.runs.contains(&run) {
                        f.runs.push(run);
                    }
                }
                None => f.always = true,
            }
        }
        f
    }

    fn pair(a: u8, b: u8) -> usize {
        (a.to_ascii_lowercase() as usize) << 8 | b.to_ascii_lowercase() as usize
    }

    /// Whether some run starts with the bytes `a`, `b` (in any ASCII case).
    fn starts_run(&self, a: u8, b: u8) -> bool {
        let pair = Self::pair(a, b);
        self.pairs[pair / 64] & (1 << (pair % 64)) != 0
    }

    /// Whether some run starts `tail`.
    fn run_at(&self, tail: &[u8]) -> bool {
        self.runs.iter().any(|run| tail.get(..run.len()).is_some_and(|head| head.eq_ignore_ascii_case(run)))
    }

    /// Whether the set could match `path`.
    fn may_match(&self, path: &str) -> bool {
        if self.always || !path.is_ascii() {
            return true;
        }
        let b = path.as_bytes();
        (0..b.len().saturating_sub(1)).any(|i| self.starts_run(b[i], b[i + 1]) && self.run_at(&b[i..]))
    }
}

/// The longest run of literal ASCII characters within one part of `pattern`, outside
/// classes (`[…]`) and alternatives (`{…}`); `None` when no run is two characters long.
fn literal_run(pattern: &str) -> Option<&str> {
    let b = pattern.as_bytes();
    let (mut best, mut start, mut i) = ((0, 0), 0, 0);
    let close = |start: usize, end: usize, best: &mut (usize, usize)| {
        if end.saturating_sub(start) > best.1 - best.0 {
            *best = (start, end);
        }
    };
    while i < b.len() {
        let c = b[i];
        let skip_to = match c {
            b'[' => {
                // `[]…]`, `[!]…]` and `[^]…]` hold a literal `]` first.
                let mut j = i + 1;
                if matches!(b.get(j), Some(b'!' | b'^')) {
                    j += 1;
                }
                if b.get(j) == Some(&b']') {
                    j += 1;
                }
                Some(b[j..].iter().position(|&x| x == b']').map_or(b.len(), |k| j + k + 1))
            }
            b'{' => Some(b[i..].iter().position(|&x| x == b'}').map_or(b.len(), |k| i + k + 1)),
            b'\\' => Some(i + 2),
            b'*' | b'?' | b'/' => Some(i + 1),
            c if !c.is_ascii() => Some(i + 1),
            _ => None,
        };
        match skip_to {
            Some(next) => {
                close(start, i, &mut best);
                i = next.min(b.len());
                start = i;
            }
            None => i += 1,
        }
    }
    close(start, b.len(), &mut best);
    (best.1 - best.0 >= 2).then(|| &pattern[best.0..best.1])
}

/// Whether one part of a path names a git directory in some spelling
/// ([`cheng_contract::paths::is_git_dir_name`]), without allocating for a plain name.
fn git_part(part: &str) -> bool {
    if part.is_ascii() && !part.contains(':') {
        let name = part.trim_end_matches(['.', ' ']);
        return name.eq_ignore_ascii_case(".git") || name.eq_ignore_ascii_case("git~1");
    }
    cheng_contract::paths::is_git_dir_name(part)
}

/// Characters some file systems ignore in names (HFS+ drops these when it compares
/// names), as the workspace guard's `.git` check treats them.
fn ignorable(c: char) -> bool {
    matches!(c as u32, 0x200C..=0x200F | 0x202A..=0x202E | 0x206A..=0x206F | 0xFEFF)
}

/// `rel` as a file system that folds names may read it: in each part, ignorable
/// characters removed, an NTFS stream suffix (`:…`) cut off, trailing dots and spaces
/// dropped. Borrowed, without work beyond one scan, for the usual path.
fn fold(rel: &str) -> Cow<'_, str> {
    let plain = rel.is_ascii() && !rel.contains(':') && !rel.split('/').any(|p| p.ends_with(['.', ' ']));
    if plain {
        return Cow::Borrowed(rel);
    }
    let parts: Vec<String> = rel
        .split('/')
        .map(|part| {
            let cleaned: String = part.chars().filter(|c| !ignorable(*c)).collect();
            let name = cleaned.split(':').next().unwrap_or("").trim_end_matches(['.', ' ']);
            if name.is_empty() { part.to_string() } else { name.to_string() }
        })
        .collect();
    let folded = parts.join("/");
    if folded == rel { Cow::Borrowed(rel) } else { Cow::Owned(folded) }
}

/// `rel` as a pattern anchored at the root that matches only it.
fn anchored(rel: &str) -> String {
    let mut out = String::with_capacity(rel.len() + 1);
    out.push('/');
    for c in rel.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '?' | '*' | '[' | ']' | '{' | '}' => {
                out.push('[');
                out.push(c);
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

/// `s` as a TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use RuleDecision::{Allow, Forbid, Prompt};

    fn rules(text: &str) -> FileRules {
        rules_with(text, &[])
    }

    fn rules_with(text: &str, host_files: &[&str]) -> FileRules {
        let cfg: FilesConfig = toml::from_str(text).unwrap();
        cfg.read(host_files).unwrap()
    }

    fn refused(text: &str) -> String {
        let cfg: FilesConfig = toml::from_str(text).unwrap();
        cfg.read::<&str>(&[]).unwrap_err().0
    }

    fn built(pattern: &str) -> &'static BuiltIn {
        built_in().iter().find(|b| b.pattern == pattern).unwrap()
    }

    fn by_built_in(pattern: &str) -> Option<DecidingRule<'static>> {
        Some(DecidingRule::BuiltIn(built(pattern)))
    }

    /// Every built-in rule: a path it protects and one it leaves alone.
    const CASES: &[(&str, &str, &str)] = &[
        (".git", "sub/.git/hooks/pre-commit", "src/.gitignore"),
        (".vscode/**", "sub/.vscode/tasks.json", "vscode/tasks.json"),
        (".idea/**", ".idea/workspace.xml", ".idea.md"),
        (".zed/**", ".zed/settings.json", "zed/settings.json"),
        (".claude/**", ".claude/settings.json", "CLAUDE.md"),
        (".cursor/**", ".cursor/mcp.json", "src/cursor.ts"),
        (".codex/**", ".codex/config.toml", "src/codex/config.toml"),
        (".mcp.json", "app/.mcp.json", "mcp.json"),
        (".envrc", ".envrc", ".envrc.example"),
        (".github/workflows/**", ".github/workflows/ci.yml", ".github/CODEOWNERS"),
        (".gitlab-ci.yml", ".gitlab-ci.yml", "ci/gitlab-ci.yml"),
        (".pre-commit-config.yaml", ".pre-commit-config.yaml", ".pre-commit-hooks.yaml"),
        (".husky/**", ".husky/pre-commit", "husky/pre-commit"),
        (".devcontainer/**", ".devcontainer/devcontainer.json", "devcontainer.json"),
        (".bashrc", "home/.bashrc", ".bashrc.bak"),
        (".bash_profile", ".bash_profile", "bash_profile"),
        (".bash_login", ".bash_login", ".bash_login.txt"),
        (".bash_logout", ".bash_logout", "bash_logout"),
        (".bash_aliases", ".bash_aliases", "aliases"),
        (".profile", ".profile", "profile.rs"),
        (".zshrc", ".zshrc", "zshrc"),
        (".zshenv", ".zshenv", "zshenv"),
        (".zprofile", ".zprofile", "zprofile"),
        (".zlogin", ".zlogin", "zlogin"),
        (".zlogout", ".zlogout", "zlogout"),
        (".cshrc", ".cshrc", "cshrc"),
        (".tcshrc", ".tcshrc", "tcshrc"),
        (".login", ".login", "login.html"),
        (".kshrc", ".kshrc", "kshrc"),
        (".config/fish/**", ".config/fish/config.fish", ".config/fishy/config.fish"),
        (".env", ".env", ".envoy"),
        (".env.*", "web/.env.local", ".env.example"),
        ("*.pem", "certs/server.pem", "pem/readme.md"),
        ("*.key", "tls/site.key", "src/monkey.rs"),
        ("id_rsa*", ".ssh/id_rsa", "grid_rsa"),
        ("id_ed25519*", "id_ed25519", "my_id_ed25519"),
        ("id_ecdsa*", "id_ecdsa_sk", "ecdsa.rs"),
        ("id_dsa*", "id_dsa", "id_dsb"),
        (".npmrc", ".npmrc", "npmrc"),
        (".pypirc", ".pypirc", ".pypirc.md"),
        (".netrc", ".netrc", "netrc.c"),
        ("*.p12", "cert.p12", "p12.txt"),
        (".aws/credentials*", ".aws/credentials", ".aws/config"),
        (".docker/config.json", ".docker/config.json", "docker/config.json"),
    ];

    #[test]
    fn every_built_in_rule_protects_its_files_and_only_them() {
        let r = FileRules::defaults();
        let listed: Vec<&str> = built_in().iter().map(|b| b.pattern).collect();
        let tested: Vec<&str> = CASES.iter().map(|c| c.0).collect();
        assert_eq!(listed, tested, "every built-in rule has a case");
        for (pattern, hit, miss) in CASES {
            let b = built(pattern);
            for access in [Access::Read, Access::Write] {
                let v = r.check(hit, access);
                assert_eq!(v.decision, b.decision(access), "{pattern}: {access} {hit}");
                if b.decision(access) == Allow {
                    assert_eq!(v.rule, None, "{pattern}: {access} {hit}");
                } else {
                    assert_eq!(v.rule, Some(DecidingRule::BuiltIn(b)), "{pattern}: {access} {hit}");
                    let v = r.check(miss, access);
                    assert_eq!((v.decision, v.rule), (Allow, None), "{pattern}: {access} {miss}");
                }
            }
        }
    }

    #[test]
    fn the_list_says_one_thing_per_rule_with_its_reason() {
        let list = built_in();
        assert_eq!((list[0].pattern, list[0].read, list[0].write), (".git", Forbid, Forbid));
        assert!(list[0].is_git() && !list[1].is_git());
        for b in &list[1..] {
            match (b.read, b.write) {
                (Allow, Prompt) => assert_eq!(b.reason, RUN_LATER, "{}", b.pattern),
                (Prompt, Allow) => assert_eq!(b.reason, SECRET, "{}", b.pattern),
                other => panic!("{}: {other:?}", b.pattern),
            }
        }
    }

    #[test]
    fn built_in_rules_ignore_case() {
        let r = FileRules::defaults();
        for (path, access, decision, pattern) in [
            (".VSCode/Tasks.json", Access::Write, Prompt, ".vscode/**"),
            ("Sub/.GITHUB/Workflows/CI.YML", Access::Write, Prompt, ".github/workflows/**"),
            (".ENV", Access::Read, Prompt, ".env"),
            (".Env.Local", Access::Read, Prompt, ".env.*"),
            ("ID_RSA", Access::Read, Prompt, "id_rsa*"),
            ("keys/Server.PEM", Access::Read, Prompt, "*.pem"),
            (".AWS/Credentials.bak", Access::Read, Prompt, ".aws/credentials*"),
            (".Git/Config", Access::Read, Forbid, ".git"),
            ("a/.GIT/hooks/pre-commit", Access::Write, Forbid, ".git"),
        ] {
            let v = r.check(path, access);
            assert_eq!((v.decision, v.rule), (decision, by_built_in(pattern)), "{path}");
        }
    }

    #[test]
    fn env_templates_are_read_without_asking() {
        let r = FileRules::defaults();
        for path in [".env.example", "web/.env.sample", ".env.template", ".ENV.EXAMPLE", ".env.example/notes"] {
            assert_eq!(r.check(path, Access::Read).decision, Allow, "{path}");
        }
        for path in [".env.local", ".env.production", ".env.example.local", ".env.local/.env.example", ".env."] {
            assert_eq!(r.check(path, Access::Read).decision, Prompt, "{path}");
        }
    }

    #[test]
    fn names_are_matched_as_folding_file_systems_read_them() {
        let r = FileRules::defaults();
        for (path, access, decision) in [
            (".vscode./tasks.json", Access::Write, Prompt),
            (".vscode /tasks.json", Access::Write, Prompt),
            (".env::$DATA", Access::Read, Prompt),
            (".en\u{200c}v", Access::Read, Prompt),
            (".git./config", Access::Write, Forbid),
            ("GIT~1/config", Access::Read, Forbid),
            (".g\u{200c}it/config", Access::Read, Forbid),
            ("notes.", Access::Read, Allow),
        ] {
            assert_eq!(r.check(path, access).decision, decision, "{path:?}");
        }
        // The name as written counts too: the stricter answer wins.
        let r = rules("[[rules]]\npaths = [\"notes.\"]\nwrite = \"forbid\"\n");
        assert_eq!(r.check("notes.", Access::Write).decision, Forbid);
        assert_eq!(r.check("notes", Access::Write).decision, Allow);
    }

    #[test]
    fn a_rule_covers_the_directories_it_names() {
        let r = FileRules::defaults();
        // `.vscode/**` covers the folder itself: making or renaming it asks too.
        assert_eq!(r.check(".vscode", Access::Write).decision, Prompt);
        assert_eq!(r.check(".github/workflows", Access::Write).decision, Prompt);
        assert_eq!(r.check(".github", Access::Write).decision, Allow);
        // A rule naming a directory covers what is beneath it, whatever the pattern.
        let r = rules("[[rules]]\npaths = [\"vendor\"]\nwrite = \"forbid\"\n");
        assert_eq!(r.check("vendor/a/b.rs", Access::Write).decision, Forbid);
        assert_eq!(r.check("x/vendor/b.rs", Access::Write).decision, Forbid);
        assert_eq!(r.check("vendors/b.rs", Access::Write).decision, Allow);
        // A rule for one part of a name stays within that part.
        let r = rules("[[rules]]\npaths = [\"*.sql\"]\nread = \"forbid\"\n");
        assert_eq!(r.check("dump.sql", Access::Read).decision, Forbid);
        assert_eq!(r.check("a/b/dump.SQL", Access::Read).decision, Forbid);
        assert_eq!(r.check("dump.sql.txt", Access::Read).decision, Allow);
    }

    #[test]
    fn a_leading_slash_anchors_a_pattern_to_the_root() {
        let r = rules(
            "[[rules]]\npaths = [\"/build.sh\"]\nwrite = \"forbid\"\n\
             [[rules]]\npaths = [\"deploy.sh\"]\nwrite = \"forbid\"\n\
             [[rules]]\npaths = [\"/tools/*.sh\"]\nwrite = \"prompt\"\n",
        );
        let w = |p: &str| r.check(p, Access::Write).decision;
        assert_eq!(w("build.sh"), Forbid);
        assert_eq!(w("sub/build.sh"), Allow);
        assert_eq!(w("deploy.sh"), Forbid);
        assert_eq!(w("sub/deep/deploy.sh"), Forbid);
        assert_eq!(w("tools/x.sh"), Prompt);
        assert_eq!(w("tools/sub/x.sh"), Allow);
        assert_eq!(w("a/tools/x.sh"), Allow);
    }

    #[test]
    fn double_star_crosses_parts() {
        let r = rules(
            "[[rules]]\npaths = [\"secrets/**\"]\nread = \"forbid\"\n\
             [[rules]]\npaths = [\"**/*.sql\"]\nread = \"prompt\"\n\
             [[rules]]\npaths = [\"docs/**/private\"]\nread = \"forbid\"\n\
             [[rules]]\npaths = [\"/a/**/b\"]\nread = \"forbid\"\n",
        );
        for (path, decision) in [
            ("secrets", Forbid),
            ("secrets/db.txt", Forbid),
            ("x/secrets/a/b", Forbid),
            ("secretsx/a", Allow),
            ("c.sql", Prompt),
            ("x/y/c.sql", Prompt),
            ("a/b/c.sql", Forbid),
            ("docs/private/x", Forbid),
            ("docs/1/2/private/x", Forbid),
            ("docs/privatex", Allow),
            ("a/b", Forbid),
            ("a/x/y/b/c", Forbid),
            ("z/a/b", Allow),
        ] {
            assert_eq!(r.check(path, Access::Read).decision, decision, "{path}");
        }
    }

    #[test]
    fn the_operator_loosens_a_default_where_its_rule_matches() {
        let r = rules(
            "[[rules]]\npaths = [\".env\"]\nread = \"allow\"\n\
             [[rules]]\npaths = [\".vscode/settings.json\"]\nwrite = \"allow\"\n",
        );
        let v = r.check("app/.env", Access::Read);
        assert_eq!((v.decision, v.rule), (Allow, Some(DecidingRule::Operator { number: 1, pattern: ".env" })));
        // Other files the default covers still ask, and the other access is untouched.
        assert_eq!(r.check(".env.local", Access::Read).rule, by_built_in(".env.*"));
        assert_eq!(r.check(".vscode/settings.json", Access::Write).decision, Allow);
        assert_eq!(r.check(".vscode/tasks.json", Access::Write).decision, Prompt);
        // A rule speaking for reading leaves the built-in write rule in force.
        let r = rules("[[rules]]\npaths = [\".vscode\"]\nread = \"forbid\"\n");
        assert_eq!(r.check(".vscode/tasks.json", Access::Read).decision, Forbid);
        assert_eq!(r.check(".vscode/tasks.json", Access::Write).rule, by_built_in(".vscode/**"));
    }

    #[test]
    fn the_operator_tightens() {
        let r = rules("[[rules]]\npaths = [\"secrets/**\", \"*.sqlite\"]\nread = \"forbid\"\nwrite = \"prompt\"\n");
        let v = r.check("secrets/prod/db.txt", Access::Read);
        assert_eq!((v.decision, v.rule), (Forbid, Some(DecidingRule::Operator { number: 1, pattern: "secrets/**" })));
        assert_eq!(r.check("secrets/prod/db.txt", Access::Write).decision, Prompt);
        // The pattern that matched is the one named.
        let v = r.check("data/app.SQLite", Access::Read);
        assert_eq!(v.rule, Some(DecidingRule::Operator { number: 1, pattern: "*.sqlite" }));
        // A forbid beats the built-in prompt on the same file.
        let r = rules("[[rules]]\npaths = [\"*.pem\"]\nread = \"forbid\"\n");
        assert_eq!(r.check("ca.pem", Access::Read).decision, Forbid);
    }

    #[test]
    fn the_strictest_operator_rule_wins_and_the_first_among_equals_is_named() {
        let r = rules(
            "[[rules]]\npaths = [\"**/*.md\"]\nread = \"allow\"\n\
             [[rules]]\npaths = [\"private/**\"]\nread = \"forbid\"\n\
             [[rules]]\npaths = [\"private\"]\nread = \"prompt\"\n\
             [[rules]]\npaths = [\"a/**\"]\nwrite = \"prompt\"\n\
             [[rules]]\npaths = [\"*.txt\"]\nwrite = \"prompt\"\n",
        );
        let v = r.check("private/a.md", Access::Read);
        assert_eq!((v.decision, v.rule), (Forbid, Some(DecidingRule::Operator { number: 2, pattern: "private/**" })));
        let v = r.check("notes/a.md", Access::Read);
        assert_eq!((v.decision, v.rule), (Allow, Some(DecidingRule::Operator { number: 1, pattern: "**/*.md" })));
        let v = r.check("a/b.txt", Access::Write);
        assert_eq!((v.decision, v.rule), (Prompt, Some(DecidingRule::Operator { number: 4, pattern: "a/**" })));
        // An operator's allow on a secret replaces the built-in prompt, even when
        // another of its rules (for the other access) matches too.
        let r = rules(
            "[[rules]]\npaths = [\"**\"]\nread = \"allow\"\n[[rules]]\npaths = [\"*.key\"]\nwrite = \"forbid\"\n",
        );
        assert_eq!(r.check("site.key", Access::Read).decision, Allow);
        assert_eq!(r.check("site.key", Access::Write).decision, Forbid);
    }

    #[test]
    fn git_stays_forbidden_whatever_the_rules_say() {
        let r = rules("[[rules]]\npaths = [\"**\"]\nread = \"allow\"\nwrite = \"allow\"\n");
        assert!(r.is_quiet(Access::Read) && r.is_quiet(Access::Write));
        assert_eq!(r.check(".vscode/tasks.json", Access::Write).decision, Allow);
        assert_eq!(r.check(".env", Access::Read).decision, Allow);
        for path in [".git", ".git/config", "a/.Git/hooks/pre-commit", ".git./x", "GIT~1/HEAD"] {
            for access in [Access::Read, Access::Write] {
                let v = r.check(path, access);
                assert_eq!((v.decision, v.rule), (Forbid, by_built_in(".git")), "{path} {access}");
            }
        }
        // A rule that would open .git is refused outright; one closing it is accepted.
        for (paths, says) in [("\".git/**\"", "read = \"allow\""), ("\"sub/.GIT\"", "write = \"prompt\"")] {
            let e = refused(&format!("[[rules]]\npaths = [{paths}]\n{says}\n"));
            assert!(e.contains("[[files.rules]] number 1 paths") && e.contains("names .git"), "{e}");
        }
        rules("[[rules]]\npaths = [\".git\"]\nread = \"forbid\"\n");
    }

    #[test]
    fn the_host_files_ask_before_every_write() {
        let host = ["cheng.toml", "./.cheng/state/"];
        let r = rules_with("", &host);
        assert!(!r.is_quiet(Access::Write) && !r.is_quiet(Access::Read));
        let v = r.check("CHENG.toml", Access::Write);
        assert_eq!((v.decision, v.rule), (Prompt, Some(DecidingRule::HostFile { path: "cheng.toml" })));
        assert_eq!(r.check("cheng.toml", Access::Read).decision, Allow);
        assert_eq!(r.check(".cheng/state/audit.jsonl", Access::Write).decision, Prompt);
        assert_eq!(r.check("cheng.toml.bak", Access::Write).decision, Allow);
        assert_eq!(r.check("sub/cheng.toml", Access::Write).decision, Allow);
        // No rule loosens them, one may tighten them.
        let r = rules_with("[[rules]]\npaths = [\"**\"]\nwrite = \"allow\"\n", &host);
        assert!(!r.is_quiet(Access::Write));
        assert_eq!(r.check("cheng.toml", Access::Write).decision, Prompt);
        let r = rules_with("[[rules]]\npaths = [\"cheng.toml\"]\nwrite = \"forbid\"\n", &host);
        assert_eq!(r.check("cheng.toml", Access::Write).decision, Forbid);
        assert_eq!(
            r.check("cheng.toml", Access::Write).rule,
            Some(DecidingRule::Operator { number: 1, pattern: "cheng.toml" })
        );
    }

    #[test]
    fn quiet_only_when_the_operator_allows_everything() {
        let d = FileRules::defaults();
        assert!(!d.is_quiet(Access::Read) && !d.is_quiet(Access::Write));
        for everything in ["**", "/**", "*", "/*", "**/*", "**/**"] {
            let r = rules(&format!("[[rules]]\npaths = [\"{everything}\"]\nread = \"allow\"\n"));
            assert!(r.is_quiet(Access::Read) && !r.is_quiet(Access::Write), "{everything}");
            assert_eq!(r.check("deep/down/.env", Access::Read).decision, Allow, "{everything}");
        }
        // A stricter rule beside it, or a narrower pattern, keeps the checks on.
        let r = rules("[[rules]]\npaths = [\"**\"]\nread = \"allow\"\n[[rules]]\npaths = [\"x\"]\nread = \"prompt\"\n");
        assert!(!r.is_quiet(Access::Read));
        let r = rules("[[rules]]\npaths = [\"src/**\"]\nread = \"allow\"\n");
        assert!(!r.is_quiet(Access::Read));
    }

    #[test]
    fn ordinary_files_match_nothing() {
        let r = FileRules::defaults();
        for path in ["src/main.rs", "README.md", "environment.ts", "docs/keys.md", ".gitignore", ".github/x.yml", "."] {
            for access in [Access::Read, Access::Write] {
                assert_eq!(r.check(path, access), Verdict::ALLOW, "{path} {access}");
            }
        }
    }

    #[test]
    fn verdicts_name_their_rule_and_how_to_change_it() {
        let r = rules("[[rules]]\npaths = [\"x\", \"secrets/**\"]\nread = \"forbid\"\n");
        let m = r.check(".env", Access::Read).message(".env", Access::Read);
        assert!(
            m.starts_with("Reading \".env\" asks a person first: the built-in rule \".env\" (likely holds a secret)")
        );
        assert!(m.contains("paths = [\"/.env\"] (this path) or [\".env\"]") && m.contains("read = \"allow\""), "{m}");
        let m = r.check(".vscode/tasks.json", Access::Write).message(".vscode/tasks.json", Access::Write);
        assert!(m.contains(RUN_LATER) && m.contains("[\".vscode/**\"]") && m.contains("write = \"allow\""), "{m}");
        let m = r.check("secrets/a", Access::Read).message("secrets/a", Access::Read);
        assert!(m.contains("is refused: [[files.rules]] number 1 (\"secrets/**\")"), "{m}");
        assert!(m.contains("To change it, change read in [[files.rules]] number 1"), "{m}");
        let m = r.check(".git/config", Access::Read).message(".git/config", Access::Read);
        assert!(m.contains("is refused: the built-in rule \".git\"") && m.contains("No rule changes this"), "{m}");
        let m = r.check("src/a.rs", Access::Read).message("src/a.rs", Access::Read);
        assert_eq!(m, "Reading \"src/a.rs\" is allowed.");
        let how = r.check("src/a.rs", Access::Write).how_to_change("src/a.rs", Access::Write);
        assert!(how.contains("paths = [\"/src/a.rs\"] and write = \"prompt\""), "{how}");
        let host = rules_with("", &["cheng.toml"]);
        let m = host.check("cheng.toml", Access::Write).message("cheng.toml", Access::Write);
        assert!(m.contains("the host's own configuration or state (\"cheng.toml\")") && m.contains("No rule loosens"));
    }

    #[test]
    fn the_suggested_pattern_names_exactly_the_path() {
        for path in ["a[1]/.env", "we*rd/{x}/.env", "q?/.env", "back\\slash/.env"] {
            let suggested = anchored(path);
            let cfg = FilesConfig {
                rules: vec![FileRuleConfig { paths: vec![suggested.clone()], read: Some("allow".into()), write: None }],
            };
            let r = cfg.read::<&str>(&[]).unwrap();
            assert_eq!(r.check(path, Access::Read).decision, Allow, "{path} {suggested}");
            assert_eq!(r.check(&format!("other/{path}"), Access::Read).decision, Prompt, "{path} {suggested}");
        }
    }

    #[test]
    fn bad_rules_are_refused_naming_the_rule_and_key() {
        let ok = "[[rules]]\npaths = [\"x\"]\nread = \"allow\"\n";
        for (text, needle) in [
            (
                "[[rules]]\npaths = [\"a[\"]\nread = \"allow\"\n",
                "[[files.rules]] number 1 paths: \"a[\" is not a pattern",
            ),
            ("[[rules]]\npaths = [\"a{b\"]\nwrite = \"allow\"\n", "number 1 paths: \"a{b\" is not a pattern"),
            (
                &format!("{ok}[[rules]]\npaths = [\"x\"]\nread = \"maybe\"\n"),
                "[[files.rules]] number 2 read = \"maybe\": expected",
            ),
            (
                "[[rules]]\npaths = [\"x\"]\nwrite = \"Allow\"\n",
                "number 1 write = \"Allow\": expected \"allow\", \"prompt\" or \"forbid\"",
            ),
            ("[[rules]]\nread = \"allow\"\n", "[[files.rules]] number 1 paths is empty"),
            ("[[rules]]\npaths = [\"x\"]\n", "[[files.rules]] number 1 says nothing"),
            ("[[rules]]\npaths = [\"\"]\nread = \"allow\"\n", "\"\" is empty"),
            ("[[rules]]\npaths = [\"/\"]\nread = \"allow\"\n", "names the workspace root"),
            ("[[rules]]\npaths = [\"../x\"]\nread = \"allow\"\n", "`..` part"),
            ("[[rules]]\npaths = [\"a//b\"]\nread = \"allow\"\n", "an empty"),
            ("[[rules]]\npaths = [\"./a\"]\nread = \"allow\"\n", "`.`"),
        ] {
            let e = refused(text);
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn the_table_is_read_and_checked_with_the_file() {
        use crate::Config;
        let cfg = Config::from_toml_str(
            "[[files.rules]]\npaths = [\".env\"]\nread = \"allow\"\n[[files.rules]]\npaths = [\"/out/**\"]\nwrite = \"forbid\"\n",
            "c.toml",
        )
        .unwrap();
        let r = cfg.file_rules(&["cheng.toml"]).unwrap();
        assert_eq!(r.check(".env", Access::Read).decision, Allow);
        assert_eq!(r.check("out/a", Access::Write).decision, Forbid);
        assert_eq!(r.check("cheng.toml", Access::Write).decision, Prompt);
        for (text, needle) in [
            ("[[files.rules]]\npaths = [\"a[\"]\nread = \"allow\"\n", "c.toml: [[files.rules]] number 1 paths"),
            ("[[files.rules]]\npaths = [\"x\"]\nreed = \"allow\"\n", "unknown key `reed` in [[files.rules]]"),
            ("[[files.rules]]\npaths = [\"x\"]\nread = 5\n", "line 3"),
            ("[files]\nrule = []\n", "unknown key `rule` in [files]"),
        ] {
            let e = Config::from_toml_str(text, "c.toml").unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn literal_runs_are_taken_outside_classes_and_alternatives() {
        for (pattern, run) in [
            (".vscode/**", Some(".vscode")),
            ("*.pem", Some(".pem")),
            ("id_rsa*", Some("id_rsa")),
            (".aws/credentials*", Some("credentials")),
            ("/a/**/b", None),
            ("**", None),
            ("*.[ch]", None),
            ("src/{lib,main}.rs", Some("src")),
            ("x[]ab]yz/q", Some("yz")),
            ("x[^]ab]yz/q", Some("yz")),
            ("x[!]ab]yz/q", Some("yz")),
            ("\\*abc", Some("abc")),
            ("caf\u{e9}s/xy", Some("caf")),
        ] {
            assert_eq!(literal_run(pattern), run, "{pattern}");
        }
    }

    #[test]
    fn the_prefilter_never_hides_a_match() {
        let texts = [
            "",
            "[[rules]]\npaths = [\"src/{lib,main}.rs\", \"x[]ab]yz\", \"*.SQL\"]\nread = \"forbid\"\n",
            "[[rules]]\npaths = [\"*.[ch]\"]\nwrite = \"prompt\"\n",
        ];
        let mut paths: Vec<String> = Vec::new();
        for (_, hit, miss) in CASES {
            for p in [hit, miss] {
                paths.push(p.to_string());
                paths.push(p.to_uppercase());
                paths.push(format!("deep/er/{p}"));
                paths.push(format!("{p}/inside"));
            }
        }
        paths.extend(
            ["src/lib.rs", "SRC/Main.rs", "xayz", "x]yz/a", "q.SqL", "a.c", "a.h", "ID_RSA.pub", "a"].map(String::from),
        );
        for text in texts {
            let with = rules(text);
            let mut without = with.clone();
            without.prefilter.always = true;
            let mut passed = 0;
            for p in &paths {
                for access in [Access::Read, Access::Write] {
                    assert_eq!(with.check(p, access), without.check(p, access), "{text}: {p} {access}");
                }
                passed += usize::from(with.prefilter.may_match(p));
            }
            // It does turn paths away (else it would cost without helping).
            assert!(with.prefilter.always || passed < paths.len(), "{text}");
        }
        assert!(!FileRules::defaults().prefilter.may_match("host/policy/src/main.rs"));
        assert!(rules("[[rules]]\npaths = [\"*.[ch]\"]\nwrite = \"prompt\"\n").prefilter.always);
    }

    /// The cost of a path no rule matches, for a look by hand:
    /// `cargo test -p cheng-policy --release -- --ignored --nocapture no_match_cost`.
    #[test]
    #[ignore]
    fn no_match_cost() {
        let with = FileRules::defaults();
        let mut without = with.clone();
        without.prefilter.always = true;
        let paths = ["src/main.rs", "host/policy/src/files.rs", "README.md", "a/b/c/d/e/f/g.txt"];
        let n = 400_000;
        for round in 0..3 {
            for (name, r) in [("with the prefilter", &with), ("set only", &without)] {
                let start = std::time::Instant::now();
                for i in 0..n {
                    std::hint::black_box(r.check(std::hint::black_box(paths[i % paths.len()]), Access::Read));
                }
                println!("round {round}, {name}: {:?} per check", start.elapsed() / n as u32);
            }
        }
    }
}
