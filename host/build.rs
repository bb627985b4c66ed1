//! Builds the built-in tool components in `plugins/` for wasm32-wasip2 and writes
//! `builtin.rs`, which embeds them in the `cheng` binary.

use std::fmt::Write as _;

fn main() {
    let mut build = cheng_guest_build::GuestBuild::new("../plugins")
        .watch("../sdk/src")
        .watch("../sdk/Cargo.toml")
        .watch("../sdk/contract/src")
        .watch("../sdk/macros/src")
        .watch("../wit");
    // Without the `web` feature the host links no wasi:http, so the web tools'
    // component is neither built nor embedded.
    if std::env::var_os("CARGO_FEATURE_WEB").is_none() {
        build = build.exclude("cheng-plugin-web");
    }
    let guests = build.build();
    let mut src = String::from(
        "/// The built-in components: (family name, component bytes, SHA-256 of the bytes).\npub static BUILTINS: &[(&str, &[u8], &str)] = &[\n",
    );
    for g in &guests {
        let family = g.package.strip_prefix("cheng-plugin-").unwrap_or(&g.package);
        let sha = g.sha256().expect("the built component is readable");
        writeln!(src, "    ({family:?}, include_bytes!({:?}), {sha:?}),", g.wasm.display().to_string()).unwrap();
    }
    src.push_str("];\n");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("builtin.rs");
    std::fs::write(out, src).unwrap();
}
