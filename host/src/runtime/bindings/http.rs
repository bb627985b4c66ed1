//! `wasi:http/outgoing-handler`, guarded: wasmtime-wasi-http builds the request from
//! the guest's resources, and this hook decides where it goes. Every request is
//! checked by the egress guard ([`crate::egress`]) against the component's reach, sent
//! to the checked address only, bounded in time and size, and put in the call's record
//! (method, URL, status, bytes, refused or not). A refusal reaches the guest as
//! `internal-error("refused: …")`, so its message says which rule or address class
//! refused it, and is recorded as the host's denial.
//!
//! Without the `web` feature the host links no `wasi:http` at all (a component that
//! imports it is refused when loaded); the hooks below then carry nothing used.

#[cfg(feature = "web")]
mod outgoing;

use std::sync::Arc;

use crate::call::CallScope;
use crate::egress::{Egress, Reach};

/// The hook's state in one store: the guard, the component's reach, and the call
/// (none while a component describes itself: every request is refused then).
#[cfg_attr(not(feature = "web"), allow(dead_code))]
pub struct HttpHooks {
    pub(crate) call: Option<(Arc<Egress>, Arc<CallScope>)>,
    pub(crate) reach: Reach,
}

impl HttpHooks {
    /// Hooks for one call.
    pub(crate) fn for_call(egress: Arc<Egress>, scope: Arc<CallScope>, reach: Reach) -> HttpHooks {
        HttpHooks { call: Some((egress, scope)), reach }
    }

    /// Hooks that refuse every request (a component describing itself).
    pub(crate) fn refusing() -> HttpHooks {
        HttpHooks { call: None, reach: Reach::Nothing }
    }
}
