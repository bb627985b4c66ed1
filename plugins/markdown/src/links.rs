//! `link_check_local`: relative links and anchors checked against the workspace through
//! the host's guarded listing; external links listed, never fetched.

use std::collections::HashMap;

use cheng_sdk::host::{self, EntryKind};

use crate::doc::Doc;
use crate::*;

/// Lexically join `base_dir` and `target` (workspace-relative); None when it climbs
/// above the root.
pub(crate) fn join(base_dir: &str, target: &str) -> Option<String> {
    let mut parts: Vec<&str> = if target.starts_with('/') || base_dir == "." || base_dir.is_empty() {
        Vec::new()
    } else {
        base_dir.split('/').collect()
    };
    for seg in target.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(if parts.is_empty() { ".".to_string() } else { parts.join("/") })
}

pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn is_external(url: &str) -> bool {
    if url.starts_with("//") {
        return true;
    }
    match url.split_once(':') {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
        }
        None => false,
    }
}

/// Whether `rel` exists (file or directory), through the host's guarded listings.
pub(crate) fn exists(rel: &str, cache: &mut HashMap<String, Option<Vec<(String, EntryKind)>>>) -> Option<EntryKind> {
    if rel == "." {
        return Some(EntryKind::Dir);
    }
    let (dir, name) = match rel.rsplit_once('/') {
        Some((d, n)) => (d.to_string(), n),
        None => (".".to_string(), rel),
    };
    let listing = cache
        .entry(dir.clone())
        .or_insert_with(|| host::read_dir(&dir, false).ok().map(|v| v.into_iter().map(|e| (e.name, e.kind)).collect()));
    listing.as_ref()?.iter().find(|(n, _)| n == name).map(|(_, k)| *k)
}

pub(crate) fn anchor_matches(anchors: &[String], wanted: &str) -> bool {
    let w = percent_decode(wanted).to_lowercase();
    let w = w.strip_prefix("user-content-").unwrap_or(&w);
    anchors.iter().any(|a| a.to_lowercase() == w)
}

pub(crate) fn check_links(doc: &Doc<'_>, rel: &str) -> (Vec<Diagnostic>, Vec<Link>) {
    let base_dir = rel.rsplit_once('/').map(|(d, _)| d).unwrap_or(".");
    let own = doc.anchors();
    let mut listings = HashMap::new();
    let mut other_anchors: HashMap<String, Option<Vec<String>>> = HashMap::new();
    let mut diags = Vec::new();
    let mut links = Vec::new();
    for (url, line, _img, _) in &doc.links {
        let url = url.trim();
        if url.is_empty() {
            continue;
        }
        if is_external(url) {
            links.push(Link { target: url.into(), line: *line, kind: "external".into(), ok: None });
            continue;
        }
        if let Some(anchor) = url.strip_prefix('#') {
            let ok = anchor.is_empty() || anchor_matches(&own, anchor);
            if !ok {
                diags.push(Diagnostic {
                    code: "broken-anchor".into(),
                    line: *line,
                    column: 1,
                    message: format!("no heading here has the anchor #{anchor}"),
                });
            }
            links.push(Link { target: url.into(), line: *line, kind: "anchor".into(), ok: Some(ok) });
            continue;
        }
        let (path_part, anchor) = match url.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (url, None),
        };
        let path_part = path_part.split('?').next().unwrap_or(path_part);
        let decoded = percent_decode(path_part);
        let Some(target) = join(base_dir, &decoded) else {
            diags.push(Diagnostic {
                code: "link-outside-workspace".into(),
                line: *line,
                column: 1,
                message: format!("\"{url}\" points above the workspace root"),
            });
            links.push(Link { target: url.into(), line: *line, kind: "local".into(), ok: Some(false) });
            continue;
        };
        let kind = exists(&target, &mut listings);
        let mut ok = kind.is_some();
        if !ok {
            diags.push(Diagnostic {
                code: "broken-local-link".into(),
                line: *line,
                column: 1,
                message: format!("\"{url}\" does not exist (looked for {target})"),
            });
        } else if let Some(a) = anchor.filter(|a| !a.is_empty()) {
            let is_md = target.ends_with(".md") || target.ends_with(".markdown");
            if kind == Some(EntryKind::File) && is_md {
                let anchors = other_anchors.entry(target.clone()).or_insert_with(|| {
                    host::read_file(&target, MAX_FILE_BYTES).ok().map(|b| {
                        let t = String::from_utf8_lossy(&b).into_owned();
                        Doc::new(&t).anchors()
                    })
                });
                if let Some(list) = anchors
                    && !anchor_matches(list, a)
                {
                    ok = false;
                    diags.push(Diagnostic {
                        code: "broken-anchor".into(),
                        line: *line,
                        column: 1,
                        message: format!("{target} has no heading with the anchor #{a}"),
                    });
                }
            }
        }
        links.push(Link { target: url.into(), line: *line, kind: "local".into(), ok: Some(ok) });
    }
    diags.truncate(MAX_ITEMS);
    links.truncate(MAX_ITEMS);
    (diags, links)
}
