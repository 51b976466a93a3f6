//! Which messages a bulk request means, as QStash's SDKs name them: ids (`messageIds` or `dlqIds`,
//! in the query or in a JSON body), or filters in the query (`label`, `url`, `host`, `path`,
//! `flowControlKey`, `scheduleId`, `queueName`, `fromDate`, `toDate`, `responseStatus`, and
//! `messageId` for the DLQ), or every one. A filter named more than once matches any of its
//! values; different filters must all match. A filter delayer cannot apply is refused: ignoring
//! it would act on more messages than asked.

use axum::http::Uri;
use serde_json::Value;

use crate::qstash::Message;

/// A bulk request's choice of messages.
#[derive(Debug, Default)]
pub(super) struct Selection {
    /// The ids named; none: every message the filters match.
    pub ids: Option<Vec<String>>,
    filters: Vec<(Filter, Vec<String>)>,
    /// `count`: the most to act on in one call.
    pub count: Option<usize>,
    /// `cursor`: where a listing goes on.
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Filter {
    Label,
    Url,
    Host,
    Path,
    FlowControlKey,
    ScheduleId,
    QueueName,
    FromDate,
    ToDate,
    ResponseStatus,
    MessageId,
}

impl Filter {
    fn named(name: &str) -> Result<Option<Self>, String> {
        Ok(Some(match name {
            "label" => Self::Label,
            "url" => Self::Url,
            "host" => Self::Host,
            "path" => Self::Path,
            "flowControlKey" => Self::FlowControlKey,
            "scheduleId" => Self::ScheduleId,
            "queueName" => Self::QueueName,
            "fromDate" => Self::FromDate,
            "toDate" => Self::ToDate,
            "responseStatus" => Self::ResponseStatus,
            "messageId" => Self::MessageId,
            // Not filters; the SDKs send them along (`api` is ignored by QStash too).
            "count" | "cursor" | "messageIds" | "dlqIds" | "api" | "order" => return Ok(None),
            "topicName" | "urlGroup" => {
                return Err(format!("{name}: URL groups are not served by delayer"));
            }
            "callerIp" => {
                return Err("callerIp: delayer does not keep the publisher's address".into());
            }
            _ => return Err(format!("{name}: not a filter delayer knows")),
        }))
    }
}

impl Selection {
    /// The choice made by `uri`'s query and a JSON `body`, ids named `ids_name`.
    pub fn of(uri: &Uri, body: &[u8], ids_name: &str) -> Result<Self, String> {
        let mut selection = Self::default();
        let query = form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes());
        for (name, value) in query {
            if name == ids_name {
                let ids = selection.ids.get_or_insert_with(Vec::new);
                ids.push(value.into_owned());
            } else if name == "count" {
                let count = value.parse().ok().filter(|count| *count > 0);
                selection.count =
                    Some(count.ok_or_else(|| format!("count: {value:?}: not a whole number"))?);
            } else if name == "cursor" {
                selection.cursor = Some(value.into_owned()).filter(|cursor| !cursor.is_empty());
            } else if let Some(filter) = Filter::named(&name)? {
                check(filter, &value)?;
                match selection.filters.iter_mut().find(|(of, _)| *of == filter) {
                    Some((_, values)) => values.push(value.into_owned()),
                    None => selection.filters.push((filter, vec![value.into_owned()])),
                }
            }
        }
        if !body.is_empty() {
            let json: Value = serde_json::from_slice(body)
                .map_err(|why| format!("the body is not {{\"{ids_name}\": [...]}}: {why}"))?;
            // Named, even as null (Go's SDK sends a nil list so), the ids are the choice: never
            // every message.
            if let Some(listed) = json.get(ids_name) {
                let ids = selection.ids.get_or_insert_with(Vec::new);
                let listed = listed.as_array().into_iter().flatten();
                ids.extend(listed.filter_map(|id| id.as_str().map(str::to_string)));
            }
        }
        Ok(selection)
    }

    /// Whether message `id`, dead with a reply of `status` if dead, is chosen.
    pub fn matches(&self, id: &str, message: &Message, status: Option<u16>) -> bool {
        if let Some(ids) = &self.ids
            && !ids.iter().any(|named| named == id)
        {
            return false;
        }
        let uri: Option<Uri> = message.url.parse().ok();
        self.filters.iter().all(|(filter, values)| {
            let any =
                |value: Option<&str>| value.is_some_and(|value| values.iter().any(|v| v == value));
            match filter {
                Filter::Label => message.labels.iter().any(|label| any(Some(label))),
                Filter::Url => any(Some(&message.url)),
                Filter::Host => any(uri.as_ref().and_then(Uri::host)),
                Filter::Path => any(uri.as_ref().map(Uri::path)),
                Filter::FlowControlKey => any(message.flow.as_ref().map(|flow| flow.key.as_str())),
                Filter::ScheduleId => any(message.schedule_id.as_deref()),
                Filter::QueueName => any(message.queue.as_deref()),
                Filter::MessageId => any(Some(id)),
                Filter::ResponseStatus => any(status.map(|status| status.to_string()).as_deref()),
                Filter::FromDate => values.iter().any(|from| {
                    from.parse()
                        .is_ok_and(|from: i64| message.created_at >= from)
                }),
                Filter::ToDate => values
                    .iter()
                    .any(|to| to.parse().is_ok_and(|to: i64| message.created_at <= to)),
            }
        })
    }
}

/// Refuses a value its filter cannot mean.
fn check(filter: Filter, value: &str) -> Result<(), String> {
    let whole = |name: &str| {
        value
            .parse::<i64>()
            .map(|_| ())
            .map_err(|_| format!("{name}: {value:?}: not a whole number"))
    };
    match filter {
        Filter::FromDate => whole("fromDate"),
        Filter::ToDate => whole("toDate"),
        Filter::ResponseStatus => whole("responseStatus"),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::Selection;
    use crate::qstash::Message;

    fn message(url: &str, label: &str) -> Message {
        Message::of_job(
            serde_json::json!({
                "url": url, "method": "POST", "retries": 3, "createdAt": 1_000,
                "notBefore": 1_000, "labels": [label],
            })
            .to_string()
            .as_bytes(),
        )
        .unwrap()
    }

    fn selection(query: &str) -> Result<Selection, String> {
        Selection::of(&format!("/v2/dlq?{query}").parse().unwrap(), b"", "dlqIds")
    }

    #[test]
    fn filters_of_one_name_match_any_value_and_of_different_names_all() {
        let a = message("https://a.example/x", "one");
        let b = message("https://b.example/y", "two");
        let chosen = selection("label=one&label=two&host=a.example").unwrap();
        assert!(chosen.matches("1", &a, None));
        assert!(!chosen.matches("2", &b, None));
        let by_id = selection("dlqIds=2&count=10").unwrap();
        assert!(!by_id.matches("1", &a, None) && by_id.matches("2", &b, None));
        assert_eq!(by_id.count, Some(10));
        let all = selection("count=100").unwrap();
        assert!(all.matches("1", &a, None) && all.matches("2", &b, None));
        assert!(!selection("fromDate=2000").unwrap().matches("1", &a, None));
    }

    #[test]
    fn a_filter_that_cannot_be_applied_is_refused_by_name() {
        for (query, named) in [
            ("callerIp=1.2.3.4", "callerIp"),
            ("topicName=g", "URL groups"),
            ("colour=red", "colour"),
            ("responseStatus=ok", "responseStatus"),
        ] {
            let refused = selection(query).unwrap_err();
            assert!(refused.contains(named), "{query}: {refused}");
        }
    }
}
