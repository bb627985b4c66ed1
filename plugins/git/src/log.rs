//! `log`: commits from a revision, narrowed by pathspecs with git's default history
//! simplification, in git's default format.

use super::*;

pub(crate) fn commit_info(c: &gix::Commit<'_>) -> Result<Commit, Failure> {
    let author = c.author().map_err(io)?;
    let msg = c.message_raw().map_err(io)?;
    Ok(Commit {
        id: c.id.to_string(),
        author: author.name.to_str_lossy().into_owned(),
        email: author.email.to_str_lossy().into_owned(),
        time: author.time().map(|t| t.seconds).unwrap_or(0),
        summary: msg.lines().next().map(|l| l.to_str_lossy().into_owned()).unwrap_or_default(),
        parents: c.parent_ids().map(|p| p.to_string()).collect(),
    })
}

/// git's default `log`/`show` header for `c`.
pub(crate) fn header(c: &gix::Commit<'_>) -> Result<String, Failure> {
    let author = c.author().map_err(io)?;
    let time = author.time().map_err(io)?;
    let mut s = format!("commit {}\n", c.id);
    let parents: Vec<_> = c.parent_ids().collect();
    if parents.len() > 1 {
        s.push_str(&format!(
            "Merge: {}\n",
            parents.iter().map(|p| p.shorten_or_id().to_string()).collect::<Vec<_>>().join(" ")
        ));
    }
    s.push_str(&format!("Author: {} <{}>\n", author.name.to_str_lossy(), author.email.to_str_lossy()));
    s.push_str(&format!("Date:   {}\n\n", time.format_or_unix(gix::date::time::format::DEFAULT)));
    let msg = c.message_raw().map_err(io)?.to_str_lossy().into_owned();
    for line in msg.trim_end_matches('\n').lines() {
        s.push_str(&format!("    {line}\n"));
    }
    Ok(s)
}

/// Does `c` change anything under `specs` (always, without specs)? As git's default
/// history simplification decides: a commit is left out when those paths are the same
/// as in one of its parents; a root commit is shown when it has any of them.
pub(crate) fn touches(repo: &gix::Repository, c: &gix::Commit<'_>, specs: &Pathspecs) -> Result<bool, Failure> {
    if specs.is_empty() {
        return Ok(true);
    }
    // What a tree holds under the pathspecs: for plain paths the entries at them (fast:
    // one lookup each); for wildcard patterns every matching file.
    let plain = specs.plain();
    type Found = Vec<(String, Option<(u32, gix::ObjectId)>)>;
    let at = |tree: &gix::Tree<'_>| -> Result<Found, Failure> {
        match &plain {
            Some(paths) => paths
                .iter()
                .map(|s| {
                    if s.is_empty() {
                        return Ok((String::new(), Some((0o040000, tree.id))));
                    }
                    let e = tree.lookup_entry_by_path(s).map_err(io)?;
                    Ok((s.to_string(), e.map(|e| (e.mode().value() as u32, e.object_id()))))
                })
                .collect(),
            None => Ok(tree_files(repo, Some(tree.id))?
                .into_iter()
                .filter(|(p, _)| specs.matches(p))
                .map(|(p, side)| (p, Some(side)))
                .collect()),
        }
    };
    let mine = at(&c.tree().map_err(io)?)?;
    let mut parents = c.parent_ids().peekable();
    if parents.peek().is_none() {
        return Ok(mine.iter().any(|(_, e)| e.is_some()));
    }
    for p in parents {
        let tree = repo.find_commit(p).map_err(io)?.tree().map_err(io)?;
        if at(&tree)? == mine {
            return Ok(false);
        }
    }
    Ok(true)
}

pub(crate) fn log(
    repo: &gix::Repository,
    rev: Option<&str>,
    n: usize,
    specs: &Pathspecs,
) -> Result<(Vec<Commit>, String), Failure> {
    let start = match rev {
        Some(r) => resolve(repo, r)?,
        None => match head_commit_id(repo)? {
            Some(id) => id,
            None => return Ok((Vec::new(), String::new())),
        },
    };
    let mut commits = Vec::new();
    let mut text = String::new();
    let walk = repo
        .rev_walk([start])
        .sorting(gix::revision::walk::Sorting::ByCommitTime(Default::default()))
        .all()
        .map_err(io)?;
    for info in walk {
        if commits.len() == n {
            break;
        }
        let info = info.map_err(io)?;
        let c = info.object().map_err(io)?;
        if !touches(repo, &c, specs)? {
            continue;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&header(&c)?);
        commits.push(commit_info(&c)?);
    }
    Ok((commits, text))
}
