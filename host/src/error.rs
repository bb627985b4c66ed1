//! The host library's typed errors. The stable `LOCAL_EXECUTOR_*` kinds callers see
//! are [`crate::ErrorKind`], from the contract crate.

/// Errors from building or configuring a [`crate::Host`], or loading a component.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The wasmtime engine could not be configured.
    #[error("failed to configure the WebAssembly engine: {0}")]
    Engine(String),
    /// A component could not be compiled, loaded or described.
    #[error("component \"{name}\" could not be loaded: {reason}")]
    Component {
        /// The component's name or file.
        name: String,
        /// Why.
        reason: String,
    },
    /// Two components declare the same tool name.
    #[error("tool \"{tool}\" is declared by both \"{first}\" and \"{second}\"")]
    DuplicateTool {
        /// The tool name.
        tool: String,
        /// The component that registered it first.
        first: String,
        /// The component that tried again.
        second: String,
    },
    /// The audit log cannot be opened.
    #[error("{0}")]
    Audit(String),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::policy::ConfigError),
    /// The OpenTelemetry exporters could not be set up (the message names `[telemetry]`).
    #[error("{0}")]
    Telemetry(String),
    /// The host's state (learned rules, the audit log of an operator's action) could
    /// not be read or written; the message names the file.
    #[error("{0}")]
    State(String),
    /// A filesystem error on the host's own files (state dir, cache, workspace root).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use crate::ErrorKind;

    #[test]
    fn kinds_serialize_without_the_prefix() {
        // Serde uses the code minus its prefix.
        assert_eq!(serde_json::to_string(&ErrorKind::PathRefused).unwrap(), "\"PATH_REFUSED\"");
    }
}
