//! The legacy pop: a job is deleted as it is handed out, so it is taken at most once.

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use tokio::time::Instant;

use super::{Client, check_topic_in};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::keys::field;
use crate::time::from_unix;

/// How often `bpop` of several topics in the cluster layout looks at each.
const POLL_TOPICS: Duration = Duration::from_millis(20);

impl Client {
    /// The legacy pop: takes the oldest ready job of `topic` and deletes its data, so a consumer
    /// that dies before finishing it loses it. `None` when there is none.
    pub async fn pop(&self, topic: &str) -> Result<Option<Job>> {
        check_topic_in(self.layout(), topic)?;
        let keys = self.keys_for(topic);
        let ready = keys.ready(topic);
        let id: Option<String> = self
            .connection()
            .await?
            .rpop(&ready, None)
            .await
            .map_err(|error| Error::about_key(error, &ready))?;
        match id {
            Some(id) => {
                let bucket = keys.bucket(&id);
                take(id, &bucket, &mut self.connection().await?)
                    .await
                    .map(Some)
            }
            None => Ok(None),
        }
    }

    /// The legacy blocking pop: like [`pop`](Client::pop) on the first of `topics` that has a
    /// job, waiting up to `timeout` for one (`Duration::ZERO`: for ever, as BRPOP's 0).
    pub async fn bpop(&self, topics: &[&str], timeout: Duration) -> Result<Option<Job>> {
        for topic in topics {
            check_topic_in(self.layout(), topic)?;
        }
        if self.per_topic() && topics.len() > 1 {
            return self.bpop_polling(topics, timeout).await;
        }
        let ready: Vec<String> = topics
            .iter()
            .map(|topic| self.keys_for(topic).ready(topic))
            .collect();
        let mut connection = self.blocking_connection().await?;
        let popped: Option<(String, String)> = redis::cmd("BRPOP")
            .arg(&ready)
            .arg(timeout.as_secs_f64())
            .query_async(&mut connection)
            .await
            .map_err(|error| {
                if error.is_io_error() || error.is_connection_dropped() {
                    // The idle ones broke with it (a Redis restart): none of them is tried next.
                    self.inner
                        .idle_blocking
                        .lock()
                        .expect("not poisoned")
                        .clear();
                }
                Error::about_key(error, &ready.join(" "))
            })?;
        let job = match popped {
            Some((list, id)) => {
                let topic = topics
                    .iter()
                    .zip(&ready)
                    .find_map(|(topic, ready)| (*ready == list).then_some(*topic))
                    .unwrap_or_default();
                let bucket = self.keys_for(topic).bucket(&id);
                Some(take(id, &bucket, &mut connection).await?)
            }
            None => None,
        };
        self.return_blocking_connection(connection);
        Ok(job)
    }

    /// Puts a popped job back where it was, next in line on its topic's ready list, with its
    /// data (its body, topic and due time; kept `ready_max_lifetime` from now): for a server
    /// whose caller went away before the job could be handed over, so that it is not lost.
    pub async fn put_back(&self, job: &Job) -> Result<()> {
        let keys = self.keys_for(&job.topic);
        let bucket = keys.bucket(&job.id);
        let mut fields = vec![(field::TOPIC, job.topic.as_bytes().to_vec())];
        fields.push((field::BODY, job.body.clone()));
        if let Some(due) = job.due {
            fields.push((
                field::DUE,
                crate::time::to_unix(due).to_string().into_bytes(),
            ));
        }
        let lifetime = self.settings().ready_max_lifetime.as_secs().max(1);
        let ready = keys.ready(&job.topic);
        // RPUSH: the right end, where consumers pop from.
        let _: () = redis::pipe()
            .atomic()
            .hset_multiple(&bucket, &fields)
            .ignore()
            .expire(&bucket, lifetime as i64)
            .ignore()
            .rpush(&ready, &job.id)
            .ignore()
            .query_async(&mut self.connection().await?)
            .await
            .map_err(|error| Error::about_key(error, &ready))?;
        Ok(())
    }

    /// `bpop` of several topics in the cluster layout, where one BRPOP cannot wait on lists in
    /// different slots: pops each in turn, every [`POLL_TOPICS`] until `timeout`.
    async fn bpop_polling(&self, topics: &[&str], timeout: Duration) -> Result<Option<Job>> {
        let until = (timeout > Duration::ZERO).then(|| Instant::now() + timeout);
        loop {
            for topic in topics {
                if let Some(job) = self.pop(topic).await? {
                    return Ok(Some(job));
                }
            }
            let wait = match until {
                Some(until) if Instant::now() >= until => return Ok(None),
                Some(until) => (until - Instant::now()).min(POLL_TOPICS),
                None => POLL_TOPICS,
            };
            tokio::time::sleep(wait).await;
        }
    }
}

/// The legacy pop's second half: reads the job's data and deletes it.
async fn take(
    id: String,
    bucket: &str,
    connection: &mut (impl redis::aio::ConnectionLike + Send + Sync),
) -> Result<Job> {
    let fields: HashMap<String, Vec<u8>> = connection
        .hgetall(bucket)
        .await
        .map_err(|error| Error::about_key(error, bucket))?;
    let (Some(topic), Some(body)) = (fields.get(field::TOPIC), fields.get(field::BODY)) else {
        return Err(Error::Incomplete(id));
    };
    let _: () = connection.del(bucket).await?;
    Ok(Job {
        topic: String::from_utf8_lossy(topic).into_owned(),
        body: body.clone(),
        attempts: 0,
        due: fields
            .get(field::DUE)
            .and_then(|due| String::from_utf8_lossy(due).parse().ok())
            .and_then(from_unix),
        id,
    })
}
