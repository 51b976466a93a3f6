//! What a claim of a schedule's next tick does: decided from the tick, Redis's time and the
//! catch-up policy, before the claim script checks that the tick is still the schedule's next and
//! does it.

use super::cadence::Cadence;
use super::definition::{CatchUp, Definition};

/// The most jobs one claim pushes: `all` catches up a long gap over several claims.
pub const MAX_FIRED_PER_CLAIM: usize = 100;
/// The most missed ticks one claim counts one by one; beyond, it counts this many and goes on
/// from the first tick still on time.
const MAX_COUNTED: u64 = 10_000;

/// What one claim does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The ticks to push a job for, in order (unix ms).
    pub fire: Vec<i64>,
    /// Ticks that passed and get no job.
    pub missed: u64,
    /// How many of `fire` are late ticks caught up.
    pub caught_up: u64,
    /// The schedule's next tick after the claim.
    pub next: i64,
}

/// The claim of `next` (the schedule's next tick, unix ms) when Redis's time is `now`: a tick at
/// or after `on_time_from` is on time and fires; earlier ones were missed, and the catch-up
/// policy says which of those still fire.
pub fn plan(
    definition: &Definition,
    cadence: &Cadence,
    next: i64,
    now: i64,
    on_time_from: i64,
) -> Option<Plan> {
    if next >= on_time_from {
        return Some(Plan {
            fire: vec![next],
            missed: 0,
            caught_up: 0,
            next: cadence.next_after(next)?,
        });
    }
    let window_start = now - definition.catch_up_window.as_millis() as i64;
    let (mut counted, mut within) = (0u64, Vec::new());
    let mut tick = next;
    while tick < on_time_from {
        if counted == MAX_COUNTED {
            // Too many to count: go on from the last missed tick.
            tick = cadence.next_after(on_time_from - 1)?;
            break;
        }
        if definition.catch_up == CatchUp::All && within.len() == MAX_FIRED_PER_CLAIM {
            // The rest in the next claim, from this tick.
            break;
        }
        counted += 1;
        if tick >= window_start {
            within.push(tick);
        }
        tick = cadence.next_after(tick)?;
    }
    let fire = match definition.catch_up {
        CatchUp::Skip => Vec::new(),
        CatchUp::Latest => within.last().copied().into_iter().collect(),
        CatchUp::All => within,
    };
    let caught_up = fire.len() as u64;
    Some(Plan {
        fire,
        missed: counted - caught_up,
        caught_up,
        next: tick,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const S: i64 = 1000;

    fn every_second(catch_up: CatchUp, window: u64) -> (Definition, Cadence) {
        let mut definition = Definition::new("s", "every 1s", "t");
        definition.catch_up = catch_up;
        definition.catch_up_window = Duration::from_secs(window);
        let cadence = definition.check(0).unwrap();
        (definition, cadence)
    }

    #[test]
    fn an_on_time_tick_fires_and_the_next_follows() {
        let (definition, cadence) = every_second(CatchUp::Skip, 3600);
        let plan = plan(&definition, &cadence, 100 * S, 99_500, 99_500).unwrap();
        assert_eq!(plan.fire, [100 * S]);
        assert_eq!((plan.missed, plan.caught_up, plan.next), (0, 0, 101 * S));
    }

    #[test]
    fn ten_missed_ticks_by_policy() {
        // Next was 100 s; now is 110.5 s: ticks 100..=110 passed, 111 is next.
        let now = 110_500;
        let claim = |catch_up, window| {
            let (definition, cadence) = every_second(catch_up, window);
            plan(&definition, &cadence, 100 * S, now, now).unwrap()
        };
        let skip = claim(CatchUp::Skip, 3600);
        assert_eq!((skip.fire.len(), skip.missed, skip.next), (0, 11, 111 * S));
        let latest = claim(CatchUp::Latest, 3600);
        assert_eq!(
            (latest.fire.clone(), latest.missed, latest.caught_up),
            (vec![110 * S], 10, 1)
        );
        let all = claim(CatchUp::All, 3600);
        assert_eq!(
            (all.fire.len(), all.missed, all.caught_up, all.next),
            (11, 0, 11, 111 * S)
        );
        // A 5 s window: ticks 106..=110 only.
        let bounded = claim(CatchUp::All, 5);
        assert_eq!(bounded.fire, (106..=110).map(|s| s * S).collect::<Vec<_>>());
        assert_eq!(bounded.missed, 6);
        let late = claim(CatchUp::Latest, 1);
        assert_eq!(late.fire, [110 * S], "the latest is within a second");
    }

    #[test]
    fn a_long_gap_is_caught_up_over_several_claims_and_counted_within_bounds() {
        let (definition, cadence) = every_second(CatchUp::All, 86_400);
        let now = 1_000 * S;
        let first = plan(&definition, &cadence, S, now, now).unwrap();
        assert_eq!(first.fire.len(), MAX_FIRED_PER_CLAIM);
        assert_eq!(first.next, 101 * S, "the rest in the next claim");
        let (definition, cadence) = every_second(CatchUp::Skip, 60);
        let year = plan(&definition, &cadence, S, 366 * 86_400 * S, 366 * 86_400 * S).unwrap();
        assert_eq!(year.missed, MAX_COUNTED);
        assert_eq!(year.next, 366 * 86_400 * S, "the tick now is on time");
    }
}
