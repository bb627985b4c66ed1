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

impl EngineHandle {
    /// Build the engine and start its ticker.
    pub fn new() -> Result<Self, HostError> {
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .epoch_interruption(true)
            .max_wasm_stack(MAX_WASM_STACK)
            .async_stack_size(ASYNC_STACK)
            .cranelift_opt_level(wasmtime::OptLevel::Speed)
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
