//! The daemon's integration tests, in one binary: each module tests one part the way users run
//! it, the `delayer` binary and real redis-servers (started per test, on free ports or unix
//! sockets), sentinels, clusters and a browser; `support` holds what they share.

mod support;

mod acl;
mod clock;
mod cluster;
mod compact;
mod compact_cluster;
mod console;
mod console_clicks;
mod consumers;
mod consumers_page;
mod docs;
mod history;
mod hostile_data;
mod http;
mod kafka;
mod legacy_clients;
mod move_script;
mod non_utf8;
mod operator;
mod pause;
mod qstash;
mod redis_trouble;
mod running_as_a_service;
mod schedule_metrics;
mod schedules;
mod schedules_claims;
mod schedules_http;
mod sentinel;
mod service;
mod timer_loop;
mod tls;
mod waiting;
mod webhooks;
