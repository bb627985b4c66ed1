//! `cheng:tool/log`: guest log lines into `tracing` under the `cheng::plugin` target,
//! capped per line so a guest cannot flood the log with one call.

use super::generated::cheng::tool::log::{Host, Level};
use crate::runtime::store::StoreState;

/// Longest log line kept from a guest.
pub const MAX_LOG_LINE: usize = 4096;

impl Host for StoreState {
    async fn log(&mut self, level: Level, message: String) {
        let mut message = message;
        if message.len() > MAX_LOG_LINE {
            let mut cut = MAX_LOG_LINE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push_str(" …");
        }
        let c = &self.call.component;
        match level {
            Level::Trace => tracing::trace!(target: "cheng::plugin", component = %c, "{message}"),
            Level::Debug => tracing::debug!(target: "cheng::plugin", component = %c, "{message}"),
            Level::Info => tracing::info!(target: "cheng::plugin", component = %c, "{message}"),
            Level::Warn => tracing::warn!(target: "cheng::plugin", component = %c, "{message}"),
            Level::Error => tracing::error!(target: "cheng::plugin", component = %c, "{message}"),
        }
    }
}
