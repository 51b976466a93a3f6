//! Wakes the cluster mover when any master's job pools or reservations are written, and tells
//! which topics' keys they were, so that a job pushed to fall due before the next poll is moved in
//! time (as `wakeup` does for one Redis) and only its topic is polled. A cluster's writes
//! happen on its masters, so each is watched on a connection of its own, connected in the
//! background: a master that hangs must not hold up the loop, which moves the other masters' jobs
//! meanwhile.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use delayer_wire::Target;
use delayer_wire::connection;
use delayer_wire::watch::{Ensured, KeyWatch, Written};
use futures_util::future::select_all;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

use crate::redis::{RedisSettings, node_info};

/// Watches the pools on every master.
pub struct ClusterWatch {
    shared: Arc<Shared>,
    /// The receiver the loop waits on, for each master watched.
    written: HashMap<String, watch::Receiver<u64>>,
    /// The background refresh, while it runs; it tells whether a watch began.
    refreshing: Option<JoinHandle<bool>>,
}

/// What the background refresh and the loop share.
struct Shared {
    redis: RedisSettings,
    masters: Mutex<Vec<(String, Arc<KeyWatch>)>>,
    /// The masters whose watch was working at the last refresh.
    watching: Mutex<HashSet<String>>,
    /// Said once: this cluster cannot report writes.
    said_unsupported: AtomicBool,
}

impl ClusterWatch {
    pub fn new(redis: &RedisSettings) -> ClusterWatch {
        ClusterWatch {
            shared: Arc::new(Shared {
                redis: redis.clone(),
                masters: Mutex::new(Vec::new()),
                watching: Mutex::new(HashSet::new()),
                said_unsupported: AtomicBool::new(false),
            }),
            written: HashMap::new(),
            refreshing: None,
        }
    }

    /// Starts, in the background, watching each of `masters` not watched yet (and no longer
    /// the others), unless that is under way already. Returns at once.
    pub fn ensure(&mut self, masters: Vec<String>) {
        if self
            .refreshing
            .as_ref()
            .is_some_and(|refresh| !refresh.is_finished())
        {
            return;
        }
        let shared = self.shared.clone();
        self.refreshing = Some(tokio::spawn(async move { shared.refresh(masters).await }));
    }

    /// Takes the writes so far: the keys written on every master watched, and `any` when a
    /// watch began (writes made before it are not known) or lost some.
    pub fn take_written(&mut self) -> Written {
        let began = self.subscribe_new();
        for written in self.written.values_mut() {
            written.mark_unchanged();
        }
        let mut all = Written {
            any: began,
            ..Written::default()
        };
        for (_, watch) in self.shared.masters.lock().expect("not poisoned").iter() {
            let written = watch.take_written();
            all.any |= written.any;
            all.keys.extend(written.keys);
        }
        all
    }

    /// Whether writes are reported from each of `masters`: then a topic nobody wrote to needs
    /// no poll.
    pub fn watches_all(&self, masters: &[String]) -> bool {
        let watching = self.shared.watching.lock().expect("not poisoned");
        !masters.is_empty() && masters.iter().all(|master| watching.contains(master))
    }

    /// Completes when a pool or reservations key was written on any master since the last
    /// [`take_written`](Self::take_written), or when a watch began (writes made before it did
    /// are looked for that way).
    pub async fn written(&mut self) {
        if self.subscribe_new() {
            return;
        }
        let refreshed = async {
            let began = match &mut self.refreshing {
                Some(refresh) => refresh.await.unwrap_or(false),
                None => false,
            };
            self.refreshing = None;
            if !began {
                // Nothing to look for: wait for writes alone.
                std::future::pending::<()>().await;
            }
        };
        let changed = async {
            if self.written.is_empty() {
                return std::future::pending().await;
            }
            let changes = self
                .written
                .values_mut()
                .map(|written| Box::pin(written.changed()));
            if select_all(changes).await.0.is_err() {
                // Cannot happen (each watch owns its sender); never wake for it.
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = refreshed => {}
            () = changed => {}
        }
    }

    /// Waits on the masters watched since the last call too, and forgets those no longer
    /// listed; true when there are new ones.
    fn subscribe_new(&mut self) -> bool {
        let masters = self.shared.masters.lock().expect("not poisoned").clone();
        self.written
            .retain(|address, _| masters.iter().any(|(known, _)| known == address));
        let mut new = false;
        for (address, watch) in masters {
            self.written.entry(address).or_insert_with(|| {
                new = true;
                watch.subscribe()
            });
        }
        new
    }
}

impl Shared {
    /// Watches the `listed` masters; true when a watch began (on a master not watched before,
    /// or again after it was lost).
    async fn refresh(&self, listed: Vec<String>) -> bool {
        {
            let mut masters = self.masters.lock().expect("not poisoned");
            masters.retain(|(address, _)| listed.contains(address));
            for address in listed {
                let watched = masters.iter().any(|(known, _)| *known == address);
                if !watched && let Some(watch) = self.watch(&address) {
                    masters.push((address, Arc::new(watch)));
                }
            }
        }
        let masters = self.masters.lock().expect("not poisoned").clone();
        // Side by side: one master that hangs must not keep the others unwatched.
        let ensured = masters.iter().map(|(_, watch)| watch.ensure());
        let ensured = futures_util::future::join_all(ensured).await;
        let mut watching = self.watching.lock().expect("not poisoned");
        let mut began = false;
        for ((address, _), ensured) in masters.iter().zip(ensured) {
            if matches!(ensured, Ensured::Watching) {
                began |= watching.insert(address.clone());
            } else {
                watching.remove(address);
            }
            match ensured {
                Ensured::Unsupported(Some(refusal))
                    if !self.said_unsupported.swap(true, Ordering::Relaxed) =>
                {
                    info!(
                        "Jobs pushed to fall due sooner than the loop's next look wait up to \
                         timer_interval: Redis at {address} cannot report writes to job pools \
                         ({refusal}; CLIENT TRACKING needs Redis 6)"
                    );
                }
                // Tried again at the next poll.
                _ => {}
            }
        }
        began
    }

    fn watch(&self, address: &str) -> Option<KeyWatch> {
        let node = node_info(&self.redis, address).ok()?;
        let layout = self.redis.layout;
        let (pools, reservations) = (layout.topic_pools()?, layout.topic_reservations()?);
        let watch = KeyWatch::new(Target::from(node), connection::config(), &pools.prefix);
        Some(
            watch
                .only_ending_with(&pools.suffix)
                .only_ending_with(&reservations.suffix),
        )
    }
}
