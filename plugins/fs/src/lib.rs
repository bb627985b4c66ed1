//! The `fs` component: Cheng's workspace file tools. Every path goes through the SDK's
//! resolver (the workspace path rules plus a symlink check on every segment), and
//! every cap is a documented constant in [`caps`] with a message that says what to do
//! instead.

mod caps;
mod list_dir;
mod read_file;
mod text;

cheng_sdk::export_tools!(read_file::ReadFile, list_dir::ListDir);
