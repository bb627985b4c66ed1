//! Builds every guest program the integration tests load — the probes of
//! `tests/programs` and the two in-repository examples — once, for wasm32-wasip2, and
//! writes their paths as constants (`HOSTILE`, `HELLO_TOOL`, …) plus the list of them
//! all (`PROGRAMS`).

use std::fmt::Write as _;

fn main() {
    let sources = [
        cheng_guest_build::GuestBuild::new("../programs"),
        cheng_guest_build::GuestBuild::new("../../examples/hello-tool").watch("../../examples/hello-tool/src"),
        cheng_guest_build::GuestBuild::new("../../examples/wordcount").watch("../../examples/wordcount/src"),
    ];
    let mut src = String::new();
    let mut all = Vec::new();
    for build in sources {
        let build = build
            .watch("../../sdk/src")
            .watch("../../sdk/Cargo.toml")
            .watch("../../sdk/contract/src")
            .watch("../../sdk/macros/src")
            .watch("../../wit");
        for g in build.build() {
            let name = g.package.to_uppercase().replace('-', "_");
            writeln!(
                src,
                "/// The `{}` component.\npub const {name}: &str = {:?};",
                g.package,
                g.wasm.display().to_string()
            )
            .unwrap();
            all.push((g.package, name));
        }
    }
    src.push_str("/// Every program: (package name, component path).\npub const PROGRAMS: &[(&str, &str)] = &[\n");
    for (package, name) in &all {
        writeln!(src, "    ({package:?}, {name}),").unwrap();
    }
    src.push_str("];\n");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("programs.rs");
    std::fs::write(out, src).unwrap();
}
