//! What a tool declares it needs from the host.

use crate::wit::cheng::tool::types as wt;

pub use cheng_contract::FsAccess;

/// What a tool needs, as a constant a tool declares ([`crate::Tool::NEEDS`]). The host
/// grants the intersection of this and the operator's grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// Filesystem access.
    pub fs: FsAccess,
    /// Whether it asks the host to run processes.
    pub spawn: bool,
    /// Network hosts it wants (`host` or `host:port`).
    pub network: &'static [&'static str],
}

impl Needs {
    /// Nothing at all.
    pub const NONE: Needs = Needs { fs: FsAccess::None, spawn: false, network: &[] };
    /// The workspace, read-only.
    pub const READ: Needs = Needs { fs: FsAccess::Read, spawn: false, network: &[] };
    /// The workspace, read-write.
    pub const WRITE: Needs = Needs { fs: FsAccess::Write, spawn: false, network: &[] };

    /// The same, plus process spawning through the host.
    pub const fn with_spawn(mut self) -> Self {
        self.spawn = true;
        self
    }

    pub(crate) fn to_wit(self) -> wt::Needs {
        wt::Needs {
            fs: match self.fs {
                FsAccess::None => wt::FsAccess::None,
                FsAccess::Read => wt::FsAccess::Read,
                FsAccess::Write => wt::FsAccess::Write,
            },
            spawn: self.spawn,
            network: self.network.iter().map(|s| s.to_string()).collect(),
        }
    }
}
