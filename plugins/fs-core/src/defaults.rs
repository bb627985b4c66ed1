//! Serde defaults shared by the tools' inputs.

/// `"."`: the workspace root.
pub fn dot() -> String {
    ".".into()
}

/// `true`.
pub fn yes() -> bool {
    true
}
