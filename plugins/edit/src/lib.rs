//! The `edit` component: the tools that change files — write_file, edit_file,
//! apply_patch — run with the workspace read-write; every write is the host's atomic
//! write, and protected paths (.git, the host's configuration and state) are refused here
//! and again in the host.

mod apply_patch;
mod edit_file;
mod write_file;

cheng_sdk::export_tools!(write_file::WriteFile, edit_file::EditFile, apply_patch::ApplyPatch);
