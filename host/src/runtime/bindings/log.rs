//! `cheng:tool/log`: guest log lines into `tracing` under the `cheng::plugin` target,
//! capped per line and escaped, so a guest can neither flood the log with one call nor
//! write terminal escape sequences into it.

use super::ChengView;
use super::generated::cheng::tool::log::{Host, Level};
use cheng_contract::text::{cut_at_char, escape_line};

/// Longest log line kept from a guest.
pub const MAX_LOG_LINE: usize = 4096;

impl Host for ChengView<'_> {
    async fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let cut = cut_at_char(&message, MAX_LOG_LINE);
        let message = escape_line(cut) + if cut.len() < message.len() { " …" } else { "" };
        let c = self.ctx.call.as_ref().map_or("(describing)", |c| c.component.as_str());
        match level {
            Level::Trace => tracing::trace!(target: "cheng::plugin", component = %c, "{message}"),
            Level::Debug => tracing::debug!(target: "cheng::plugin", component = %c, "{message}"),
            Level::Info => tracing::info!(target: "cheng::plugin", component = %c, "{message}"),
            Level::Warn => tracing::warn!(target: "cheng::plugin", component = %c, "{message}"),
            Level::Error => tracing::error!(target: "cheng::plugin", component = %c, "{message}"),
        }
        Ok(())
    }
}
