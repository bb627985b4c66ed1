//! A command's environment: nothing inherited but the allowlist (`PATH`, `HOME`, the
//! locale, `TERM`, `TZ`, `USER` and what the operator adds under `[process] env`), the
//! variables the host sets itself (`PATH`, `TMPDIR`, and with private caches the
//! caches' homes), and the request's own entries — each of which must be on the
//! allowlist, and none of which may be a name the host sets or never passes.

use std::collections::BTreeMap;
use std::path::Path;

use crate::ErrorKind;
use crate::policy::process::{DEFAULT_ENV, ProcessConfig, env_never_passed};

use super::Refusal;

pub use crate::policy::process::host_owned_env as host_owned;

/// Whether `name` is on the allowlist: the defaults or the operator's `[process] env`.
pub fn listed(cfg: &ProcessConfig, name: &str) -> bool {
    DEFAULT_ENV.iter().any(|d| name_matches(d, name)) || cfg.env.iter().any(|d| name_matches(d, name))
}

/// `LC_*`-style patterns: a trailing `*` matches any suffix.
fn name_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// The host's own values of the allowlisted variables, read once (`PATH` and `TMPDIR`
/// are set per command instead).
pub fn passthrough(cfg: &ProcessConfig) -> BTreeMap<String, String> {
    std::env::vars()
        .filter(|(k, _)| {
            k != "PATH"
                && k != "TMPDIR"
                && !crate::policy::process::proxy_env(k)
                && listed(cfg, k)
                && !env_never_passed(k)
        })
        .collect()
}

/// Check the request's entries and merge them over `base`.
pub fn merge_request(
    cfg: &ProcessConfig,
    base: &mut BTreeMap<String, String>,
    request: &[(String, String)],
) -> Result<(), Refusal> {
    for (k, v) in request {
        if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
            return Err(Refusal::new(ErrorKind::InvalidArgument, format!("environment entry \"{k}\" is malformed")));
        }
        if env_never_passed(k) {
            return Err(Refusal::new(
                ErrorKind::CommandNotAllowed,
                format!("environment variable \"{k}\" is never passed to commands; leave it out"),
            ));
        }
        if host_owned(k) {
            return Err(Refusal::new(
                ErrorKind::CommandNotAllowed,
                format!("environment variable \"{k}\" is set by the host; leave it out"),
            ));
        }
        if !listed(cfg, k) {
            return Err(Refusal::new(
                ErrorKind::CommandNotAllowed,
                format!(
                    "environment variable \"{k}\" is not in the allowlist; the operator can add it under [process] env"
                ),
            ));
        }
        base.insert(k.clone(), v.clone());
    }
    Ok(())
}

/// The variables that point build tools at caches of their own under `dir` (the
/// workspace's private caches): Cargo, npm, Yarn, pnpm, pip, Go, Gradle and the XDG
/// cache most other tools use.
pub fn private_caches(dir: &Path) -> Vec<(String, String)> {
    let at = |sub: &str| dir.join(sub).to_string_lossy().into_owned();
    vec![
        ("CARGO_HOME".into(), at("cargo")),
        ("npm_config_cache".into(), at("npm")),
        ("YARN_CACHE_FOLDER".into(), at("yarn")),
        ("PNPM_HOME".into(), at("pnpm")),
        ("PIP_CACHE_DIR".into(), at("pip")),
        ("GOMODCACHE".into(), at("go/mod")),
        ("GOCACHE".into(), at("go/build")),
        ("GRADLE_USER_HOME".into(), at("gradle")),
        ("XDG_CACHE_HOME".into(), at("xdg")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_cannot_set_what_the_host_sets() {
        let cfg = ProcessConfig { env: vec!["XDG_CONFIG_HOME".into(), "RUST_LOG".into()], ..Default::default() };
        let mut env = BTreeMap::new();
        // HOME, PATH, TMPDIR and XDG_* are the host's, even when allowlisted.
        for k in ["HOME", "PATH", "TMPDIR", "XDG_CONFIG_HOME"] {
            let e = merge_request(&cfg, &mut env, &[(k.into(), "/w".into())]).unwrap_err();
            assert!(e.message.contains("set by the host"), "{k}: {}", e.message);
        }
        // Loader hooks and credentials are never passed.
        assert!(merge_request(&cfg, &mut env, &[("LD_PRELOAD".into(), "x".into())]).is_err());
        // An allowlisted name is merged.
        merge_request(&cfg, &mut env, &[("RUST_LOG".into(), "debug".into())]).unwrap();
        assert_eq!(env["RUST_LOG"], "debug");
        // One that is not listed is refused, naming where to list it.
        let e = merge_request(&cfg, &mut env, &[("FOO".into(), "1".into())]).unwrap_err();
        assert!(e.message.contains("[process] env"));
    }
}
