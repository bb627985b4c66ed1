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
//! The rules are compiled once into one [`globset::GlobSet`]; a path no rule matches is
//! answered by one set lookup, without allocating.
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
        std::ptr::eq(self, &BUILT_IN[0])
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
const BUILT_IN: &[BuiltIn] = &[
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

    /// How the operator changes this answer for `rel` (the path checked), as one
    /// sentence.
    pub fn how_to_change(&self, rel: &str, access: Access) -> String {
        let a = access.as_str();
        let this = quote(&anchored(rel));
        match self.rule {
            None => format!(
                "no rule protects it; to protect it, add a [[files.rules]] entry with paths = [{this}] and {a} = \
                 \"prompt\" (or \"forbid\") to cheng.toml"
            ),
            Some(DecidingRule::BuiltIn(b)) if b.is_git() => {
                "no rule changes this: .git stays closed to the file tools in every spelling; the repository \
                 changes through workspace_git_write"
                    .to_string()
            }
            Some(DecidingRule::BuiltIn(b)) => format!(
                "add a [[files.rules]] entry with paths = [{this}] (this path) or [{}] (every path the built-in rule \
                 covers) and {a} = \"allow\" to cheng.toml",
                quote(b.pattern)
            ),
            Some(DecidingRule::Operator { number, .. }) => format!(
                "change {a} in [[files.rules]] number {number} of cheng.toml, or remove that rule (the strictest \
                 matching rule decides)"
            ),
            Some(DecidingRule::HostFile { .. }) => {
                "no rule loosens this: a person answers every write to the host's own configuration and state, and \
                 a [[files.rules]] entry can only make it stricter"
                    .to_string()
            }
        }
    }

    /// One sentence for a refusal or an approval card: what happens to `access` of
    /// `rel`, which rule says so, and how to change it.
    pub fn message(&self, rel: &str, access: Access) -> String {
        let path = quote(rel);
        let what = match (access, self.decision) {
            (_, RuleDecision::Allow) => "is allowed",
            (_, RuleDecision::Prompt) => "asks a person first",
            (_, RuleDecision::Forbid) => "is refused",
        };
        let verb = match access {
            Access::Read => "Reading",
            Access::Write => "Writing",
        };
        match self.rule {
            Some(rule) => format!("{verb} {path} {what}: {rule}. To change it, {}.", self.how_to_change(rel, access)),
            None => format!("{verb} {path} {what}."),
        }
    }
}

/// A `[files]` table, checked and compiled: what [`FilesConfig::read`] returns.
#[derive(Debug, Clone)]
pub struct FileRules {
    /// Every glob of every rule; a glob's index leads to its pattern through `globs`.
    set: GlobSet,
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
        Ok(FileRules { set, globs, patterns, host_files: host, quiet })
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
        let folded = fold(rel);
        let verdict = self.check_one(&folded, access);
        if folded == rel {
            return verdict;
        }
        let raw = self.check_one(rel, access);
        if raw.decision > verdict.decision { raw } else { verdict }
    }

    fn check_one(&self, path: &str, access: Access) -> Verdict<'_> {
        if path.split('/').any(git_part) {
            return Verdict { decision: BUILT_IN[0].decision(access), rule: Some(DecidingRule::BuiltIn(&BUILT_IN[0])) };
        }
        let mut verdict = if self.set.is_match(path) { self.decide(path, access) } else { Verdict::ALLOW };
        if access == Access::Write && verdict.decision <= RuleDecision::Prompt && !self.host_files.is_empty() {
            let lower = path.to_lowercase();
            if let Some((given, _)) = self.host_files.iter().find(|(_, p)| {
                lower.strip_prefix(p.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            }) {
                verdict =
                    Verdict { decision: RuleDecision::Prompt, rule: Some(DecidingRule::HostFile { path: given }) };
            }
        }
        verdict
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
