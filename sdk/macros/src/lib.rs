//! `#[cheng_sdk::schema]`: derive `Serialize`, `Deserialize` and `JsonSchema` for a
//! tool's input or output type through the SDK's re-exported serde and schemars, so a
//! plugin depends on `cheng-sdk` alone.
//!
//! # Example
//!
//! ```ignore
//! #[cheng_sdk::schema]
//! struct Input {
//!     /// Who to greet.
//!     name: String,
//! }
//! ```

use proc_macro::TokenStream;

/// Derive serde and schemars for a tool's input or output type, using the SDK's
/// re-exports. Other `#[serde(...)]` and `#[schemars(...)]` attributes on the type and
/// its fields work as usual.
#[proc_macro_attribute]
pub fn schema(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return "compile_error!(\"#[cheng_sdk::schema] takes no arguments\");".parse().unwrap_or_default();
    }
    let derives = "#[derive(::cheng_sdk::serde::Serialize, ::cheng_sdk::serde::Deserialize, ::cheng_sdk::schemars::JsonSchema)] \
                   #[serde(crate = \"::cheng_sdk::serde\")] \
                   #[schemars(crate = \"::cheng_sdk::schemars\")]";
    let mut out: TokenStream = derives.parse().unwrap_or_default();
    out.extend(item);
    out
}
