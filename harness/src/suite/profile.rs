//! A target profile: what the user knows of a server that probes should
//! not decide (`--profile FILE`), such as a feature it documents as not
//! supported. Absent capabilities turn their cases into SKIPs with the
//! profile's reason; nothing else does. `[routes]` names where a server
//! serves an API under another path, so it is tested, not skipped.
//!
//! ```toml
//! assume = ["tools"]          # present without probing
//! [absent]
//! grammar = "documented: response_format is not supported"
//! [routes]                    # the suites' path prefix = the server's
//! "/v1/messages" = "/anthropic/v1/messages"
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::suite::capabilities::{self, Capabilities};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    #[serde(default)]
    pub assume: Vec<String>,
    /// Capability -> why it is absent.
    #[serde(default)]
    pub absent: BTreeMap<String, String>,
    /// A path prefix the suites send to -> the server's own for it.
    #[serde(default)]
    pub routes: BTreeMap<String, String>,
}

impl Profile {
    pub fn read(path: &Path) -> Result<Profile> {
        let profile: Profile = crate::toml_input::read(path, "profile")?;
        profile
            .check()
            .with_context(|| format!("profile {}", path.display()))?;
        Ok(profile)
    }

    /// Adds `--assume NAME` and `--assume-absent NAME[=REASON]` flags.
    pub fn with_flags(mut self, assume: &[String], absent: &[String]) -> Result<Profile> {
        self.assume.extend(assume.iter().cloned());
        for a in absent {
            let (name, reason) = a.split_once('=').unwrap_or((a, "--assume-absent"));
            self.absent.insert(name.to_string(), reason.to_string());
        }
        self.check()?;
        Ok(self)
    }

    fn check(&self) -> Result<()> {
        for (from, to) in &self.routes {
            if !from.starts_with('/') || !to.starts_with('/') {
                bail!("route '{from}' = '{to}': both must be paths starting with /");
            }
        }
        for name in self.assume.iter().chain(self.absent.keys()) {
            if !capabilities::is_known(name) {
                bail!(
                    "unknown capability '{name}' ({})",
                    capabilities::ALL.join(", ")
                );
            }
        }
        Ok(())
    }

    /// The capabilities this profile settles, before any probe.
    pub fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::default();
        for name in &self.assume {
            caps.assume(name);
        }
        for (name, reason) in &self.absent {
            caps.assume_absent(name, reason);
        }
        caps
    }
}
