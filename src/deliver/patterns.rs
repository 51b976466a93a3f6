//! A sink's `topics` (`[kafka] topics`): delayer topic names, or patterns where `*` matches any run
//! of characters.

/// Whether delayer topic `topic` is one of `patterns` (a name, or a pattern where `*` stands for
/// any run of characters, none included).
pub fn matches(patterns: &[String], topic: &str) -> bool {
    patterns.iter().any(|pattern| glob(pattern, topic))
}

fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_match_names_and_wildcards() {
        let patterns = |list: &[&str]| list.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert!(matches(&patterns(&["*"]), "anything"));
        assert!(matches(&patterns(&["*"]), ""));
        assert!(matches(&patterns(&["order.close"]), "order.close"));
        assert!(!matches(&patterns(&["order.close"]), "order.closed"));
        assert!(matches(&patterns(&["order.*"]), "order.close"));
        assert!(!matches(&patterns(&["order.*"]), "orders"));
        assert!(matches(&patterns(&["a*b*c"]), "a-b-b-c"));
        assert!(!matches(&patterns(&["a*bc"]), "abc-c"));
        assert!(!matches(&patterns(&["a*b*a"]), "aba-"));
        assert!(matches(&patterns(&["x", "*.mail"]), "user.mail"));
        assert!(!matches(&patterns(&["ab*ba"]), "aba"));
    }
}
