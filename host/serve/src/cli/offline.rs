//! Commands that need no host, answered before any starts: `records`, `plugin`
//! (inspect; pull, diff and accept in [`super::plugin`]), `approvals` / `approve` / `decline` (over a running server's
//! socket), `token` and `settings`.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use cheng_host::policy::Config;
use cheng_host::records::{Filter, Status};
use serde_json::json;

use super::args::{Cli, Command, PluginCommand, RecordsCommand, SettingsCommand, StatusArg, TokenCommand};
use super::{EXIT_ERROR, EXIT_USAGE, UsageError, emit_json, known_role, need_state, settings};

/// Answer `cli`'s command if it is one of these: `Some(exit code)`, else `None`.
pub async fn run(cli: &Cli, config: &Config, state: &Option<PathBuf>) -> Result<Option<u8>> {
    let code = match &cli.command {
        Command::Records { action: Some(RecordsCommand::Verify { head, expect }), .. } => {
            verify(&cheng_host::records::audit_log_in(&need_state(state)?), *head, expect.as_deref())?
        }
        Command::Records { action: None, status, tool, last } => {
            let filter =
                Filter { status: status.map(status_of), tool: tool.clone(), run: cli.run.clone(), last: *last };
            let recs = cheng_host::records::read_log(&cheng_host::records::audit_log_in(&need_state(state)?), &filter)?;
            emit_json(&recs)?;
            0
        }
        Command::Plugin { action: PluginCommand::Inspect { file } } => inspect(file).await?,
        Command::Plugin { action: PluginCommand::Pull { target } } => {
            super::plugin::pull(config, &need_state(state)?, target.as_deref()).await?
        }
        Command::Plugin { action: PluginCommand::Diff { id } } => super::plugin::diff(&need_state(state)?, id).await?,
        Command::Plugin { action: PluginCommand::Accept { id } } => super::plugin::accept(&need_state(state)?, id)?,
        Command::Approvals => approvals(&need_state(state)?, json!({"op": "list"})).await?,
        Command::Approve { id, scope, tier, hosts, prefix, every_workspace, expires_in_hours, all_of_run } => {
            let answer = json!({
                "decision": "approved",
                "scope": scope,
                "tier": tier,
                "hosts": hosts,
                "prefix": prefix,
                "every_workspace": every_workspace,
                "expires_in_ms": expires_in_hours.map(|h| h.saturating_mul(3_600_000)),
            });
            approvals(&need_state(state)?, answer_request(id, *all_of_run, answer)).await?
        }
        Command::Decline { id, message, all_of_run } => {
            let answer = json!({"decision": "declined", "message": message});
            approvals(&need_state(state)?, answer_request(id, *all_of_run, answer)).await?
        }
        Command::Rules { action } => rules(&need_state(state)?, action.as_ref())?,
        Command::Token { action } => token(cli, config, &need_state(state)?, action)?,
        Command::Settings { action } => show_settings(&need_state(state)?, action.as_ref(), config)?,
        _ => return Ok(None),
    };
    Ok(Some(code))
}

/// `cheng records verify`: the walk as JSON, exit 1 when the chain breaks; with
/// `--head`, only the chain's head (first and latest links); with `--expect FILE`, the
/// log checked against the head in FILE as well.
fn verify(log: &Path, head: bool, expect: Option<&Path>) -> Result<u8> {
    use cheng_host::records::chain;
    let expected = match expect {
        None => None,
        Some(file) => {
            let text = chain::read_head_file(file)
                .with_context(|| format!("cannot read the expected head {}", file.display()))?
                .ok_or_else(|| UsageError(format!("no expected head at {}", file.display())))?;
            let parsed = chain::parse_head(&text).ok_or_else(|| {
                UsageError(format!(
                    "{} holds no head (`cheng records verify --head` writes one: \
                     {{\"version\",\"seq\",\"sha256\",\"first\"}})",
                    file.display()
                ))
            })?;
            Some((parsed, file))
        }
    };
    let v = cheng_host::records::verify_expecting(log, expected.as_ref().map(|(h, f)| (h, *f)))
        .with_context(|| format!("cannot read the audit log {}", log.display()))?;
    if head {
        emit_json(&v.found_head())?;
    } else {
        emit_json(&v)?;
    }
    Ok(if v.ok { 0 } else { EXIT_ERROR })
}

fn status_of(s: StatusArg) -> Status {
    match s {
        StatusArg::Ok => Status::Ok,
        StatusArg::Error => Status::Error,
        StatusArg::Denied => Status::Denied,
        StatusArg::Running => Status::Running,
    }
}

/// `cheng plugin inspect FILE`: exit 1 when the component imports what it may not.
async fn inspect(file: &Path) -> Result<u8> {
    use cheng_host::policy::hostfile;
    let wasm = hostfile::read(file, hostfile::PLUGIN_WASM)?;
    let report = cheng_host::inspect(&wasm, &file.display().to_string()).await?;
    // The detached signature beside it, when there is one: who signed and what they
    // wrote (not verified here: which keys to trust is the entry's `signed_by`).
    let sig_path = cheng_host::plugin_signature_path(file);
    let signature = match hostfile::read_to_string(&sig_path, hostfile::SIGNATURE) {
        Ok(text) => match cheng_host::signature::describe(&text, &sig_path.display().to_string()) {
            Ok(info) => serde_json::to_value(info)?,
            Err(e) => json!({"error": e.to_string()}),
        },
        Err(e) if e.is_not_found() => serde_json::Value::Null,
        // A FIFO, device or oversized file beside it: said, not waited on or read whole.
        Err(e) => json!({"error": e.to_string()}),
    };
    let mut shown = serde_json::to_value(&report)?;
    shown["signature"] = signature;
    emit_json(&shown)?;
    Ok(if report.refused_imports.is_empty() { 0 } else { EXIT_ERROR })
}

/// One request to a running server's approvals socket, and its reply.
/// The socket request answering `id` (a request, or with `all_of_run` a run) with
/// `answer`; nulls are left out.
fn answer_request(id: &str, all_of_run: bool, mut answer: serde_json::Value) -> serde_json::Value {
    if let Some(o) = answer.as_object_mut() {
        o.retain(|_, v| !v.is_null() && *v != json!(false));
    }
    match all_of_run {
        true => json!({"op": "answer_run", "run": id, "answer": answer}),
        false => json!({"op": "answer", "id": id, "answer": answer}),
    }
}

/// `cheng rules [list]` and `cheng rules revoke ID`: the state directory's learned rules,
/// read and changed under their lock (a running server sees the change at its next
/// command); a revoke is recorded in the audit log.
fn rules(dir: &Path, action: Option<&super::args::RulesCommand>) -> Result<u8> {
    use super::args::RulesCommand;
    let store = cheng_host::learned::Store::new(Some(dir));
    match action {
        None | Some(RulesCommand::List) => {
            emit_json(&store.list()?)?;
            Ok(0)
        }
        Some(RulesCommand::Revoke { id }) => {
            // SAFETY: getuid has no failure mode.
            let by = format!("cli:uid {}", unsafe { libc::getuid() });
            let log =
                cheng_host::records::AuditLog::open(&cheng_host::records::audit_log_in(dir), std::time::Duration::ZERO)
                    .context("cannot open the audit log to record the revoke")?;
            match store.revoke(id)? {
                Some(rule) => {
                    log.append(&cheng_host::records::operator_record(
                        "cheng.rules.revoke",
                        rule.workspace.as_ref().map(|w| w.display().to_string()).unwrap_or_default(),
                        json!({"rule": rule.id, "by": by}),
                        json!({"revoked": rule}),
                    ))?;
                    log.flush()?;
                    emit_json(&json!({"revoked": rule}))?;
                    Ok(0)
                }
                None => {
                    emit_json(&json!({"error": format!("no learned rule \"{id}\" (`cheng rules list` shows them)")}))?;
                    Ok(EXIT_USAGE)
                }
            }
        }
    }
}

async fn approvals(dir: &Path, req: serde_json::Value) -> Result<u8> {
    let reply = cheng_serve::socket::request(dir, &req).await?;
    emit_json(&reply)?;
    Ok(match reply["result"].as_str() {
        None if reply["error"].is_null() => 0,
        None => EXIT_USAGE,
        Some("applied") => 0,
        Some("unknown") => EXIT_USAGE,
        Some(_) => EXIT_ERROR,
    })
}

/// `cheng token add | revoke | list`.
fn token(cli: &Cli, config: &Config, dir: &Path, action: &TokenCommand) -> Result<u8> {
    use cheng_serve::tokens::{Kind, TokenStore};
    let store = TokenStore::new(dir);
    match action {
        TokenCommand::Add { name, role, operator } => {
            let (kind, role) = match (operator, role) {
                (true, _) => (Kind::Operator, None),
                (false, Some(r)) => {
                    known_role(&config.policy()?, r)?;
                    (Kind::Agent, Some(r.as_str()))
                }
                (false, None) => bail!(UsageError("give --role ROLE for an agent token, or --operator".into())),
            };
            let name = name.clone().unwrap_or_else(|| format!("token-{}", &cheng_host::new_id()[..8]));
            // `--workspace DIR` pins an agent token: its sessions work there, whatever
            // roots their client names.
            let pin = cli.workspace.as_deref().filter(|_| kind == Kind::Agent);
            let secret = store.add_pinned(&name, kind, role, pin).map_err(|e| UsageError(e.to_string()))?;
            eprintln!("cheng: token \"{name}\" made; it is shown once, only its hash is kept");
            emit_json(&json!({"name": name, "token": secret}))?;
        }
        TokenCommand::Revoke { name } => {
            store.revoke(name).map_err(|e| UsageError(e.to_string()))?;
            emit_json(&json!({"revoked": name}))?;
        }
        TokenCommand::List => {
            let list: Vec<_> = store
                .list()?
                .into_iter()
                .map(|t| json!({"name": t.name, "kind": t.kind, "role": t.role, "created_ms": t.created_ms}))
                .collect();
            emit_json(&list)?;
        }
    }
    Ok(0)
}

/// `cheng settings [set KEY VALUE]`: the saved settings, and what confines commands on
/// this machine (shown, not saved).
fn show_settings(dir: &Path, action: Option<&SettingsCommand>, config: &Config) -> Result<u8> {
    let mut s = settings::Settings::load_or_init(dir)?;
    if let Some(SettingsCommand::Set { key, value }) = action {
        s.set(key, value).map_err(UsageError)?;
        s.save(dir)?;
    }
    let mut shown = serde_json::to_value(&s)?;
    let c = cheng_host::confinement();
    shown["process_confinement"] = json!({
        "landlock": match c.landlock_abi {
            Some(v) => format!("available (ABI {v}); {}", c.landlock),
            None => c.landlock,
        },
        "containment": c.containment,
        "mcp_servers_without_network": c.mcp_network,
    });
    // The path rules in force: the operator's first (they replace a built-in rule they
    // match), then the built-in ones.
    let word = |d: cheng_host::policy::process::RuleDecision| format!("{d:?}").to_lowercase();
    shown["path_rules"] = json!({
        "operator": config.files.rules.iter().map(|r| json!({
            "paths": r.paths, "read": r.read, "write": r.write,
        })).collect::<Vec<_>>(),
        "built_in": cheng_host::policy::files::built_in().iter().map(|b| json!({
            "paths": b.pattern,
            "read": word(b.decision(cheng_host::policy::files::Access::Read)),
            "write": word(b.decision(cheng_host::policy::files::Access::Write)),
            "why": b.reason,
            "except": b.except,
        })).collect::<Vec<_>>(),
        "change": "add [[files.rules]] entries (paths, read, write) to cheng.toml",
    });
    emit_json(&shown)?;
    Ok(0)
}
