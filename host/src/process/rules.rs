//! The operator's command rules and whitelist, matched against the programs a command
//! will actually run (see [`super::launchers`] and [`super::resolve`]).
//!
//! Each rule's program is resolved once, when the host starts. A rule matches a program
//! when both are the same executable; a `forbid` or `prompt` rule also matches anything
//! started under the rule's name (so it holds for a multi-call binary's applet, or a
//! program installed after the host started). Every program of a command's chain is
//! checked — a rule forbidding `env` forbids `env ls` — and the strictest decision wins.
//! An `allow` rule only ever covers a program started directly: never one started
//! through a launcher, and never a command whose program cannot be told from its words
//! (then the strictest rule of any program its words name applies).

use super::Net;
use super::launchers::{Chain, Step};
use super::resolve::{ProgramId, basename};
use crate::policy::process::{CommandRule, RuleDecision};

/// A rule with its program resolved.
#[derive(Debug, Clone)]
struct Compiled {
    rule: CommandRule,
    id: Option<ProgramId>,
    name: String,
}

/// A program named by the whitelist, resolved.
#[derive(Debug, Clone)]
struct Listed {
    name: String,
    id: Option<ProgramId>,
}

/// The rules and the whitelist of one host.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rules {
    rules: Vec<Compiled>,
    whitelist: Vec<Listed>,
}

/// What the rules decided for a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decided {
    /// Allow, prompt or forbid.
    pub decision: RuleDecision,
    /// For an allowed command: the network its rule grants.
    pub network: Net,
    /// Whether an operator rule matched at all (a `prompt` rule is the operator's
    /// decision; the known-safe list applies only where no rule speaks).
    pub ruled: bool,
}

/// The identity of a word as a program (`None` when it does not resolve).
pub(crate) type Resolver<'a> = &'a dyn Fn(&str) -> Option<ProgramId>;

impl Rules {
    /// Compile `rules` and `whitelist` (program names or paths), resolving each with
    /// `resolve`.
    pub fn new(rules: &[CommandRule], whitelist: &[String], resolve: Resolver<'_>) -> Rules {
        Rules {
            rules: rules
                .iter()
                .map(|r| Compiled { id: resolve(&r.program), name: basename(&r.program).to_string(), rule: r.clone() })
                .collect(),
            whitelist: whitelist.iter().map(|w| Listed { id: resolve(w), name: basename(w).to_string() }).collect(),
        }
    }

    /// Whether a whitelist is in force.
    pub fn has_whitelist(&self) -> bool {
        !self.whitelist.is_empty()
    }

    /// The whitelist as written.
    pub fn whitelist_names(&self) -> Vec<&str> {
        self.whitelist.iter().map(|l| l.name.as_str()).collect()
    }

    /// The first program of `chain` the whitelist does not list, if any (`Err` with
    /// the reason when the chain's last program cannot be known).
    pub fn not_whitelisted<'c>(&self, chain: &'c Chain, resolve: Resolver<'_>) -> Result<Option<&'c Step>, String> {
        if !self.has_whitelist() {
            return Ok(None);
        }
        if let Some(why) = &chain.unknown {
            return Err(why.clone());
        }
        Ok(chain.steps.iter().find(|s| {
            let id = resolve(&s.name);
            !self.whitelist.iter().any(|l| match (&l.id, &id) {
                (Some(a), Some(b)) => a == b,
                // An entry that names no executable here admits only that bare name, as
                // the host's PATH finds it — never a path (`./ls` is the workspace's).
                (None, _) => !s.name.contains('/') && l.name == s.name,
                (Some(_), None) => false,
            })
        }))
    }

    /// The decision for `chain`: the strictest rule matching any of its programs (with
    /// arguments), or any program its words name when the last one cannot be known;
    /// `prompt` when no rule matches; never `allow` unless the command is one program
    /// started directly and an allow rule names that very executable.
    pub fn decide(&self, chain: &Chain, resolve: Resolver<'_>) -> Decided {
        let mut strictest = RuleDecision::Allow;
        let mut ruled = false;
        let mut matched_last: Option<(RuleDecision, Net)> = None;
        for (i, step) in chain.steps.iter().enumerate() {
            let id = resolve(&step.name);
            let last = i + 1 == chain.steps.len();
            for r in &self.rules {
                if !self.program_matches(r, step, id.as_ref()) || !args_match(&r.rule.args, &step.args, step.open_args)
                {
                    continue;
                }
                let d = r.rule.decision;
                ruled = true;
                if last && chain.unknown.is_none() {
                    let network = if d == RuleDecision::Allow { Net::of(&r.rule.network) } else { Net::None };
                    matched_last = Some(match matched_last.take() {
                        Some((prev, net)) if prev > d => (prev, net),
                        Some((prev, net)) if prev == d => (d, net.meet(&network)),
                        _ => (d, network),
                    });
                } else if d != RuleDecision::Allow {
                    strictest = strictest.max(d);
                }
            }
        }
        for word in &chain.named {
            for r in self.rules.iter().filter(|r| r.name == basename(word) && r.rule.decision != RuleDecision::Allow) {
                strictest = strictest.max(r.rule.decision);
                ruled = true;
            }
        }
        let (mut decision, mut network) = matched_last.unwrap_or((RuleDecision::Prompt, Net::None));
        if !chain.is_direct() && decision == RuleDecision::Allow {
            (decision, network) = (RuleDecision::Prompt, Net::None);
        }
        if strictest > decision {
            (decision, network) = (strictest, Net::None);
        }
        Decided { decision, network, ruled }
    }

    fn program_matches(&self, r: &Compiled, step: &Step, id: Option<&ProgramId>) -> bool {
        let same = matches!((&r.id, id), (Some(a), Some(b)) if a == b);
        match r.rule.decision {
            // An allow rule names one executable; an unresolvable rule allows by name
            // only what is started by exactly that name.
            RuleDecision::Allow => same || (r.id.is_none() && step.name == r.rule.program),
            // Stricter rules also hold for anything started under the rule's name.
            _ => same || basename(&step.name) == r.name || id.is_some_and(|i| i.name() == r.name),
        }
    }
}

/// Whether `args` start with `prefix`; with `open`, arguments beyond `args` are not
/// known, so a longer prefix that agrees with them may still match.
fn args_match(prefix: &[String], args: &[String], open: bool) -> bool {
    if args.len() < prefix.len() && !open {
        return false;
    }
    prefix.iter().zip(args).all(|(p, a)| p == a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::launchers::chain;
    use crate::process::resolve::SearchPath;

    fn rule(program: &str, args: &[&str], decision: RuleDecision) -> CommandRule {
        CommandRule {
            program: program.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            decision,
            network: Default::default(),
        }
    }

    fn decided(rules: &Rules, words: &[&str]) -> Decided {
        let sp = SearchPath::from_env();
        let root = std::path::Path::new("/nonexistent-workspace");
        let resolve = |w: &str| -> Option<ProgramId> {
            let p = if w.contains('/') { w.into() } else { sp.lookup(w, root)? };
            ProgramId::of(&p, w)
        };
        let words: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        let c = chain(&words, &|w| resolve(w).map(|i| i.name().to_string()));
        rules.decide(&c, &resolve)
    }

    fn decide(rules: &Rules, words: &[&str]) -> RuleDecision {
        decided(rules, words).decision
    }

    fn compiled(rules: &[CommandRule]) -> Rules {
        let sp = SearchPath::from_env();
        let root = std::path::Path::new("/nonexistent-workspace");
        Rules::new(rules, &[], &|w| {
            let p = if w.contains('/') { w.into() } else { sp.lookup(w, root)? };
            ProgramId::of(&p, w)
        })
    }

    #[test]
    fn strictest_rule_wins() {
        let r = compiled(&[rule("git", &[], RuleDecision::Allow), rule("git", &["push"], RuleDecision::Forbid)]);
        // An allow rule for the program.
        assert_eq!(decide(&r, &["git", "status"]), RuleDecision::Allow);
        // A stricter rule with a matching prefix wins over it.
        assert_eq!(decide(&r, &["git", "push", "origin"]), RuleDecision::Forbid);
        // No rule: ask.
        assert_eq!(decide(&r, &["ls"]), RuleDecision::Prompt);
    }

    #[test]
    fn a_prompt_rule_is_told_from_no_rule() {
        let r = compiled(&[rule("ls", &["-R"], RuleDecision::Prompt)]);
        let ruled = |words: &[&str]| decided(&r, words);
        // Both ask; only one is the operator's word.
        let (with, without) = (ruled(&["ls", "-R"]), ruled(&["ls", "-l"]));
        assert_eq!((with.decision, with.ruled), (RuleDecision::Prompt, true));
        assert_eq!((without.decision, without.ruled), (RuleDecision::Prompt, false));
    }

    #[test]
    fn a_forbid_rule_holds_however_the_program_is_named() {
        let r = compiled(&[rule("touch", &[], RuleDecision::Forbid)]);
        let touch = SearchPath::from_env().lookup("touch", std::path::Path::new("/x")).unwrap();
        // By name, by absolute path, through each launcher, through a shell string.
        for words in [
            vec!["touch", "a"],
            vec![touch.to_str().unwrap(), "b"],
            vec!["env", "touch", "c"],
            vec!["nice", "-n", "1", "touch", "c"],
            vec!["timeout", "5", "touch", "c"],
            vec!["sh", "-c", "touch c"],
            vec!["sh", "-c", "true; touch c"],
            vec!["xargs", "touch"],
        ] {
            assert_eq!(decide(&r, &words), RuleDecision::Forbid, "{words:?}");
        }
        // A different program is not affected.
        assert_eq!(decide(&r, &["ls"]), RuleDecision::Prompt);
    }

    #[test]
    fn an_allow_rule_never_covers_a_launcher() {
        let r = compiled(&[rule("touch", &[], RuleDecision::Allow), rule("env", &[], RuleDecision::Allow)]);
        // Direct: allowed.
        assert_eq!(decide(&r, &["touch", "a"]), RuleDecision::Allow);
        // Through a launcher, even an allowed one: asked.
        assert_eq!(decide(&r, &["env", "touch", "a"]), RuleDecision::Prompt);
        assert_eq!(decide(&r, &["env", "rm", "a"]), RuleDecision::Prompt);
        // A shell string that cannot be read: asked.
        assert_eq!(decide(&r, &["sh", "-c", "touch a && touch b"]), RuleDecision::Prompt);
    }
}
