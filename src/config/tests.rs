//! The configuration file as a whole: read, checked and rendered back, against the original's
//! file, the shipped ones and the manual.

use std::path::Path;

use anyhow::Result;

use super::*;
use crate::redis::address_list;
use crate::service::logging::{LogFormat, LogLevel, LogRotation};
use delayer_wire::keys::Layout;
use std::path::PathBuf;
use std::time::Duration;

const ORIGINAL: &str = include_str!("../../delayer.conf");

fn parse(text: &str) -> Result<Config> {
    Config::parse(text, Path::new("test.conf"))
}

fn error_of(text: &str) -> String {
    format!("{:#}", parse(text).expect_err("should be rejected"))
}

#[test]
fn reads_the_original_file_verbatim() {
    let config = parse(ORIGINAL).unwrap();
    assert_eq!(config.pid, Some(PathBuf::from("/var/run/delayer.pid")));
    assert_eq!(config.mover.timer_interval, Duration::from_millis(1000));
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(config.log.access_log, Some(cwd.join("logs/access.log")));
    assert_eq!(config.log.error_log, Some(cwd.join("logs/error.log")));
    assert_eq!(config.mover.batch_size, 1000);
    let redis = &config.redis;
    assert_eq!(redis.host, "127.0.0.1");
    assert_eq!(redis.port, 6379);
    assert_eq!(redis.database, 0);
    assert_eq!(
        redis.password, None,
        "an empty value followed by a comment is empty"
    );
    assert_eq!((redis.max_idle, redis.max_active), (2, 20));
    assert_eq!(redis.idle_timeout, Some(Duration::from_secs(3600)));
    assert_eq!(redis.conn_max_lifetime, Some(Duration::from_secs(3600)));
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}

#[test]
fn kafka_topics_are_none_unless_named_and_a_section_that_does_nothing_is_refused() {
    let kafka = |lines: &str| format!("[kafka]\nbrokers = k:9092\n{lines}");
    let topics = |lines: &str| parse(&kafka(lines)).unwrap().kafka.unwrap().topics;
    assert!(topics("requests_topic = req\n").is_empty(), "missing: none");
    assert!(
        topics("topics =\nrequests_topic = req\n").is_empty(),
        "empty: none"
    );
    assert!(topics("topics =   ; Kafka in only\nrequests_topic = req\n").is_empty());
    assert_eq!(topics("topics = *\n"), ["*"], "* is every topic, as before");
    assert_eq!(
        topics("topics = order.*, mail.send\n"),
        ["order.*", "mail.send"]
    );
    for nothing in ["", "topics =\n"] {
        let error = error_of(&kafka(nothing));
        assert!(
            error.contains("[kafka] topics = \"\": none, and no requests_topic"),
            "{error}"
        );
    }
    let looped = error_of(&kafka("topics = req\nrequests_topic = req\n"));
    assert!(
        looped.contains("[kafka] topics = \"req\": \"req\" would be delivered to the Kafka topic \"req\", the requests_topic"),
        "{looped}"
    );
    let prefixed = error_of(&kafka(
        "topics = r, x\ntopic_prefix = d.\nrequests_topic = d.r\n",
    ));
    assert!(prefixed.contains("\"r\" would be delivered"), "{prefixed}");
    let covered = parse(&kafka(
        "topics = *\ntopic_prefix = d.\nrequests_topic = d.r\n",
    ))
    .unwrap();
    assert!(
        covered.warnings[0].contains("covers the topic \"r\""),
        "{:?}",
        covered.warnings
    );
    // One error for one mistake.
    let error = error_of("[kafka]\nbrokers = 127.0.0.1:99999\ntopics = *\n");
    assert_eq!(error.lines().count(), 1, "{error}");
    assert!(
        error.contains("[kafka] brokers = \"127.0.0.1:99999\""),
        "{error}"
    );
    assert!(error_of("[kafka]\ntopics = *\n").contains("[kafka] brokers = \"\": missing"));
}

#[test]
fn an_unreadable_kafka_ca_file_is_named_with_its_key() {
    let config = parse(
        "[kafka]\nbrokers = k:9092\ntopics = *\nsecurity_protocol = ssl\n\
         ssl_ca_file = /nonexistent/ca.pem\n",
    )
    .unwrap();
    let problems = config.path_problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("[kafka] ssl_ca_file = /nonexistent/ca.pem: cannot be read"),
        "{problems:?}"
    );
}

#[test]
fn the_packaged_config_suits_systemd() {
    let config = parse(include_str!("../../dist/delayer.conf")).unwrap();
    assert_eq!(config.pid, None, "systemd tracks the process");
    assert_eq!(
        (config.log.access_log, config.log.error_log),
        (None, None),
        "logs go to the journal"
    );
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    assert!(config.unknown.is_empty(), "{:?}", config.unknown);
}

#[test]
fn the_compose_config_names_the_redis_service() {
    let config = parse(include_str!("../../dist/docker/delayer.conf")).unwrap();
    assert_eq!(config.redis.host, "redis");
    assert_eq!((config.pid, config.log.access_log), (None, None));
    assert!(config.unknown.is_empty() && config.warnings.is_empty());
}

#[test]
fn the_original_chinese_comments_parse_too() {
    let text = "[delayer]\ntimer_interval = 250           ; 计算间隔时间, 单位毫秒\n\
                [redis]\npassword =                      ; 密码, 无需密码留空\n";
    let config = parse(text).unwrap();
    assert_eq!(config.mover.timer_interval, Duration::from_millis(250));
    assert_eq!(config.redis.password, None);
}

#[test]
fn missing_keys_take_the_defaults() {
    let config = parse("").unwrap();
    assert_eq!(config.pid, None);
    assert_eq!(config.log.access_log, None);
    assert_eq!(config.mover.timer_interval, Duration::from_millis(1000));
    assert_eq!(config.redis.address(), "127.0.0.1:6379");
    assert_eq!(config.redis.max_active, 20);
}

#[test]
fn values_keep_what_is_not_a_comment() {
    let text = "[redis]\npassword = se;cret#1   ; the comment\nhost = /run/redis.sock\n\
                [delayer]\naccess_log = C:\\temp\\a.log\n";
    let config = parse(text).unwrap();
    assert_eq!(config.redis.password.as_deref(), Some("se;cret#1"));
    assert!(config.redis.is_unix_socket());
    assert_eq!(config.redis.address(), "/run/redis.sock");
    let log = config.log.access_log.unwrap();
    assert!(log.ends_with("C:\\temp\\a.log"), "no escapes: {log:?}");
}

#[test]
fn log_rotation() {
    let config = parse("[delayer]\nlog_rotate = Daily ; roll\nlog_max_files = 7\n").unwrap();
    assert_eq!(
        (config.log.rotate, config.log.max_files),
        (LogRotation::Daily, Some(7))
    );
    let config = parse("").unwrap();
    assert_eq!(
        (config.log.rotate, config.log.max_files),
        (LogRotation::Never, None)
    );
}

#[test]
fn printing_masks_the_password_and_reads_back_the_same() {
    let text = "[delayer]\nbatch_size = 7\nlog_rotate = daily\n[redis]\npassword = hunter2\nidle_timeout = 0\n";
    let config = parse(text).unwrap();
    let printed = config.to_string();
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(printed.contains("password = ********"), "{printed}");
    let again = parse(&printed.replace("********", "hunter2")).unwrap();
    assert_eq!(again.to_string(), printed);
    assert_eq!(
        (again.mover.batch_size, again.redis.idle_timeout),
        (7, None)
    );
}

#[test]
fn a_repeated_key_takes_the_last_value_with_a_warning() {
    let config = parse("[redis]\nport = 1\nport = 2\n").unwrap();
    assert_eq!(config.redis.port, 2);
    assert!(
        config
            .warnings
            .join("\n")
            .contains("[redis] port is set more than once"),
        "{:?}",
        config.warnings
    );
}

#[test]
fn zero_timeouts_mean_never() {
    let config = parse("[redis]\nidle_timeout = 0\nconn_max_lifetime = 0\n").unwrap();
    assert_eq!(config.redis.idle_timeout, None);
    assert_eq!(config.redis.conn_max_lifetime, None);
}

#[test]
fn bad_numbers_name_file_section_key_and_value() {
    let cases = [
        ("[redis]\nport = 6379x\n", "[redis] port = \"6379x\""),
        ("[redis]\nport = 0\n", "from 1 to 65535"),
        ("[redis]\nport = 70000\n", "[redis] port = \"70000\""),
        ("[redis]\ndatabase = -1\n", "[redis] database = \"-1\""),
        ("[redis]\nmax_active = 0\n", "[redis] max_active = \"0\""),
        ("[redis]\nmax_idle = two\n", "[redis] max_idle = \"two\""),
        (
            "[redis]\nidle_timeout = 1.5\n",
            "[redis] idle_timeout = \"1.5\"",
        ),
        (
            "[redis]\nconn_max_lifetime = -3\n",
            "[redis] conn_max_lifetime",
        ),
        (
            "[delayer]\ntimer_interval = 0  ; ms\n",
            "[delayer] timer_interval = \"0\"",
        ),
        (
            "[delayer]\ntimer_interval = 1s\n",
            "[delayer] timer_interval = \"1s\"",
        ),
        (
            "[delayer]\nbatch_size = 1000000\n",
            "[delayer] batch_size = \"1000000\"",
        ),
        (
            "[delayer]\nmax_body_bytes = 1g\n",
            "[delayer] max_body_bytes = \"1g\"",
        ),
        ("[delayer]\nmax_body_bytes = 0\n", "from 1 to 536870912"),
    ];
    for (text, expected) in cases {
        let message = error_of(text);
        assert!(
            message.starts_with("test.conf: ") || message.contains("/test.conf: "),
            "{message}"
        );
        assert!(message.contains(expected), "{text:?} gave {message}");
    }
}

#[test]
fn unknown_sections_and_keys_are_told_apart() {
    let text = "stray = 1\n[delayer]\ntimer_intervall = 5\n[redsi]\nhost = x\n";
    let config = parse(text).unwrap();
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    let warnings = config.unknown.join("\n");
    assert!(
        warnings.contains("unknown key [delayer] timer_intervall"),
        "{warnings}"
    );
    assert!(warnings.contains("unknown section [redsi]"), "{warnings}");
    assert!(
        warnings.contains("keys outside any section, ignored: stray"),
        "{warnings}"
    );
}

#[test]
fn every_bad_value_is_told_at_once() {
    let message = error_of(
        "[delayer]\ntimer_interval = abc\nbatch_size = 0\nlog_level = loud\n[redis]\nport = 99999\n",
    );
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(lines.len(), 4, "{message}");
    for key in ["timer_interval", "batch_size", "log_level", "port"] {
        assert!(message.contains(&format!("] {key} = ")), "{key}: {message}");
    }
}

#[test]
fn a_broken_file_is_told_in_words_with_its_absolute_path_and_line() {
    let message = error_of("[delayer]\ntimer_interval = 5\n[redis\nhost = x\n");
    let cwd = std::env::current_dir().unwrap();
    let expected = format!(
        "{}:3: a section name is not closed with ']'",
        cwd.join("test.conf").display()
    );
    assert_eq!(message, expected);
}

#[test]
fn the_http_section_is_optional_and_checked() {
    assert!(parse("").unwrap().http.is_none());
    let config =
        parse("[http]\nlisten = 127.0.0.1:9277   ; go-delay-queue's port\ntoken = s3cret\n")
            .unwrap();
    let http = config.http.unwrap();
    assert_eq!(http.listen.to_string(), "127.0.0.1:9277");
    assert_eq!(http.token.as_deref(), Some("s3cret"));
    let listed = parse("[http]\nlisten = 127.0.0.1:0\nmax_listed_topics = 0\n").unwrap();
    assert_eq!(listed.http.unwrap().max_listed_topics, 0);
    let listed = parse("[http]\nlisten = 127.0.0.1:0\nmax_listed_schedules = 7\n").unwrap();
    assert_eq!(listed.http.unwrap().max_listed_schedules, 7);
    assert!(
        error_of("[http]\nlisten = 127.0.0.1:0\nmax_listed_schedules = 100001\n")
            .contains("[http] max_listed_schedules = \"100001\"")
    );
    assert!(
        error_of("[http]\nlisten = 127.0.0.1:0\nmax_listed_topics = -1\n")
            .contains("[http] max_listed_topics = \"-1\": expected a whole number")
    );
    assert!(error_of("[http]\nlisten = somewhere\n").contains("[http] listen = \"somewhere\""));
    assert!(error_of("[http]\ntoken = s3cret\n").contains("[http] listen = \"\": expected"));
    assert!(
        error_of("[http]\nlisten = 127.0.0.1:0\ntoken =   ; none yet\n")
            .contains("[http] token = \"\": empty")
    );
    let hosts = parse("[http]\nlisten = 127.0.0.1:0\nhosts = delayer.internal, Q.example:9277\n");
    let hosts = hosts.unwrap().http.unwrap().hosts;
    let hosts: Vec<String> = hosts.iter().map(ToString::to_string).collect();
    assert_eq!(hosts, ["delayer.internal", "q.example:9277"]);
    assert!(
        error_of("[http]\nlisten = 127.0.0.1:0\nhosts = a, http://b\n")
            .contains("[http] hosts = \"a, http://b\": \"http://b\" is not a host name")
    );
}

#[test]
fn tls_keys_go_together() {
    let config =
        parse("[redis]\nusername = delayer\npassword = s3cret\ntls = true\ntls_insecure = yes\n")
            .unwrap();
    assert_eq!(config.redis.username.as_deref(), Some("delayer"));
    let tls = config.redis.tls.unwrap();
    assert!(tls.insecure && tls.ca_file.is_none() && tls.client().is_none());
    assert!(
        config
            .warnings
            .iter()
            .any(|warning| warning.contains("tls_insecure = true"))
    );
    assert!(
        error_of("[redis]\nhost = /run/redis.sock\ntls = true\n")
            .contains("a unix socket speaks no TLS")
    );
    assert!(error_of("[redis]\ntls = maybe\n").contains("[redis] tls = \"maybe\""));
    assert!(parse("[redis]\ntls = false\n").unwrap().redis.tls.is_none());
    assert!(error_of("[redis]\nusername = delayer\n").contains("without a password"));
}

#[test]
fn sentinels_with_their_master_name_and_ipv6_in_brackets() {
    let config =
        parse("[redis]\nsentinels = 10.0.0.5:26379, [::1]:26380\nsentinel_master = mymaster\n")
            .unwrap();
    let sentinel = config.redis.sentinel.unwrap();
    assert_eq!(
        sentinel.addresses,
        [("10.0.0.5".to_string(), 26379), ("::1".to_string(), 26380)]
    );
    assert_eq!(
        address_list(&sentinel.addresses),
        "10.0.0.5:26379,[::1]:26380"
    );
    assert!(
        error_of("[redis]\nsentinels = ::1:26379\nsentinel_master = m\n")
            .contains("is not host:port")
    );
    assert!(error_of("[redis]\nsentinels = h:26379\n").contains("sentinel_master"));
    assert!(
        error_of("[redis]\nsentinels = h:26379\nsentinel_master = m\nhost = x\n")
            .contains("set with sentinels")
    );
    assert_eq!(sentinel.password, None);
    let text =
        "[redis]\nsentinels = h:26379\nsentinel_master = m\nsentinel_password = s;3 ; hers\n";
    let config = parse(text).unwrap();
    let sentinel = config.redis.sentinel.as_ref().unwrap();
    assert_eq!(sentinel.password.as_deref(), Some("s;3"));
    let printed = config.to_string();
    assert!(
        printed.contains("sentinel_password = ********") && !printed.contains("s;3"),
        "{printed}"
    );
    assert!(
        error_of("[redis]\nsentinel_password = x\n")
            .contains("sentinel_password = \"********\": given without sentinels")
    );
    let text = "[redis]\nsentinels = h:26379\nsentinel_master = m\nsentinel_username = watcher\n\
                sentinel_password = pw\n";
    let config = parse(text).unwrap();
    let sentinel = config.redis.sentinel.as_ref().unwrap();
    assert_eq!(sentinel.username.as_deref(), Some("watcher"));
    assert!(config.to_string().contains("sentinel_username = watcher\n"));
    assert!(
        error_of("[redis]\nsentinels = h:26379\nsentinel_master = m\nsentinel_username = w\n")
            .contains("given without sentinel_password")
    );
}

#[test]
fn cluster_and_key_layouts() {
    let config = parse("[redis]\ncluster = 10.0.0.5:6379,[::1]:7000\n").unwrap();
    assert_eq!(
        (
            config.redis.layout,
            address_list(config.redis.cluster.as_ref().unwrap())
        ),
        (Layout::CLUSTER, "10.0.0.5:6379,[::1]:7000".to_string())
    );
    assert_eq!(parse("").unwrap().redis.layout, Layout::LEGACY);
    assert_eq!(
        parse("[redis]\nkey_layout = jop\n").unwrap().redis.layout,
        Layout::JOP
    );
    assert!(error_of("[redis]\nkey_layout = jsp\n").contains("expected one of legacy, jop"));
    let mixed = error_of("[redis]\ncluster = h:6379\nhost = x\ndatabase = 2\nkey_layout = jop\n");
    for said in [
        "host = \"x\": set with cluster",
        "database = \"2\": set with cluster",
        "key_layout = \"jop\": set with cluster",
    ] {
        assert!(mixed.contains(said), "{said}: {mixed}");
    }
    assert!(error_of("[redis]\ncluster = h\n").contains("is not host:port"));
}

#[test]
fn log_level_and_format() {
    let config = parse("[delayer]\nlog_level = warn\nlog_format = JSON\n").unwrap();
    assert_eq!(
        (config.log.level, config.log.format),
        (LogLevel::Warn, LogFormat::Json)
    );
    let config = parse("").unwrap();
    assert_eq!(
        (config.log.level, config.log.format),
        (LogLevel::Info, LogFormat::Text)
    );
}

#[test]
fn a_missing_file_is_named() {
    let message = format!(
        "{:#}",
        Config::load(Path::new("/nonexistent/d.conf")).unwrap_err()
    );
    assert!(message.contains("/nonexistent/d.conf"), "{message}");
}

/// The text of a shipped configuration after its header comment.
fn body(shipped: &str) -> &str {
    let header: usize = shipped
        .lines()
        .take_while(|line| line.starts_with(';'))
        .map(|line| line.len() + 1)
        .sum();
    &shipped[header..]
}

#[test]
fn the_shipped_configs_follow_the_key_table() {
    for shipped in [
        include_str!("../../dist/delayer.conf"),
        include_str!("../../dist/docker/delayer.conf"),
    ] {
        let rendered = parse(shipped).unwrap().render(true);
        for line in body(shipped).lines() {
            assert!(
                rendered.lines().any(|wanted| wanted == line),
                "a shipped delayer.conf gives each key with the key table's line of doc: \
                 {line:?} is not one of\n{rendered}"
            );
        }
    }
}

#[test]
fn the_printout_of_an_http_section_reads_back_with_or_without_a_token() {
    for text in [
        "[http]\nlisten = 127.0.0.1:9277\n",
        "[http]\nlisten = 127.0.0.1:9277\ntoken = s3cret\nhosts = a.example, b.example:1\n",
    ] {
        let printed = parse(text).unwrap().to_string();
        assert!(!printed.contains("s3cret"), "{printed}");
        let again = parse(&printed.replace("********", "s3cret")).unwrap();
        assert_eq!(again.to_string(), printed);
    }
}

#[test]
fn tls_on_a_unix_socket_is_one_problem_not_five() {
    let message = error_of("[redis]\nhost = /run/r.sock\ntls = true\ntls_ca_file = /ca.pem\n");
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(
        message.contains("[redis] tls = \"true\": Redis on a unix socket"),
        "{message}"
    );
}

#[test]
fn a_byte_order_mark_and_a_section_given_twice_are_read_as_go_ini_reads_them() {
    let config =
        parse("\u{feff}[redis]\nport = 1\n[delayer]\n[redis]\nhost = h\nport = 2\n").unwrap();
    assert_eq!((config.redis.host.as_str(), config.redis.port), ("h", 2));
    assert!(config.unknown.is_empty(), "{:?}", config.unknown);
    assert!(
        config
            .warnings
            .iter()
            .any(|warning| warning.contains("[redis] port is set more than once")),
        "{:?}",
        config.warnings
    );
}

#[test]
fn the_manual_describes_every_key() {
    let manual = include_str!("../../docs/configuration.md");
    for key in keys::all() {
        let named = format!("| `[{}] {}` |", key.section, key.name);
        assert!(
            manual.contains(&named),
            "docs/configuration.md has no row {named}"
        );
    }
}

#[test]
fn the_defaults_are_the_key_tables_and_the_clients() {
    // With [http] on, for its keys.
    for config in [
        parse("").unwrap(),
        parse("[http]\nlisten = 127.0.0.1:0\n").unwrap(),
    ] {
        for key in keys::all().filter(|key| key.name != "listen") {
            if let Some(shown) = (key.show)(&config).filter(|shown| !shown.is_empty()) {
                assert_eq!(shown, key.default, "[{}] {}", key.section, key.name);
            }
        }
    }
    let config = parse("").unwrap();
    assert_eq!(
        config.mover.max_attempts,
        delayer_client::DEFAULT_MAX_ATTEMPTS
    );
    assert_eq!(
        config.max_body_bytes,
        delayer_client::DEFAULT_MAX_BODY_BYTES
    );
    assert_eq!(config.max_ttr, delayer_client::DEFAULT_MAX_TTR);
}

#[test]
fn a_bad_value_hides_no_other_problem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a-file"), "").unwrap();
    let file = dir.path().join("many.conf");
    let pid = dir.path().join("a-file/delayer.pid");
    let text = format!(
        "[delayer]\npid = {}\ntimer_intervall = 5\n[redis]\nport = 70000\n[redsi]\nhost = x\n",
        pid.display()
    );
    std::fs::write(&file, text).unwrap();
    let mut reading = Config::read(&file).unwrap();
    reading.errors.extend(reading.config.path_problems());
    let error = reading.into_config().unwrap_err();
    let problems = error.downcast_ref::<Problems>().unwrap();
    let said = [&problems.errors[..], &problems.warnings[..]]
        .concat()
        .join("\n");
    for expected in [
        "[redis] port = \"70000\": expected a whole number from 1 to 65535",
        "[delayer] pid = ",
        "unknown key [delayer] timer_intervall",
        "unknown section [redsi]",
    ] {
        assert!(said.contains(expected), "{expected:?} in {said}");
    }
    assert_eq!(problems.errors.len(), 2, "{said}");
    assert!(
        problems
            .errors
            .iter()
            .all(|error| error.starts_with(&file.display().to_string()))
    );
}

#[test]
fn a_file_that_is_not_ini_is_named_by_a_line_it_has() {
    let message = error_of("[delayer]\ntimer_interval = 5\nnot ini at all\n");
    assert!(
        message.ends_with("test.conf:3: expected key = value, a [section] or a ; comment"),
        "{message}"
    );
    assert!(!message.contains("Some("), "no debug text: {message}");
}
