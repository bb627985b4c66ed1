//! The tool registry: which tools exist, what serves each (a component, or an external
//! MCP server the host runs), and under what name a model calls it. Whether a caller
//! may use a tool is policy's business, not the registry's.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crate::error::HostError;
use crate::runtime::component::{LoadedComponent, ToolSpec};

/// What serves a tool.
pub enum Source {
    /// A component, and the index into its tools.
    Component(Arc<LoadedComponent>, usize),
    /// An external MCP server, and the tool's name there.
    #[cfg(feature = "mcp-sources")]
    Mcp(Arc<crate::sources::mcp::Server>, ToolSpec),
}

/// One registered tool.
pub struct Entry {
    /// The name a model calls.
    pub name: String,
    /// What serves it.
    pub source: Source,
    validator: OnceLock<Result<jsonschema::Validator, InputError>>,
}

/// Why an input was not accepted by its tool's schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The input breaks the schema: the first few violations, each naming its field.
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    /// The tool's own input schema does not compile: the tool broke its contract, and
    /// no input can pass.
    #[error("the tool's input schema is invalid: {0}")]
    BadSchema(String),
}

impl Entry {
    /// The tool's spec.
    pub fn spec(&self) -> &ToolSpec {
        match &self.source {
            Source::Component(c, i) => &c.tools[*i],
            #[cfg(feature = "mcp-sources")]
            Source::Mcp(_, spec) => spec,
        }
    }

    /// The component serving it, unless an MCP server does.
    pub fn component(&self) -> Option<&Arc<LoadedComponent>> {
        match &self.source {
            Source::Component(c, _) => Some(c),
            #[cfg(feature = "mcp-sources")]
            Source::Mcp(..) => None,
        }
    }

    /// Who serves it, by name: the component, or `mcp:<server id>`.
    pub fn served_by(&self) -> String {
        match &self.source {
            Source::Component(c, _) => c.name.clone(),
            #[cfg(feature = "mcp-sources")]
            Source::Mcp(s, _) => format!("mcp:{}", s.id()),
        }
    }

    /// Whether the input schema is compiled already (validation is then microseconds).
    pub fn validator_ready(&self) -> bool {
        self.validator.get().is_some()
    }

    /// Check `input` against the tool's input schema; each violation names its field.
    pub fn validate(&self, input: &serde_json::Value) -> Result<(), InputError> {
        let validator = self.validator.get_or_init(|| {
            jsonschema::validator_for(&self.spec().input_schema).map_err(|e| InputError::BadSchema(e.to_string()))
        });
        let validator = validator.as_ref().map_err(Clone::clone)?;
        let errors: Vec<String> = validator
            .iter_errors(input)
            .take(3)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() {
                    e.to_string()
                } else {
                    format!("field `{}`: {e}", path.trim_start_matches('/').replace('/', "."))
                }
            })
            .collect();
        if errors.is_empty() { Ok(()) } else { Err(InputError::Invalid(errors)) }
    }
}

/// All registered tools, by name.
#[derive(Default)]
pub struct Registry {
    entries: HashMap<String, Arc<Entry>>,
    order: Vec<String>,
}

impl Registry {
    /// Register every tool of `component`, each under `prefix` + its own name.
    pub fn add(&mut self, component: Arc<LoadedComponent>, prefix: &str) -> Result<(), HostError> {
        for (index, spec) in component.tools.iter().enumerate() {
            self.insert(format!("{prefix}{}", spec.name), Source::Component(component.clone(), index))?;
        }
        Ok(())
    }

    /// Register the tools of an MCP server, each as `<id>__<tool>`.
    #[cfg(feature = "mcp-sources")]
    pub(crate) fn add_mcp(
        &mut self,
        server: Arc<crate::sources::mcp::Server>,
        specs: Vec<ToolSpec>,
    ) -> Result<(), HostError> {
        for spec in specs {
            self.insert(format!("{}__{}", server.id(), spec.name), Source::Mcp(server.clone(), spec))?;
        }
        Ok(())
    }

    fn insert(&mut self, name: String, source: Source) -> Result<(), HostError> {
        let entry = Entry { name: name.clone(), source, validator: OnceLock::new() };
        if let Some(existing) = self.entries.get(&name) {
            return Err(HostError::DuplicateTool {
                tool: name,
                first: existing.served_by(),
                second: entry.served_by(),
            });
        }
        self.order.push(name.clone());
        self.entries.insert(name, Arc::new(entry));
        Ok(())
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Entry>> {
        self.entries.get(name)
    }

    /// Every tool, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Entry>> {
        self.order.iter().filter_map(|n| self.entries.get(n))
    }
}
