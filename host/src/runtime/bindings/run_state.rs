//! `cheng:tool/run-state`: per-run values scoped to the calling component.

use super::ChengView;
use super::generated::cheng::tool::run_state::Host;
use crate::runstate::RunStateError;
use cheng_contract::ErrorKind;

impl Host for ChengView<'_> {
    async fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self.caps().ok().and_then(|c| c.run_state.get(&key)))
    }

    async fn set(&mut self, key: String, value: String) -> Result<(), super::ImportError> {
        let kind = |e: &RunStateError| match e {
            RunStateError::Io { .. } => ErrorKind::Io,
            _ => ErrorKind::TooLarge,
        };
        Ok(self.caps()?.run_state.set(&key, &value).map_err(|e| super::failure(kind(&e), e.to_string()))?)
    }
}
