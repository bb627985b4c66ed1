//! The guest components the integration tests load, built once by this crate's build
//! script (not by nested builds inside individual tests): each program's path as a
//! constant, and [`PROGRAMS`], the list the tests check is all used.
//!
//! # Example
//!
//! ```
//! assert!(cheng_test_artifacts::PROGRAMS.iter().any(|(name, _)| *name == "hostile"));
//! assert!(std::path::Path::new(cheng_test_artifacts::HOSTILE).is_file());
//! ```
#![deny(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/programs.rs"));
