//! What a command's approval card offers: the scopes (once; this run; always), the
//! rule each argument prefix would save, in words, the tiers, and the hosts proposed
//! for "confined + hosts".
//!
//! A scope never widens past the request. A command is offered **once** only — and
//! the card says why — when a remembered answer could not say what it lets run: it
//! goes through a shell or a launcher, its program lies in the workspace or another
//! place commands can write, it is an interpreter given code (`-c`, `-e`, a script read
//! from standard input) or options this reader does not know, the host's own
//! configuration or state lies in the workspace, or an operator rule asks every time.
//!
//! The hosts proposed come from the operator's `[process.hosts]` table and its
//! built-in entries (package registries), and for git from the URL in its arguments
//! or the repository's remote as its configuration names it; nothing is run to find
//! them.

use std::path::Path;

use crate::approvals::{Offer, RulePreview, Scope, Tier};

use super::launchers::Chain;
use super::resolve::{ProgramId, basename};
use super::{Spawner, spawn};

/// What the card is made from.
pub(super) struct Asking<'a> {
    pub words: &'a [String],
    pub chain: &'a Chain,
    pub via_shell: bool,
    pub program: Option<&'a ProgramId>,
    pub root: &'a Path,
    pub cwd_abs: &'a Path,
    pub explicit_prompt: bool,
    pub protected_here: bool,
    /// For git: the workspace's guard, to read the repository's remotes.
    pub guard: &'a crate::guard::Guard,
}

/// Interpreters: given code, they run anything; given a script or module, the rule
/// keeps it.
const INTERPRETERS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "mksh",
    "fish",
    "csh",
    "tcsh",
    "python",
    "python2",
    "python3",
    "pypy",
    "pypy3",
    "node",
    "nodejs",
    "deno",
    "bun",
    "ruby",
    "perl",
    "php",
    "lua",
    "luajit",
    "Rscript",
    "julia",
    "tclsh",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "osascript",
    "pwsh",
    "powershell",
    "irb",
    "jshell",
];

/// Options an interpreter may be given before its script that change nothing about
/// what it runs (and for `-m`, `-W`, `-X`: the next word is theirs).
fn harmless_option(interp: &str, opt: &str) -> Option<bool> {
    let python = interp.starts_with("python") || interp.starts_with("pypy");
    match opt {
        "-u" | "-B" | "-E" | "-s" | "-S" | "-I" | "-q" | "-O" | "-OO" | "-b" | "-bb" if python => Some(false),
        "-W" | "-X" if python => Some(true),
        "--no-warnings" | "--enable-source-maps" | "--trace-warnings" if interp.starts_with("node") => Some(false),
        "-w" | "-W" if interp == "perl" || interp == "ruby" => Some(false),
        _ => None,
    }
}

/// Is `name` an interpreter (`python3.12` counts as `python3`)?
fn interpreter(name: &str) -> bool {
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    INTERPRETERS.contains(&name) || INTERPRETERS.contains(&base)
}

/// For an interpreter: how many words the shortest rule keeps (through the script or
/// module), or why it may be answered once only.
fn interpreter_prefix(words: &[String]) -> Result<usize, String> {
    let interp = basename(&words[0]);
    if matches!(interp, "awk" | "gawk" | "mawk" | "nawk") {
        return Err(format!("`{interp}` is given its program as an argument, which a rule could not check"));
    }
    let mut i = 1;
    while i < words.len() {
        let w = words[i].as_str();
        if w == "-m" && interp.starts_with("python") {
            return match words.get(i + 1) {
                Some(_) => Ok(i + 2),
                None => Err(format!("`{interp} -m` without a module")),
            };
        }
        if w == "-" || w == "--" && words.len() == i + 1 {
            return Err(format!("`{interp}` reads the code to run from its standard input"));
        }
        if w.starts_with('-') && w.len() > 1 {
            match harmless_option(interp, w) {
                Some(takes_value) => i += if takes_value { 2 } else { 1 },
                None => {
                    return Err(format!(
                        "`{interp} {w}` may be given code to run (an option such as -c or -e), which a rule could not check"
                    ));
                }
            }
            continue;
        }
        return Ok(i + 1);
    }
    Err(format!("`{interp}` without a script reads the code to run from its standard input"))
}

/// The host of a URL in git's arguments (`https://host/…`, `http://host/…`).
fn url_host(word: &str) -> Option<String> {
    let rest = word.strip_prefix("https://").or_else(|| word.strip_prefix("http://"))?;
    let authority = rest.split('/').next()?;
    let host = authority.rsplit('@').next()?;
    let host = host.split(':').next()?;
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

impl Spawner {
    /// The card's offer for a command that asks.
    pub(super) fn offer(&self, a: Asking<'_>) -> Offer {
        let netns = spawn::isolation();
        let mut tiers = vec![Tier::Confined];
        if netns {
            tiers.push(Tier::Hosts);
        }
        tiers.push(Tier::Full);
        let name = basename(&a.words[0]).to_string();
        let hosts = if !netns {
            Vec::new()
        } else if name == "git" {
            // A URL in its arguments, else the remote it names (or `origin`) as the
            // repository's configuration spells it.
            match a.words.iter().skip(1).find_map(|w| url_host(w)) {
                Some(host) => vec![host],
                None => {
                    let mut hosts: Vec<String> = super::git::remote_urls(a.guard, a.cwd_abs, &a.words[1..])
                        .iter()
                        .filter_map(|u| url_host(u))
                        .collect();
                    hosts.dedup();
                    hosts
                }
            }
        } else if interpreter(&name) && a.words.get(1).is_some_and(|w| w == "-m") {
            a.words.get(2).map(|m| self.cfg.proposed_hosts(m)).unwrap_or_default()
        } else {
            self.cfg.proposed_hosts(&name)
        };
        let full = "full access: the command reads everything the host's user can (~/.ssh and other keys included), \
                    reaches the whole network, and may read the workspace's secrets and change what runs later \
                    (.git/hooks, .vscode/, .env), which the path rules otherwise keep from it"
            .to_string();
        let once = |why: String| Offer {
            scopes: vec![Scope::Once],
            once_only: Some(why),
            prefixes: Vec::new(),
            prefix: 0,
            tiers: tiers.clone(),
            hosts: hosts.clone(),
            full: full.clone(),
        };
        if a.protected_here {
            return once(
                "the host's configuration or state lies in this workspace, so no answer here is remembered".into(),
            );
        }
        if a.explicit_prompt {
            return once("an operator rule in cheng.toml asks for this command every time".into());
        }
        if a.via_shell {
            return once("it runs through a shell (`sh -c`), so what it runs cannot be told from its words".into());
        }
        if !a.chain.is_direct() {
            let why = match &a.chain.unknown {
                Some(u) => format!("what it runs cannot be told from its words ({u})"),
                None => format!("it starts another program through `{}`", basename(&a.chain.steps[0].name)),
            };
            return once(why);
        }
        let Some(program) = a.program else {
            return once("its program was not found".into());
        };
        if a.words[0].contains('/') && !a.words[0].starts_with('/') {
            return once("its program lies in the workspace, where commands can change it".into());
        }
        if let Some(place) = self.writable_place_of(&program.path, a.root) {
            return once(format!(
                "its program lies in {}, where commands can write, so it may not stay the program approved",
                place.display()
            ));
        }
        let shortest = if interpreter(&name) || interpreter(program.name()) {
            match interpreter_prefix(a.words) {
                Ok(n) => n,
                Err(why) => return once(why),
            }
        } else {
            1
        };
        let len = a.words.len();
        let mut choices = vec![shortest];
        if shortest < 2 && len >= 2 {
            choices.push(2);
        }
        if !choices.contains(&len) {
            choices.push(len);
        }
        let default = if len >= 2 && !a.words[1].starts_with('-') { shortest.max(2) } else { len };
        let place = a.cwd_abs.display().to_string();
        let prefixes = choices
            .into_iter()
            .map(|n| {
                let kept =
                    shlex::try_join(a.words[..n].iter().map(String::as_str)).unwrap_or_else(|_| a.words[..n].join(" "));
                RulePreview {
                    words: n,
                    rule: format!("{kept} *"),
                    text: if n == 1 {
                        format!("`{kept}` with any arguments, in {place}")
                    } else {
                        format!("`{kept}` with any further arguments, in {place}")
                    },
                }
            })
            .collect();
        Offer {
            scopes: vec![Scope::Once, Scope::Run, Scope::Always],
            once_only: None,
            prefixes,
            prefix: default,
            tiers,
            hosts,
            full,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn interpreters_given_code_are_once_only_and_scripts_are_kept() {
        for code in [
            &["python3", "-c", "print(1)"][..],
            &["python3"],
            &["python3", "-"],
            &["node", "-e", "1"],
            &["node", "--eval", "1"],
            &["perl", "-e", "1"],
            &["ruby", "-e", "1"],
            &["bash"],
            &["sh", "-c", "ls"],
            &["awk", "{print}"],
            &["python3", "-i", "x.py"],
        ] {
            assert!(interpreter_prefix(&w(code)).is_err(), "{code:?}");
        }
        assert_eq!(interpreter_prefix(&w(&["python3", "-m", "pytest", "-q"])), Ok(3));
        assert_eq!(interpreter_prefix(&w(&["python3", "-u", "run.py", "x"])), Ok(3));
        assert_eq!(interpreter_prefix(&w(&["python3", "-W", "ignore", "run.py"])), Ok(4));
        assert_eq!(interpreter_prefix(&w(&["node", "build.js"])), Ok(2));
        assert!(interpreter("python3.12") && interpreter("python3") && !interpreter("cargo"));
    }

    #[test]
    fn git_urls_give_their_host() {
        assert_eq!(url_host("https://github.com/a/b.git").as_deref(), Some("github.com"));
        assert_eq!(url_host("http://user@Git.Example:8080/x").as_deref(), Some("git.example"));
        assert_eq!(url_host("git@github.com:a/b"), None);
    }
}
