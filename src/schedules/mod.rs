//! Recurring schedules in the daemon: writes the configuration file's schedules to Redis at start
//! ([`reconcile`]), then claims their ticks in rounds ([`claimer`]), as every daemon on the Redis
//! does; the claim script pushes each tick's job once, whichever daemon claims it.

mod claimer;
mod reconcile;

use std::time::Duration;

use delayer_client::Inspector;
use delayer_wire::schedule::{Definition, MOST_BETWEEN_ROUNDS_MS};
use delayer_wire::scripts::schedule_claim::Claimed;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::service::duty::{Trouble, sleep_or_stop};

pub use claimer::{Claimer, Round};

/// The wait after a round that failed (Redis down): the mover tells the outage.
const AFTER_A_FAILURE: Duration = Duration::from_secs(1);

/// Claims schedules' ticks with `claimer` until `stop` is cancelled; first writes `from_file` (the
/// configuration's schedules) to Redis with `inspector`, again until that succeeds. A round that has
/// begun a claim finishes it: the claim script is one call.
pub async fn run(
    inspector: Inspector,
    mut claimer: Claimer,
    from_file: &[Definition],
    stop: &CancellationToken,
) {
    let mut reconciled = false;
    let mut trouble = Trouble::default();
    while !stop.is_cancelled() {
        if !reconciled {
            match reconcile::run(&inspector, from_file).await {
                Ok(unreadable) => {
                    for invalid in unreadable {
                        claimer.told_unusable(&invalid.schedule);
                    }
                    reconciled = true;
                }
                Err(error) => {
                    if trouble.failed() {
                        warn!("cannot write the configuration's schedules to Redis yet: {error}");
                    }
                    sleep_or_stop(AFTER_A_FAILURE, stop).await;
                    continue;
                }
            }
        }
        let wait = match claimer.round().await {
            Ok(round) => {
                if trouble.worked() {
                    info!("schedules are claimed again");
                }
                for why in &round.refused {
                    warn!("{why}; its ticks are not claimed until it is saved again");
                }
                for (name, tick, claimed) in &round.claims {
                    debug!("schedule {name:?} tick {tick}: {}", outcome(*claimed));
                }
                let until = round
                    .next_claim
                    .map(|at| at - round.now)
                    .unwrap_or(i64::MAX);
                // A schedule written by another process is seen this soon, before its first tick
                // (see `FIRST_TICK_AFTER_MS`).
                Duration::from_millis(until.clamp(0, MOST_BETWEEN_ROUNDS_MS) as u64)
            }
            Err(error) => {
                if trouble.failed() {
                    warn!("cannot claim schedules' ticks: {error}");
                }
                AFTER_A_FAILURE
            }
        };
        sleep_or_stop(wait, stop).await;
    }
}

/// What a claim did, in words (for the debug log).
fn outcome(claimed: Claimed) -> &'static str {
    match claimed {
        Claimed::Pushed(_) => "pushed",
        Claimed::Skipped => "skipped: the last job is still there",
        Claimed::Lost => "claimed by another",
        Claimed::Stale => "changed meanwhile",
        Claimed::Gone => "removed meanwhile",
    }
}
