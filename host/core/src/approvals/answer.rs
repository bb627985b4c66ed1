//! What a person may answer, and what they did answer.
//!
//! A card for a command carries an [`Offer`]: the scopes it may be answered with
//! (once; this run; always, which saves a rule), the rule each choice of argument
//! prefix would save, in words, the tiers it may run at (confined; confined with the
//! network to named hosts; full access) and the hosts it proposes. A card without an
//! offer (an MCP server's tool, a component's own request) is answered once, and has no
//! tier.
//!
//! An [`Answer`] is checked against the card's offer and the route it came by
//! ([`Answer::checked`]): a scope or prefix the card does not offer is refused (a card
//! with no offer takes a plain yes, whatever else was chosen), and
//! only an operator's route (the console or API with an operator token, `cheng
//! approve`, the terminal) may pick "always" or "full access" — the person at an MCP
//! client answers once or for this run, confined. A plain yes is confined with the
//! hosts the card proposes; full access is always an explicit choice.

use serde::{Deserialize, Serialize};

use super::Decision;

/// How long an answer holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// This request only.
    #[default]
    Once,
    /// The same program and argument prefix, in the same run, until the run ends (at
    /// most twelve hours).
    Run,
    /// Saved as a rule in the state directory, until revoked or expired.
    Always,
}

impl Scope {
    /// Its name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Once => "once",
            Scope::Run => "run",
            Scope::Always => "always",
        }
    }

    /// Read a name (`once`, `run`, `always`).
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "once" => Some(Scope::Once),
            "run" => Some(Scope::Run),
            "always" => Some(Scope::Always),
            _ => None,
        }
    }
}

/// How much of the machine an approved command gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// The unasked tier: it reads the system, the workspace, its caches and toolchains,
    /// writes the workspace, and reaches no network.
    #[default]
    Confined,
    /// Confined, with the network to the named hosts only (through the host's proxy).
    Hosts,
    /// What the host's user can read, and the whole network.
    Full,
}

impl Tier {
    /// Its name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Confined => "confined",
            Tier::Hosts => "hosts",
            Tier::Full => "full",
        }
    }

    /// Read a name (`confined`, `hosts`, `full`).
    pub fn parse(s: &str) -> Option<Tier> {
        match s {
            "confined" => Some(Tier::Confined),
            "hosts" => Some(Tier::Hosts),
            "full" => Some(Tier::Full),
            _ => None,
        }
    }
}

/// One argument prefix a remembered answer may keep, and what it would let run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulePreview {
    /// How many words of the command it keeps (the program is the first).
    pub words: usize,
    /// The rule, written as a command with `*` for any further arguments.
    pub rule: String,
    /// In words: "`cargo test` with any further arguments, in /path/ws".
    pub text: String,
}

/// What a card may be answered with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    /// The scopes offered (always `once`; `run` and `always` when the command's program
    /// can be told from its words).
    pub scopes: Vec<Scope>,
    /// Why only `once` is offered, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub once_only: Option<String>,
    /// The prefixes a remembered answer may keep, shortest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefixes: Vec<RulePreview>,
    /// The prefix chosen when the answer names none.
    #[serde(default)]
    pub prefix: usize,
    /// The tiers offered.
    pub tiers: Vec<Tier>,
    /// The hosts proposed for "confined + hosts" (a plain yes grants them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// What "full access" lifts, when it is offered.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub full: String,
}

impl Offer {
    /// The tier a plain yes means: confined, with the proposed hosts when there are any.
    pub fn default_tier(&self) -> Tier {
        if self.hosts.is_empty() { Tier::Confined } else { Tier::Hosts }
    }
}

/// Who an answer comes from, which bounds what it may choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The operator: the console or API with an operator token, `cheng approve` over
    /// the operator's socket, the terminal, an embedder's approver.
    Operator,
    /// The person at an MCP client (elicitation): once or this run, confined.
    Client,
}

/// An answer to a card.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// Yes or no (or why nobody answered).
    pub decision: Decision,
    /// How long a yes holds.
    #[serde(default)]
    pub scope: Scope,
    /// The tier; none for the card's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<Tier>,
    /// The hosts for [`Tier::Hosts`]; none for the card's proposal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<String>>,
    /// How many words of the command a remembered answer keeps; none for the card's
    /// default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<usize>,
    /// For "always": the rule holds in every workspace, not only this one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub every_workspace: bool,
    /// For "always": the rule ends this many milliseconds after it is saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in_ms: Option<u64>,
    /// For a no: what the agent should do instead, passed on in its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Longest decline message kept (characters).
pub const MESSAGE_CHARS: usize = 2000;

/// Longest expiry "always" may be given: a year.
pub const MAX_EXPIRY_MS: u64 = 366 * 24 * 3600 * 1000;

impl From<Decision> for Answer {
    fn from(decision: Decision) -> Answer {
        Answer { decision, ..Answer::default() }
    }
}

impl Answer {
    /// A plain yes: once, the card's default tier.
    pub fn yes() -> Answer {
        Decision::Approved.into()
    }

    /// A plain no.
    pub fn no() -> Answer {
        Decision::Declined.into()
    }

    /// A no with what to do instead.
    pub fn decline_with(message: impl Into<String>) -> Answer {
        Answer { message: Some(message.into()), ..Answer::no() }
    }

    /// This answer as it applies to a card with `offer` (none: answered once, no
    /// tier), from `route`: the card's defaults filled in, or why it cannot be taken.
    pub fn checked(mut self, offer: Option<&Offer>, route: Route) -> Result<Answer, String> {
        if let Some(m) = &self.message {
            let m = cheng_contract::text::cut_chars(m.trim(), MESSAGE_CHARS);
            self.message = (!m.is_empty()).then_some(m);
        }
        if !self.decision.approved() {
            // A no keeps only its message.
            return Ok(Answer { decision: self.decision, message: self.message, ..Answer::default() });
        }
        self.message = None;
        let Some(offer) = offer else {
            // A card without an offer takes a plain yes: a scope or tier given with it is
            // dropped (never widened into something the card did not offer).
            return Ok(Answer { decision: self.decision, ..Answer::default() });
        };
        if !offer.scopes.contains(&self.scope) {
            let why = offer.once_only.as_deref().unwrap_or("the card does not offer it");
            return Err(format!("\"{}\" is not offered for this request: {why}", self.scope.as_str()));
        }
        if offer.tiers.is_empty() {
            // A card that is not a command's (a protected file): no tier, hosts or
            // prefix; a plain "confined" from a route that always sends one is fine.
            if self.tier.is_some_and(|t| t != Tier::Confined) || self.hosts.as_ref().is_some_and(|h| !h.is_empty()) {
                return Err("this request is not a command: it offers no tier and no hosts".into());
            }
            if route == Route::Client && self.scope == Scope::Always {
                return Err("an answer from the MCP client can be once or for this run".into());
            }
            return Ok(Answer {
                decision: self.decision,
                scope: self.scope,
                message: None,
                tier: None,
                hosts: None,
                prefix: None,
                every_workspace: false,
                expires_in_ms: None,
            });
        }
        let tier = match (self.tier, &self.hosts) {
            (Some(t), _) => t,
            (None, Some(h)) if !h.is_empty() => Tier::Hosts,
            (None, _) => offer.default_tier(),
        };
        if !offer.tiers.contains(&tier) {
            return Err(format!("the tier \"{}\" is not offered for this request", tier.as_str()));
        }
        if route == Route::Client && (self.scope == Scope::Always || tier == Tier::Full) {
            return Err("an answer from the MCP client can be once or for this run, confined; \
                 \"always\" and full access are the operator's (the console, the API, `cheng approve`)"
                .into());
        }
        if self.scope != Scope::Once && tier == Tier::Full {
            return Err(format!(
                "\"{}\" never combines with full access, which is for one command: answer once for full access, \
                 or remember the answer confined (with hosts)",
                self.scope.as_str()
            ));
        }
        self.tier = Some(tier);
        match tier {
            Tier::Hosts => {
                let hosts = self.hosts.take().unwrap_or_else(|| offer.hosts.clone());
                if hosts.is_empty() {
                    return Err("confined + hosts needs at least one host (`--hosts a,b`)".into());
                }
                for h in &hosts {
                    cheng_policy::net::HostPattern::parse(h).map_err(|e| format!("host \"{h}\": {e}"))?;
                }
                self.hosts = Some(hosts);
            }
            _ => self.hosts = None,
        }
        if self.scope == Scope::Once {
            self.prefix = None;
            self.every_workspace = false;
            self.expires_in_ms = None;
        } else {
            let words = self.prefix.unwrap_or(offer.prefix);
            if !offer.prefixes.iter().any(|p| p.words == words) {
                let offered: Vec<String> = offer.prefixes.iter().map(|p| p.words.to_string()).collect();
                return Err(format!("a prefix of {words} words is not offered (offered: {})", offered.join(", ")));
            }
            self.prefix = Some(words);
            if self.scope == Scope::Run {
                self.every_workspace = false;
                self.expires_in_ms = None;
            }
            if let Some(ms) = self.expires_in_ms
                && (ms == 0 || ms > MAX_EXPIRY_MS)
            {
                return Err("an expiry must be between 1 ms and a year".into());
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer() -> Offer {
        Offer {
            scopes: vec![Scope::Once, Scope::Run, Scope::Always],
            once_only: None,
            prefixes: vec![
                RulePreview { words: 1, rule: "cargo *".into(), text: String::new() },
                RulePreview { words: 2, rule: "cargo test *".into(), text: String::new() },
            ],
            prefix: 2,
            tiers: vec![Tier::Confined, Tier::Hosts, Tier::Full],
            hosts: vec!["crates.io".into(), "static.crates.io".into()],
            full: "everything".into(),
        }
    }

    #[test]
    fn a_plain_yes_is_confined_with_the_proposed_hosts() {
        let a = Answer::yes().checked(Some(&offer()), Route::Operator).unwrap();
        assert_eq!(a.tier, Some(Tier::Hosts));
        assert_eq!(a.hosts.as_deref(), Some(&["crates.io".to_string(), "static.crates.io".into()][..]));
        assert_eq!(a.scope, Scope::Once);
        let none = Offer { hosts: vec![], ..offer() };
        assert_eq!(Answer::yes().checked(Some(&none), Route::Operator).unwrap().tier, Some(Tier::Confined));
    }

    #[test]
    fn the_client_route_cannot_pick_always_or_full() {
        let always = Answer { scope: Scope::Always, ..Answer::yes() };
        assert!(always.clone().checked(Some(&offer()), Route::Client).is_err());
        assert!(always.checked(Some(&offer()), Route::Operator).is_ok());
        let full = Answer { tier: Some(Tier::Full), ..Answer::yes() };
        assert!(full.clone().checked(Some(&offer()), Route::Client).is_err());
        assert!(full.checked(Some(&offer()), Route::Operator).is_ok());
        let run = Answer { scope: Scope::Run, tier: Some(Tier::Confined), ..Answer::yes() };
        assert!(run.checked(Some(&offer()), Route::Client).is_ok());
    }

    #[test]
    fn always_never_combines_with_full_and_scopes_stay_within_the_offer() {
        let a = Answer { scope: Scope::Always, tier: Some(Tier::Full), ..Answer::yes() };
        assert!(a.checked(Some(&offer()), Route::Operator).unwrap_err().contains("never combines"));
        let once_only = Offer {
            scopes: vec![Scope::Once],
            once_only: Some("an interpreter given code".into()),
            prefixes: vec![],
            ..offer()
        };
        let run = Answer { scope: Scope::Run, ..Answer::yes() };
        assert!(run.checked(Some(&once_only), Route::Operator).unwrap_err().contains("an interpreter given code"));
        let long = Answer { scope: Scope::Run, prefix: Some(3), ..Answer::yes() };
        assert!(long.checked(Some(&offer()), Route::Operator).is_err());
        let short = Answer { scope: Scope::Always, prefix: Some(1), ..Answer::yes() };
        assert_eq!(short.checked(Some(&offer()), Route::Operator).unwrap().prefix, Some(1));
        // No offer: a plain yes (what else was chosen is dropped) or no.
        let plain = Answer { scope: Scope::Always, tier: Some(Tier::Full), ..Answer::yes() };
        assert_eq!(plain.checked(None, Route::Client), Ok(Answer::yes()));
    }

    #[test]
    fn a_no_keeps_only_its_message_cut_and_trimmed() {
        let a = Answer { scope: Scope::Always, tier: Some(Tier::Full), ..Answer::decline_with("  use cargo check  ") }
            .checked(Some(&offer()), Route::Client)
            .unwrap();
        assert_eq!(a, Answer { message: Some("use cargo check".into()), ..Answer::no() });
        let long = Answer::decline_with("x".repeat(5000)).checked(None, Route::Operator).unwrap();
        assert!(long.message.unwrap().chars().count() <= MESSAGE_CHARS + 1);
        assert_eq!(Answer::decline_with("   ").checked(None, Route::Operator).unwrap().message, None);
    }

    #[test]
    fn hosts_are_checked_patterns() {
        let bad = Answer { hosts: Some(vec!["exa mple.com".into()]), ..Answer::yes() };
        assert!(bad.checked(Some(&offer()), Route::Operator).is_err());
        let good = Answer { hosts: Some(vec!["*.example.com".into()]), ..Answer::yes() };
        let a = good.checked(Some(&offer()), Route::Operator).unwrap();
        assert_eq!((a.tier, a.hosts), (Some(Tier::Hosts), Some(vec!["*.example.com".to_string()])));
    }
}
