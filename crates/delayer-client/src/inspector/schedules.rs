//! Recurring schedules: save, look up, pause, resume, remove and run one. The daemons claim their
//! ticks; any client may change them at run time.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use redis::AsyncCommands;

use super::handle::Inspector;
use crate::client::check_topic_to_write_in;
use crate::error::{Error, Result};
use delayer_wire::keys::Keys;
use delayer_wire::name::JobId;
use delayer_wire::schedule::{self, Definition, FIRST_TICK_AFTER_MS, Invalid, Source, Stored};
use delayer_wire::scripts::schedule_claim::{Claim, Claimed};
use delayer_wire::scripts::schedule_save::Saved;
use delayer_wire::scripts::schedule_state::{Change, Changed};

/// Every schedule in Redis, by name: those whose hash reads, and those whose hash does not (a
/// word from a newer version, a hand edit), each with why. One unreadable schedule never hides
/// the others.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScheduleList {
    /// The schedules that read, by name.
    pub readable: Vec<Stored>,
    /// The schedules whose hash cannot be read, by name: the schedule, the field and why.
    pub unreadable: Vec<Invalid>,
}

impl ScheduleList {
    /// How many schedules there are, readable or not.
    pub fn len(&self) -> usize {
        self.readable.len() + self.unreadable.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inspector {
    /// Creates schedule `definition.name`, or changes it to `definition` (the same definition
    /// changes nothing). Its first tick is the first after now by Redis's clock, at
    /// least [`FIRST_TICK_AFTER_MS`] ahead; a change of the
    /// expression or zone sets the next tick so, other changes keep it. `source` says who wrote
    /// it: [`Source::File`] for a daemon's configuration file, [`Source::Api`] for everyone
    /// else.
    pub async fn save_schedule(&self, definition: &Definition, source: Source) -> Result<Saved> {
        self.write_schedule(definition, source, false).await
    }

    /// Creates schedule `definition.name` ([`Saved::Exists`], and nothing changed, when one of
    /// that name exists).
    pub async fn create_schedule(&self, definition: &Definition) -> Result<Saved> {
        self.write_schedule(definition, Source::Api, true).await
    }

    async fn write_schedule(
        &self,
        definition: &Definition,
        source: Source,
        create: bool,
    ) -> Result<Saved> {
        let now = (self.client.now().await? * 1000.0) as i64;
        let cadence = definition.check(now)?;
        check_topic_to_write_in(self.client.layout(), definition.topic.as_bytes())?;
        // The first tick far enough ahead for a daemon to claim it before it is due.
        let next = cadence
            .next_after(now + FIRST_TICK_AFTER_MS)
            .ok_or_else(|| Error::UnknownSchedule(definition.name.clone()))?;
        let keys = self.client.keys_for(&definition.topic);
        let mut connection = self.client.connection().await?;
        if keys.per_topic() {
            // The registry is in another slot: written first, so that no schedule is out of a
            // daemon's sight; one moved to another topic leaves the old topic's keys.
            let old: Option<String> = redis::cmd("HGET")
                .arg(keys.schedules())
                .arg(&definition.name)
                .query_async(&mut connection)
                .await?;
            if create && old.is_some() {
                return Ok(Saved::Exists);
            }
            redis::cmd("HSET")
                .arg(keys.schedules())
                .arg(&definition.name)
                .arg(&definition.topic)
                .query_async::<()>(&mut connection)
                .await?;
            // The topic too, as a push adds it (the claim script cannot reach the registry of
            // topics from the topic's slot): the daemon drains the topics it names.
            redis::cmd("SADD")
                .arg(keys.topics())
                .arg(&definition.topic)
                .query_async::<()>(&mut connection)
                .await?;
            if let Some(old) = old.filter(|old| *old != definition.topic) {
                self.scripts()
                    .schedule_state
                    .run(
                        &mut connection,
                        &self.client.keys_for(&old),
                        &definition.name,
                        Change::Remove,
                    )
                    .await?;
            }
        }
        Ok(self
            .scripts()
            .schedule_save
            .run(&mut connection, &keys, definition, next, create, source)
            .await?)
    }

    /// Every schedule, by name: the registry, then each shard's schedules' hashes, 200 to a
    /// pipeline (in the cluster layout each topic is a shard, in a slot of its own). A hash that does not read is listed apart with why, not an error.
    pub async fn schedules(&self) -> Result<ScheduleList> {
        let registry: HashMap<String, String> = self
            .client
            .connection()
            .await?
            .hgetall(self.client.keys().schedules())
            .await?;
        let mut by_topic: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (name, topic) in &registry {
            by_topic.entry(topic).or_default().push(name);
        }
        let topics: Vec<&str> = by_topic.keys().copied().collect();
        let mut connection = self.client.connection().await?;
        let mut list = ScheduleList::default();
        for (keys, topics) in self.client.keys().shards(&topics) {
            let names: Vec<&str> = topics.iter().flat_map(|t| by_topic[t].clone()).collect();
            for read in schedule::read(&mut connection, &keys, &names).await? {
                match read {
                    Some(Ok(stored)) => list.readable.push(stored),
                    Some(Err(invalid)) => list.unreadable.push(invalid),
                    None => {}
                }
            }
        }
        list.readable
            .sort_by(|a, b| a.definition.name.cmp(&b.definition.name));
        list.unreadable.sort_by(|a, b| a.schedule.cmp(&b.schedule));
        Ok(list)
    }

    /// Schedule `name`, if there is one.
    pub async fn schedule(&self, name: &str) -> Result<Option<Stored>> {
        match self.schedule_keys(name).await? {
            Some(keys) => self.read_schedule(&keys, name).await,
            None => Ok(None),
        }
    }

    /// Stops schedule `name` ticking; its next tick is kept ([`Changed::Already`] if paused).
    pub async fn pause_schedule(&self, name: &str) -> Result<Changed> {
        self.change_schedule(name, Change::Pause).await
    }

    /// Lets schedule `name` tick again from the tick it was paused at: the ticks that passed
    /// meanwhile go by its catch-up policy ([`Changed::Already`] if it was not paused).
    pub async fn resume_schedule(&self, name: &str) -> Result<Changed> {
        self.change_schedule(name, Change::Resume).await
    }

    /// Removes schedule `name`; the jobs it pushed stay.
    pub async fn remove_schedule(&self, name: &str) -> Result<Changed> {
        let changed = self.change_schedule(name, Change::Remove).await?;
        if self.client.keys().every_topic().is_none() {
            // The registry, in another slot: after the schedule, which no daemon then finds.
            self.client
                .connection()
                .await?
                .hdel::<_, _, ()>(self.client.keys().schedules(), name)
                .await?;
        }
        Ok(changed)
    }

    /// Pushes schedule `name`'s job once now, outside its ticks (its overlap policy aside); returns
    /// its id.
    pub async fn run_schedule(&self, name: &str) -> Result<JobId> {
        let keys = self
            .schedule_keys(name)
            .await?
            .ok_or_else(|| Error::UnknownSchedule(name.to_string()))?;
        let stored = self
            .read_schedule(&keys, name)
            .await?
            .ok_or_else(|| Error::UnknownSchedule(name.to_string()))?;
        let now = (self.client.now().await? * 1000.0) as i64;
        let fired = self
            .scripts()
            .schedule_claim
            .run(
                &mut self.client.connection().await?,
                &keys,
                name,
                stored.version,
                Claim::Run { now },
                self.client.settings().ready_max_lifetime.as_secs(),
            )
            .await?;
        match fired {
            Claimed::Pushed(_) => Ok(delayer_wire::schedule::run_id(name, now)),
            // Changed between the read and the run: nothing was pushed.
            _ => Err(Error::UnknownSchedule(name.to_string())),
        }
    }

    async fn change_schedule(&self, name: &str, change: Change) -> Result<Changed> {
        let Some(keys) = self.schedule_keys(name).await? else {
            return Ok(Changed::Gone);
        };
        Ok(self
            .scripts()
            .schedule_state
            .run(&mut self.client.connection().await?, &keys, name, change)
            .await?)
    }

    /// The keys of schedule `name`: its topic's, found in the registry (placed per topic).
    async fn schedule_keys(&self, name: &str) -> Result<Option<Cow<'_, Keys>>> {
        if let Some(keys) = self.client.keys().every_topic() {
            return Ok(Some(Cow::Borrowed(keys)));
        }
        let topic: Option<String> = self
            .client
            .connection()
            .await?
            .hget(self.client.keys().schedules(), name)
            .await?;
        Ok(topic.map(|topic| self.client.keys_for(topic)))
    }

    /// Schedule `name`'s hash under `keys`, read ([`Error::InvalidSchedule`] when it does not
    /// read).
    pub(super) async fn read_schedule(&self, keys: &Keys, name: &str) -> Result<Option<Stored>> {
        let mut connection = self.client.connection().await?;
        let read = schedule::read(&mut connection, keys, &[name]).await?;
        Ok(read.into_iter().next().flatten().transpose()?)
    }
}
