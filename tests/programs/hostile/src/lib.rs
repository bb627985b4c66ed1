//! A hostile component: each action tries one way out of the sandbox (or one way to
//! hurt the host), and reports what happened. The tests pair each escape with a
//! positive control — the same action where access is granted — so a broken sandbox
//! and a broken probe cannot both pass.

use std::io::Write;

use cheng_sdk::host;
use cheng_sdk::prelude::*;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// What to try.
    action: String,
    /// A path, address or host name, per action.
    #[serde(default)]
    target: String,
    /// A second path (link targets).
    #[serde(default)]
    to: String,
    /// A size or count, per action; absent means "without bound".
    n: Option<u64>,
}

#[derive(Serialize, JsonSchema)]
pub struct Output {
    /// What the action found or produced.
    detail: String,
}

fn io(e: std::io::Error) -> Failure {
    Failure::new(ErrorKind::Io, format!("{:?}: {e}", e.kind())).with_terminal(true)
}

#[inline(never)]
fn recurse(depth: u64, limit: Option<u64>) -> u64 {
    let pad = [depth as u8; 256];
    if limit.is_some_and(|l| depth >= l) {
        return pad[0] as u64;
    }
    recurse(depth + 1, limit) + std::hint::black_box(pad)[1] as u64
}

fn act(input: Input, cx: &Context) -> Result<Output, Failure> {
    let detail = match input.action.as_str() {
        "read" => std::fs::read_to_string(&input.target).map_err(io)?,
        "list" => {
            let mut names: Vec<String> = std::fs::read_dir(&input.target)
                .map_err(io)?
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect();
            names.sort();
            names.join(",")
        }
        "write" => {
            std::fs::write(&input.target, b"pwned").map_err(io)?;
            "written".into()
        }
        "symlink" => {
            // Create `target` as a symbolic link whose content is `to`, through the
            // preopen that holds `target` (std has no stable symlink call on WASI).
            let dirs = wasip2::filesystem::preopens::get_directories();
            let (dir, rel) = dirs
                .iter()
                .filter_map(|(d, p)| {
                    input.target.strip_prefix(p.as_str()).map(|r| (d, r.trim_start_matches('/').to_string()))
                })
                .max_by_key(|(_, r)| usize::MAX - r.len())
                .ok_or_else(|| Failure::new(ErrorKind::NotFound, format!("no preopen holds {}", input.target)))?;
            dir.symlink_at(&input.to, &rel)
                .map_err(|e| Failure::new(ErrorKind::Io, format!("{e:?}")).with_terminal(true))?;
            "symlinked".into()
        }
        "hardlink" => {
            std::fs::hard_link(&input.target, &input.to).map_err(io)?;
            "linked".into()
        }
        "env" => {
            let vars: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
            let args: Vec<String> = std::env::args().collect();
            format!("vars=[{}] args=[{}]", vars.join(","), args.join(","))
        }
        "loop" => {
            let mut x: u64 = 0;
            let mut i: u64 = 0;
            while input.n.is_none_or(|n| i < n) {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                i += 1;
            }
            format!("looped {i} times ({x})")
        }
        "memory" => {
            // Grow by 1 MiB at a time, touching every page.
            let mut blocks: Vec<Vec<u8>> = Vec::new();
            while input.n.is_none_or(|n| (blocks.len() as u64) < n) {
                blocks.push(vec![1u8; 1 << 20]);
            }
            format!("held {} MiB", blocks.len())
        }
        "recurse" => format!("recursed {}", recurse(0, input.n)),
        "trap" => {
            if input.n == Some(0) {
                "no trap".into()
            } else {
                core::arch::wasm32::unreachable()
            }
        }
        "panic" => panic!("the hostile probe panicked on purpose"),
        "flood" => {
            let chunk = vec![b'x'; 64 * 1024];
            let total = input.n.unwrap_or(100 << 20);
            let mut written = 0u64;
            let mut out = std::io::stdout();
            let mut err = std::io::stderr();
            while written < total {
                let _ = out.write_all(&chunk);
                let _ = err.write_all(&chunk);
                written += chunk.len() as u64;
            }
            format!("printed {written} bytes to each stream")
        }
        "spawn" => {
            let outcome = host::run_process(&host::Command { command: "true".into(), ..Default::default() })?;
            format!("spawned: {:?}", outcome.termination)
        }
        "protected" => format!("{}", cx.is_protected(&input.target)),
        // The host's batched filesystem interface, probed directly.
        "host_read" => String::from_utf8_lossy(&host::read_file(&input.target, 1 << 20)?).into_owned(),
        "host_list" => host::read_dir(&input.target, false)?.into_iter().map(|e| e.name).collect::<Vec<_>>().join(","),
        "host_stat" => match host::stat_dirs(std::slice::from_ref(&input.target)).pop() {
            Some(list) => {
                list?.into_iter().map(|e| format!("{}:{:?}:{}", e.name, e.kind, e.size)).collect::<Vec<_>>().join(",")
            }
            None => String::new(),
        },
        "host_write" => {
            host::write_file(&input.target, b"pwned", true, true)?;
            "written".into()
        }
        "approval" => {
            let d = host::request_approval(&input.target, &format!("detail: {}", input.target), "a test");
            format!("{d:?}")
        }
        // A failure of the kind named in `target`, claimed by the component itself.
        "claim" => {
            let kind = match input.target.as_str() {
                "not-granted" => ErrorKind::NotGranted,
                "approval-denied" => ErrorKind::ApprovalDenied,
                "command-not-allowed" => ErrorKind::CommandNotAllowed,
                _ => ErrorKind::Io,
            };
            return Err(Failure::new(kind, "refused: the component says so"));
        }
        other => return Err(Failure::invalid_argument(format!("unknown action {other}"))),
    };
    Ok(Output { detail })
}

/// Declares everything a component can declare: write, spawn.
pub struct Probe;
impl Tool for Probe {
    const NAME: &'static str = "probe";
    const DESCRIPTION: &'static str = "Tries one thing and reports what happened.";
    const NEEDS: Needs = Needs::WRITE.with_spawn();
    type Input = Input;
    type Output = Output;
    fn run(input: Input, cx: &Context) -> Result<Output, Failure> {
        act(input, cx)
    }
}

/// Declares read-only access and nothing else.
pub struct ProbeRead;
impl Tool for ProbeRead {
    const NAME: &'static str = "probe_read";
    const DESCRIPTION: &'static str = "Like probe, declaring read-only access.";
    const NEEDS: Needs = Needs::READ;
    type Input = Input;
    type Output = Output;
    fn run(input: Input, cx: &Context) -> Result<Output, Failure> {
        act(input, cx)
    }
}

cheng_sdk::export_tools!(Probe, ProbeRead);
