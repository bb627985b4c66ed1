//! `cheng:tool/run-state`: per-run values scoped to the calling component.

use super::generated::cheng::tool::run_state::Host;
use super::generated::cheng::tool::types::{ErrorKind, Failure};
use crate::runtime::store::StoreState;

impl Host for StoreState {
    async fn get(&mut self, key: String) -> Option<String> {
        self.call.run_state.get(&key)
    }

    async fn set(&mut self, key: String, value: String) -> Result<(), Failure> {
        self.call.run_state.set(&key, &value).map_err(|message| Failure {
            kind: ErrorKind::TooLarge,
            message,
            terminal: true,
        })
    }
}
