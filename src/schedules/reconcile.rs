//! The configuration file's schedules written to Redis: each created, changed, or left as it is
//! when it is the same (so that daemons started together with one file write it once). When the
//! file has schedules, those a file wrote that it no longer has are removed; a file without
//! any leaves Redis's as they are (a drop-in configuration writes nothing), and schedules added at
//! run time are never touched. A schedule whose hash does not read is left as it is, with a
//! warning: it must not keep the file's schedules from being written, nor any tick from being
//! claimed.

use anyhow::Result;
use delayer_client::Inspector;
use delayer_client::inspector::{Changed, Definition, Saved, Source};
use delayer_wire::schedule::Invalid;
use tracing::{info, warn};

/// Writes `from_file`; returns the schedules in Redis whose hash does not read, each warned of.
pub(super) async fn run(inspector: &Inspector, from_file: &[Definition]) -> Result<Vec<Invalid>> {
    if from_file.is_empty() {
        return Ok(Vec::new());
    }
    for definition in from_file {
        match inspector.save_schedule(definition, Source::File).await? {
            Saved::Created => info!(
                "schedule {:?} created from the configuration file",
                definition.name
            ),
            Saved::Changed => info!(
                "schedule {:?} changed as the configuration file says",
                definition.name
            ),
            Saved::Same | Saved::Exists => {}
        }
    }
    let list = inspector.schedules().await?;
    for invalid in &list.unreadable {
        warn!("{invalid}; its ticks are not claimed until it is saved again");
    }
    for stored in &list.readable {
        let name = &stored.definition.name;
        let in_file = from_file.iter().any(|definition| definition.name == *name);
        if stored.source == Source::File
            && !in_file
            && inspector.remove_schedule(name).await? == Changed::Done
        {
            info!("schedule {name:?} removed: the configuration file no longer has it");
        }
    }
    Ok(list.unreadable)
}
