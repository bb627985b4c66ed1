//! The approval card for a command: the command's first line as the summary; the exact
//! command, its absolute working directory and every environment entry the request
//! sets as the detail. The text is raw here: the approvals broker escapes every card,
//! from every source, before anyone sees it.

use super::Prepared;

/// The `(summary, detail)` of the card for `p`.
pub fn card(p: &Prepared) -> (String, String) {
    let first = p.display.lines().next().unwrap_or("");
    let summary = if p.display.lines().nth(1).is_some() { format!("{first} …") } else { first.to_string() };
    let mut detail = format!("{} (in {})", p.display, p.cwd_abs().display());
    if !p.request_env.is_empty() {
        let entries: Vec<String> = p.request_env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        detail.push_str(&format!(" with environment {}", entries.join(" ")));
    }
    (summary, detail)
}
