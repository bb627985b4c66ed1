//! The one `Engine` every component runs in, configured for untrusted code.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::{Config, Engine};

use crate::error::HostError;

/// How often the epoch advances. A guest is checked against its CPU deadline, and
/// yields to other calls, once per tick.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);
/// The most wasm stack a guest may use; deeper recursion traps.
pub const MAX_WASM_STACK: usize = 1 << 20;
/// The native stack each async call runs on (must exceed [`MAX_WASM_STACK`]).
pub const ASYNC_STACK: usize = 4 << 20;

/// The engine plus the ticker thread that drives epoch interruption. Dropping the last
/// handle stops the ticker.
#[derive(Clone)]
pub struct EngineHandle {
    engine: Engine,
    _ticker: Arc<Ticker>,
}

struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// How the engine allocates instances.
#[derive(Debug, Clone, Copy)]
pub struct EngineOptions {
    /// Use the pooling allocator: instance slots, memories and fiber stacks reserved
    /// once and reused, instead of mapped and unmapped per call.
    pub pooling: bool,
    /// Calls that may be in flight at once (pool slots).
    pub slots: u32,
    /// The largest linear memory any component may reach, in bytes (the pool's slot
    /// size; per-call limits below it are enforced by the store's limiter).
    pub max_memory: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions { pooling: true, slots: 256, max_memory: 256 << 20 }
    }
}

/// Whether the kernel has the `PAGEMAP_SCAN` ioctl (Linux 6.7 or newer), with which the
/// pool resets only the pages a call dirtied.
fn pagemap_scan_available() -> bool {
    if !cfg!(target_os = "linux") {
        return false;
    }
    let uname = rustix::system::uname();
    let release = uname.release().to_string_lossy();
    let mut parts = release.split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse::<u32>().ok());
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (6, 7)
}

impl EngineHandle {
    /// Build the engine with default options and start its ticker.
    pub fn new() -> Result<Self, HostError> {
        Self::with_options(EngineOptions::default())
    }

    /// Build the engine and start its ticker.
    pub fn with_options(opts: EngineOptions) -> Result<Self, HostError> {
        let mut config = Config::new();
        if opts.pooling {
            let mut pool = wasmtime::PoolingAllocationConfig::new();
            let slots = opts.slots.max(1);
            let pagemap = pagemap_scan_available();
            pool.total_component_instances(slots)
                .total_core_instances(slots.saturating_mul(8))
                .total_memories(slots)
                .total_tables(slots.saturating_mul(4))
                .total_stacks(slots)
                .max_memories_per_component(2)
                .max_tables_per_component(4)
                .max_memory_size(opts.max_memory)
                // Keep each freed slot's pages resident and reset them in place, so the
                // next call reuses them without faulting them in again: with the kernel's
                // PAGEMAP_SCAN (Linux 6.7+) only the pages the call dirtied are reset,
                // with no madvise and no TLB shootdown across cores; without it, the
                // lowest 64 KiB are reset by memset and the rest returned.
                .pagemap_scan(if pagemap { wasmtime::Enabled::Auto } else { wasmtime::Enabled::No })
                .linear_memory_keep_resident(if pagemap { 4 << 20 } else { 64 << 10 })
                .table_keep_resident(if pagemap { 64 << 10 } else { 0 })
                .async_stack_keep_resident(64 << 10)
                // Bound what stays resident: past 16 idle slots, a call takes a slot
                // that has run before rather than a never-used one, so at most
                // (16 + the most calls in flight together) slots keep their pages.
                .max_unused_warm_slots(16);
            config.allocation_strategy(pool);
            // Reserve what a slot may grow to (plus guard pages), not 4 GiB per memory:
            // the virtual address space stays proportional to slots x max_memory.
            config.memory_reservation(opts.max_memory as u64);
        }
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .max_wasm_stack(MAX_WASM_STACK)
            .async_stack_size(ASYNC_STACK)
            .cranelift_opt_level(wasmtime::OptLevel::Speed)
            // Smaller artifacts load faster; traps still name their cause.
            .generate_address_map(false)
            .parallel_compilation(true);
        let engine = Engine::new(&config).map_err(|e| HostError::Engine(e.to_string()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let weak = engine.weak();
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("cheng-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(|e| HostError::Engine(format!("cannot start the epoch ticker: {e}")))?;
        Ok(EngineHandle { engine, _ticker: Arc::new(Ticker { stop }) })
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}
