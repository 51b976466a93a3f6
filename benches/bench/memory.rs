//! Bytes per waiting job: 100,000 jobs written in each candidate layout for the compact jobs
//! (issue 32) beside the legacy one, on a fresh redis-server with its default configuration, at
//! 16 B, 100 B and 1 KiB bodies. Each figure is Redis's `used_memory` after the writes, less before,
//! over the jobs: what a user pays for. A layout's id index (what `get` and `remove` by id read
//! instead of scanning) is written last and shown apart too, since it is in the total.
//!
//! The layouts are prototypes written with plain commands, not the scripts that would write
//! them: the bytes Redis keeps do not depend on who wrote them. docs/design/compact-layout.md
//! reads these figures.

use delayer_client::redis::aio::MultiplexedConnection;
use delayer_client::redis::{self, Pipeline};
use delayer_testkit::{RedisServer, wait_for};
use std::time::Duration;

const JOBS: usize = 100_000;
const BODIES: [usize; 3] = [16, 100, 1024];
/// The topic of every job: one long enough to be a real one ("order.close"); with many topics,
/// this and a number.
const TOPIC: &str = "order.close";
/// The topics of the rows that show what many topics cost the layouts keyed by topic.
const MANY_TOPICS: usize = 100;
/// How long a job waits at least (its due times start this far from now, in seconds).
const AHEAD: u64 = 3_600;
/// How far apart the jobs' due times are spread, uniformly, to the millisecond: an hour (28 jobs
/// a second) and a day (1.2 a second). Time buckets gain from jobs due close together.
const SPREADS: [(&str, u64); 2] = [("1 h", 3_600), ("1 day", 86_400)];
/// A time window's jobs are kept in lists of at most this many (see [`Candidate::Chunks`]).
const CHUNK: usize = 1_000;
/// The window of the windowed layouts, in seconds.
const WINDOW: u64 = 64;
/// Commands sent at once.
const PIPELINE: usize = 5_000;

/// The layouts measured.
#[derive(Clone, Copy)]
enum Candidate {
    /// Today's: a hash per job (topic, body, due, delay) with a time to live, and the id in
    /// `delayer:job_pool` scored by due time.
    Legacy,
    /// (a) A sorted set of ids by due time, and one hash id → a packed job (topic, due, delay,
    /// body).
    PoolAndHash,
    /// (b) One sorted-set member a job, holding the packed job, id and body; the index is a hash
    /// id → due time (the member is then among the few due at that millisecond).
    Member,
    /// (c) A hash a due second, id → packed job, listpack-encoded while it holds at most 128
    /// entries of at most 64 B; a sorted set of the seconds; an index id → second.
    SecondHashes,
    /// (c) The same with a hash a 64 s window.
    WindowHashes,
    /// (d) A list a topic's 64 s window, in chunks of at most [`CHUNK`] packed jobs (lists are
    /// listpack-encoded at any length, whatever the body's size); a sorted set of the chunks by
    /// their window's start; an index id → `<chunk>:<position>`.
    Chunks,
    /// (d) The same with one list a window for every topic, each job holding its topic.
    SharedChunks,
}

impl Candidate {
    const ALL: [Candidate; 7] = [
        Candidate::Legacy,
        Candidate::PoolAndHash,
        Candidate::Member,
        Candidate::SecondHashes,
        Candidate::WindowHashes,
        Candidate::Chunks,
        Candidate::SharedChunks,
    ];

    fn name(self) -> &'static str {
        match self {
            Candidate::Legacy => "legacy: a hash a job with a TTL + pool member",
            Candidate::PoolAndHash => "(a) pool of ids + one hash id → job",
            Candidate::Member => "(b) one pool member a job (id + job)",
            Candidate::SecondHashes => "(c) a hash a due second",
            Candidate::WindowHashes => "(c) a hash a 64 s window",
            Candidate::Chunks => "(d) lists of ≤ 1,000 a topic's 64 s window",
            Candidate::SharedChunks => "(d) lists of ≤ 1,000 a 64 s window, topic in each job",
        }
    }

    /// What `get` and `remove` by id read.
    fn by_id(self) -> &'static str {
        match self {
            Candidate::Legacy => "HGETALL bucket / ZREM + DEL",
            Candidate::PoolAndHash => "HGET jobs id / ZREM + HDEL",
            Candidate::Member => {
                "HGET index → due; ZRANGEBYSCORE due due, the id's member among that ms's"
            }
            Candidate::SecondHashes | Candidate::WindowHashes => {
                "HGET index → window; HGET window id / HDEL both"
            }
            Candidate::Chunks | Candidate::SharedChunks => {
                "HGET index → chunk:pos; LINDEX (≤ 1,000 entries) / HDEL index + LSET pos \"\""
            }
        }
    }

    /// How the mover takes a due batch.
    fn batch(self) -> &'static str {
        match self {
            Candidate::Legacy => "ZRANGEBYSCORE pool LIMIT; HMGET a bucket a job",
            Candidate::PoolAndHash => "ZRANGEBYSCORE pool LIMIT; one HMGET jobs",
            Candidate::Member => "ZRANGEBYSCORE pool LIMIT: the members are the jobs",
            Candidate::SecondHashes | Candidate::WindowHashes => {
                "ZRANGEBYSCORE windows; HGETALL a window (in due order only by second)"
            }
            Candidate::Chunks | Candidate::SharedChunks => {
                "ZRANGEBYSCORE chunks ≤ now + 64 s; LRANGE a chunk, written to the legacy pool a window ahead"
            }
        }
    }

    /// Whether the spread of due times changes its bytes (else it is measured once).
    fn by_window(self) -> bool {
        matches!(
            self,
            Candidate::SecondHashes
                | Candidate::WindowHashes
                | Candidate::Chunks
                | Candidate::SharedChunks
        )
    }

    /// Whether its keys are a topic's, so that many topics with few jobs each cost more.
    fn by_topic(self) -> bool {
        matches!(self, Candidate::Chunks | Candidate::SharedChunks)
    }
}

/// A job as the prototypes write it.
struct Job {
    id: String,
    topic: String,
    due_ms: u64,
    delay: u32,
}

impl Job {
    /// The job's fields packed as a compact layout would keep them: a 14-byte header (due time
    /// in ms, delay in s, the id's and the topic's lengths), the id, the topic when `with_topic`
    /// (a layout keyed by topic leaves it out), then the body.
    fn packed(&self, body: &[u8], with_topic: bool) -> Vec<u8> {
        let topic = if with_topic {
            self.topic.as_bytes()
        } else {
            b""
        };
        let mut packed = Vec::with_capacity(14 + self.id.len() + topic.len() + body.len());
        packed.extend_from_slice(&self.due_ms.to_be_bytes());
        packed.extend_from_slice(&self.delay.to_be_bytes());
        packed.push(self.id.len() as u8);
        packed.push(topic.len() as u8);
        packed.extend_from_slice(self.id.as_bytes());
        packed.extend_from_slice(topic);
        packed.extend_from_slice(body);
        packed
    }

    fn due(&self) -> f64 {
        self.due_ms as f64 / 1000.0
    }

    fn second(&self) -> u64 {
        self.due_ms / 1000
    }

    fn window(&self) -> u64 {
        self.second() / WINDOW * WINDOW
    }
}

pub async fn memory() {
    let server = RedisServer::start();
    let mut redis = server.connect().await;
    println!(
        "\n## Memory: bytes per waiting job ({JOBS} jobs, 16 B ids, topic {TOPIC:?} or {MANY_TOPICS} \
         topics, due {AHEAD} s ahead and after, spread over 1 h or 1 day; a fresh redis-server, \
         default configuration; used_memory after − before, over the jobs)\n"
    );
    println!(
        "| layout | spread | topics | 16 B body | 100 B body | 1 KiB body | its index at 100 B | get / remove by id | the mover's batch |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---|---|");
    for candidate in Candidate::ALL {
        let mut runs: Vec<(&str, u64, usize)> = if candidate.by_window() {
            SPREADS
                .iter()
                .map(|(name, spread)| (*name, *spread, 1))
                .collect()
        } else {
            vec![("any", SPREADS[1].1, 1)]
        };
        if candidate.by_topic() {
            runs.push((SPREADS[1].0, SPREADS[1].1, MANY_TOPICS));
        }
        for (spread_name, spread, topics) in runs {
            let jobs = jobs(spread, topics);
            let mut totals = Vec::new();
            let mut index_at_100 = 0.0;
            for body_size in BODIES {
                let (total, index) =
                    measure(&server, &mut redis, candidate, &jobs, body_size).await;
                totals.push(format!("{total:.0}"));
                if body_size == 100 {
                    index_at_100 = index;
                }
            }
            println!(
                "| {} | {spread_name} | {topics} | {} | {index_at_100:.0} | {} | {} |",
                candidate.name(),
                totals.join(" | "),
                candidate.by_id(),
                candidate.batch()
            );
        }
    }
}

/// [`JOBS`] jobs due from [`AHEAD`] s on, spread over `spread` seconds, in an order that is not
/// their due order (as pushes come), with 16-byte ids, in turn in each of `topics` topics.
fn jobs(spread: u64, topics: usize) -> Vec<Job> {
    let now_ms = delayer_wire::time::unix_now() as u64 * 1000;
    (0..JOBS as u64)
        .map(|index| {
            let mixed = mix(index);
            let offset_ms = mixed % (spread * 1000);
            Job {
                id: format!("{:016x}", mix(mixed)),
                topic: if topics == 1 {
                    TOPIC.to_string()
                } else {
                    format!("{TOPIC}.{:03}", index as usize % topics)
                },
                due_ms: now_ms + AHEAD * 1000 + offset_ms,
                delay: (AHEAD + offset_ms / 1000) as u32,
            }
        })
        .collect()
}

/// A fixed mixing of a number (splitmix64): spread-out due times and ids, the same every run.
fn mix(value: u64) -> u64 {
    let mut mixed = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
    mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    mixed ^ (mixed >> 31)
}

/// Writes `jobs` with `body_size`-byte bodies in `candidate`'s layout into an empty Redis: bytes
/// per job in all and of its index alone.
async fn measure(
    server: &RedisServer,
    redis: &mut MultiplexedConnection,
    candidate: Candidate,
    jobs: &[Job],
    body_size: usize,
) -> (f64, f64) {
    redis::cmd("FLUSHALL")
        .query_async::<()>(redis)
        .await
        .unwrap();
    // Not a number, which a listpack would keep as an integer.
    let body: Vec<u8> = (0..body_size).map(|at| b'a' + (at % 26) as u8).collect();
    let before = used_memory(redis).await;
    let index = write(server, redis, candidate, jobs, &body).await;
    let without_index = used_memory(redis).await;
    send(server, redis, index).await;
    let after = used_memory(redis).await;
    let per_job = |bytes: u64| bytes as f64 / jobs.len() as f64;
    (per_job(after - before), per_job(after - without_index))
}

/// Writes the jobs, less the index; returns the index's commands.
async fn write(
    server: &RedisServer,
    redis: &mut MultiplexedConnection,
    candidate: Candidate,
    jobs: &[Job],
    body: &[u8],
) -> Vec<Pipeline> {
    let mut main = Commands::default();
    let mut index = Commands::default();
    match candidate {
        Candidate::Legacy => {
            for job in jobs {
                let bucket = delayer_wire::keys::job_bucket(&job.id);
                main.add(|pipe| {
                    pipe.cmd("HSET")
                        .arg(&bucket)
                        .arg("topic")
                        .arg(&job.topic)
                        .arg("body")
                        .arg(body)
                        .arg("due")
                        .arg(format!("{:.3}", job.due()))
                        .arg("delay")
                        .arg(job.delay)
                        .ignore()
                        .expire(&bucket, i64::from(job.delay) + 604_800)
                        .ignore()
                        .zadd(delayer_wire::keys::JOB_POOL, &job.id, job.due())
                        .ignore();
                });
            }
        }
        Candidate::PoolAndHash => {
            for job in jobs {
                main.add(|pipe| {
                    pipe.zadd("c:pool", &job.id, job.due())
                        .ignore()
                        .hset("c:jobs", &job.id, job.packed(body, true))
                        .ignore();
                });
            }
        }
        Candidate::Member => {
            for job in jobs {
                main.add(|pipe| {
                    pipe.zadd("c:pool", job.packed(body, true), job.due())
                        .ignore();
                });
                index.add(|pipe| {
                    pipe.hset("c:index", &job.id, job.due_ms).ignore();
                });
            }
        }
        Candidate::SecondHashes | Candidate::WindowHashes => {
            for job in jobs {
                let window = if matches!(candidate, Candidate::SecondHashes) {
                    job.second()
                } else {
                    job.window()
                };
                main.add(|pipe| {
                    pipe.hset(format!("c:w:{window}"), &job.id, job.packed(body, true))
                        .ignore()
                        .zadd("c:windows", window, window)
                        .ignore();
                });
                index.add(|pipe| {
                    pipe.hset("c:index", &job.id, window).ignore();
                });
            }
        }
        Candidate::Chunks | Candidate::SharedChunks => {
            let by_topic = matches!(candidate, Candidate::Chunks);
            // Each (window, topic)'s open chunk: (its number, how many jobs it holds).
            let mut open: std::collections::HashMap<(u64, &str), (u64, usize)> = Default::default();
            let mut chunks = 0;
            for job in jobs {
                let window = job.window();
                let topic = if by_topic { job.topic.as_str() } else { "" };
                let (chunk, held) = open.entry((window, topic)).or_insert((0, CHUNK));
                if *held == CHUNK {
                    chunks += 1;
                    (*chunk, *held) = (chunks, 0);
                    let key = format!("c:chunk:{chunk}");
                    let chunk = *chunk;
                    main.add(|pipe| {
                        // A chunk's first entry names its topic, once for its jobs ("" when
                        // each job holds its own).
                        pipe.rpush(&key, topic)
                            .ignore()
                            .zadd("c:chunks", chunk, window)
                            .ignore();
                    });
                }
                *held += 1;
                let (chunk, position) = (*chunk, *held);
                main.add(|pipe| {
                    pipe.rpush(format!("c:chunk:{chunk}"), job.packed(body, !by_topic))
                        .ignore();
                });
                index.add(|pipe| {
                    pipe.hset("c:index", &job.id, format!("{chunk}:{position}"))
                        .ignore();
                });
            }
        }
    }
    send(server, redis, main.done()).await;
    index.done()
}

/// Commands in pipelines of [`PIPELINE`].
#[derive(Default)]
struct Commands {
    done: Vec<Pipeline>,
    current: Pipeline,
    count: usize,
}

impl Commands {
    fn add(&mut self, write: impl FnOnce(&mut Pipeline)) {
        write(&mut self.current);
        self.count += 1;
        if self.count == PIPELINE {
            self.done.push(std::mem::take(&mut self.current));
            self.count = 0;
        }
    }

    fn done(mut self) -> Vec<Pipeline> {
        if self.count > 0 {
            self.done.push(self.current);
        }
        self.done
    }
}

/// Sends the pipelines on a connection of their own, closed before the figures are read: a
/// connection's buffers (megabytes, for a pipeline of 1 KiB bodies) are in `used_memory` while it
/// is open. `redis` is the measuring connection.
async fn send(server: &RedisServer, redis: &mut MultiplexedConnection, pipelines: Vec<Pipeline>) {
    let mut writer = server.connect().await;
    for pipe in pipelines {
        pipe.query_async::<()>(&mut writer).await.unwrap();
    }
    drop(writer);
    wait_for(
        Duration::from_secs(10),
        "the writer's connection to close",
        || {
            let mut redis = redis.clone();
            async move {
                let clients: String = redis::cmd("INFO")
                    .arg("clients")
                    .query_async(&mut redis)
                    .await
                    .unwrap();
                clients.contains("connected_clients:1\r").then_some(())
            }
        },
    )
    .await;
}

/// Redis's `used_memory`: what its allocator holds for it.
pub(crate) async fn used_memory(redis: &mut MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(redis)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.trim().strip_prefix("used_memory:"))
        .and_then(|value| value.parse().ok())
        .unwrap()
}
