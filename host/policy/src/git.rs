//! The operator's `[git]` settings for `workspace_git_write`: the identity its commits,
//! tags and stashes are made with, and `[[git.rules]]`, which let some operations run
//! without asking (for example `add` and `commit` on branches matching `agent/*`) or
//! forbid others. Every operation no rule allows asks a person.

use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;

use super::process::RuleDecision;

/// The operations of `workspace_git_write`, as rules and the tool name them.
pub const OPERATIONS: &[&str] =
    &["add", "unstage", "restore", "commit", "switch", "branch_delete", "stash_push", "stash_pop", "tag"];

/// The `[git]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitConfig {
    /// Author and committer name (else the repository's own `user.name`).
    #[serde(default)]
    pub user_name: Option<String>,
    /// Author and committer email (else the repository's own `user.email`).
    #[serde(default)]
    pub user_email: Option<String>,
    /// Allow / prompt / forbid rules; the strictest matching rule wins.
    #[serde(default)]
    pub rules: Vec<GitRule>,
}

/// One `[[git.rules]]` entry: operations, branches, and what to do.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitRule {
    /// The operations it covers (empty: every one).
    #[serde(default)]
    pub operations: Vec<String>,
    /// Branch patterns it covers (`agent/*`: `*` within one `/`-separated part, `**`
    /// across them); empty: any branch, and a detached `HEAD` too. The branch is the one
    /// the operation acts on: the target of `switch` and `branch_delete`, else the
    /// current one.
    #[serde(default)]
    pub branches: Vec<String>,
    /// What to do.
    pub decision: RuleDecision,
}

impl GitConfig {
    /// Check the settings; the message names the key.
    pub fn validate(&self) -> Result<(), crate::SettingError> {
        self.checked().map_err(crate::SettingError)
    }

    fn checked(&self) -> Result<(), String> {
        for (key, value) in [("user_name", &self.user_name), ("user_email", &self.user_email)] {
            if let Some(v) = value
                && (v.trim().is_empty() || v.contains(['\n', '\r', '\0', '<', '>']))
            {
                return Err(format!("[git] {key} = {v:?} cannot be empty or hold a newline, NUL, '<' or '>'"));
            }
        }
        for rule in &self.rules {
            for op in &rule.operations {
                if !OPERATIONS.contains(&op.as_str()) {
                    return Err(format!(
                        "[[git.rules]] operations: \"{op}\" is not an operation of workspace_git_write ({})",
                        OPERATIONS.join(", ")
                    ));
                }
            }
            for b in &rule.branches {
                pattern(b).map_err(|e| format!("[[git.rules]] branches: \"{b}\" is not a pattern: {e}"))?;
            }
        }
        Ok(())
    }

    /// What the rules say of `operation` acting on `branch` (`None`: a detached `HEAD`):
    /// the strictest matching rule, or [`RuleDecision::Prompt`] when none matches.
    pub fn decide(&self, operation: &str, branch: Option<&str>) -> RuleDecision {
        self.rules
            .iter()
            .filter(|r| r.operations.is_empty() || r.operations.iter().any(|o| o == operation))
            .filter(|r| {
                r.branches.is_empty()
                    || branch.is_some_and(|b| r.branches.iter().any(|p| pattern(p).is_ok_and(|m| m.is_match(b))))
            })
            .map(|r| r.decision)
            .max()
            .unwrap_or(RuleDecision::Prompt)
    }
}

fn pattern(p: &str) -> Result<GlobMatcher, globset::Error> {
    Ok(GlobBuilder::new(p).literal_separator(true).build()?.compile_matcher())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(toml_text: &str) -> GitConfig {
        let cfg: GitConfig = toml::from_str(toml_text).unwrap();
        cfg.validate().unwrap();
        cfg
    }

    #[test]
    fn strictest_matching_rule_wins() {
        let cfg = rules(
            r#"
            [[rules]]
            operations = ["add", "commit"]
            branches = ["agent/*"]
            decision = "allow"
            [[rules]]
            operations = ["commit"]
            branches = ["agent/locked"]
            decision = "forbid"
            [[rules]]
            operations = ["branch_delete"]
            decision = "forbid"
            "#,
        );
        assert_eq!(cfg.decide("add", Some("agent/x")), RuleDecision::Allow);
        assert_eq!(cfg.decide("commit", Some("agent/x")), RuleDecision::Allow);
        // `*` stays within one part of the name.
        assert_eq!(cfg.decide("commit", Some("agent/x/y")), RuleDecision::Prompt);
        assert_eq!(cfg.decide("commit", Some("main")), RuleDecision::Prompt);
        assert_eq!(cfg.decide("commit", None), RuleDecision::Prompt);
        assert_eq!(cfg.decide("commit", Some("agent/locked")), RuleDecision::Forbid);
        assert_eq!(cfg.decide("restore", Some("agent/x")), RuleDecision::Prompt);
        assert_eq!(cfg.decide("branch_delete", None), RuleDecision::Forbid);
    }

    #[test]
    fn bad_settings_are_refused() {
        for (text, needle) in [
            ("[[rules]]\noperations = [\"push\"]\ndecision = \"allow\"\n", "\"push\" is not an operation"),
            ("[[rules]]\nbranches = [\"a[\"]\ndecision = \"allow\"\n", "is not a pattern"),
            ("user_name = \"a\\nb\"\n", "user_name"),
            ("user_email = \"\"\n", "user_email"),
        ] {
            let cfg: GitConfig = toml::from_str(text).unwrap();
            let e = cfg.validate().unwrap_err();
            assert!(e.0.contains(needle), "{text}: {e}");
        }
    }
}
