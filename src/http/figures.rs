//! The figures `/metrics` and the console show, computed once for all their readers: one
//! census of Redis at a time, taken when the last is over a second old, and each page's text
//! made at most once a second or census. A thousand scrapers cost what one does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use delayer_client::Inspector;
use tokio::sync::watch;
use tokio::time::Instant;

use super::census;
use crate::metrics::{Census, Format, Metrics};

/// How old figures may be before a reader asks for new ones.
const MAX_AGE: Duration = Duration::from_secs(1);
/// How long a reader waits for a census under way before it takes the last one. One whose last
/// census took longer takes the last at once: a census of a large registry takes seconds (see
/// `census`), and a scrape must not.
const FRESH_WAIT: Duration = Duration::from_secs(1);

/// The last census taken (or tried), and the pages made from it.
pub struct Figures {
    inspector: Inspector,
    metrics: Arc<Metrics>,
    latest: watch::Sender<Arc<LastCensus>>,
    /// Whether a census is under way.
    taking: AtomicBool,
    /// `/metrics`'s text in each format: OpenMetrics, Prometheus 0.0.4.
    metrics_pages: [Mutex<Option<Page>>; 2],
    overview: Mutex<Option<Page>>,
}

/// The outcome of the latest census.
pub struct LastCensus {
    /// Counts the censuses tried.
    generation: u64,
    /// When it ended; `None` before the first.
    at: Option<Instant>,
    /// How long it took.
    took: Duration,
    /// The last census read whole, this one or an earlier one.
    pub census: Option<Arc<Census>>,
    /// Why this one failed.
    pub error: Option<String>,
}

/// A page's text, as of a reading.
struct Page {
    generation: u64,
    made: Instant,
    text: Bytes,
}

impl Figures {
    pub fn new(inspector: Inspector, metrics: Arc<Metrics>) -> Figures {
        let first = LastCensus {
            generation: 0,
            at: None,
            took: Duration::ZERO,
            census: None,
            error: None,
        };
        Figures {
            inspector,
            metrics,
            latest: watch::Sender::new(Arc::new(first)),
            taking: AtomicBool::new(false),
            metrics_pages: Default::default(),
            overview: Mutex::default(),
        }
    }

    /// The latest reading: a new one if the last is over [`MAX_AGE`] old and one comes within
    /// [`FRESH_WAIT`] (or there is none yet); the census is taken once, whoever else asks
    /// meanwhile.
    pub async fn last_census(self: &Arc<Self>) -> Arc<LastCensus> {
        let mut latest = self.latest.subscribe();
        let reading = latest.borrow_and_update().clone();
        if reading.at.is_some_and(|at| at.elapsed() < MAX_AGE) {
            return reading;
        }
        if !self.taking.swap(true, Ordering::AcqRel) {
            // A task of its own: a reader that goes away does not stop it half way.
            tokio::spawn(self.clone().take(reading.generation + 1));
        }
        let wait = if reading.took < FRESH_WAIT || reading.census.is_none() {
            FRESH_WAIT
        } else {
            Duration::ZERO
        };
        if tokio::time::timeout(wait, latest.changed()).await.is_err() {
            return reading;
        }
        latest.borrow().clone()
    }

    async fn take(self: Arc<Self>, generation: u64) {
        let _taking = Taking(&self.taking);
        let started = Instant::now();
        let own = self.metrics.counted_topics();
        let (listed, listed_schedules) = (self.metrics.listed(), self.metrics.listed_schedules());
        let taken = census::take(&self.inspector, own, listed, listed_schedules).await;
        let last = self.latest.borrow().census.clone();
        let reading = match taken {
            Ok(census) => {
                self.metrics.hold(&census);
                LastCensus {
                    generation,
                    at: Some(Instant::now()),
                    took: started.elapsed(),
                    census: Some(Arc::new(census)),
                    error: None,
                }
            }
            // The console keeps the last census; `/metrics` leaves the holdings out.
            Err(error) => LastCensus {
                generation,
                at: Some(Instant::now()),
                took: started.elapsed(),
                census: last,
                error: Some(error.to_string()),
            },
        };
        self.latest.send_replace(Arc::new(reading));
    }

    /// `/metrics`'s text in `format` as of `reading`: what Redis holds only when this census
    /// read it.
    pub fn metrics_page(&self, reading: &LastCensus, format: Format) -> Bytes {
        let slot = &self.metrics_pages[usize::from(format == Format::Prometheus)];
        let holdings = reading.error.is_none() && reading.census.is_some();
        page(slot, reading, || self.metrics.encode(holdings, format))
    }

    /// The console overview's figures as of `reading`, made by `make`.
    pub fn overview(&self, reading: &LastCensus, make: impl FnOnce() -> String) -> Bytes {
        page(&self.overview, reading, make)
    }
}

/// Says that no census is under way any more when dropped, even by a panic.
struct Taking<'a>(&'a AtomicBool);

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The text in `slot` if it was made from `reading` (or a later one) within [`MAX_AGE`]; else
/// made again by `make` (once: other readers wait for it).
fn page(slot: &Mutex<Option<Page>>, reading: &LastCensus, make: impl FnOnce() -> String) -> Bytes {
    let mut slot = slot.lock().expect("not poisoned");
    if let Some(page) = &*slot
        && (page.generation > reading.generation
            || page.generation == reading.generation && page.made.elapsed() < MAX_AGE)
    {
        return page.text.clone();
    }
    let text = Bytes::from(make());
    *slot = Some(Page {
        generation: reading.generation,
        made: Instant::now(),
        text: text.clone(),
    });
    text
}
