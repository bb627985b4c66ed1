//! The `fs` component: the read-only file tools — list_dir, read_file, read_files. Every
//! path goes through the host's workspace rules; every cap is a constant in
//! `cheng_fs_core::caps` with a message that says what to do instead.

mod list_dir;
mod read_file;
mod read_files;

cheng_sdk::export_tools!(list_dir::ListDir, read_file::ReadFile, read_files::ReadFiles);
