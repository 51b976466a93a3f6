//! The jobs that are waiting: the pool a page at a time in due order, and making waiting jobs
//! due now ("run now"), one by id or a topic's, a bounded number a call.
//!
//! A page starts after a [`Cursor`] (the job the page before ended with), found anew in the pool
//! each time: no page costs more for coming later, and jobs that move meanwhile do not shift it.
//! In the shared layouts one pool holds every topic, so a topic's jobs are found among every
//! topic's: a call reads at most a fixed number of entries, and says where to go on from.

use redis::{RedisResult, Value};

use super::handle::Inspector;
use crate::client::{check_id, check_topic_in};
use crate::error::{Error, Result};
use delayer_wire::keys::Keys;
use delayer_wire::keys::field;
use delayer_wire::name::{JobId, Topic};
use delayer_wire::scripts::compact_page::CompactPage;
use delayer_wire::scripts::pool_page::MOST_READ;
use delayer_wire::scripts::promote::{MOST_IDS, Promotion};

/// The most pool entries one [`Inspector::waiting`] call reads to find a topic's jobs in a pool that
/// holds every topic's (the shared layouts).
pub const MAX_WAITING_READ: usize = 2_000;
/// The most jobs one [`Inspector::promote_topic`] call makes due (a larger limit counts as this).
pub const MAX_PROMOTE: usize = 10_000;
/// The most pool entries one [`Inspector::promote_topic`] call reads (in the shared layouts, to find
/// the topic's jobs among every topic's).
pub const MAX_PROMOTE_READ: usize = 20_000;
/// Pool entries read at once when looking for a topic's jobs among every topic's: a page of a
/// common topic is found in the first.
const FILTER_WINDOW: usize = 500;

/// A place in the job pool: after the job with this score and id. The pool orders jobs by due
/// time, then by id.
#[derive(Debug, Clone, PartialEq)]
pub struct Cursor {
    /// The job's score in the pool: its due time in unix seconds, exactly as the pool holds it.
    pub score: f64,
    /// The job.
    pub id: JobId,
}

/// A job waiting in the pool, as [`Inspector::waiting`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitingJob {
    /// The job.
    pub id: JobId,
    /// Its score in the pool: when it falls due, in unix seconds (while its topic is paused, or
    /// its ready list is broken, when the daemon looks at it again).
    pub due: f64,
    /// Its topic; none when its data is gone (the daemon drops such an entry when it falls due).
    pub topic: Option<Topic>,
    /// How many times it was reserved.
    pub attempts: u32,
}

impl WaitingJob {
    /// The place right after this job.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            score: self.due,
            id: self.id.clone(),
        }
    }
}

/// A page of the pool, from [`Inspector::waiting`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WaitingPage {
    /// The jobs, in due order.
    pub jobs: Vec<WaitingJob>,
    /// How many pool entries were read to find them.
    pub read: usize,
    /// Where the next page starts; none when the pool ends here.
    pub next: Option<Cursor>,
    /// Whether the page has fewer jobs than asked only because [`MAX_WAITING_READ`] entries of
    /// every topic were read: the topic may have more after `next`.
    pub cut_short: bool,
}

/// What [`Inspector::promote`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promoted {
    /// The job was waiting: it is due now, and the daemon moves it at once.
    Due,
    /// The job was due already (the daemon had not moved it yet): unchanged.
    WasDue,
}

/// What [`Inspector::promote_topic`] did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TopicPromotion {
    /// How many of the topic's waiting jobs are due now.
    pub made_due: usize,
    /// How many pool entries were read to find them.
    pub read: usize,
    /// Where to go on from, when the topic may have more waiting jobs (the limit or
    /// [`MAX_PROMOTE_READ`] was reached); none when the pool ends here.
    pub next: Option<Cursor>,
}

/// A page of the pool and one of the jobs waiting compact after the same cursor, as one page in
/// due order: none past the place either source stopped reading at, since jobs may hide there.
fn merged(pool: WaitingPage, compact: CompactPage, count: usize) -> WaitingPage {
    let key = |cursor: &Cursor| (cursor.score, cursor.id.as_bytes().to_vec());
    let compact_frontier = compact.resume.map(|resume| match compact.jobs.last() {
        Some((id, due, _)) if compact.jobs.len() == count => Cursor {
            score: *due,
            id: id.clone(),
        },
        _ => Cursor {
            score: resume,
            id: JobId::from(Vec::new()),
        },
    });
    let limit = [pool.next.clone(), compact_frontier]
        .into_iter()
        .flatten()
        .min_by(|a, b| key(a).partial_cmp(&key(b)).expect("due times are numbers"));
    let mut jobs: Vec<WaitingJob> = pool.jobs;
    jobs.extend(compact.jobs.into_iter().map(|(id, due, topic)| WaitingJob {
        id,
        due,
        topic: Some(topic),
        attempts: 0,
    }));
    jobs.sort_by(|a, b| {
        key(&a.cursor())
            .partial_cmp(&key(&b.cursor()))
            .expect("due times are numbers")
    });
    if let Some(limit) = &limit {
        jobs.retain(|job| key(&job.cursor()) <= key(limit));
    }
    jobs.truncate(count);
    let next = match jobs.last() {
        Some(last) if jobs.len() == count => Some(last.cursor()),
        _ => limit,
    };
    WaitingPage {
        cut_short: jobs.len() < count && next.is_some(),
        read: pool.read + compact.read,
        jobs,
        next,
    }
}

impl Inspector {
    /// Up to `count` jobs waiting in the pool, in due order, after `after` (none: from the
    /// first), with their topic and attempts: a script call for each window of the pool read
    /// and one pipelined HMGET for its jobs. With a `topic`, only its jobs: in the cluster layout
    /// its own pool; in the shared layouts, where one pool holds every topic, those among the
    /// next [`MAX_WAITING_READ`] entries (see [`WaitingPage::cut_short`]). Without a topic in the
    /// cluster layout, where each topic has a pool of its own, [`Error::TopicNeeded`].
    pub async fn waiting(
        &self,
        topic: Option<&[u8]>,
        after: Option<&Cursor>,
        count: usize,
    ) -> Result<WaitingPage> {
        if let Some(topic) = topic {
            check_topic_in(self.client.layout(), topic)?;
        }
        // The topic's shard; without one, the shard of every topic (none in the cluster layout,
        // where each topic is a shard of its own).
        let named: Vec<&[u8]> = topic.into_iter().collect();
        let Some((keys, _)) = self.client.keys().shards(&named).into_iter().next() else {
            return Err(Error::TopicNeeded);
        };
        // A topic's own pool holds its jobs alone.
        let filter = topic.filter(|_| keys.every_topic().is_some());
        let pooled = self.pool_page(&keys, filter, after, count).await?;
        let Some(compact) = keys.compact().filter(|_| count > 0) else {
            return Ok(pooled);
        };
        let scripts = self.scripts();
        let from = after.map(|at| (at.score, at.id.as_bytes()));
        let window = (scripts.compact_page)
            .run(
                &mut self.client.connection().await?,
                compact,
                from,
                count,
                topic,
                MAX_WAITING_READ,
            )
            .await?;
        Ok(merged(pooled, window, count))
    }

    /// Up to `count` jobs of `keys`' pool after `after` (of topic `filter` only, when given):
    /// see [`waiting`](Inspector::waiting).
    async fn pool_page(
        &self,
        keys: &Keys,
        filter: Option<&[u8]>,
        after: Option<&Cursor>,
        count: usize,
    ) -> Result<WaitingPage> {
        let mut page = WaitingPage {
            next: after.cloned(),
            ..WaitingPage::default()
        };
        if count == 0 {
            return Ok(page);
        }
        let mut connection = self.client.connection().await?;
        loop {
            let want = match filter {
                Some(_) => FILTER_WINDOW.min(MAX_WAITING_READ - page.read),
                // One more than the page: whether the pool goes on.
                None => (count - page.jobs.len() + 1).min(MOST_READ),
            };
            let from = page.next.as_ref().map(|at| (at.score, at.id.as_bytes()));
            let window = self
                .scripts()
                .pool_page
                .run(&mut connection, keys.pool(), from, want)
                .await
                .map_err(|error| Error::about_key(error, keys.pool()))?;
            let ends = window.len() < want;
            let mut pipe = redis::pipe();
            for (id, _) in &window {
                pipe.cmd("HMGET")
                    .arg(keys.bucket(id))
                    .arg(&[field::TOPIC, field::ATTEMPTS]);
            }
            // (An empty pipeline is an error in the redis crate.)
            let found: Vec<RedisResult<Value>> = match window.is_empty() {
                true => Vec::new(),
                false => pipe.ignore_errors().query_async(&mut connection).await?,
            };
            for ((id, due), fields) in window.into_iter().zip(found) {
                if page.jobs.len() == count {
                    return Ok(page);
                }
                // A bucket of the wrong type (an error) or gone has neither.
                let (of, attempts): (Option<Vec<u8>>, Option<String>) = fields
                    .ok()
                    .and_then(|fields| redis::from_redis_value(fields).ok())
                    .unwrap_or_default();
                page.read += 1;
                page.next = Some(Cursor {
                    score: due,
                    id: id.clone(),
                });
                if filter.is_none_or(|topic| of.as_deref() == Some(topic)) {
                    page.jobs.push(WaitingJob {
                        id,
                        due,
                        topic: of.map(Topic::from),
                        attempts: attempts.and_then(|n| n.parse().ok()).unwrap_or(0),
                    });
                }
            }
            if ends {
                page.next = None;
                return Ok(page);
            }
            if page.jobs.len() == count {
                return Ok(page);
            }
            if filter.is_some() && page.read >= MAX_WAITING_READ {
                page.cut_short = true;
                return Ok(page);
            }
        }
    }

    /// Makes waiting job `id` due now, by Redis's clock, so that the daemon moves it to its
    /// ready list at once (or, while its topic is paused, when it is resumed). Only a job the
    /// pool holds: [`Error::NotWaiting`] for one that is ready, reserved or dead,
    /// [`Error::UnknownJob`] when there is no such job.
    pub async fn promote(&self, id: impl AsRef<[u8]>) -> Result<Promoted> {
        let id = id.as_ref();
        check_id(id)?;
        let Some(keys) = self.client.keys_of(id, None).await? else {
            return Err(Error::UnknownJob(id.into()));
        };
        // A job waiting compact is written in the legacy form first, then promoted as any.
        if let Some(compact) = keys.compact() {
            let scripts = self.scripts();
            (scripts.compact_job)
                .stage(&mut self.client.connection().await?, &keys, compact, &[id])
                .await
                .map_err(|error| Error::about_key(error, keys.pool()))?;
        }
        let found = self
            .scripts()
            .promote
            .run(&mut self.client.connection().await?, &keys, None, &[id])
            .await
            .map_err(|error| Error::about_key(error, keys.pool()))?;
        match found.first() {
            Some(Promotion::Due) => Ok(Promoted::Due),
            Some(Promotion::WasDue) => Ok(Promoted::WasDue),
            Some(Promotion::NotWaiting) => Err(Error::NotWaiting(id.into())),
            _ => Err(Error::UnknownJob(id.into())),
        }
    }

    /// Makes up to `limit` (at most [`MAX_PROMOTE`]) of `topic`'s waiting jobs due now,
    /// earliest first, after `after` (none: from the pool's first job), as
    /// [`promote`](Inspector::promote) makes one; stops reading the pool once it has read
    /// [`MAX_PROMOTE_READ`] entries. Call again from [`next`](TopicPromotion::next) for more.
    pub async fn promote_topic(
        &self,
        topic: impl AsRef<[u8]>,
        limit: usize,
        after: Option<&Cursor>,
    ) -> Result<TopicPromotion> {
        let topic = topic.as_ref();
        let limit = limit.min(MAX_PROMOTE);
        let keys = self.client.keys_for(topic);
        let mut done = TopicPromotion {
            next: after.cloned(),
            ..TopicPromotion::default()
        };
        while done.made_due < limit && done.read < MAX_PROMOTE_READ {
            let want = (limit - done.made_due).min(MOST_IDS);
            let page = self.waiting(Some(topic), done.next.as_ref(), want).await?;
            done.read += page.read;
            done.next = page.next;
            let ids: Vec<&JobId> = page.jobs.iter().map(|job| &job.id).collect();
            // Those waiting compact are written in the legacy form first, then promoted as any.
            if let (Some(compact), false) = (keys.compact(), ids.is_empty()) {
                let ids: Vec<&[u8]> = ids.iter().map(|id| id.as_bytes()).collect();
                (self.scripts().compact_job)
                    .stage(&mut self.client.connection().await?, &keys, compact, &ids)
                    .await
                    .map_err(|error| Error::about_key(error, keys.pool()))?;
            }
            if !ids.is_empty() {
                let found = self
                    .scripts()
                    .promote
                    .run(
                        &mut self.client.connection().await?,
                        &keys,
                        Some(topic),
                        &ids,
                    )
                    .await
                    .map_err(|error| Error::about_key(error, keys.pool()))?;
                done.made_due += found.iter().filter(|&&f| f == Promotion::Due).count();
            }
            if done.next.is_none() {
                break;
            }
        }
        Ok(done)
    }
}
