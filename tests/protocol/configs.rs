//! The configurations the checker explores by default.
#![allow(dead_code)]

use crate::model::Config;

/// Every default configuration.
pub fn all() -> Vec<Config> {
    vec![
        Config {
            name: "two owners, faults and a force-unlock",
            owners: vec!["a", "b"],
            acquires: 2,
            fenced: true,
            faults: 1,
            restarts: 0,
            force_unlocks: 1,
            advances: 3,
        },
        Config {
            name: "two owners, lost replies",
            owners: vec!["a", "b"],
            acquires: 2,
            fenced: false,
            faults: 2,
            restarts: 0,
            force_unlocks: 0,
            advances: 2,
        },
        Config {
            name: "one owner on two clients (handover), restart",
            owners: vec!["a", "a"],
            acquires: 2,
            fenced: true,
            faults: 1,
            restarts: 1,
            force_unlocks: 0,
            advances: 2,
        },
        Config {
            name: "expiry and renewal",
            owners: vec!["a", "b"],
            acquires: 1,
            fenced: false,
            faults: 1,
            restarts: 0,
            force_unlocks: 1,
            advances: 5,
        },
    ]
}

/// The milestones each default configuration must reach at the default bound (see
/// `model::MILESTONES`): what its parties and faults are there for.
pub fn must_reach(name: &str) -> Vec<&'static str> {
    match name {
        "two owners, faults and a force-unlock" => vec![
            "hand-off to another owner",
            "nested release",
            "retried release",
            "reconciled orphan",
            "loss told",
        ],
        "two owners, lost replies" => vec![
            "hand-off to another owner",
            "nested release",
            "retried release",
            "reconciled orphan",
            "a re-entry turned a first hold's string into the hash form",
        ],
        "one owner on two clients (handover), restart" => {
            vec!["nested release", "reconciled orphan", "loss told"]
        }
        "expiry and renewal" => vec!["hand-off to another owner", "loss told"],
        _ => Vec::new(),
    }
}

/// Every configuration the checker runs: the default ones, the one in which a client's
/// watchdog ticks overlap (`model::overlapping_ticks`), the re-arm one (`model::rearm`) and
/// the one whose users extend their guards (`model::extends`). The last three are kept out
/// of [`all`], which the teeth explore as "the other configurations": a tooth asserts that
/// only one of them catches its defect (the extend teeth search `model::extends` alone).
pub fn checked() -> Vec<Config> {
    let mut checked = all();
    checked.push(crate::model::overlapping_ticks());
    checked.push(crate::model::rearm());
    checked.push(crate::model::extends());
    checked
}

/// The milestones each configuration the checker runs must reach at the default bound.
pub fn must_reach_checked(name: &str) -> Vec<&'static str> {
    match name {
        crate::model::OVERLAPPING_TICKS => crate::model::overlapping_ticks_must_reach(),
        crate::model::REARM => vec![
            "nested release",
            "a re-entry turned a first hold's string into the hash form",
            "a first hold's release found the hash form and sent release.lua",
        ],
        crate::model::EXTENDS => crate::model::extends_must_reach(),
        _ => must_reach(name),
    }
}
