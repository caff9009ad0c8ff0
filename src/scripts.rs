//! The script registry: every Lua script the library runs, compiled in from `lua/`.
//!
//! Scripts run with `EVALSHA`. Redis forgets loaded scripts on restart, failover and
//! `SCRIPT FLUSH`; `redis::Script` answers the resulting `NOSCRIPT` by loading the script
//! and retrying once, so callers never see it.

use redis::Script;

/// All scripts, hashed once per client.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) acquire: Script,
    pub(crate) release: Script,
    pub(crate) renew: Script,
    pub(crate) force_unlock: Script,
    pub(crate) inspect: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            acquire: Script::new(include_str!("../lua/acquire.lua")),
            release: Script::new(include_str!("../lua/release.lua")),
            renew: Script::new(include_str!("../lua/renew.lua")),
            force_unlock: Script::new(include_str!("../lua/force_unlock.lua")),
            inspect: Script::new(include_str!("../lua/inspect.lua")),
        }
    }
}
