//! The figures as text: OpenMetrics, or Prometheus's text format 0.0.4.

use std::collections::HashSet;

/// The text formats `/metrics` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics 1.0.0.
    OpenMetrics,
    /// Prometheus's text format 0.0.4.
    Prometheus,
}

/// OpenMetrics text (without `# EOF`) as Prometheus's text format 0.0.4: a counter family is
/// named as its samples are (`x_total`), and there are no `# UNIT` lines.
pub(super) fn prometheus_text(open_metrics: &str) -> String {
    let counters: HashSet<&str> = open_metrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut text = String::with_capacity(open_metrics.len() + 64 * counters.len());
    for line in open_metrics.lines() {
        if line.starts_with("# UNIT ") {
            continue;
        }
        let family = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, rest) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {rest}"))
        });
        match family {
            Some(line) => text.push_str(&line),
            None => text.push_str(line),
        }
        text.push('\n');
    }
    text
}
