//! The contract the Cheng host and its SDK share, written once: the failure kinds a
//! caller sees, filesystem access, the workspace path rules and the paths no tool may
//! write, and the text helpers (head-and-tail cutting, card escaping) both sides use.
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
mod kinds;
pub mod paths;
pub mod text;

pub use access::{FsAccess, Needs};
pub use kinds::ErrorKind;
