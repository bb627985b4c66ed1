//! Saved settings (`<state dir>/settings.json`): the authority for auto-approve once the
//! host has booted once. At first boot the file is created, copying `CHENG_AUTO_APPROVE`
//! (on only when exactly `true`); after that the variable is ignored and `cheng
//! settings set auto_approve …` changes it.

use std::path::Path;

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

/// The settings file's content.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    /// Grant every approval without asking.
    pub auto_approve: bool,
}

impl Settings {
    /// What a first boot saves: auto-approve from the environment.
    pub fn from_env() -> Self {
        Settings { auto_approve: std::env::var("CHENG_AUTO_APPROVE").as_deref() == Ok("true") }
    }

    /// Read the saved settings, creating them from the environment at first boot.
    pub fn load_or_init(dir: &Path) -> Result<Self> {
        let path = dir.join("settings.json");
        match cheng_host::policy::hostfile::read(&path, cheng_host::policy::hostfile::SETTINGS) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes).with_context(|| format!("invalid settings file {}", path.display()))
            }
            Err(e) if e.is_not_found() => {
                let s = Self::from_env();
                s.save(dir)?;
                Ok(s)
            }
            // The error names the file, what is wrong with it and the limit.
            Err(e) => Err(e.into()),
        }
    }

    /// Save atomically.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let path = dir.join("settings.json");
        cheng_host::atomic::write_atomic(&path, &serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Change one setting by name.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "auto_approve" => {
                self.auto_approve = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(format!("auto_approve must be true or false, not \"{value}\"")),
                }
            }
            _ => return Err(format!("unknown setting \"{key}\"; settings: auto_approve")),
        }
        Ok(())
    }
}
