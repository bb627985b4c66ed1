//! `cheng:tool/process`: the only way a component can ask for a process. Without a
//! spawn grant the request is refused with `not-granted`, and the refusal is logged.

use super::generated::cheng::tool::process::{CommandOutcome, CommandRequest, Host};
use super::generated::cheng::tool::types::{ErrorKind, Failure};
use crate::runtime::store::StoreState;

impl Host for StoreState {
    async fn run(&mut self, req: CommandRequest) -> Result<CommandOutcome, Failure> {
        if !self.call.spawn_granted {
            tracing::warn!(target: "cheng::denials", component = %self.call.component, tool = %self.call.tool, command = %req.command, "process spawning refused: not granted");
            return Err(Failure {
                kind: ErrorKind::NotGranted,
                message: format!(
                    "refused: the component \"{}\" is not granted process spawning",
                    self.call.component
                ),
                terminal: true,
            });
        }
        Err(Failure {
            kind: ErrorKind::SpawnFailed,
            message: "process spawning is not available in this host build".to_string(),
            terminal: true,
        })
    }
}
