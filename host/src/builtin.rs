//! The built-in tool components, compiled from `plugins/` by the build script and
//! embedded in the binary.

include!(concat!(env!("OUT_DIR"), "/builtin.rs"));
