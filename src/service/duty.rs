//! What every background duty (the stagers, the schedules' rounds, the history, the delivery loops,
//! Kafka in) shares: a sleep that a stop cuts short, and its trouble said once when it begins and
//! once when it ends, however many tries fail between.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Sleeps for `wait`, or until `stop` is cancelled: false once it is.
pub async fn sleep_or_stop(wait: Duration, stop: &CancellationToken) -> bool {
    tokio::select! {
        () = tokio::time::sleep(wait) => true,
        () = stop.cancelled() => false,
    }
}

/// Whether a duty's tries fail, so that its caller warns when trouble begins and says when it
/// ends, and not at every try.
#[derive(Debug, Default)]
pub struct Trouble {
    failing: bool,
}

impl Trouble {
    /// A try failed: true when that begins trouble (say so), false while it goes on.
    pub fn failed(&mut self) -> bool {
        !std::mem::replace(&mut self.failing, true)
    }

    /// A try worked: true when that ends trouble (say so).
    pub fn worked(&mut self) -> bool {
        std::mem::replace(&mut self.failing, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trouble_is_said_when_it_begins_and_when_it_ends() {
        let mut trouble = Trouble::default();
        assert!(!trouble.worked(), "no trouble yet");
        assert!(trouble.failed());
        assert!(!trouble.failed(), "said once");
        assert!(trouble.worked());
        assert!(!trouble.worked());
        assert!(trouble.failed(), "again");
    }

    #[tokio::test]
    async fn a_stop_cuts_the_sleep_short() {
        let stop = CancellationToken::new();
        assert!(sleep_or_stop(Duration::from_millis(1), &stop).await);
        stop.cancel();
        let started = std::time::Instant::now();
        assert!(!sleep_or_stop(Duration::from_secs(60), &stop).await);
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
