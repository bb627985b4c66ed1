//! Tools that do nothing: the cost of a call is all host and sandbox.

use cheng_sdk::prelude::*;

#[derive(Deserialize, JsonSchema)]
pub struct Empty {}

#[derive(Serialize, JsonSchema)]
pub struct Done {
    ok: bool,
}

/// No filesystem at all.
pub struct Noop;
impl Tool for Noop {
    const NAME: &'static str = "noop";
    const DESCRIPTION: &'static str = "Does nothing.";
    type Input = Empty;
    type Output = Done;
    fn run(_: Empty, _: &Context) -> Result<Done, Failure> {
        Ok(Done { ok: true })
    }
}

/// The workspace preopened read-only, unused.
pub struct NoopRead;
impl Tool for NoopRead {
    const NAME: &'static str = "noop_read";
    const DESCRIPTION: &'static str = "Does nothing, with the workspace mounted.";
    const NEEDS: Needs = Needs::READ;
    type Input = Empty;
    type Output = Done;
    fn run(_: Empty, _: &Context) -> Result<Done, Failure> {
        Ok(Done { ok: true })
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct Wait {
    /// Milliseconds to sleep.
    ms: u64,
}

/// Sleeps (waiting in the host, not computing): to hold many calls in flight at once.
pub struct NoopWait;
impl Tool for NoopWait {
    const NAME: &'static str = "noop_wait";
    const DESCRIPTION: &'static str = "Sleeps for ms milliseconds.";
    const NEEDS: Needs = Needs::READ;
    type Input = Wait;
    type Output = Done;
    fn run(w: Wait, _: &Context) -> Result<Done, Failure> {
        std::thread::sleep(std::time::Duration::from_millis(w.ms));
        Ok(Done { ok: true })
    }
}

cheng_sdk::export_tools!(Noop, NoopRead, NoopWait);
