//! Running one call: a fresh `Store` from the component's `InstancePre`, the workspace
//! preopened per grant, limits armed, and every outcome mapped to a [`GuestOutcome`].

use futures::FutureExt as _;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::{Store, Trap, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use super::bindings::http::HttpHooks;
use super::bindings::{CallCaps, ChengCtx, ToolPre, types};
use super::store::{CapturedOutput, CpuBudget, Limiter, StoreState};
use crate::ErrorKind;
use crate::call::say;
use crate::grant::Mount;
use crate::guard::Guard;

/// Where the workspace appears inside a component.
pub const GUEST_ROOT: &str = "/workspace";

/// What a guest call produced.
#[derive(Debug)]
pub enum GuestOutcome {
    /// JSON output.
    Ok(serde_json::Value),
    /// A typed failure (from the tool, or from the host about the tool).
    Failed {
        /// Kind.
        kind: ErrorKind,
        /// Message for the model.
        message: String,
        /// Must not be retried.
        terminal: bool,
    },
}

/// One call's parameters.
pub(crate) struct CallSpec<'a> {
    /// The engine.
    pub engine: &'a wasmtime::Engine,
    /// The prepared component.
    pub pre: &'a ToolPre<StoreState>,
    /// The tool's name inside the component.
    pub local_name: &'a str,
    /// The registry name (for messages).
    pub display_name: &'a str,
    /// Input JSON text.
    pub input: &'a str,
    /// The workspace guard (its root is the resolved workspace).
    pub guard: &'a Arc<Guard>,
    /// Directories to preopen.
    pub mounts: &'a [Mount],
    /// Memory limit in bytes.
    pub memory: usize,
    /// CPU deadline.
    pub cpu: Duration,
    /// What the imports may use.
    pub caps: CallCaps,
    /// Where `wasi:http` requests may go.
    pub http: HttpHooks,
    /// The component's environment: settings the host gives it (never the host's own).
    pub env: &'a [(String, String)],
}

fn wasi_ctx(
    mounts: &[Mount],
    guard: Option<&Guard>,
    env: &[(String, String)],
    out: &CapturedOutput,
    err: &CapturedOutput,
) -> Result<wasmtime_wasi::WasiCtx, String> {
    let mut b = WasiCtxBuilder::new();
    for (k, v) in env {
        b.env(k, v);
    }
    // No environment but the settings the host hands this component, no arguments, no
    // stdin, no sockets, no name lookup: the default builder grants none of them; the
    // network switches are spelled out anyway (HTTP goes through `wasi:http` and the
    // host's egress guard).
    b.stdout(out.clone())
        .stderr(err.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        // Filesystem calls run on the calling thread instead of a blocking pool hop
        // (measured several times faster; the multi-threaded runtime keeps other
        // calls moving).
        .allow_blocking_current_thread(true);
    for m in mounts {
        let Some(guard) = guard else { break };
        let perms = if m.write { FsPerms::ReadWrite } else { FsPerms::ReadOnly };
        if m.rel == "." {
            b.preopened_dir(guard.root(), GUEST_ROOT, perms)
                .map_err(|e| format!("cannot open the workspace {}: {e}", guard.root().display()))?;
            continue;
        }
        // A granted sub-folder is opened through the guard (no symlink, no mount point
        // on the way) and handed over by its descriptor, so nothing can swap it between
        // the check and the open.
        let opened = match guard.open(&m.rel) {
            Ok(o) => o,
            Err(e) => {
                tracing::warn!(target: "cheng::grants", folder = %m.rel, "granted folder not mounted: {e}");
                continue;
            }
        };
        let by_fd = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&opened.fd));
        let guest = format!("{GUEST_ROOT}/{}", opened.rel);
        b.preopened_dir(&by_fd, &guest, perms)
            .map_err(|e| format!("cannot open the granted folder \"{}\": {e}", m.rel))?;
    }
    Ok(b.build())
}

fn new_store(
    engine: &wasmtime::Engine,
    wasi: wasmtime_wasi::WasiCtx,
    memory: usize,
    cheng: ChengCtx,
    hooks: HttpHooks,
) -> Store<StoreState> {
    let state = StoreState {
        wasi,
        table: wasmtime::component::ResourceTable::new(),
        limiter: Limiter { memory_limit: memory, hit: false },
        cheng,
        #[cfg(feature = "web")]
        http: wasmtime_wasi_http::WasiHttpCtx::new(),
        hooks,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    // Check the CPU budget once per epoch tick; between checks, yield so that other
    // calls on the same runtime thread keep moving.
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| {
        if ctx.data().cheng.budget().exhausted() {
            return Err(wasmtime::format_err!("cpu deadline exceeded"));
        }
        Ok(UpdateDeadline::Yield(1))
    });
    store
}

/// Run `describe` with no filesystem.
pub async fn describe(
    engine: &wasmtime::Engine,
    pre: &ToolPre<StoreState>,
    memory: usize,
    cpu: Duration,
) -> Result<Vec<types::ToolSpec>, String> {
    let out = CapturedOutput::default();
    let wasi = wasi_ctx(&[], None, &[], &out, &out)?;
    let mut store = new_store(engine, wasi, memory, ChengCtx::describe(CpuBudget::new(cpu)), HttpHooks::refusing());
    let r = async {
        let tool = pre.instantiate_async(&mut store).await?;
        tool.call_describe(&mut store).await
    }
    .await;
    r.map_err(|e| format!("its describe failed: {}", trap_text(&e, &store, &out)))
}

/// Run one call to completion.
pub(crate) async fn call(spec: CallSpec<'_>) -> GuestOutcome {
    let out = CapturedOutput::default();
    let err = CapturedOutput::default();
    let wasi = match wasi_ctx(spec.mounts, Some(spec.guard), spec.env, &out, &err) {
        Ok(w) => w,
        Err(message) => {
            return GuestOutcome::Failed { kind: ErrorKind::Io, message, terminal: false };
        }
    };
    let component = spec.caps.component.clone();
    let call_id = spec.caps.scope.id.clone();
    let ctx = types::CallContext {
        sandbox_root: spec.guard.root().to_string_lossy().into_owned(),
        guest_root: if spec.mounts.is_empty() { String::new() } else { GUEST_ROOT.to_string() },
        run_id: spec.caps.scope.cx.run.clone(),
        role: spec.caps.scope.cx.role.clone(),
        call_id: call_id.clone(),
        protected: spec.caps.protected.clone(),
    };
    let mut store =
        new_store(spec.engine, wasi, spec.memory, ChengCtx::for_call(spec.caps, CpuBudget::new(spec.cpu)), spec.http);
    // A panic inside a host service (an import) unwinds out of the guest's call; it is
    // caught here and ends this call as "crashed", naming the fault, instead of taking
    // the caller's task (and the reply an agent waits for) with it.
    let result = std::panic::AssertUnwindSafe(async {
        let tool = spec.pre.instantiate_async(&mut store).await?;
        tool.call_call(&mut store, spec.local_name, spec.input, &ctx).await
    })
    .catch_unwind()
    .await
    .unwrap_or_else(|panic| Err(host_panic(panic.as_ref())));
    log_output(&component, &call_id, &out, &err);
    match result {
        Ok(Ok(text)) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(v) if v.is_object() => GuestOutcome::Ok(v),
            _ => GuestOutcome::Failed {
                kind: ErrorKind::Crashed,
                message: say::crashed(spec.display_name, "it returned output that is not a JSON object"),
                terminal: true,
            },
        },
        Ok(Err(f)) => GuestOutcome::Failed { kind: f.kind.into(), message: f.message, terminal: f.terminal },
        Err(e) => {
            if store.data().cheng.budget().exhausted() {
                let ms = store.data().cheng.budget().limit().as_millis();
                return GuestOutcome::Failed {
                    kind: ErrorKind::Timeout,
                    message: say::timed_out(
                        spec.display_name,
                        &format!("it used its whole CPU budget of {ms} ms and was stopped"),
                    ),
                    terminal: true,
                };
            }
            GuestOutcome::Failed {
                kind: ErrorKind::Crashed,
                message: say::crashed(spec.display_name, &trap_text(&e, &store, &err)),
                terminal: true,
            }
        }
    }
}

/// A host panic caught during a call, as the error the call ends with (and a line in
/// the host's log: it is a host bug).
fn host_panic(panic: &(dyn std::any::Any + Send)) -> wasmtime::Error {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string());
    tracing::error!(target: "cheng::host", "a host service panicked during a call: {what}");
    super::bindings::fault(format_args!("it panicked ({what})"))
}

/// A short description of why a guest stopped.
fn trap_text(e: &wasmtime::Error, store: &Store<StoreState>, stderr: &CapturedOutput) -> String {
    if store.data().limiter.hit {
        return format!("it exceeded its memory limit of {} MiB", store.data().limiter.memory_limit >> 20);
    }
    if store.data().cheng.budget().exhausted() {
        return format!("it used its whole CPU budget of {} ms", store.data().cheng.budget().limit().as_millis());
    }
    // A Rust guest's panic message is the most useful line it printed.
    let (text, _) = stderr.take();
    let panic = text.lines().skip_while(|l| !l.contains("panicked at")).take(2).collect::<Vec<_>>().join(" ");
    match e.downcast_ref::<Trap>() {
        Some(Trap::StackOverflow) => "it exhausted its stack (unbounded recursion?)".to_string(),
        Some(trap) if !panic.is_empty() => format!("{trap} ({})", panic.trim()),
        Some(trap) => trap.to_string(),
        None => format!("{e:#}"),
    }
}

fn log_output(component: &str, call_id: &str, out: &CapturedOutput, err: &CapturedOutput) {
    for (name, pipe) in [("stdout", out), ("stderr", err)] {
        let (text, dropped) = pipe.take();
        if !text.is_empty() {
            tracing::debug!(target: "cheng::plugin::output", component, call_id, stream = name, dropped, "{text}");
        }
    }
}
