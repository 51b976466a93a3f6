//! Recurring schedules in the daemon: writes the configuration file's schedules to Redis at start
//! ([`reconcile`]), then claims their ticks in rounds ([`firing`]), as every daemon on the Redis
//! does; the fire script pushes each tick's job once, whichever daemon claims it.

mod firing;
mod reconcile;

use std::time::Duration;

use delayer_client::Inspector;
use delayer_wire::schedule::{Definition, MOST_BETWEEN_LOOKS_MS};
use delayer_wire::scripts::schedule_fire::Fired;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

pub use firing::{Firing, Round};

/// The longest wait between rounds: a schedule written by another process is seen this soon,
/// before its first tick (see `FIRST_TICK_AFTER_MS`).
const MOST_BETWEEN_ROUNDS: Duration = Duration::from_millis(MOST_BETWEEN_LOOKS_MS as u64);
/// The wait after a round that failed (Redis down): the mover tells the outage.
const AFTER_A_FAILURE: Duration = Duration::from_secs(1);

/// Claims schedules' ticks with `firing` until `stop` is cancelled; first writes `from_file` (the
/// configuration's schedules) to Redis with `inspector`, again until that succeeds. A round that has
/// begun a claim finishes it: the fire script is one call.
pub async fn run(
    inspector: Inspector,
    mut firing: Firing,
    from_file: &[Definition],
    stop: &CancellationToken,
) {
    let mut reconciled = false;
    let mut failing = false;
    while !stop.is_cancelled() {
        if !reconciled {
            match reconcile::run(&inspector, from_file).await {
                Ok(unreadable) => {
                    for invalid in unreadable {
                        firing.told_unusable(&invalid.schedule);
                    }
                    reconciled = true;
                }
                Err(error) => {
                    if !failing {
                        warn!("cannot write the configuration's schedules to Redis yet: {error}");
                    }
                    failing = true;
                    pause(AFTER_A_FAILURE, stop).await;
                    continue;
                }
            }
        }
        let wait = match firing.round().await {
            Ok(round) => {
                if failing {
                    info!("schedules are claimed again");
                    failing = false;
                }
                for why in &round.refused {
                    warn!("{why}; its ticks are not claimed until it is saved again");
                }
                for (name, tick, fired) in &round.claims {
                    debug!("schedule {name:?} tick {tick}: {}", said(*fired));
                }
                let until = round
                    .next_claim
                    .map(|at| at - round.now)
                    .unwrap_or(i64::MAX);
                Duration::from_millis(until.max(0) as u64).min(MOST_BETWEEN_ROUNDS)
            }
            Err(error) => {
                if !failing {
                    warn!("cannot claim schedules' ticks: {error}");
                }
                failing = true;
                AFTER_A_FAILURE
            }
        };
        pause(wait, stop).await;
    }
}

async fn pause(wait: Duration, stop: &CancellationToken) {
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        () = stop.cancelled() => {}
    }
}

/// What a claim did, in words (for the debug log).
fn said(fired: Fired) -> &'static str {
    match fired {
        Fired::Pushed(_) => "pushed",
        Fired::Skipped => "skipped: the last job is still there",
        Fired::Lost => "claimed by another",
        Fired::Stale => "changed meanwhile",
        Fired::Gone => "removed meanwhile",
    }
}
