//! Seams for the host's own crash tests; not part of the API.
//!
//! The write path of the guard names its steps (`tmpfile`, `written`, `synced`,
//! `linked`, `renamed`). A test program (never the `cheng` binary, never an embedder
//! that does not ask for it) may install a hook that sees each step, and so kill its
//! own process at a chosen one. Nothing here reads the environment: without an
//! installed hook a step costs one atomic load.

use std::sync::OnceLock;

static HOOK: OnceLock<fn(&str)> = OnceLock::new();

/// Install `hook` to be called at each named step of a write (once per process).
pub fn on_write_step(hook: fn(&str)) {
    let _ = HOOK.set(hook);
}

/// A write reached `step`.
pub fn write_step(step: &str) {
    if let Some(hook) = HOOK.get() {
        hook(step);
    }
}
