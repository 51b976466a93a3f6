//! The compact layout: where jobs that our own code pushes wait until shortly before they fall
//! due, in about a third of the legacy layout's memory (see `docs/design/compact-layout.md`).
//!
//! A job waits compact when it falls due at least [`Settings::compact_after`] after its push (by
//! Redis's clock) and a daemon that stages compact jobs is alive. Its fields are packed into one
//! entry of a list, a *chunk*, holding the jobs due in one [`WINDOW`] (at most [`CHUNK_JOBS`]
//! of them); an index finds a job by id. [`LEAD`] before its window starts, a daemon writes each
//! job of a chunk in the legacy form (a bucket and a pool entry), a few hundred a call from the
//! chunk's end (the entries left keep their places), and deletes the chunk once empty: from there
//! on the job is a legacy one, moved, popped, reserved and acked as today. Old daemons and the
//! legacy clients never look at these keys, so a compact job is never an orphan to them.
//!
//! Keys, beginning with the layout's compact prefix (`delayer:compact:` on one Redis; in the
//! cluster layout `delayer:{TOPIC}:compact:`, one set a topic, in its slot):
//! - `index`: hash, id → `chunk * CHUNK_JOBS + position`: a job waits compact exactly when its
//!   id is here, and at that place;
//! - `chunk:<n>`: list of packed jobs (see `compact_pack` in `prelude.lua`); a removed job's
//!   entry is emptied, so that the positions of the others hold;
//! - `chunks`: sorted set, chunk number → the start of its window (unix seconds);
//! - `open`: hash, window start → the chunk it is filling;
//! - `next`: the last chunk number given;
//!
//! And one key each whatever the layout (in a cluster, in a slot of its own):
//! - [`STAGERS`]: sorted set, daemon → its last beat (unix ms by Redis's clock);
//! - [`WANTED`]: written by a push that would have been compact but found no daemon staging: a
//!   daemon starts beating when it sees it (a drop-in install, where only the legacy clients
//!   push, gets no key of this layout);
//! - [`TOPICS`] (the cluster layout only): set of the topics that had compact pushes, so that a
//!   daemon knows which topics' chunks to stage.
//!
//! [`Settings::compact_after`]: https://docs.rs/delayer-client

use std::time::Duration;

/// How long before its window starts a chunk is staged: covers a daemon restart, and leaves the
/// mover its usual precision (a staged job waits in the pool as any other).
pub const LEAD: Duration = Duration::from_secs(60);
/// The span of due times one chunk holds: a power of two of seconds, so that windows are cheap to
/// find and line up on every host.
pub const WINDOW: Duration = Duration::from_secs(64);
/// The most jobs a chunk holds: a chunk is staged in one script call of about a millisecond.
pub const CHUNK_JOBS: u64 = 1_000;
/// The shortest delay our pushes wait compact with, by default: jobs due sooner are staged
/// within the lead at once, which would only cost work.
pub const DEFAULT_AFTER: Duration = Duration::from_secs(LEAD.as_secs() + WINDOW.as_secs());
/// How often a daemon that stages tells so.
pub const BEAT_EVERY: Duration = Duration::from_secs(5);
/// How long after a daemon's last beat pushes still count on it.
pub const BEAT_FRESH: Duration = Duration::from_secs(30);
/// How long the `wanted` key lasts after the last push that found no daemon staging (the push
/// script's `EX 86400`).
pub const WANTED_KEPT: Duration = Duration::from_secs(86_400);
/// How often a daemon makes a pass over the chunks to stage.
pub const STAGE_EVERY: Duration = Duration::from_secs(1);
/// In the cluster layout, the longest a daemon leaves a topic of [`TOPICS`] without a stage
/// call: an idle topic costs one call this often, and a push of a window earlier than those its
/// topic held is staged at least `LEAD` − this ahead.
pub const STAGE_AGAIN: Duration = Duration::from_secs(10);

/// The daemons that stage, by last beat (see the module's documentation).
pub const STAGERS: &str = "delayer:compact:stagers";
/// The key a push leaves when it would have been compact but no daemon stages.
pub const WANTED: &str = "delayer:compact:wanted";
/// The cluster layout's topics that had compact pushes. Pushers add a topic before they push
/// compact jobs to it; nobody removes one (a daemon stages an idle topic every
/// [`STAGE_AGAIN`]), so that no push can race a removal.
pub const TOPICS: &str = "delayer:compact:topics";

/// The compact layout's keys under `prefix` (see the module's documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactKeys {
    prefix: String,
}

impl CompactKeys {
    pub(crate) fn new(prefix: &str) -> CompactKeys {
        CompactKeys {
            prefix: prefix.to_string(),
        }
    }

    /// What every key of the layout starts with, as the scripts are told it.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The index: id → place.
    pub fn index(&self) -> String {
        format!("{}index", self.prefix)
    }

    /// The chunks by window.
    pub fn chunks(&self) -> String {
        format!("{}chunks", self.prefix)
    }

    /// The daemons that stage, by last beat: [`STAGERS`], one key whatever the layout.
    pub fn stagers(&self) -> &'static str {
        STAGERS
    }

    /// The key a push leaves when it would have been compact but no daemon stages: [`WANTED`],
    /// one key whatever the layout.
    pub fn wanted(&self) -> &'static str {
        WANTED
    }

    /// The cluster layout's topics that had compact pushes: [`TOPICS`].
    pub fn topics(&self) -> &'static str {
        TOPICS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_use_these_numbers() {
        let prelude = include_str!("scripts/prelude.lua");
        for line in [
            format!("local CHUNK_JOBS = {CHUNK_JOBS}\n"),
            format!("local WINDOW = {}\n", WINDOW.as_secs()),
            format!("local BEAT_FRESH = {}\n", BEAT_FRESH.as_secs()),
        ] {
            assert!(prelude.contains(&line), "prelude.lua lacks {line:?}");
        }
        assert!(
            BEAT_EVERY * 3 <= BEAT_FRESH,
            "a missed beat or two is no stop"
        );
        assert!(WINDOW.as_secs().is_power_of_two());
        assert!(
            STAGE_AGAIN < LEAD,
            "a new window is staged before its lead runs out"
        );
    }

    #[test]
    fn the_beats_and_the_wanted_key_are_one_whatever_the_layout() {
        for keys in [
            CompactKeys::new("delayer:compact:"),
            CompactKeys::new("delayer:{t}:compact:"),
        ] {
            assert_eq!((keys.stagers(), keys.wanted()), (STAGERS, WANTED));
            assert!(STAGERS.starts_with(crate::keys::COMPACT_PREFIX));
        }
    }
}
