//! Every link in README.md, CHANGELOG.md and docs/*.md resolves: relative targets exist, anchors
//! name a heading of their file, and external links are well-formed (never fetched).

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The Markdown files whose links are checked.
fn markdown_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[test]
fn every_link_resolves() {
    let mut problems = Vec::new();
    let mut links = 0;
    for file in markdown_files() {
        let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        links += links_in(&text).len();
        problems.extend(check(&file, &text));
    }
    assert!(links > 0, "no links found: the parser is broken");
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

/// The checker itself finds what is broken (so `every_link_resolves` can fail).
#[test]
fn broken_links_are_found() {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let text = "# Title\n\
        [ok](#title) [ok](docs/) [ok](LICENSE) [ok](https://example.com/x) <mailto:a@b.org>\n\
        `[in code](nowhere.md)`\n\
        ```\n[in a block](nowhere.md)\n```\n\
        [missing file](docs/no-such-page.md)\n\
        [missing anchor](#no-such-heading)\n\
        [missing anchor elsewhere](CHANGELOG.md#no-such-heading)\n\
        [bad url](https://)\n\
        <https://bad url>\n";
    let problems = check(&readme, text);
    assert_eq!(problems.len(), 5, "{problems:#?}");
    assert_eq!(slug("`[delayer] timer_interval`"), "delayer-timer_interval");
    assert_eq!(
        slug("At least once: reserve, ack, nack, touch"),
        "at-least-once-reserve-ack-nack-touch"
    );
    assert_eq!(slug("[Unreleased]"), "unreleased");
}

/// What is wrong with the links of `file` (whose text is `text`), one line each.
fn check(file: &Path, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for (line, target) in links_in(text) {
        let at = format!("{}:{line}: {target}", file.display());
        if let Some(why) = problem(file, text, &target) {
            problems.push(format!("{at}: {why}"));
        }
    }
    problems
}

/// Why `target`, linked from `file`, does not resolve; `None` when it does.
fn problem(file: &Path, text: &str, target: &str) -> Option<String> {
    if target.is_empty() {
        return Some("empty target".into());
    }
    if let Some(rest) = target
        .strip_prefix("https://")
        .or_else(|| target.strip_prefix("http://"))
    {
        let host = rest.split(['/', '?', '#']).next().unwrap_or("");
        let host_ok = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
        let rest_ok = !rest.chars().any(|c| c.is_whitespace() || c.is_control());
        return (!(host_ok && rest_ok)).then(|| "not a well-formed URL".into());
    }
    if let Some(address) = target.strip_prefix("mailto:") {
        let ok = address.split_once('@').is_some_and(|(user, host)| {
            !user.is_empty() && host.contains('.') && !address.contains(char::is_whitespace)
        });
        return (!ok).then(|| "not a well-formed mail address".into());
    }
    if target.contains("://") || target.starts_with("//") {
        return Some("an external link other than http, https or mailto".into());
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let (resolved, linked_text) = if path.is_empty() {
        (file.to_path_buf(), Some(text.to_string()))
    } else {
        let base = if path.starts_with('/') {
            Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
        } else {
            file.parent().unwrap().to_path_buf()
        };
        let resolved = base.join(path.trim_start_matches('/'));
        if !resolved.exists() {
            return Some(format!("{} does not exist", resolved.display()));
        }
        (resolved.clone(), fs::read_to_string(&resolved).ok())
    };
    let anchor = anchor?;
    if resolved.extension().is_none_or(|ext| ext != "md") {
        return Some("an anchor into a file that is not Markdown".into());
    }
    let headings = anchors(&linked_text.unwrap_or_default());
    (!headings.contains(anchor)).then(|| {
        format!(
            "{} has no heading whose anchor is #{anchor}",
            resolved.display()
        )
    })
}

/// The text outside fenced code blocks, each line with its number; inline code spans blanked.
fn prose_lines(text: &str) -> Vec<(usize, String)> {
    let mut fence: Option<String> = None;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        if marker.len() >= 3 && marker.chars().all(|c| c == marker.chars().next().unwrap()) {
            match &fence {
                None => fence = Some(marker),
                Some(open) if marker.starts_with(open.as_str()) => fence = None,
                Some(_) => {}
            }
            continue;
        }
        if fence.is_none() {
            lines.push((index + 1, without_code_spans(line)));
        }
    }
    lines
}

/// `line` with the content of its inline code spans replaced by spaces.
fn without_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(c);
        } else {
            out.push(if in_code { ' ' } else { c });
        }
    }
    out
}

/// Every link target in `text`, with its line: `[text](target)` (and images), `<scheme:...>`
/// autolinks, and `[label]: target` definitions.
fn links_in(text: &str) -> Vec<(usize, String)> {
    let mut links = Vec::new();
    for (number, line) in prose_lines(text) {
        // A link reference definition: `[label]: target`.
        let trimmed = line.trim_start();
        if trimmed.starts_with('[')
            && let Some(end) = trimmed.find("]:")
            && !trimmed[..end].contains('(')
        {
            let target = trimmed[end + 2..].split_whitespace().next().unwrap_or("");
            links.push((number, target.trim_matches(['<', '>']).to_string()));
            continue;
        }
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            // The target ends at the `)` that balances the opening one.
            let mut depth = 0;
            let mut end = after.len();
            for (i, c) in after.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        end = i;
                        break;
                    }
                    ')' => depth -= 1,
                    _ => {}
                }
            }
            let inside = after[..end].trim();
            let target = if let Some(angle) = inside.strip_prefix('<') {
                angle.split('>').next().unwrap_or("")
            } else {
                // A title may follow the target: `[a](b "title")`.
                inside.split_whitespace().next().unwrap_or("")
            };
            links.push((number, target.to_string()));
            rest = &after[end.min(after.len())..];
        }
        let mut rest = line.as_str();
        while let Some(start) = rest.find('<') {
            let after = &rest[start + 1..];
            let Some(end) = after.find('>') else { break };
            let inside = &after[..end];
            if ["http://", "https://", "mailto:"]
                .iter()
                .any(|scheme| inside.starts_with(scheme))
            {
                links.push((number, inside.to_string()));
            }
            rest = &after[end..];
        }
    }
    links
}

/// The anchors GitHub gives the headings of `text` (a repeated one gets `-1`, `-2`, ...).
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut fence = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence || line.starts_with("    ") {
            continue;
        }
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !trimmed[hashes..].starts_with([' ', '\t']) {
            continue;
        }
        let heading = trimmed[hashes..].trim().trim_end_matches('#').trim();
        let base = slug(heading);
        let mut anchor = base.clone();
        let mut n = 0;
        while !seen.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
    }
    seen
}

/// GitHub's anchor for a heading: its text (a link's text, not its target), lower-case, spaces
/// to '-', punctuation other than '-' and '_' dropped.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // `[text](target)` shows as `text`.
    while let Some(start) = rest.find("](") {
        text.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        rest = after.find(')').map_or("", |end| &after[end + 1..]);
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}
