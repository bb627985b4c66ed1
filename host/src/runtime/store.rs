//! The state of one call's `Store`: its WASI context (preopens per grant, no
//! environment, no arguments, no network), the host imports' state (the call's
//! capabilities and its CPU budget), its memory limiter, and its captured standard
//! output and error.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::http::HttpHooks;
use super::bindings::{ChengCtx, ChengHostView, ChengView};

/// Bytes of a guest's stdout and of its stderr kept for the log; the rest is counted
/// and dropped (the guest never blocks or fails on output).
pub const CAPTURE_LIMIT: usize = 64 * 1024;

/// Guest computing time: wall time since the call started, minus time spent waiting in
/// host imports that block on the outside world (approvals, processes).
pub struct CpuBudget {
    started: Instant,
    waiting: Duration,
    limit: Duration,
}

impl CpuBudget {
    /// A budget of `limit` starting now.
    pub fn new(limit: Duration) -> Self {
        CpuBudget { started: Instant::now(), waiting: Duration::ZERO, limit }
    }

    /// Guest time used so far.
    pub fn used(&self) -> Duration {
        self.started.elapsed().saturating_sub(self.waiting)
    }

    /// Whether the budget is spent.
    pub fn exhausted(&self) -> bool {
        self.used() >= self.limit
    }

    /// The configured limit.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Record time spent waiting outside the guest.
    pub fn add_wait(&mut self, d: Duration) {
        self.waiting += d;
    }
}

/// Enforces the memory limit and remembers that it was hit — by this limit or by the
/// engine's own ceiling for a memory — so that the resulting trap can be reported as
/// what it is.
pub struct Limiter {
    /// Bytes of linear memory the guest may grow to.
    pub memory_limit: usize,
    /// Set when a growth past the limit was refused.
    pub hit: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_limit || maximum.is_some_and(|m| desired > m) {
            self.hit = true;
            return Err(wasmtime::format_err!("memory limit of {} MiB exceeded", self.memory_limit >> 20));
        }
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        // The engine could not grow the memory (its reservation is spent): that is the
        // memory limit too, as far as the tool is concerned.
        self.hit = true;
        Ok(())
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// Everything a call's store holds.
pub struct StoreState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: Limiter,
    pub(crate) cheng: ChengCtx,
    #[cfg(feature = "web")]
    pub(crate) http: wasmtime_wasi_http::WasiHttpCtx,
    #[cfg_attr(not(feature = "web"), allow(dead_code))]
    pub(crate) hooks: HttpHooks,
}

#[cfg(feature = "web")]
impl wasmtime_wasi_http::WasiHttpView for StoreState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.hooks }
    }
}

impl ChengHostView for StoreState {
    fn cheng(&mut self) -> ChengView<'_> {
        ChengView { ctx: &mut self.cheng }
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// A stdout/stderr sink that keeps the first [`CAPTURE_LIMIT`] bytes and counts the
/// rest. Writes always succeed, so a guest that prints without end is stopped by its
/// CPU deadline, not by a broken pipe.
#[derive(Clone, Default)]
pub struct CapturedOutput {
    inner: Arc<Mutex<Captured>>,
}

#[derive(Default)]
struct Captured {
    kept: Vec<u8>,
    dropped: u64,
}

impl CapturedOutput {
    /// What was kept, lossily decoded, and how many bytes were dropped.
    pub fn take(&self) -> (String, u64) {
        let c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (String::from_utf8_lossy(&c.kept).into_owned(), c.dropped)
    }

    fn push(&self, bytes: &[u8]) {
        let mut c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let room = CAPTURE_LIMIT.saturating_sub(c.kept.len());
        let take = room.min(bytes.len());
        c.kept.extend_from_slice(&bytes[..take]);
        c.dropped += (bytes.len() - take) as u64;
    }
}

impl IsTerminal for CapturedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

impl OutputStream for CapturedOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(1 << 20)
    }
}

#[async_trait::async_trait]
impl Pollable for CapturedOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CapturedOutput {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.push(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
