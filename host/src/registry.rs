//! The tool registry: which tools exist, which component serves each, and under what
//! name a model calls it. Whether a caller may use a tool is policy's business, not
//! the registry's.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crate::error::HostError;
use crate::runtime::component::{LoadedComponent, ToolSpec};

/// One registered tool.
pub struct Entry {
    /// The name a model calls.
    pub name: String,
    /// The component serving it.
    pub component: Arc<LoadedComponent>,
    /// Index into the component's tools.
    pub index: usize,
    validator: OnceLock<Result<jsonschema::Validator, String>>,
}

impl Entry {
    /// The tool's spec.
    pub fn spec(&self) -> &ToolSpec {
        &self.component.tools[self.index]
    }

    /// Whether the input schema is compiled already (validation is then microseconds).
    pub fn validator_ready(&self) -> bool {
        self.validator.get().is_some()
    }

    /// Check `input` against the tool's input schema; the message names the field.
    pub fn validate(&self, input: &serde_json::Value) -> Result<(), String> {
        let validator = self.validator.get_or_init(|| {
            jsonschema::validator_for(&self.spec().input_schema)
                .map_err(|e| format!("the tool's input schema is invalid: {e}"))
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
        if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
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
            let name = format!("{prefix}{}", spec.name);
            if let Some(existing) = self.entries.get(&name) {
                return Err(HostError::DuplicateTool {
                    tool: name,
                    first: existing.component.name.clone(),
                    second: component.name.clone(),
                });
            }
            self.order.push(name.clone());
            self.entries.insert(
                name.clone(),
                Arc::new(Entry { name, component: component.clone(), index, validator: OnceLock::new() }),
            );
        }
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
