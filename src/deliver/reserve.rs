//! The reserving loop: reserves the due jobs of the sink's topics while there is room in flight,
//! and hands them to the settling loop; one job at a time while the receiver fails (a probe).

use std::time::Duration;

use delayer_client::{Client, Job};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::topics::{TOPICS_CHECK, Topics};
use super::{BATCH, Flow, GATHER_WAIT, Sink};
use crate::metrics::Deliveries;
use crate::service::duty::sleep_or_stop;

/// How long a reserve waits for a job before the loop looks again (at its stop, and its topics).
const RESERVE_WAIT: Duration = Duration::from_millis(500);
/// While jobs are in flight, a reserve of fewer jobs than this waits [`GATHER_WAIT`] for more
/// room first: sends end one at a time, and one reserve call for many jobs costs Redis far less
/// than one a job.
const GATHER: usize = 32;

/// Reserves due jobs while there is room in flight, and hands them on, until `stop`.
pub(super) async fn run(
    client: &Client,
    sink: &impl Sink,
    figures: &Deliveries,
    stop: &CancellationToken,
    flow: &Flow,
    reserved: mpsc::UnboundedSender<Vec<Job>>,
) {
    let Flow { room, backoff } = flow;
    let name = sink.name();
    let most_in_flight = sink.room();
    let mut topics = Topics::default();
    while !stop.is_cancelled() {
        let names = match topics.current(client, sink).await {
            Ok(names) if !names.is_empty() => names,
            Ok(_) => {
                sleep_or_stop(TOPICS_CHECK, stop).await;
                continue;
            }
            Err(error) => {
                // The mover tells Redis's outages.
                warn!("{name}: cannot list the topics to deliver: {error}");
                sleep_or_stop(Duration::from_secs(1), stop).await;
                continue;
            }
        };
        let wait = *backoff.lock().expect("not poisoned");
        let most = match wait {
            // While the receiver fails, one job at a time once the others settled: a probe, not
            // thousands given back each round.
            Some(wait) => {
                let all = tokio::select! {
                    all = room.acquire_many(most_in_flight as u32) => all,
                    () = stop.cancelled() => break,
                };
                all.expect("never closed").forget();
                room.add_permits(most_in_flight - 1);
                sleep_or_stop(wait, stop).await;
                if stop.is_cancelled() {
                    room.add_permits(1);
                    break;
                }
                1
            }
            None => {
                let first = tokio::select! {
                    first = room.acquire() => first,
                    () = stop.cancelled() => break,
                };
                first.expect("never closed").forget();
                let in_flight = most_in_flight - room.available_permits();
                if room.available_permits() < GATHER && in_flight > 1 {
                    sleep_or_stop(GATHER_WAIT, stop).await;
                }
                let more = room.available_permits().min(BATCH - 1);
                if let Ok(more) = room.try_acquire_many(more as u32) {
                    more.forget();
                }
                1 + more
            }
        };
        let jobs = match client
            .reserve_many(&names, sink.ttr(), most, RESERVE_WAIT)
            .await
        {
            Ok(jobs) => jobs,
            Err(error) => {
                room.add_permits(most);
                warn!("{name}: cannot reserve jobs to deliver: {error}");
                sleep_or_stop(Duration::from_secs(1), stop).await;
                continue;
            }
        };
        room.add_permits(most - jobs.len());
        if jobs.is_empty() {
            continue;
        }
        figures.sending(jobs.len());
        // The settling loop ends after this one: the channel is open.
        let _ = reserved.send(jobs);
    }
}
