//! The contract the Cheng host and its SDK share, written once: the failure kinds a
//! caller sees, filesystem access, the workspace path rules and the paths no tool may
//! write, the text helpers (head-and-tail cutting, card escaping) both sides use, and
//! the Rust form of the types that cross the host↔guest line (a command and its
//! outcome, a directory entry) — the WIT files define them, each side converts its
//! generated bindings to these in one place.
//!
//! # Example
//!
//! ```
//! use cheng_contract::{ErrorKind, paths};
//!
//! assert_eq!(ErrorKind::PathRefused.code(), "LOCAL_EXECUTOR_PATH_REFUSED");
//! assert!(paths::is_protected::<&str>(".GIT/hooks/pre-commit", &[]));
//! ```
#![deny(missing_docs)]

mod access;
pub mod entries;
mod kinds;
pub mod paths;
pub mod process;
pub mod text;

pub use access::{FsAccess, Needs};
pub use kinds::ErrorKind;
