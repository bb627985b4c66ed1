//! The attribute macros of `cheng-sdk`:
//!
//! - `#[cheng_sdk::tool]` on a function makes it a tool: its doc comment is the
//!   description, its parameters are the input's fields (unknown fields refused), its
//!   return value (`T` or `Result<T, Failure>`) the output; `#[cheng_sdk::tool(export)]`
//!   also exports it as the component's one tool.
//! - `#[cheng_sdk::schema]` derives `Serialize`, `Deserialize` and `JsonSchema` for a
//!   tool's input or output type through the SDK's re-exported serde and schemars (so a
//!   plugin depends on `cheng-sdk` alone), refusing unknown fields by default.
//!
//! # Example
//!
//! ```ignore
//! use cheng_sdk::prelude::*;
//! #[cheng_sdk::schema]
//! struct Greeting {
//!     greeting: String,
//! }
//! /// Greets someone by name.
//! #[cheng_sdk::tool(export)]
//! fn hello(name: String) -> Greeting {
//!     Greeting { greeting: format!("Hello, {name}!") }
//! }
//! ```

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{format_ident, quote};
use syn::parse::Parser as _;
use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, FnArg, Item, ItemFn, Lit, Meta, Pat, ReturnType, Token, Type};

/// Derive serde and schemars for a tool's input or output type, using the SDK's
/// re-exports. A struct with named fields refuses unknown fields (unless it flattens
/// another type, which serde cannot combine with that). Other `#[serde(...)]` and
/// `#[schemars(...)]` attributes work as usual.
#[proc_macro_attribute]
pub fn schema(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return error(Span::call_site(), "#[cheng_sdk::schema] takes no arguments");
    }
    let item = syn::parse_macro_input!(item as Item);
    let deny = match &item {
        Item::Struct(s) => {
            let named = matches!(s.fields, syn::Fields::Named(_));
            let flattens = s.fields.iter().any(|f| f.attrs.iter().any(|a| tokens_of(a).contains("flatten")));
            let already = s.attrs.iter().any(|a| tokens_of(a).contains("deny_unknown_fields"));
            named && !flattens && !already
        }
        Item::Enum(_) => false,
        other => return error_at(other, "#[cheng_sdk::schema] goes on a struct or an enum"),
    };
    let deny = deny.then(|| quote!(#[serde(deny_unknown_fields)]));
    quote! {
        #[derive(::cheng_sdk::serde::Serialize, ::cheng_sdk::serde::Deserialize, ::cheng_sdk::schemars::JsonSchema)]
        #[serde(crate = "::cheng_sdk::serde")]
        #[schemars(crate = "::cheng_sdk::schemars")]
        #deny
        #item
    }
    .into()
}

/// Make a function a tool. Options: `name = "..."` (default: the function's name),
/// `needs = <a Needs constant>` (default `Needs::NONE`), `export` (export it as the
/// component's only tool; with several tools, list them in `export_tools!`).
///
/// The function's parameters are the input's fields; a parameter of type `&Context`
/// receives the call's context instead. `#[doc = "..."]`-style comments on parameters
/// describe the fields. The function keeps its name as a plain function; the tool is a
/// type of the same name, which `export_tools!` takes.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let options = match Punctuated::<Meta, Token![,]>::parse_terminated.parse(attr) {
        Ok(o) => o,
        Err(e) => return e.to_compile_error().into(),
    };
    let mut func = syn::parse_macro_input!(item as ItemFn);
    match expand_tool(options, &mut func) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand_tool(options: Punctuated<Meta, Token![,]>, func: &mut ItemFn) -> syn::Result<Tokens> {
    let ident = func.sig.ident.clone();
    let mut name = ident.to_string();
    let mut needs = quote!(::cheng_sdk::Needs::NONE);
    let mut export = false;
    for o in options {
        match &o {
            Meta::Path(p) if p.is_ident("export") => export = true,
            Meta::NameValue(nv) if nv.path.is_ident("name") => match &nv.value {
                Expr::Lit(l) => match &l.lit {
                    Lit::Str(s) => name = s.value(),
                    _ => return Err(syn::Error::new_spanned(&nv.value, "name = \"...\" takes a string")),
                },
                _ => return Err(syn::Error::new_spanned(&nv.value, "name = \"...\" takes a string")),
            },
            Meta::NameValue(nv) if nv.path.is_ident("needs") => {
                let v = &nv.value;
                needs = quote!(#v);
            }
            _ => return Err(syn::Error::new_spanned(&o, "expected `name = \"...\"`, `needs = ...` or `export`")),
        }
    }
    let description = doc_text(&func.attrs);
    if description.is_empty() {
        return Err(syn::Error::new_spanned(
            &func.sig.ident,
            "a tool needs a doc comment: it is the tool's description",
        ));
    }

    // The input's fields are the parameters; `&Context` is the context.
    let mut fields = Vec::new();
    let mut call_args = Vec::new();
    let input_ident = format_ident!("__{}Input", ident);
    for arg in func.sig.inputs.iter_mut() {
        let FnArg::Typed(pt) = arg else { return Err(syn::Error::new_spanned(arg, "a tool is a plain function")) };
        let docs: Vec<Attribute> = pt.attrs.iter().filter(|a| a.path().is_ident("doc")).cloned().collect();
        let serde_attrs: Vec<Attribute> = pt.attrs.iter().filter(|a| a.path().is_ident("serde")).cloned().collect();
        pt.attrs.retain(|a| !a.path().is_ident("doc") && !a.path().is_ident("serde"));
        if is_context(&pt.ty) {
            call_args.push(quote!(cx));
            continue;
        }
        let Pat::Ident(pi) = &*pt.pat else { return Err(syn::Error::new_spanned(&pt.pat, "name each parameter")) };
        let field = &pi.ident;
        let ty = &pt.ty;
        fields.push(quote!(#(#docs)* #(#serde_attrs)* pub #field: #ty));
        call_args.push(quote!(input.#field));
    }
    let (output, body) = match &func.sig.output {
        ReturnType::Default => return Err(syn::Error::new_spanned(&func.sig, "a tool returns its output")),
        ReturnType::Type(_, ty) => match result_ok_type(ty) {
            Some(ok) => (quote!(#ok), quote!(#ident(#(#call_args),*))),
            None => (quote!(#ty), quote!(::std::result::Result::Ok(#ident(#(#call_args),*)))),
        },
    };
    let vis = &func.vis;
    let export = export.then(|| quote!(::cheng_sdk::export_tools!(#ident);));
    let input_doc = format!("The input of the `{name}` tool.");
    Ok(quote! {
        #func

        #[doc = #input_doc]
        #[allow(non_camel_case_types)]
        #[derive(::cheng_sdk::serde::Deserialize, ::cheng_sdk::schemars::JsonSchema)]
        #[serde(crate = "::cheng_sdk::serde", deny_unknown_fields)]
        #[schemars(crate = "::cheng_sdk::schemars")]
        #vis struct #input_ident { #(#fields),* }

        #[doc = #description]
        #[allow(non_camel_case_types)]
        #vis struct #ident {}

        impl ::cheng_sdk::Tool for #ident {
            const NAME: &'static str = #name;
            const DESCRIPTION: &'static str = #description;
            const NEEDS: ::cheng_sdk::Needs = #needs;
            type Input = #input_ident;
            type Output = #output;
            #[allow(unused_variables)]
            fn run(input: Self::Input, cx: &::cheng_sdk::Context)
                -> ::std::result::Result<Self::Output, ::cheng_sdk::Failure> {
                #body
            }
        }

        #export
    })
}

/// `T` when `ty` is `Result<T, _>`.
fn result_ok_type(ty: &Type) -> Option<&Type> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "Result" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else { return None };
    match args.args.first()? {
        syn::GenericArgument::Type(t) => Some(t),
        _ => None,
    }
}

/// Whether `ty` is `&Context` (any path ending in `Context`).
fn is_context(ty: &Type) -> bool {
    match ty {
        Type::Reference(r) => {
            matches!(&*r.elem, Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Context"))
        }
        _ => false,
    }
}

/// The doc comment's lines joined into one text.
fn doc_text(attrs: &[Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(l) => match &l.lit {
                    Lit::Str(s) => Some(s.value().trim().to_string()),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        })
        .collect();
    let mut text = String::new();
    for l in lines {
        if l.is_empty() {
            text.push_str("\n\n");
        } else {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push(' ');
            }
            text.push_str(&l);
        }
    }
    text.trim().to_string()
}

fn tokens_of(a: &Attribute) -> String {
    quote!(#a).to_string()
}

fn error(span: Span, msg: &str) -> TokenStream {
    syn::Error::new(span, msg).to_compile_error().into()
}

fn error_at(item: &Item, msg: &str) -> TokenStream {
    syn::Error::new_spanned(item, msg).to_compile_error().into()
}
