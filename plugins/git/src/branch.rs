//! `branch`: local branches like `git branch`, with those checked out in other worktrees marked.

use super::*;

pub(crate) fn branches(repo: &gix::Repository) -> Result<(Vec<Branch>, String), Failure> {
    let head_name = repo.head_name().ok().flatten();
    let mut out = Vec::new();
    let refs = repo.references().map_err(io)?;
    for r in refs.local_branches().map_err(io)? {
        let mut r = r.map_err(io)?;
        let name = r.name().shorten().to_str_lossy().into_owned();
        let current = head_name.as_ref().is_some_and(|h| h.as_bstr() == r.name().as_bstr());
        let commit = r.peel_to_id().map(|id| id.to_string()).unwrap_or_default();
        out.push(Branch { name, commit, current });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    let mut text = String::new();
    let detached = head_name.is_none();
    if detached && let Ok(id) = repo.head_id() {
        text.push_str(&format!("* (HEAD detached at {})\n", id.shorten_or_id()));
    }
    // Branches checked out in another worktree get git's `+`.
    let elsewhere = other_worktree_branches(repo);
    for b in &out {
        let mark = if b.current {
            "*"
        } else if elsewhere.contains(&b.name) {
            "+"
        } else {
            " "
        };
        text.push_str(&format!("{mark} {}\n", b.name));
    }
    Ok((out, text))
}

/// Short names of the branches that the repository's other worktrees have checked out
/// (read from their `HEAD` files under the common directory).
pub(crate) fn other_worktree_branches(repo: &gix::Repository) -> Vec<String> {
    let common = repo.common_dir().to_path_buf();
    let own = repo.git_dir().to_path_buf();
    let mut heads = vec![common.clone()];
    if let Ok(dir) = std::fs::read_dir(common.join("worktrees")) {
        heads.extend(dir.flatten().map(|e| e.path()));
    }
    heads
        .into_iter()
        .filter(|d| *d != own)
        .filter_map(|d| std::fs::read_to_string(d.join("HEAD")).ok())
        .filter_map(|h| h.trim().strip_prefix("ref: refs/heads/").map(str::to_string))
        .collect()
}
