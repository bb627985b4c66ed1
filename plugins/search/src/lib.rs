//! The `search` component: find_files and search_files, read-only. Walks list
//! directories through the host (one call per directory) and apply ignore rules the way
//! ripgrep does; search runs ripgrep's searcher and the regex-automata engine on bytes read
//! through the host.

mod find_files;
mod line_regex;
mod search_files;

cheng_sdk::export_tools!(find_files::FindFiles, search_files::SearchFiles);
