//! `cheng:tool/run-state`: per-run values scoped to the calling component.

use super::ChengView;
use super::generated::cheng::tool::run_state::Host;
use super::generated::cheng::tool::types::Failure;
use cheng_contract::ErrorKind;

impl Host for ChengView<'_> {
    async fn get(&mut self, key: String) -> Option<String> {
        self.caps().ok()?.run_state.get(&key)
    }

    async fn set(&mut self, key: String, value: String) -> Result<(), Failure> {
        self.caps()?.run_state.set(&key, &value).map_err(|message| super::failure(ErrorKind::TooLarge, message))
    }
}
