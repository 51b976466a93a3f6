//! The history: what happened to jobs, counted per minute in Redis (the keys are in
//! [`crate::keys`]: [`HISTORY`](crate::keys::HISTORY)), so that several daemons and clients add
//! up. A minute's hash holds every topic's counts, and marks the topics that have a hash of their
//! own that minute: the first [`MAX_TOPICS`] counted. Each minute's keys expire
//! [`KEPT`] after it ends. The move lag is kept as counts of lags by bucket ([`LAG_BOUNDS_MS`]),
//! which add up across daemons where percentiles would not.

use std::time::Duration;

/// How long a minute's counts are kept after it ends.
pub const KEPT: Duration = Duration::from_secs(24 * 60 * 60);
/// The most topics a minute counts apart; the others are in its total only.
pub const MAX_TOPICS: usize = 20;

/// The counters of a minute's hashes.
pub mod field {
    /// Jobs pushed by delayer's own clients (a legacy client's push is seen only when it moves).
    pub const PUSHED: &str = "pushed";
    /// Jobs moved to their ready lists.
    pub const MOVED: &str = "moved";
    /// Reservations acked.
    pub const ACKED: &str = "acked";
    /// Jobs delivered again because their reservation lapsed.
    pub const AGAIN: &str = "again";
    /// Jobs sent to their dead list after their last attempt.
    pub const DEAD: &str = "dead";
    /// In the minute's total: how many topics have counts of their own.
    pub const TOPICS: &str = "topics";
    /// In the minute's total: what the field of each topic with counts of its own starts with
    /// (the topic follows).
    pub const TOPIC_PREFIX: &str = "topic:";
    /// What each lag bucket's field starts with (its bound in milliseconds follows, or `inf`).
    pub const LAG_PREFIX: &str = "lag:";
}

/// The upper bounds of the lag buckets, in milliseconds: 1 ms to about 9 minutes, doubling; a
/// last bucket holds the longer lags.
pub const LAG_BOUNDS_MS: [u64; 20] = {
    let mut bounds = [0; 20];
    let mut index = 0;
    while index < bounds.len() {
        bounds[index] = 1 << index;
        index += 1;
    }
    bounds
};
/// How many lag buckets there are: one a bound, and the last for the longer lags.
pub const LAG_BUCKETS: usize = LAG_BOUNDS_MS.len() + 1;

/// The bucket of a lag of `seconds`.
pub fn lag_bucket(seconds: f64) -> usize {
    let ms = seconds * 1000.0;
    LAG_BOUNDS_MS
        .iter()
        .position(|&bound| ms <= bound as f64)
        .unwrap_or(LAG_BOUNDS_MS.len())
}

/// Each lag bucket's field: `lag:` and its bound in milliseconds, or `inf` for the last.
const LAG_FIELDS: [&str; LAG_BUCKETS] = [
    "lag:1",
    "lag:2",
    "lag:4",
    "lag:8",
    "lag:16",
    "lag:32",
    "lag:64",
    "lag:128",
    "lag:256",
    "lag:512",
    "lag:1024",
    "lag:2048",
    "lag:4096",
    "lag:8192",
    "lag:16384",
    "lag:32768",
    "lag:65536",
    "lag:131072",
    "lag:262144",
    "lag:524288",
    "lag:inf",
];

/// The field of lag bucket `bucket` (`lag:1`, `lag:2`, ... `lag:inf`).
pub fn lag_field(bucket: usize) -> &'static str {
    LAG_FIELDS[bucket.min(LAG_BUCKETS - 1)]
}

/// The unix minute of unix time `seconds`: the keys' name for it.
pub fn minute_of(seconds: f64) -> u64 {
    (seconds.max(0.0) / 60.0) as u64
}

/// One minute's counts (or several minutes' added up): of every topic, or of one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub pushed: u64,
    pub moved: u64,
    pub acked: u64,
    pub again: u64,
    pub dead: u64,
    /// Jobs moved by lag bucket (see [`lag_bucket`]).
    pub lags: [u64; LAG_BUCKETS],
}

impl Counts {
    /// The counts a hash of the history holds (its fields and values, as HGETALL gives them);
    /// fields it does not know are left out.
    pub fn from_fields<'a>(fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Counts {
        let mut counts = Counts::default();
        for (name, value) in fields {
            let Some(value) = std::str::from_utf8(value)
                .ok()
                .and_then(|value| value.parse::<u64>().ok())
            else {
                continue;
            };
            let counter = match name {
                b"pushed" => &mut counts.pushed,
                b"moved" => &mut counts.moved,
                b"acked" => &mut counts.acked,
                b"again" => &mut counts.again,
                b"dead" => &mut counts.dead,
                _ => match LAG_FIELDS.iter().position(|lag| lag.as_bytes() == name) {
                    Some(bucket) => &mut counts.lags[bucket],
                    None => continue,
                },
            };
            *counter += value;
        }
        counts
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Counts) {
        self.pushed += other.pushed;
        self.moved += other.moved;
        self.acked += other.acked;
        self.again += other.again;
        self.dead += other.dead;
        for (lags, more) in self.lags.iter_mut().zip(&other.lags) {
            *lags += more;
        }
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        *self == Counts::default()
    }

    /// The 99th percentile of the move lag, as the bound of the bucket it falls in (at most
    /// that); `None` when no job moved, and [`Duration::MAX`] when it is over the last bound.
    pub fn lag_p99(&self) -> Option<Duration> {
        let moved: u64 = self.lags.iter().sum();
        if moved == 0 {
            return None;
        }
        // The smallest lag that at least 99% of the moves are at or under.
        let wanted = moved - moved / 100;
        let mut seen = 0;
        for (bucket, lags) in self.lags.iter().enumerate() {
            seen += lags;
            if seen >= wanted {
                return Some(
                    LAG_BOUNDS_MS
                        .get(bucket)
                        .map_or(Duration::MAX, |&ms| Duration::from_millis(ms)),
                );
            }
        }
        Some(Duration::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lags_fall_in_doubling_buckets_named_by_their_bound() {
        assert_eq!(lag_bucket(0.0), 0);
        assert_eq!(lag_bucket(0.001), 0);
        assert_eq!(lag_bucket(0.0011), 1);
        assert_eq!(lag_bucket(0.003), 2);
        assert_eq!(lag_bucket(1e6), LAG_BUCKETS - 1);
        assert_eq!(lag_field(0), "lag:1");
        assert_eq!(lag_field(2), "lag:4");
        assert_eq!(lag_field(LAG_BUCKETS - 1), "lag:inf");
        for (bucket, bound) in LAG_BOUNDS_MS.iter().enumerate() {
            assert_eq!(lag_field(bucket), format!("{}{bound}", field::LAG_PREFIX));
        }
        for bucket in 0..LAG_BUCKETS {
            let name = lag_field(bucket);
            let counts = Counts::from_fields([(name.as_bytes(), &b"3"[..])]);
            assert_eq!(counts.lags[bucket], 3, "{name}");
        }
    }

    #[test]
    fn a_hash_reads_as_counts_and_the_p99_comes_from_the_merged_buckets() {
        let mut one = Counts::from_fields([
            (&b"moved"[..], &b"100"[..]),
            (b"pushed", b"7"),
            (b"lag:1", b"98"),
            (b"lag:64", b"2"),
            (b"topic:t", b"1"),
            (b"dead", b"not a number"),
        ]);
        assert_eq!((one.moved, one.pushed, one.dead), (100, 7, 0));
        // 98 of 100 at 1 ms: the 99th is in the 64 ms bucket.
        assert_eq!(one.lag_p99(), Some(Duration::from_millis(64)));
        let other = Counts::from_fields([(&b"moved"[..], &b"900"[..]), (b"lag:2", b"900")]);
        one.add(&other);
        assert_eq!(one.moved, 1000);
        // 998 of 1000 at 2 ms or less: 99% are.
        assert_eq!(one.lag_p99(), Some(Duration::from_millis(2)));
        assert_eq!(Counts::default().lag_p99(), None);
        assert!(Counts::default().is_empty() && !one.is_empty());
        let late = Counts::from_fields([(&b"lag:inf"[..], &b"1"[..])]);
        assert_eq!(late.lag_p99(), Some(Duration::MAX));
        assert_eq!(minute_of(120.5), 2);
    }
}
