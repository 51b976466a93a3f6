//! The compact page script (`compact_page.lua`): the jobs waiting compact in due order after
//! a cursor, for the pages of waiting jobs (see [`crate::compact`]).

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::malformed;
use crate::compact::CompactKeys;
use crate::name::{JobId, Topic};

script_type!(
    /// The compact page script.
    CompactPageScript,
    "compact_page.lua"
);

/// What one call read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompactPage {
    /// The jobs, in due order: id, due time (unix seconds), topic.
    pub jobs: Vec<(JobId, f64, Topic)>,
    /// How many entries were read.
    pub read: usize,
    /// Where jobs may follow those given (none: no job waits compact after them): the last
    /// job's due time when the page is full, else where the read stopped.
    pub resume: Option<f64>,
}

impl CompactPageScript {
    /// Up to `most` jobs waiting compact after `after` (a due time and an id; none: from the
    /// first), of `topic` only when given, reading about `budget` entries at most.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        compact: &CompactKeys,
        after: Option<(f64, &[u8])>,
        most: usize,
        topic: Option<&[u8]>,
        budget: usize,
    ) -> RedisResult<CompactPage> {
        let (score, id) = match after {
            Some((score, id)) => (score.to_string(), id),
            None => (String::new(), &b""[..]),
        };
        let reply: Vec<Vec<u8>> = self
            .0
            .key(compact.chunks())
            .arg(compact.prefix())
            .arg(score)
            .arg(id)
            .arg(most)
            .arg(topic.unwrap_or_default())
            .arg(budget)
            .invoke_async(connection)
            .await?;
        let number = |bytes: &[u8]| -> RedisResult<f64> {
            std::str::from_utf8(bytes)
                .ok()
                .and_then(|text| text.parse().ok())
                .ok_or_else(|| malformed("compact_page"))
        };
        let [resume, read, jobs @ ..] = &reply[..] else {
            return Err(malformed("compact_page"));
        };
        if jobs.len() % 3 != 0 {
            return Err(malformed("compact_page"));
        }
        Ok(CompactPage {
            jobs: jobs
                .chunks(3)
                .map(|job| {
                    Ok((
                        JobId::from(job[0].clone()),
                        number(&job[1])?,
                        Topic::from(job[2].clone()),
                    ))
                })
                .collect::<RedisResult<_>>()?,
            read: number(read)? as usize,
            resume: match resume.is_empty() {
                true => None,
                false => Some(number(resume)?),
            },
        })
    }
}
