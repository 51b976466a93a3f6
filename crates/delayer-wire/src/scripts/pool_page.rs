//! The pool page script (`pool_page.lua`): the job pool a page at a time, in due order,
//! from a cursor.

use redis::RedisResult;
use redis::aio::ConnectionLike;

use super::malformed;
use crate::name::JobId;

script_type!(
    /// The pool page script: the pool's entries after a cursor, in due order.
    PoolPageScript,
    "pool_page.lua"
);

/// The most entries one call reads.
pub const MOST_READ: usize = 1000;

impl PoolPageScript {
    /// Up to `most` (at most [`MOST_READ`]) entries of `pool` after `after` (a score and an id;
    /// none: from the first), each an id and its score, in due order.
    pub async fn run(
        &self,
        connection: &mut impl ConnectionLike,
        pool: &str,
        after: Option<(f64, &[u8])>,
        most: usize,
    ) -> RedisResult<Vec<(JobId, f64)>> {
        let (score, id) = match after {
            // Rust prints a float's shortest exact form: Redis and Lua read back the same score.
            Some((score, id)) => (score.to_string(), id),
            None => (String::new(), &b""[..]),
        };
        let page: Vec<(Vec<u8>, String)> = self
            .0
            .key(pool)
            .arg(score)
            .arg(id)
            .arg(most.min(MOST_READ))
            .invoke_async(connection)
            .await?;
        page.into_iter()
            .map(|(id, score)| match score.parse() {
                Ok(score) => Ok((JobId::from(id), score)),
                Err(_) => Err(malformed("pool_page")),
            })
            .collect()
    }
}
