//! What a schedule is: its name, when it ticks, the job each tick pushes, and its two policies;
//! checked before anything is written, and read back from its hash.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::cadence::Cadence;
use super::{field, shortened};

/// The longest name, in bytes: it is part of every tick's job id.
pub const MAX_NAME: usize = 200;
/// The longest expression (`cron`), in bytes: one that lists every second, minute and hour is
/// some 300.
pub const MAX_CRON: usize = 1_000;
/// The catch-up window unless told otherwise.
pub const DEFAULT_CATCH_UP_WINDOW: Duration = Duration::from_secs(3600);
/// The longest catch-up window.
const MAX_CATCH_UP_WINDOW: Duration = Duration::from_secs(366 * 86_400);

/// What to do with ticks that passed while no daemon claimed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CatchUp {
    /// Nothing: they are counted as missed.
    #[default]
    Skip,
    /// One job, for the latest of them within the window.
    Latest,
    /// A job for each of them within the window.
    All,
}

/// What to do with a tick while the previous tick's job is still waiting, ready or reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// Push it anyway.
    #[default]
    Allow,
    /// Push nothing for it: it is counted as skipped.
    Skip,
}

macro_rules! words {
    ($type:ident, $($variant:ident = $word:literal),+) => {
        impl $type {
            /// The word for it, as the configuration and Redis hold it.
            pub fn word(self) -> &'static str {
                match self {
                    $($type::$variant => $word,)+
                }
            }
        }

        impl FromStr for $type {
            type Err = String;

            fn from_str(text: &str) -> Result<$type, String> {
                match text.trim().to_ascii_lowercase().as_str() {
                    $($word => Ok($type::$variant),)+
                    _ => Err(format!(
                        "{text:?} is not one of {}",
                        [$($word),+].join(", ")
                    )),
                }
            }
        }

        impl fmt::Display for $type {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.word())
            }
        }
    };
}

words!(CatchUp, Skip = "skip", Latest = "latest", All = "all");
words!(Overlap, Allow = "allow", Skip = "skip");

/// A schedule as it is defined (what is kept of it at run time is [`super::Stored`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Definition {
    /// Letters, digits, `.`, `_`, `-` and `:`; part of each tick's job id.
    pub name: String,
    /// A cron expression, a macro, or `every <duration>` (see [`Cadence::parse`]).
    pub cron: String,
    /// The IANA time zone the expression's times are in.
    pub zone: String,
    /// The topic of each tick's job.
    pub topic: String,
    /// The body of each tick's job.
    pub body: Vec<u8>,
    pub catch_up: CatchUp,
    /// How far back catch-up goes: missed ticks older than this are counted, never pushed.
    pub catch_up_window: Duration,
    pub overlap: Overlap,
}

/// Why a schedule cannot be written: the schedule, the field at fault and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub schedule: String,
    pub field: &'static str,
    pub why: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "schedule {:?}: {}: {}",
            shortened(&self.schedule),
            self.field,
            self.why
        )
    }
}

impl std::error::Error for Invalid {}

impl Definition {
    /// A schedule of `cron` in UTC pushing `topic` with an empty body, and the default policies.
    pub fn new(name: &str, cron: &str, topic: &str) -> Definition {
        Definition {
            name: name.to_string(),
            cron: cron.to_string(),
            zone: "UTC".to_string(),
            topic: topic.to_string(),
            body: Vec::new(),
            catch_up: CatchUp::default(),
            catch_up_window: DEFAULT_CATCH_UP_WINDOW,
            overlap: Overlap::default(),
        }
    }

    /// Checks every field as of `now` (unix ms: a schedule must fire within five years of it),
    /// and returns when it ticks. Every path that writes a schedule (the file, the API, the shell,
    /// the client) checks it here.
    pub fn check(&self, now: i64) -> Result<Cadence, Invalid> {
        let invalid = |field: &'static str, why: String| Invalid {
            schedule: self.name.clone(),
            field,
            why,
        };
        if let Some(why) = name_refusal(&self.name) {
            return Err(invalid("name", why));
        }
        if self.topic.trim().is_empty() {
            return Err(invalid("topic", "is empty".to_string()));
        }
        if self.catch_up_window.is_zero() || self.catch_up_window > MAX_CATCH_UP_WINDOW {
            return Err(invalid(
                "catch_up_window",
                format!(
                    "{} s is not 1 s to 366 days",
                    self.catch_up_window.as_secs_f64()
                ),
            ));
        }
        if self.cron.len() > MAX_CRON {
            return Err(invalid(
                "cron",
                format!(
                    "{:?} is longer than {MAX_CRON} bytes",
                    shortened(&self.cron)
                ),
            ));
        }
        Cadence::parse(&self.cron, &self.zone, now)
            .map_err(|refusal| invalid(refusal.field, refusal.why))
    }

    /// The fields of its hash that define it (the others are its state).
    pub fn fields(&self) -> Vec<(&'static str, Vec<u8>)> {
        vec![
            (field::CRON, self.cron.clone().into_bytes()),
            (field::ZONE, self.zone.clone().into_bytes()),
            (field::TOPIC, self.topic.clone().into_bytes()),
            (field::BODY, self.body.clone()),
            (field::CATCH_UP, self.catch_up.word().into()),
            (
                field::CATCH_UP_WINDOW,
                self.catch_up_window.as_secs().to_string().into_bytes(),
            ),
            (field::OVERLAP, self.overlap.word().into()),
        ]
    }

    /// Reads it back from its hash's fields.
    pub fn from_fields(
        name: &str,
        fields: &HashMap<String, Vec<u8>>,
    ) -> Result<Definition, Invalid> {
        let invalid = |field: &'static str, why: String| Invalid {
            schedule: name.to_string(),
            field,
            why,
        };
        let text = |field: &'static str| -> Result<String, Invalid> {
            let bytes = fields
                .get(field)
                .ok_or_else(|| invalid(field, "is missing from Redis".to_string()))?;
            String::from_utf8(bytes.clone()).map_err(|_| invalid(field, "is not UTF-8".to_string()))
        };
        let window: u64 = text(field::CATCH_UP_WINDOW)?
            .parse()
            .map_err(|_| invalid(field::CATCH_UP_WINDOW, "is not whole seconds".to_string()))?;
        Ok(Definition {
            name: name.to_string(),
            cron: text(field::CRON)?,
            zone: text(field::ZONE)?,
            topic: text(field::TOPIC)?,
            body: fields.get(field::BODY).cloned().unwrap_or_default(),
            catch_up: text(field::CATCH_UP)?
                .parse()
                .map_err(|why| invalid(field::CATCH_UP, why))?,
            catch_up_window: Duration::from_secs(window),
            overlap: text(field::OVERLAP)?
                .parse()
                .map_err(|why| invalid(field::OVERLAP, why))?,
        })
    }
}

/// Why `name` cannot name a schedule, if it cannot.
pub fn name_refusal(name: &str) -> Option<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':');
    if name.is_empty() {
        Some("is empty".to_string())
    } else if name.len() > MAX_NAME {
        Some(format!(
            "{:?} is longer than {MAX_NAME} bytes",
            shortened(name)
        ))
    } else if !name.chars().all(allowed) {
        Some(format!(
            "{name:?} holds a character other than letters, digits, '.', '_', '-' and ':'"
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_reads_back_from_its_fields() {
        let mut definition = Definition::new("nightly", "0 3 * * *", "report.build");
        definition.zone = "Europe/Paris".into();
        definition.body = b"\xff{}".to_vec();
        definition.catch_up = CatchUp::All;
        definition.overlap = Overlap::Skip;
        let fields: HashMap<String, Vec<u8>> = definition
            .fields()
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect();
        assert_eq!(
            Definition::from_fields("nightly", &fields).unwrap(),
            definition
        );
    }

    #[test]
    fn a_refusal_of_a_long_value_quotes_only_its_start() {
        let mut long = Definition::new(&"n".repeat(10_000), "* * * * *", "t");
        let said = long.check(0).unwrap_err().to_string();
        assert!(said.len() < 300, "{said}");
        assert!(said.contains("(10000 bytes)"), "{said}");
        long.name = "s".into();
        long.cron = format!("{} * * * *", "0,".repeat(50_000) + "0");
        let said = long.check(0).unwrap_err().to_string();
        assert!(
            said.len() < 300 && said.contains("longer than 1000 bytes"),
            "{said}"
        );
        long.cron = "x".repeat(10_000);
        assert!(long.check(0).unwrap_err().to_string().len() < 300);
        long.cron = "@daily".into();
        long.zone = "z".repeat(10_000);
        assert!(long.check(0).unwrap_err().to_string().len() < 300);
    }

    #[test]
    fn each_bad_field_is_named() {
        let field = |change: fn(&mut Definition)| {
            let mut definition = Definition::new("s", "* * * * *", "t");
            change(&mut definition);
            definition.check(0).unwrap_err().field
        };
        assert_eq!(field(|d| d.name = "a b".into()), "name");
        assert_eq!(field(|d| d.name = String::new()), "name");
        assert_eq!(field(|d| d.topic = String::new()), "topic");
        assert_eq!(
            field(|d| d.catch_up_window = Duration::ZERO),
            "catch_up_window"
        );
        assert_eq!(field(|d| d.cron = "0 0 30 2 *".into()), "cron");
        assert_eq!(field(|d| d.zone = "Nowhere".into()), "zone");
        assert_eq!(field(|d| d.name = "n".repeat(MAX_NAME + 1)), "name");
        assert_eq!(
            field(|d| d.cron = format!("{} * * * *", "0,".repeat(600) + "0")),
            "cron"
        );
        let mut fine = Definition::new(&"n".repeat(MAX_NAME), "* * * * *", "t");
        fine.check(0).unwrap();
        fine.cron = format!("{} * * * *", "0,".repeat(400) + "0");
        assert!(fine.cron.len() < MAX_CRON);
        fine.check(0).unwrap();
        assert_eq!("LATEST".parse::<CatchUp>(), Ok(CatchUp::Latest));
        assert!(
            "sometimes"
                .parse::<Overlap>()
                .unwrap_err()
                .contains("allow, skip")
        );
    }
}
