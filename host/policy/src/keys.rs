//! Where each key of `cheng.toml` belongs, so that a key written in the wrong table is
//! refused with its home named ("`command_whitelist` belongs in `[process]`") rather
//! than with a bare "unknown field".
//!
//! The table below is checked against the structs that read the file by a unit test:
//! every key listed is accepted in its table, every table refuses an unknown key.

/// Every table and the keys it accepts. `NAME` stands for any role, tool or plugin.
pub const TABLES: &[(&str, &[&str])] = &[
    ("(top level)", &["default_role", "allow_unpinned_plugins"]),
    ("[limits]", &["memory_mb", "cpu_ms", "wall_ms"]),
    ("[approvals]", &["timeout_ms"]),
    ("[records]", &["commit_window_ms", "on_failure", "max_bytes"]),
    ("[runs]", &["max_calls"]),
    ("[workspaces]", &["root", "allow_external"]),
    ("[roles.NAME]", &["inherits", "tools"]),
    ("[tools.NAME]", &["memory_mb", "cpu_ms", "fs"]),
    (
        "[process]",
        &[
            "allow_shell_string",
            "command_whitelist",
            "env",
            "timeout_ms",
            "output_bytes",
            "kill_grace_ms",
            "landlock",
            "writable",
            "readable",
            "private_caches",
            "rules",
            "containment",
            "known_safe",
            "known_safe_remove",
            "known_safe_rules",
        ],
    ),
    ("[[process.rules]]", &["program", "args", "decision", "network"]),
    ("[[process.known_safe_rules]]", &["program", "subcommand", "flags", "value_options", "operands"]),
    ("[files]", &["rules"]),
    ("[[files.rules]]", &["paths", "read", "write"]),
    ("[git]", &["user_name", "user_email", "rules"]),
    ("[[git.rules]]", &["operations", "branches", "decision"]),
    (
        "[serve]",
        &[
            "approvals_via_client",
            "max_request_bytes",
            "max_calls",
            "max_calls_per_session",
            "busy_wait_ms",
            "idle_session_ms",
            "allowed_hosts",
            "allowed_origins",
            "workspaces",
        ],
    ),
    (
        "[[plugins]]",
        &["id", "path", "source", "auth_env", "sha256", "signed_by", "fs", "spawn", "net", "memory_mb", "timeout_ms"],
    ),
    (
        "[[mcp_servers]]",
        &[
            "id",
            "command",
            "args",
            "url",
            "bearer_env",
            "env",
            "fs",
            "net",
            "approve",
            "timeout_ms",
            "output_bytes",
            "read",
            "etc_withheld",
        ],
    ),
    (
        "[web]",
        &[
            "allow_hosts",
            "deny_hosts",
            "allow_private",
            "timeout_ms",
            "connect_timeout_ms",
            "max_bytes",
            "proxy",
            "user_agent",
            "ca_file",
        ],
    ),
    ("[web.search]", &["provider", "url", "api_key_env"]),
    (
        "[telemetry]",
        &[
            "endpoint",
            "headers",
            "service_name",
            "export_arguments",
            "export_results",
            "queue",
            "timeout_ms",
            "metrics_interval_ms",
        ],
    ),
];

/// The tables other than `current` that accept `key`, as a hint: "`key` belongs in
/// `[process]`" (or "in `[process]` or `[approvals]`"); `None` when no table has it.
pub fn home_of(key: &str, current: &str) -> Option<String> {
    let homes: Vec<String> = TABLES
        .iter()
        .filter(|(table, keys)| keys.contains(&key) && !same_table(table, current))
        .map(|(table, _)| format!("`{table}`"))
        .collect();
    match homes.len() {
        0 => None,
        _ => Some(format!("`{key}` belongs in {}", homes.join(" or "))),
    }
}

/// Whether the header `current` (as written, e.g. `[tools.read_file]`) is the table
/// pattern `pattern` (e.g. `[tools.NAME]`).
fn same_table(pattern: &str, current: &str) -> bool {
    match pattern.split_once("NAME") {
        Some((prefix, suffix)) => current.starts_with(prefix) && current.ends_with(suffix),
        None => pattern == current,
    }
}

/// The table header in force at byte `at` of `text` (the last `[...]` line before it),
/// or `(top level)`.
pub fn table_at(text: &str, at: usize) -> String {
    text[..at.min(text.len())]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| l.split('#').next().unwrap_or(l).trim().to_string())
        .unwrap_or_else(|| "(top level)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_in_the_wrong_table_is_sent_home() {
        // The operator's likely mistake: the whitelist under the shell tool's table.
        assert_eq!(
            home_of("command_whitelist", "[tools.workspace_shell]").as_deref(),
            Some("`command_whitelist` belongs in `[process]`")
        );
        // A key several tables know is pointed at all of them but the current one.
        let h = home_of("timeout_ms", "[tools.read_file]").unwrap();
        assert!(h.contains("[approvals]") && h.contains("[process]") && h.contains("[[plugins]]"), "{h}");
        // A key no table knows gets no hint.
        assert_eq!(home_of("bogus", "[tools.read_file]"), None);
    }

    #[test]
    fn the_header_before_an_offset_is_found() {
        let text = "a = 1\n[process]\nx = 2\n[tools.read_file] # note\nbogus = 1\n";
        assert_eq!(table_at(text, 0), "(top level)");
        assert_eq!(table_at(text, text.find("x =").unwrap()), "[process]");
        assert_eq!(table_at(text, text.find("bogus").unwrap()), "[tools.read_file]");
    }
}
