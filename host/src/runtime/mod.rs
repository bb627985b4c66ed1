//! The WebAssembly runtime: one engine configured for untrusted code, the on-disk
//! component cache, and per-call instances with limits.
//!
//! - [`engine`]: the `Engine` (component model, epoch interruption driven by a ticker
//!   thread, bounded wasm stack) and its configuration.
//! - [`cache`]: components precompiled once and cached by content hash and engine
//!   compatibility; corrupt or foreign files are recompiled, never trusted.
//! - [`component`]: a loaded component: its `describe` output and its `InstancePre`.
//! - [`store`]: the per-call store state — WASI context, limits, CPU budget, captured
//!   output.
//! - [`bindings`]: the host side of the `tool` world's imports, one file per interface.
//! - [`call`]: running one call in a fresh store and mapping every outcome (ok, failure,
//!   trap, out of memory, deadline) to a result.

pub mod bindings;
pub mod cache;
pub mod call;
pub mod component;
pub mod engine;
pub mod store;
