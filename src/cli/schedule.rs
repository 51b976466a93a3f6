//! `delayer schedule add|list|show|remove|pause|resume|run`: recurring schedules at run time
//! (see docs/schedules.md). Each exits 1 with the reason on bad input or an unknown schedule.

use anyhow::{Result, bail};
use clap::Subcommand;
use delayer_client::Inspector;
use delayer_client::inspector::{CatchUp, Changed, Definition, Overlap, Saved, Source, Stored};
use delayer_wire::schedule::parse_duration;
use serde_json::Value;

use crate::text::schedule::{LISTED_TICKS, SHOWN_TICKS, list_json, next_text, to_json, why};

/// What to do to schedules.
#[derive(Subcommand)]
pub enum ScheduleCommand {
    /// Create a schedule, or change the one of that name (the same definition changes nothing)
    #[command(after_help = "Examples:\n  \
        delayer schedule add nightly-report --cron '0 3 * * *' --zone Europe/Paris --topic report.build\n  \
        delayer schedule add sweep --cron 'every 5m' --topic reminders.sweep --overlap skip\n  \
        delayer schedule add invoices --cron '0 9 1 * *' --topic invoices.run --body '{\"month\":\"last\"}' \
        --catch-up latest --catch-up-window 1d")]
    Add {
        /// Letters, digits, '.', '_', '-' and ':'; each tick's job id is NAME@<tick in UTC>
        name: String,
        /// When it ticks: 5 cron fields, or 6 with seconds first; @hourly, @daily, @weekly,
        /// @monthly, @yearly; or every 30s (5m, 1h, 1d)
        #[arg(long)]
        cron: String,
        /// The topic of each tick's job
        #[arg(long)]
        topic: String,
        /// The body of each tick's job
        #[arg(long, default_value = "")]
        body: String,
        /// The IANA time zone of the cron times (Europe/Paris)
        #[arg(long, default_value = "UTC")]
        zone: String,
        /// Ticks missed while no daemon ran: skip, latest (one job) or all
        #[arg(long, default_value = "skip")]
        catch_up: String,
        /// How far back catch-up goes: 90s, 30m, 12h, 2d
        #[arg(long, default_value = "1h")]
        catch_up_window: String,
        /// A tick while the last job is still waiting, ready or reserved: allow, or skip it
        #[arg(long, default_value = "allow")]
        overlap: String,
    },
    /// List every schedule: next tick in its zone, last tick, counts
    List {
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Print a schedule as JSON, with its next ticks; exits 1 when there is none
    Show {
        /// The schedule
        name: String,
    },
    /// Remove a schedule (the jobs it pushed stay)
    Remove {
        /// The schedule
        name: String,
    },
    /// Stop a schedule ticking, for every daemon, until it is resumed
    Pause {
        /// The schedule
        name: String,
    },
    /// Let a paused schedule tick again; the ticks it missed go by its catch-up policy
    Resume {
        /// The schedule
        name: String,
    },
    /// Push the schedule's job once now, outside its ticks; prints its id
    Run {
        /// The schedule
        name: String,
    },
}

/// Runs one schedule command.
pub async fn run(inspector: &Inspector, command: ScheduleCommand) -> Result<()> {
    match command {
        ScheduleCommand::Add {
            name,
            cron,
            topic,
            body,
            zone,
            catch_up,
            catch_up_window,
            overlap,
        } => {
            let mut definition = Definition::new(&name, &cron, &topic);
            definition.body = body.into_bytes();
            definition.zone = zone;
            definition.catch_up = catch_up
                .parse::<CatchUp>()
                .map_err(|why| flag(&name, "--catch-up", &why))?;
            definition.catch_up_window = parse_duration(&catch_up_window).ok_or_else(|| {
                flag(
                    &name,
                    "--catch-up-window",
                    "is not a duration such as 90s, 30m, 12h or 2d",
                )
            })?;
            definition.overlap = overlap
                .parse::<Overlap>()
                .map_err(|why| flag(&name, "--overlap", &why))?;
            let said = match inspector.save_schedule(&definition, Source::Api).await? {
                Saved::Created => "created",
                Saved::Changed => "changed",
                Saved::Same | Saved::Exists => "unchanged",
            };
            let stored = found(inspector, &name).await?;
            println!("schedule {name} {said}; next tick {}", next_text(&stored));
            Ok(())
        }
        ScheduleCommand::List { json: true } => {
            let list: Vec<Value> = list_json(&inspector.schedules().await?, LISTED_TICKS);
            println!("{}", serde_json::to_string_pretty(&list)?);
            Ok(())
        }
        ScheduleCommand::List { json: false } => {
            let list = inspector.schedules().await?;
            if list.is_empty() {
                println!("no schedules");
                return Ok(());
            }
            println!(
                "{:<24} {:<18} {:<20} {:<28} {:>7} {:>7} {:>7}  STATE",
                "NAME", "CRON", "TOPIC", "NEXT TICK", "FIRED", "SKIPPED", "MISSED"
            );
            // By name, the unreadable among the others.
            let mut rows: Vec<(&str, String)> = list
                .readable
                .iter()
                .map(|stored| {
                    let definition = &stored.definition;
                    let row = format!(
                        "{:<24} {:<18} {:<20} {:<28} {:>7} {:>7} {:>7}  {}",
                        definition.name,
                        definition.cron,
                        definition.topic,
                        next_text(stored),
                        stored.fired,
                        stored.skipped,
                        stored.missed,
                        if stored.paused_since.is_some() {
                            "paused"
                        } else {
                            "active"
                        }
                    );
                    (definition.name.as_str(), row)
                })
                .collect();
            rows.extend(list.unreadable.iter().map(|invalid| {
                let row = format!("{:<24} unreadable: {}", invalid.schedule, why(invalid));
                (invalid.schedule.as_str(), row)
            }));
            rows.sort_by(|a, b| a.0.cmp(b.0));
            for (_, row) in rows {
                println!("{row}");
            }
            Ok(())
        }
        ScheduleCommand::Show { name } => {
            let stored = found(inspector, &name).await?;
            println!(
                "{}",
                serde_json::to_string_pretty(&to_json(&stored, SHOWN_TICKS))?
            );
            Ok(())
        }
        ScheduleCommand::Remove { name } => changed(
            inspector.remove_schedule(&name).await?,
            &name,
            "removed",
            "",
        ),
        ScheduleCommand::Pause { name } => changed(
            inspector.pause_schedule(&name).await?,
            &name,
            "paused",
            "was paused already",
        ),
        ScheduleCommand::Resume { name } => changed(
            inspector.resume_schedule(&name).await?,
            &name,
            "resumed",
            "was not paused",
        ),
        ScheduleCommand::Run { name } => {
            println!("{}", inspector.run_schedule(&name).await?);
            Ok(())
        }
    }
}

fn flag(name: &str, flag: &str, why: &str) -> anyhow::Error {
    anyhow::anyhow!("schedule {name:?}: {flag}: {why}")
}

async fn found(inspector: &Inspector, name: &str) -> Result<Stored> {
    match inspector.schedule(name).await? {
        Some(stored) => Ok(stored),
        None => bail!("there is no schedule {name:?}"),
    }
}

fn changed(changed: Changed, name: &str, done: &str, already: &str) -> Result<()> {
    match changed {
        Changed::Done => println!("schedule {name} {done}"),
        Changed::Already => println!("schedule {name} {already}"),
        Changed::Gone => bail!("there is no schedule {name:?}"),
    }
    Ok(())
}
