//! Write tools for the Cheng host as WebAssembly components.
//!
//! A tool is a type that implements [`Tool`]: a name, a description, typed input and
//! output (their JSON Schemas are derived for you), what it [`Needs`], and a `run`
//! function. [`export_tools!`] turns one or more tools into a component that the host
//! loads, describes, grants and calls. Build it with
//! `cargo build --release --target wasm32-wasip2`; the `.wasm` file in
//! `target/wasm32-wasip2/release/` is the component.
//!
//! Inside `run` the component has exactly what its grant allows: the workspace (when it
//! declared [`Needs::READ`] or [`Needs::WRITE`] and the operator granted it), mounted as
//! the current directory, so `std::fs` with relative paths just works; no environment,
//! no arguments, no network, no processes — those go through the host ([`Context`]).
//!
//! # Example
//!
//! ```no_run
//! use cheng_sdk::prelude::*;
//!
//! #[cheng_sdk::schema]
//! struct Input { name: String }
//! #[cheng_sdk::schema]
//! struct Output { greeting: String }
//!
//! struct Hello;
//! impl Tool for Hello {
//!     const NAME: &'static str = "hello";
//!     const DESCRIPTION: &'static str = "Greets someone by name.";
//!     type Input = Input;
//!     type Output = Output;
//!     fn run(input: Input, _cx: &Context) -> Result<Output, Failure> {
//!         Ok(Output { greeting: format!("Hello, {}!", input.name) })
//!     }
//! }
//! cheng_sdk::export_tools!(Hello);
//! ```
//!
//! Paths a model sends should go through [`Context::resolve`], which applies the same
//! rules the host applies (no `..` escapes, no absolute paths outside the workspace, no
//! Windows prefixes, no NUL bytes, no symlinks between the root and the target) and
//! gives back a path to open plus messages a model understands.
#![deny(missing_docs)]

extern crate self as cheng_sdk;

mod context;
mod convert;
mod failure;
pub mod host;
mod json;
mod needs;

pub use context::{Context, Resolved};
pub use failure::{ErrorKind, Failure};
pub use needs::{FsAccess, Needs};

/// Derive a tool input or output's serde and JSON Schema implementations through the
/// SDK's own re-exports: with it, a plugin needs no dependency but `cheng-sdk`.
///
/// ```ignore
/// #[cheng_sdk::schema]
/// struct Input { name: String }
/// ```
pub use cheng_sdk_macros::schema;

/// Make a function a tool: its doc comment is the description, its parameters the
/// input's fields (unknown fields refused), its return value (`T` or
/// `Result<T, Failure>`) the output. `#[cheng_sdk::tool(export)]` exports it as the
/// component's only tool; options `name = "..."` and `needs = Needs::READ` set the name
/// and what it needs.
///
/// ```ignore
/// /// Greets someone by name.
/// #[cheng_sdk::tool(export)]
/// fn hello(name: String) -> Greeting {
///     Greeting { greeting: format!("Hello, {name}!") }
/// }
/// ```
pub use cheng_sdk_macros::tool;

/// Path rules shared with the host (re-exported so authors need only this crate).
pub use cheng_contract::paths as path_rules;
/// Text helpers shared with the host: head-and-tail cutting with its marker, and the
/// one-line escaping of text shown to people.
pub use cheng_contract::text;

// Re-exported so that a plugin depends on the SDK alone: the derives its input and
// output types need, and the JSON value type.
pub use schemars;
pub use serde;
pub use serde_json;

/// Everything a tool author usually needs, in one `use`.
pub mod prelude {
    pub use crate::{Context, ErrorKind, Failure, FsAccess, Needs, Tool};
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
}

/// One tool a component serves.
///
/// Implement it on a unit struct and list the struct in [`export_tools!`]. The input
/// type is parsed from the caller's JSON (unknown or mistyped fields become a clear
/// `invalid-argument` failure naming the field); the output is serialized back.
pub trait Tool {
    /// The tool's name inside the component (`[a-zA-Z0-9_-]{1,64}`). A third-party
    /// plugin's tools are registered by the host as `<plugin-id>__<NAME>`.
    const NAME: &'static str;
    /// What the tool does and when to use it, written for a model.
    const DESCRIPTION: &'static str;
    /// What the tool needs; the host grants at most this. Defaults to nothing.
    const NEEDS: Needs = Needs::NONE;
    /// The input object; its JSON Schema is derived.
    type Input: serde::de::DeserializeOwned + schemars::JsonSchema;
    /// The output object; its JSON Schema is derived.
    type Output: serde::Serialize + schemars::JsonSchema;

    /// Run the tool. The default says the tool is not implemented.
    fn run(input: Self::Input, cx: &Context) -> Result<Self::Output, Failure> {
        let _ = (input, cx);
        Err(Failure::new(ErrorKind::Crashed, format!("the tool \"{}\" is declared but not implemented", Self::NAME)))
    }
}

/// Export one or more [`Tool`]s as this crate's component.
///
/// ```ignore
/// cheng_sdk::export_tools!(ReadFile, ListDir);
/// ```
#[macro_export]
macro_rules! export_tools {
    ($($tool:ty),+ $(,)?) => {
        #[doc(hidden)]
        struct __ChengTools;
        impl $crate::__private::Guest for __ChengTools {
            fn describe() -> ::std::vec::Vec<$crate::__private::WitToolSpec> {
                ::std::vec![$($crate::__private::spec::<$tool>()),+]
            }
            fn call(
                tool: ::std::string::String,
                input: ::std::string::String,
                ctx: $crate::__private::WitCallContext,
            ) -> ::std::result::Result<::std::string::String, $crate::__private::WitFailure> {
                let cx = $crate::__private::context(ctx);
                $(
                    if tool == <$tool as $crate::Tool>::NAME {
                        return $crate::__private::dispatch::<$tool>(&input, &cx);
                    }
                )+
                ::std::result::Result::Err($crate::__private::unknown_tool(&tool))
            }
        }
        $crate::__export_tool_impl!(__ChengTools with_types_in $crate::__private::wit);
    };
}

/// Glue for [`export_tools!`]; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use wit_bindgen;

    pub use crate::wit::Guest;
    pub use crate::wit::cheng::tool::types::{
        CallContext as WitCallContext, Failure as WitFailure, ToolSpec as WitToolSpec,
    };

    /// The generated bindings, for the export macro.
    #[allow(missing_docs)]
    pub mod wit {
        pub use crate::wit::*;
    }

    use crate::{Context, Failure, Tool};

    /// Which side of serde a schema describes: what a tool accepts, or what it sends.
    #[derive(Clone, Copy)]
    enum Side {
        Input,
        Output,
    }

    /// The JSON Schema of `T` as a self-contained object (draft 2020-12, subschemas
    /// inlined so a model reads one object). An output schema describes what serde
    /// writes, so a field left out when empty (`skip_serializing_if`) is not required.
    /// Only the formats draft 2020-12 defines are kept: schemars' `uint64` and the like
    /// are not standard, and clients' validators warn on every one (the bounds stay, as
    /// `minimum`).
    fn schema_of<T: schemars::JsonSchema>(side: Side) -> String {
        let settings = schemars::generate::SchemaSettings::draft2020_12()
            .with(|s| s.inline_subschemas = true)
            .with_transform(schemars::transform::RestrictFormats::default());
        let settings = match side {
            Side::Input => settings.for_deserialize(),
            Side::Output => settings.for_serialize(),
        };
        let schema = settings.into_generator().into_root_schema_for::<T>();
        serde_json::to_string(&schema).unwrap_or_else(|_| "{}".to_string())
    }

    /// The spec of one tool.
    pub fn spec<T: Tool>() -> WitToolSpec {
        WitToolSpec {
            name: T::NAME.to_string(),
            description: T::DESCRIPTION.to_string(),
            input_schema: schema_of::<T::Input>(Side::Input),
            output_schema: schema_of::<T::Output>(Side::Output),
            needs: T::NEEDS.to_wit(),
        }
    }

    /// Build the call's context and enter the workspace, when there is one.
    pub fn context(ctx: WitCallContext) -> Context {
        Context::from_wit(ctx)
    }

    /// Parse, run, serialize.
    pub fn dispatch<T: Tool>(input: &str, cx: &Context) -> Result<String, WitFailure> {
        let mut de = serde_json::Deserializer::from_str(input);
        let parsed: T::Input = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let msg = if path == "." || path.is_empty() {
                format!("bad arguments for \"{}\": {inner}", T::NAME)
            } else {
                format!("bad arguments for \"{}\": field `{path}`: {inner}", T::NAME)
            };
            Failure::invalid_argument(msg).into_wit()
        })?;
        let output = T::run(parsed, cx).map_err(Failure::into_wit)?;
        crate::json::to_string(&output).map_err(|e| {
            Failure::new(
                crate::ErrorKind::Crashed,
                format!("the tool \"{}\" produced output that is not JSON: {e}", T::NAME),
            )
            .into_wit()
        })
    }

    /// The failure for a tool name this component does not serve.
    pub fn unknown_tool(name: &str) -> WitFailure {
        Failure::new(crate::ErrorKind::InvalidArgument, format!("unknown tool \"{name}\" in this component")).into_wit()
    }
}

/// The generated bindings of the `tool` world; private so that generated types never
/// become the SDK's public API.
#[allow(missing_docs, clippy::too_many_arguments)]
mod wit {
    wit_bindgen::generate!({
        path: "../wit",
        world: "cheng:tool/tool",
        runtime_path: "cheng_sdk::__private::wit_bindgen::rt",
        pub_export_macro: true,
        export_macro_name: "__export_bindings",
        default_bindings_module: "cheng_sdk::__private::wit",
    });
}
