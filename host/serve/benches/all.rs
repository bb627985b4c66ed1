//! Every benchmark in one binary, so that building them links the host once rather than
//! once per benchmark: `cargo bench --bench all -- <name> [--quick]`, where `<name>` is
//! `calls`, `records`, `fs`, `process`, `rules`, `git`, `serve`, `web`, `mcp`, `tokens` or `startup`; with no name, all
//! of them in that order. Each module's documentation says what it measures (BENCHMARKS.md
//! has the figures).

mod calls;
mod common;
mod floor;
mod fs;
mod git;
mod mcp;
mod process;
mod records;
mod rules;
mod serve;
mod startup;
mod tokens;
mod web;

/// The allocator: the C library's for the benchmarks (what an embedder of the host gets
/// unless it picks one), mimalloc for the transport floor's server (`floor.rs`) and the
/// `serve` bench's own server, as the `cheng` binary uses it, so they are measured as
/// `cheng serve` is. Chosen at the first allocation from the environment and never
/// again, so every block is freed by the allocator that made it.
struct BenchAlloc;

/// 0: not chosen yet; 1: the C library's; 2: mimalloc.
static CHOSEN: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

fn mimalloc() -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    match CHOSEN.load(Relaxed) {
        1 => false,
        2 => true,
        _ => {
            // SAFETY: NUL-terminated names; nothing in this process sets variables. Two
            // threads racing here read the same environment and store the same answer.
            // The `serve` bench's own server (`CHENG_BENCH_SERVE`) is a `cheng serve` too.
            let floor = unsafe {
                !libc::getenv(c"CHENG_BENCH_FLOOR".as_ptr()).is_null()
                    || !libc::getenv(c"CHENG_BENCH_SERVE".as_ptr()).is_null()
            };
            CHOSEN.store(if floor { 2 } else { 1 }, Relaxed);
            floor
        }
    }
}

// SAFETY: each call goes to one allocator, the same one for the life of the process.
unsafe impl std::alloc::GlobalAlloc for BenchAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { if mimalloc() { mimalloc::MiMalloc.alloc(layout) } else { std::alloc::System.alloc(layout) } }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        unsafe {
            if mimalloc() { mimalloc::MiMalloc.alloc_zeroed(layout) } else { std::alloc::System.alloc_zeroed(layout) }
        }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from the same allocator (chosen once).
        unsafe {
            if mimalloc() { mimalloc::MiMalloc.dealloc(ptr, layout) } else { std::alloc::System.dealloc(ptr, layout) }
        }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`.
        unsafe {
            if mimalloc() {
                mimalloc::MiMalloc.realloc(ptr, layout, new_size)
            } else {
                std::alloc::System.realloc(ptr, layout, new_size)
            }
        }
    }
}

#[global_allocator]
static GLOBAL: BenchAlloc = BenchAlloc;

const NAMES: &[&str] =
    &["calls", "records", "fs", "process", "rules", "git", "serve", "web", "mcp", "tokens", "startup"];

#[tokio::main]
async fn main() {
    // The `serve` benchmark starts this binary as the transport floor's server.
    if let Ok(kind) = std::env::var("CHENG_BENCH_FLOOR") {
        floor::serve(&kind).await;
        return;
    }
    // ... and this binary as a `cheng serve` whose host it sets up itself.
    if let Ok(mode) = std::env::var("CHENG_BENCH_SERVE") {
        serve::serve_host(&mode).await;
        return;
    }
    // cargo passes `--bench`; options start with `--`, names do not.
    let asked: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    if let Some(bad) = asked.iter().find(|a| !NAMES.contains(&a.as_str())) {
        eprintln!("unknown benchmark \"{bad}\"; the benchmarks are {}", NAMES.join(", "));
        std::process::exit(2);
    }
    for name in NAMES.iter().filter(|n| asked.is_empty() || asked.iter().any(|a| a == *n)) {
        println!("== {name}");
        match *name {
            "calls" => calls::main().await,
            "records" => records::main().await,
            "fs" => fs::main().await,
            "process" => process::main().await,
            "rules" => rules::main().await,
            "git" => git::main().await,
            "serve" => serve::main().await,
            "web" => web::main().await,
            "mcp" => mcp::main().await,
            "tokens" => tokens::main().await,
            _ => startup::main().await,
        }
    }
}
