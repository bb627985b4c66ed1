//! Shared code of the file components (fs, search, edit): every cap in one place, text
//! helpers, line selection, and the ignore-aware walk over the host's directory listing.

pub mod caps;
pub mod defaults;
pub mod lines;
pub mod text;
pub mod walk;
