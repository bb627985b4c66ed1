//! The capability layer: every check of what a call may do, in one engine-free place.
//!
//! Each check is a pure function returning a typed [`Denial`] — which right was
//! refused, on what, why, and the message the model sees. The call pipeline calls
//! [`tool`] before anything runs; every host import calls [`fs`], [`spawn`] (and, for
//! commands, [`command`] and [`approval`]) as its first statement, and puts any
//! denial in the call's record. Every denial the host issues is built here. A call's status is `denied` only when the host issued
//! a denial; a component that merely claims one is reporting an error.
//!
//! # Example
//!
//! ```
//! use cheng_core::capability::{self, Right};
//! use cheng_core::grant::Mount;
//!
//! let mounts = [Mount { rel: "docs".into(), write: false }];
//! // Reading inside the granted folder is fine; writing there is not.
//! assert_eq!(capability::fs(&mounts, &[] as &[&str], "docs/a.md", false, "/w").unwrap(), "docs/a.md");
//! let denial = capability::fs(&mounts, &[] as &[&str], "docs/a.md", true, "/w").unwrap_err().denial().unwrap();
//! assert_eq!(denial.right, Right::FsWrite);
//! ```

use cheng_contract::paths;
use serde::{Deserialize, Serialize};

use crate::ErrorKind;
use crate::grant::Mount;
use crate::policy::Policy;

/// The right a denial refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Right {
    /// Calling the tool at all: the role does not hold it (or the role is unknown).
    Tool,
    /// One more call in a run whose call budget is spent.
    RunBudget,
    /// Working in a workspace outside the configured workspaces root.
    Workspace,
    /// Reading a path outside the component's grant.
    FsRead,
    /// Writing a path outside the component's read-write grant.
    FsWrite,
    /// Writing a path no tool may write (`.git`, the host's configuration and state).
    Protected,
    /// Asking the host to run a process without a spawn grant.
    Spawn,
    /// Running a command the operator's command policy refuses.
    Command,
    /// Going ahead without a person's approval (declined, timed out, nobody to ask).
    Approval,
    /// Reaching a network address: no grant, a host outside it or the operator's lists,
    /// an address class the egress guard refuses, a scheme other than http(s).
    Network,
}

impl Right {
    /// The right's name, as it is written in records and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Right::Tool => "tool",
            Right::RunBudget => "run-budget",
            Right::Workspace => "workspace",
            Right::FsRead => "fs-read",
            Right::FsWrite => "fs-write",
            Right::Protected => "protected",
            Right::Spawn => "spawn",
            Right::Command => "command",
            Right::Approval => "approval",
            Right::Network => "network",
        }
    }
}

/// A refusal by the host: what right, on what, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// The right refused.
    pub right: Right,
    /// What it was refused on (a tool, a path, a command).
    pub target: String,
    /// The message the model sees.
    pub message: String,
    /// The kind the model sees it as.
    #[serde(with = "kind_code")]
    pub kind: ErrorKind,
}

mod kind_code {
    use super::ErrorKind;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(k: &ErrorKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(k.code())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ErrorKind, D::Error> {
        let code = String::deserialize(d)?;
        ErrorKind::ALL.into_iter().find(|k| k.code() == code).ok_or_else(|| serde::de::Error::custom("unknown kind"))
    }
}

impl Denial {
    /// A denial of `right` on `target`.
    #[cold]
    pub fn new(right: Right, target: impl Into<String>, kind: ErrorKind, message: impl Into<String>) -> Denial {
        Denial { right, target: target.into(), message: message.into(), kind }
    }
}

/// Why a check did not pass: the host refused a right, or the request was malformed
/// (a path that escapes the workspace is an error in the request, not a denial).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// A right was refused: recorded as a denial.
    Denied(Denial),
    /// The request cannot be honoured as written.
    Invalid {
        /// The kind.
        kind: ErrorKind,
        /// The message.
        message: String,
    },
}

impl Refused {
    /// The denial, when it is one.
    pub fn denial(self) -> Option<Denial> {
        match self {
            Refused::Denied(d) => Some(d),
            Refused::Invalid { .. } => None,
        }
    }

    /// The kind and message a component sees.
    pub fn parts(&self) -> (ErrorKind, &str) {
        match self {
            Refused::Denied(d) => (d.kind, &d.message),
            Refused::Invalid { kind, message } => (*kind, message),
        }
    }
}

/// May `role` call `tool`? `available` filters the held tools shown in the refusal to
/// those that exist.
pub fn tool(policy: &Policy, role: &str, tool: &str, available: &dyn Fn(&str) -> bool) -> Result<(), Denial> {
    if !policy.has_role(role) {
        let roles: Vec<_> = policy.role_names().collect();
        return Err(Denial::new(
            Right::Tool,
            tool,
            ErrorKind::NotGranted,
            format!("refused: role \"{role}\" is not defined; roles: {}", roles.join(", ")),
        ));
    }
    if !policy.grants(role, tool) {
        let held: Vec<&str> = policy.tools_of(role).into_iter().filter(|t| available(t)).collect();
        return Err(Denial::new(
            Right::Tool,
            tool,
            ErrorKind::NotGranted,
            format!(
                "refused: tool \"{tool}\" is not granted to role \"{role}\"; granted: {}. Continue without it.",
                held.join(", ")
            ),
        ));
    }
    Ok(())
}

/// May a component with `mounts` read (or, with `write`, write) `path` (as the model
/// sent it, relative to the workspace `root`)? Returns the normalized relative path.
/// `protected` are the workspace-relative paths no tool writes besides `.git`.
pub fn fs<S: AsRef<str>>(
    mounts: &[Mount],
    protected: &[S],
    path: &str,
    write: bool,
    root: &str,
) -> Result<String, Refused> {
    let rel = match paths::lexical(path, root) {
        Ok(r) => r.normalized(),
        Err(r) => return Err(Refused::Invalid { kind: ErrorKind::PathRefused, message: r.message(path, root) }),
    };
    let under = |m: &Mount| m.rel == "." || rel == m.rel || rel.starts_with(&format!("{}/", m.rel));
    if mounts.is_empty() {
        return Err(Refused::Denied(Denial::new(
            if write { Right::FsWrite } else { Right::FsRead },
            &rel,
            ErrorKind::NotGranted,
            "refused: this component has no access to the workspace",
        )));
    }
    if !mounts.iter().any(|m| (m.write || !write) && under(m)) {
        let (right, what) = if write { (Right::FsWrite, "write") } else { (Right::FsRead, "read") };
        return Err(Refused::Denied(Denial::new(
            right,
            &rel,
            ErrorKind::NotGranted,
            format!("refused: \"{rel}\" is outside this tool's {what} grant"),
        )));
    }
    if write && paths::is_protected(&rel, protected) {
        return Err(Refused::Denied(Denial::new(
            Right::Protected,
            &rel,
            ErrorKind::PathRefused,
            format!(
                "Refusing to write \"{}\": .git, the host's configuration and its state directory are never written by tools",
                paths::display_path(&rel)
            ),
        )));
    }
    Ok(rel)
}

/// May the component ask for a process?
pub fn spawn(granted: bool, component: &str, command: &str) -> Result<(), Denial> {
    if granted {
        return Ok(());
    }
    Err(Denial::new(
        Right::Spawn,
        command,
        ErrorKind::NotGranted,
        format!("refused: the component \"{component}\" is not granted process spawning"),
    ))
}

/// A command the operator's policy refused (`kind`: not allowed, or shell syntax).
pub fn command(command: &str, kind: ErrorKind, message: &str) -> Denial {
    Denial::new(Right::Command, command, kind, message)
}

/// A command nobody approved; `why` says how it ended (empty for a plain decline).
pub fn approval(command: &str, why: &str) -> Denial {
    Denial::new(
        Right::Approval,
        command,
        ErrorKind::ApprovalDenied,
        format!(
            "The human declined to run this shell command{why}: `{}`. Do not run it again, and do not retry a variant \
             of it; propose a different approach or ask the user what to do.",
            cheng_contract::text::escape_line(command)
        ),
    )
}

/// A read or write of `rel` that a path rule (`[[files.rules]]` or a built-in one)
/// forbids; `message` says which rule and how to change it.
pub fn path_rule(rel: &str, write: bool, message: String) -> Denial {
    Denial::new(if write { Right::Protected } else { Right::FsRead }, rel, ErrorKind::PathRefused, message)
}

/// A read or write of the protected file `rel` that nobody approved; `why` says how it
/// ended (empty for a plain decline).
pub fn path_approval(rel: &str, write: bool, why: &str) -> Denial {
    let verb = if write { "write" } else { "read" };
    Denial::new(
        Right::Approval,
        rel,
        ErrorKind::ApprovalDenied,
        format!(
            "The human declined to let this tool {verb} \"{}\"{why}, which a path rule protects. Do not try again, \
             and do not reach the file another way; propose a different approach or ask the user what to do.",
            cheng_contract::paths::display_path(rel)
        ),
    )
}

/// A tool of an MCP server nobody approved; `why` says how it ended.
pub fn tool_approval(tool: &str, why: &str) -> Denial {
    Denial::new(
        Right::Approval,
        tool,
        ErrorKind::ApprovalDenied,
        format!(
            "The human declined this call of \"{tool}\"{why}. Do not call it again with the same arguments; propose a \
             different approach or ask the user what to do."
        ),
    )
}

/// A component's own request for approval (`summary`) that was not approved.
pub fn asked_approval(summary: &str, decision: &str) -> Denial {
    Denial::new(Right::Approval, summary, ErrorKind::ApprovalDenied, format!("approval {decision}"))
}

/// A tool of an MCP server whose definition changed since the operator pinned it
/// (`why`), withheld until the operator accepts it (`server` is the server's id).
pub fn withheld(tool: &str, server: &str, why: &str) -> Denial {
    Denial::new(
        Right::Tool,
        tool,
        ErrorKind::NotGranted,
        format!(
            "The tool \"{tool}\" is withheld: {why}. Tell the user; the operator reviews it with `cheng mcp diff \
             {server}` and takes the new definition with `cheng mcp accept {server}`."
        ),
    )
}

/// One more call in `run`, whose budget of `max_calls` is spent.
pub fn run_budget(run: &str, max_calls: u64) -> Denial {
    Denial::new(
        Right::RunBudget,
        run,
        ErrorKind::NotGranted,
        format!(
            "refused: run \"{run}\" has used its budget of {max_calls} tool calls. Stop calling tools and give your final \
             answer with what you have."
        ),
    )
}

/// A workspace outside the workspaces `root` while external workspaces are off.
pub fn workspace(workspace: &std::path::Path, root: &std::path::Path) -> Denial {
    Denial::new(
        Right::Workspace,
        workspace.display().to_string(),
        ErrorKind::PathRefused,
        format!(
            "Refusing workspace \"{}\": it is outside the workspaces root \"{}\" and external workspaces are turned off",
            workspace.display(),
            root.display()
        ),
    )
}

/// A workspace that was found, not given, and is one never served unless given
/// (`why`: what it is, from [`crate::guard::found_workspace_refusal`]).
pub fn found_workspace(workspace: &std::path::Path, why: &str) -> Denial {
    Denial::new(
        Right::Workspace,
        workspace.display().to_string(),
        ErrorKind::PathRefused,
        format!(
            "Refusing workspace \"{}\": it is {why}, which is served only when given explicitly (cheng serve or \
             cheng call --workspace {}, a token pinned to it, or Context::given for an embedder); work in a \
             project directory instead",
            workspace.display(),
            workspace.display()
        ),
    )
}

/// A network request the egress guard refused (`target`, cut to 512 characters).
pub fn network(target: &str, message: &str) -> Denial {
    Denial::new(Right::Network, cheng_contract::text::cut_chars(target, 512), ErrorKind::NotGranted, message)
}

/// A network target a command's proxy refused (`host:port`, and the guard's reason).
pub fn command_network(target: &str, why: &str) -> Denial {
    network(
        target,
        &format!(
            "a command asked its proxy for {}, which was refused ({}); it may reach only the hosts it was granted",
            cheng_contract::text::escape_line(target),
            cheng_contract::text::escape_line(why)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn right_names_are_the_serialized_ones() {
        use Right::*;
        for r in [Tool, RunBudget, Workspace, FsRead, FsWrite, Protected, Spawn, Command, Approval] {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
    }

    const ROOT: &str = "/w";

    #[test]
    fn fs_checks_grant_then_protection() {
        let ro = [Mount { rel: ".".into(), write: false }];
        let rw = [Mount { rel: ".".into(), write: true }];
        let none: [&str; 0] = [];
        // Reading under a read-only mount passes.
        assert_eq!(fs(&ro, &none, "./a/../b.txt", false, ROOT).unwrap(), "b.txt");
        // Writing under it is a denial of the write right.
        assert_eq!(fs(&ro, &none, "b.txt", true, ROOT).unwrap_err().denial().unwrap().right, Right::FsWrite);
        // No mount at all: a denial of the read right.
        assert_eq!(fs(&[], &none, "b.txt", false, ROOT).unwrap_err().denial().unwrap().right, Right::FsRead);
        // `.git` in any spelling, and listed paths, are protected even under a read-write mount.
        for p in [".git/config", "sub/.GIT/hooks/x", ".git./x"] {
            assert_eq!(fs(&rw, &none, p, true, ROOT).unwrap_err().denial().unwrap().right, Right::Protected, "{p}");
        }
        assert_eq!(
            fs(&rw, &["state"], "state/audit.jsonl", true, ROOT).unwrap_err().denial().unwrap().right,
            Right::Protected
        );
        // Reading a protected path is fine.
        assert!(fs(&rw, &none, ".git/config", false, ROOT).is_ok());
        // A path that escapes is an invalid request, not a denial.
        assert!(fs(&rw, &none, "../x", false, ROOT).unwrap_err().denial().is_none());
    }

    #[test]
    fn tool_grants_name_what_is_held() {
        let p = Policy::defaults();
        // A held tool passes.
        assert!(tool(&p, "recon", "read_file", &|_| true).is_ok());
        // A tool outside the role is refused with the tools the role does hold.
        let d = tool(&p, "recon", "write_file", &|t| t == "read_file").unwrap_err();
        assert!(d.message.ends_with("granted: read_file. Continue without it."), "{}", d.message);
        // An unknown role is refused with the roles that exist.
        assert!(tool(&p, "nobody", "read_file", &|_| true).unwrap_err().message.contains("roles: developer"));
    }

    #[test]
    fn spawn_needs_its_grant() {
        // Granted: fine. Not granted: a denial naming the component.
        assert!(spawn(true, "shell", "ls").is_ok());
        assert!(spawn(false, "acme", "ls").unwrap_err().message.contains("\"acme\""));
    }
}
