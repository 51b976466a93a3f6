//! What the action before a page did, as the page says it: the redirect after an action names it
//! in its query (`done`, and `count`), a word, not text, so that a link cannot make a page say
//! anything else.

use std::collections::HashMap;

/// What the action before this page did, from its redirect's `done` (a word, not text: a link
/// cannot make the page say anything else).
pub(super) fn done(fields: &HashMap<String, String>) -> Option<String> {
    let count = fields
        .get("count")
        .and_then(|count| count.parse::<u64>().ok());
    Some(match fields.get("done")?.as_str() {
        "requeued" => "The job is back in the pool, due now.".into(),
        "requeued-all" => format!(
            "{} dead jobs are back in the pool, due now.",
            count.unwrap_or(0)
        ),
        "deleted" => "The dead job is deleted.".into(),
        "stale" => "That entry was stale (the job was pushed again since, or its data expired): \
                    it is off the dead list, and nothing else changed."
            .into(),
        "removed" => "The job is removed.".into(),
        "promoted" => "The job is due now: the daemon moves it to its ready list at once.".into(),
        "was-due" => "The job was due already: the daemon moves it shortly (or, while its topic \
                      is paused, when it is resumed)."
            .into(),
        "promoted-all" => format!(
            "{} waiting jobs of the topic are due now.{}",
            count.unwrap_or(0),
            match fields.contains_key("from") {
                true => " More of its jobs may wait further on: run the next ones below.",
                false => " None is left waiting.",
            }
        ),
        "paused" => "The topic is paused: its jobs that fall due wait in the pool.".into(),
        "resumed" => format!(
            "The topic is resumed: {} jobs that fell due meanwhile move now.",
            count.unwrap_or(0)
        ),
        "schedule-paused" => {
            "The schedule is paused: no daemon claims its ticks until it is resumed.".into()
        }
        "schedule-was-paused" => "The schedule was paused already.".into(),
        "schedule-resumed" => {
            "The schedule is resumed: the ticks it missed go by its catch-up policy.".into()
        }
        "schedule-was-active" => "The schedule was not paused.".into(),
        "schedule-run" => "The schedule's job is pushed, due now: it is the last job below.".into(),
        _ => return None,
    })
}
