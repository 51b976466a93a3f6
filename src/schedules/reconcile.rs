//! The configuration file's schedules written to Redis: each created, changed, or left as it is
//! when it is the same (so that daemons started together with one file write it once). When the
//! file has schedules, those a file wrote that it no longer has are removed; a file without
//! any leaves Redis's as they are (a drop-in configuration writes nothing), and schedules added at
//! run time are never touched.

use anyhow::Result;
use delayer_client::{Changed, Client, Definition, Saved, Source};
use tracing::info;

pub(super) async fn run(client: &Client, from_file: &[Definition]) -> Result<()> {
    if from_file.is_empty() {
        return Ok(());
    }
    for definition in from_file {
        match client.save_schedule(definition, Source::File).await? {
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
    for stored in client.schedules().await? {
        let name = &stored.definition.name;
        let in_file = from_file.iter().any(|definition| definition.name == *name);
        if stored.source == Source::File
            && !in_file
            && client.remove_schedule(name).await? == Changed::Done
        {
            info!("schedule {name:?} removed: the configuration file no longer has it");
        }
    }
    Ok(())
}
