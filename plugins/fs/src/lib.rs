//! The `fs` component: Cheng's workspace file tools. Every path goes through the SDK's
//! resolver (the workspace path rules plus a symlink check on every segment), and
//! every cap is a documented constant in [`caps`] with a message that says what to do
//! instead.

mod apply_patch;
mod caps;
mod edit_file;
mod find_files;
mod list_dir;
mod read_file;
mod read_files;
mod search_files;
mod text;
mod walk;
mod write_file;

cheng_sdk::export_tools!(
    list_dir::ListDir,
    find_files::FindFiles,
    read_file::ReadFile,
    read_files::ReadFiles,
    search_files::SearchFiles,
    write_file::WriteFile,
    edit_file::EditFile,
    apply_patch::ApplyPatch,
);
