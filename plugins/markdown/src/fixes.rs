//! `format_suggestions`: the mechanical fixes for what `diagnostics` finds, as
//! `edit_file` inputs checked by applying them in order to a copy.

use std::collections::BTreeMap;

use crate::doc::Doc;
use crate::*;

/// Lines `a..=b` (1-based) of `lines`, joined with their newlines, and whether the
/// span ends at the end of the file.
pub(crate) fn span(lines: &[&str], a: usize, b: usize) -> String {
    let mut s = lines[a - 1..b].join("\n");
    if b < lines.len() {
        s.push('\n');
    }
    s
}

/// The mechanical fix of one line.
pub(crate) fn fix_line(line: &str, codes: &[&str]) -> String {
    let mut l = line.to_string();
    let cr = l.ends_with('\r');
    if cr {
        l.pop();
    }
    if codes.contains(&"trailing-whitespace") {
        l = l.trim_end_matches([' ', '\t']).to_string();
    }
    if codes.contains(&"missing-space-atx-heading") {
        let hashes = l.chars().take_while(|c| *c == '#').count();
        l = format!("{} {}", &l[..hashes], &l[hashes..]);
    }
    if cr {
        l.push('\r');
    }
    l
}

pub(crate) fn suggestions(doc: &Doc<'_>, rel: &str) -> Vec<Edit> {
    let lines = doc.lines();
    let findings = doc.line_findings();
    // Lines to rewrite (with their codes) and lines to drop (extra blank lines).
    let mut rewrite: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    let mut drop: Vec<usize> = Vec::new();
    for (line, code, _, _) in &findings {
        if *code == "multiple-blank-lines" {
            drop.push(*line);
        } else {
            rewrite.entry(*line).or_default().push(code);
        }
    }
    // Further blank lines of a run are dropped too (the finding names only the second).
    let mut extra = Vec::new();
    for &l in &drop {
        let mut n = l + 1;
        while n < lines.len() && lines[n - 1].trim().is_empty() && !doc.in_code(n) {
            extra.push(n);
            n += 1;
        }
    }
    drop.extend(extra);
    let mut touched: Vec<usize> = rewrite.keys().copied().chain(drop.iter().copied()).collect();
    touched.sort_unstable();
    touched.dedup();
    // Group neighbouring lines, then widen each group until its text is unique.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for l in touched {
        match groups.last_mut() {
            Some((_, b)) if l <= *b + 1 => *b = l,
            _ => groups.push((l, l)),
        }
    }
    let mut edits = Vec::new();
    let mut working = doc.text.to_string();
    let mut gi = 0;
    while gi < groups.len() {
        let (mut a, mut b) = groups[gi];
        loop {
            let old = span(&lines, a, b);
            let unique = !old.is_empty() && working.matches(old.as_str()).count() == 1;
            if unique || (a == 1 && b == lines.len()) {
                break;
            }
            if a > 1 {
                a -= 1;
            }
            if b < lines.len() {
                b += 1;
            }
            // Swallow a following group that the widening reached.
            while gi + 1 < groups.len() && groups[gi + 1].0 <= b + 1 {
                b = b.max(groups[gi + 1].1);
                groups.remove(gi + 1);
            }
        }
        let old = span(&lines, a, b);
        let mut new_lines: Vec<String> = Vec::new();
        for n in a..=b {
            if drop.contains(&n) {
                continue;
            }
            match rewrite.get(&n) {
                Some(codes) => new_lines.push(fix_line(lines[n - 1], codes)),
                None => new_lines.push(lines[n - 1].to_string()),
            }
        }
        let mut new = new_lines.join("\n");
        if b < lines.len() {
            new.push('\n');
        }
        let mut codes: Vec<String> = Vec::new();
        for n in a..=b {
            let here: Vec<&str> = rewrite.get(&n).cloned().unwrap_or_default();
            for c in here.into_iter().chain(drop.contains(&n).then_some("multiple-blank-lines")) {
                if !codes.iter().any(|x| x == c) {
                    codes.push(c.to_string());
                }
            }
        }
        let code = codes.first().cloned().unwrap_or_else(|| "format".into());
        // Check it applies to the file as it will be when the earlier edits are in.
        if working.matches(old.as_str()).count() == 1 && old != new {
            working = working.replacen(old.as_str(), &new, 1);
            edits.push(Edit { code, codes, line: a, path: rel.into(), old_text: old, new_text: new });
        }
        gi += 1;
    }
    // An unclosed fence: close it at the end of the file.
    if let Some(&open) = doc.unclosed_fences.first() {
        let fence: String = lines[open - 1].trim_start().chars().take_while(|c| *c == '`' || *c == '~').collect();
        let mut a = lines.len();
        while a > 1 && lines[a - 1].is_empty() {
            a -= 1;
        }
        let mut start = a;
        loop {
            let old = span(&lines, start, lines.len());
            if working.ends_with(old.as_str()) && working.matches(old.as_str()).count() == 1 || start == 1 {
                let mut new = old.trim_end_matches('\n').to_string();
                new.push_str(&format!("\n{fence}\n"));
                if working.matches(old.as_str()).count() == 1 {
                    edits.push(Edit {
                        code: "unclosed-code-fence".into(),
                        codes: vec!["unclosed-code-fence".into()],
                        line: start,
                        path: rel.into(),
                        old_text: old,
                        new_text: new,
                    });
                }
                break;
            }
            start -= 1;
        }
    }
    edits.truncate(MAX_ITEMS);
    edits
}
