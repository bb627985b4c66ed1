//! The checks every name a request carries passes before anything runs: pathspecs
//! (relative, no `..`, no `.git`, nothing an option or pathspec magic could be read
//! from), branch and tag names (git's ref-name rules, through `gix-validate`, and
//! nothing beginning with `-`), revisions (a name or a hash, never an expression), and
//! messages.

use crate::ErrorKind;
use crate::process::Refusal;

/// The longest message accepted.
const MAX_MESSAGE: usize = 64 * 1024;
/// The most pathspecs in one request.
const MAX_PATHSPECS: usize = 4096;

fn refused(message: String) -> Refusal {
    Refusal::new(ErrorKind::PathRefused, message)
}

fn invalid(message: String) -> Refusal {
    Refusal::new(ErrorKind::InvalidArgument, message)
}

/// `p` with control characters escaped, for messages.
fn shown(p: &str) -> String {
    cheng_contract::text::escape_line(p)
}

/// Check pathspecs (relative to the repository root). `what` names the operation.
pub(crate) fn pathspecs(specs: &[String], what: &str, required: bool) -> Result<(), Refusal> {
    if required && specs.is_empty() {
        return Err(invalid(format!(
            "{what} needs at least one path in `pathspecs` (relative to the repository root; \".\" for everything)"
        )));
    }
    if specs.len() > MAX_PATHSPECS {
        return Err(invalid(format!("at most {MAX_PATHSPECS} pathspecs per request; split the work")));
    }
    for p in specs {
        if p.is_empty() {
            return Err(invalid("a pathspec is empty; use \".\" for the whole repository".into()));
        }
        if p.contains('\0') {
            return Err(invalid("a pathspec cannot contain a NUL byte".into()));
        }
        if p.starts_with('/') || p.starts_with('\\') || p.starts_with('~') || p.get(1..2) == Some(":") {
            return Err(refused(format!(
                "pathspec \"{}\" is absolute; give it relative to the repository root",
                shown(p)
            )));
        }
        if p.split(['/', '\\']).any(|s| s == "..") {
            return Err(refused(format!(
                "pathspec \"{}\" climbs with `..`; give it relative to the repository root",
                shown(p)
            )));
        }
        if p.split(['/', '\\']).any(|s| s.eq_ignore_ascii_case(".git")) {
            return Err(refused(format!(
                "pathspec \"{}\" names the repository's own .git directory, which no tool changes",
                shown(p)
            )));
        }
        if p.starts_with('-') {
            return Err(invalid(format!(
                "pathspec \"{}\" begins with '-', which git would read as an option; name the file as \"./{}\"",
                shown(p),
                shown(p)
            )));
        }
        if p.starts_with(':') {
            return Err(invalid(format!(
                "pathspec \"{}\" uses pathspec magic (`:(top)`, `:/`, `:!`…), which is refused; give a path \
                 relative to the repository root or a wildcard such as *.txt",
                shown(p)
            )));
        }
        if p.chars().any(|c| c.is_control()) {
            return Err(invalid(format!("pathspec \"{}\" holds a control character", shown(p))));
        }
    }
    Ok(())
}

/// Check a branch name.
pub(crate) fn branch(name: &str) -> Result<(), Refusal> {
    ref_name(name, "branch")
}

/// Check a tag name.
pub(crate) fn tag(name: &str) -> Result<(), Refusal> {
    ref_name(name, "tag")
}

fn ref_name(name: &str, what: &str) -> Result<(), Refusal> {
    let bad = |why: &str| {
        Err(invalid(format!(
            "\"{}\" is not a valid {what} name: {why}; use letters, digits, '-', '_', '.' and '/' (as in agent/fix-1)",
            shown(name)
        )))
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.starts_with('-') {
        return bad("it begins with '-', which git would read as an option");
    }
    if name == "HEAD" || name == "@" || name.starts_with("refs/") {
        return bad("it is reserved (HEAD, @ and full refs/… names are refused)");
    }
    if let Err(e) = gix_validate::reference::name_partial(name.as_bytes().into()) {
        return bad(&e.to_string());
    }
    Ok(())
}

/// Check a revision a tag may point at: a branch or tag name, or a commit hash — never
/// an expression (`HEAD~2`, `main^{tree}`, `@{-1}`) or an option.
pub(crate) fn revision(rev: &str) -> Result<(), Refusal> {
    let hex = (4..=64).contains(&rev.len()) && rev.bytes().all(|b| b.is_ascii_hexdigit());
    if hex || rev == "HEAD" {
        return Ok(());
    }
    ref_name(rev, "revision").map_err(|_| {
        invalid(format!(
            "\"{}\" is not a revision this tool accepts: give a branch or tag name, HEAD, or a commit hash",
            shown(rev)
        ))
    })
}

/// Check a commit, tag or stash message; `required` when it may not be empty.
pub(crate) fn message(text: &str, what: &str, required: bool) -> Result<(), Refusal> {
    if required && text.trim().is_empty() {
        return Err(invalid(format!("{what} needs a non-empty `message`")));
    }
    if text.contains('\0') {
        return Err(invalid("a message cannot contain a NUL byte".into()));
    }
    if text.len() > MAX_MESSAGE {
        return Err(invalid(format!("the message is over {MAX_MESSAGE} bytes")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_pathspecs_are_refused() {
        for p in [
            "/etc/passwd",
            "../../.kube/config",
            "a/../../b",
            "-n",
            "--all",
            ":(top)x",
            ":/x",
            ":!x",
            ".git/config",
            "sub/.GIT/hooks",
            "",
            "a\0b",
            "C:x",
            "~/x",
            "a\nb",
        ] {
            assert!(pathspecs(&[p.to_string()], "add", true).is_err(), "{p:?}");
        }
        for p in ["src/main.rs", ".", "a b", "*.txt", "dir/", "a..b", ".gitignore", "x-y"] {
            pathspecs(&[p.to_string()], "add", true).unwrap();
        }
        assert!(pathspecs(&[], "add", true).is_err());
        pathspecs(&[], "stash", false).unwrap();
    }

    #[test]
    fn bad_names_are_refused() {
        for n in [
            "",
            "-b",
            "--force",
            "a..b",
            "a b",
            "a~1",
            "a^",
            "a:b",
            "HEAD",
            "@",
            "x@{1}",
            "x.lock",
            "/x",
            "x/",
            "a//b",
            ".x",
            "refs/heads/x",
            "a*",
            "a?",
            "a[b",
            "a\\b",
            "x\u{7f}",
        ] {
            assert!(branch(n).is_err(), "{n:?}");
        }
        for n in ["main", "agent/fix-1", "v1.0", "feature_x", "a.b/c"] {
            branch(n).unwrap();
        }
        for r in ["HEAD", "main", "abc1234", "0123456789abcdef0123456789abcdef01234567"] {
            revision(r).unwrap();
        }
        for r in ["HEAD~2", "main^{tree}", "@{-1}", "-x", "a..b", ":/msg"] {
            assert!(revision(r).is_err(), "{r:?}");
        }
    }
}
