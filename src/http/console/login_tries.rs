//! Login tries, counted per client address and in all, so that guessing the token is slow: a few
//! tries from an address are free, then one more every few seconds; all addresses together get
//! a few dozen, then one a second. A refused try is answered at once (429, with the wait), and
//! once the guessing stops the operator waits seconds at most. Counted in this process alone:
//! several daemons behind one load balancer each allow as many.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Tries from one address: this many at once, then one more each `every`.
const PER_ADDRESS: Rate = Rate {
    burst: 5.0,
    every: Duration::from_secs(5),
};
/// Tries from all addresses together (a guesser with many addresses).
const IN_ALL: Rate = Rate {
    burst: 50.0,
    every: Duration::from_secs(1),
};
/// Addresses counted at most; those whose tries are all back are forgotten first.
const ADDRESSES_KEPT: usize = 10_000;

/// How many tries there are, and how fast they come back.
struct Rate {
    burst: f64,
    every: Duration,
}

/// The tries left as of a moment (a token bucket).
#[derive(Clone, Copy)]
struct Tries {
    left: f64,
    at: Instant,
}

impl Tries {
    fn full(now: Instant, rate: &Rate) -> Tries {
        Tries {
            left: rate.burst,
            at: now,
        }
    }

    /// The tries left at `now`.
    fn at(self, now: Instant, rate: &Rate) -> Tries {
        let back = now.saturating_duration_since(self.at).as_secs_f64() / rate.every.as_secs_f64();
        Tries {
            left: (self.left + back).min(rate.burst),
            at: now,
        }
    }

    /// How long until a try is back, if none is left.
    fn wait(self, rate: &Rate) -> Option<Duration> {
        (self.left < 1.0).then(|| rate.every.mul_f64(1.0 - self.left))
    }
}

/// Why a login is not tried now, and how long until it would be.
pub enum Throttled {
    /// Too many failed tries from this address.
    Address(Duration),
    /// Too many failed tries from all addresses together.
    InAll(Duration),
}

/// The tries of every address, and of all together.
pub struct LoginTries {
    state: Mutex<State>,
}

struct State {
    in_all: Tries,
    by_address: HashMap<IpAddr, Tries>,
}

impl LoginTries {
    pub fn new(now: Instant) -> LoginTries {
        LoginTries {
            state: Mutex::new(State {
                in_all: Tries::full(now, &IN_ALL),
                by_address: HashMap::new(),
            }),
        }
    }

    /// Takes a try for a login from `address` at `now`, before the token is compared (so that
    /// any number sent at once is counted), or says why not. A login that succeeds gives it back
    /// ([`LoginTries::succeeded`]).
    pub fn take(&self, address: IpAddr, now: Instant) -> Result<(), Throttled> {
        let mut state = self.state.lock().expect("not poisoned");
        let address = counted_as(address);
        let mine = state
            .by_address
            .get(&address)
            .map_or(Tries::full(now, &PER_ADDRESS), |tries| {
                tries.at(now, &PER_ADDRESS)
            });
        if let Some(wait) = mine.wait(&PER_ADDRESS) {
            return Err(Throttled::Address(wait));
        }
        let in_all = state.in_all.at(now, &IN_ALL);
        if let Some(wait) = in_all.wait(&IN_ALL) {
            return Err(Throttled::InAll(wait));
        }
        state.in_all = Tries {
            left: in_all.left - 1.0,
            ..in_all
        };
        if state.by_address.len() >= ADDRESSES_KEPT {
            let counting = |tries: &Tries| tries.at(now, &PER_ADDRESS).left < PER_ADDRESS.burst;
            state.by_address.retain(|_, tries| counting(tries));
        }
        // Beyond that many guessers at once, the count in all alone holds them.
        if state.by_address.len() < ADDRESSES_KEPT || state.by_address.contains_key(&address) {
            let left = mine.left - 1.0;
            state.by_address.insert(address, Tries { left, ..mine });
        }
        Ok(())
    }

    /// A login from `address` succeeded: its tries are all back.
    pub fn succeeded(&self, address: IpAddr) {
        let mut state = self.state.lock().expect("not poisoned");
        state.by_address.remove(&counted_as(address));
        state.in_all.left = (state.in_all.left + 1.0).min(IN_ALL.burst);
    }
}

/// The address `address` is counted as: an IPv6 one by its /64 network, which one user usually
/// holds whole; an IPv4 one mapped into IPv6 as itself.
fn counted_as(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::{LoginTries, Throttled};
    use std::net::IpAddr;
    use std::time::Duration;
    use tokio::time::Instant;

    fn address(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn an_address_gets_five_tries_then_one_every_five_seconds_and_all_back_on_success() {
        let now = Instant::now();
        let tries = LoginTries::new(now);
        let guesser = address("10.0.0.1");
        for _ in 0..5 {
            assert!(tries.take(guesser, now).is_ok());
        }
        match tries.take(guesser, now) {
            Err(Throttled::Address(wait)) => assert_eq!(wait, Duration::from_secs(5)),
            _ => panic!("a sixth try at once"),
        }
        // Another address is not held up; one more try is back after 5 s, and only one.
        assert!(tries.take(address("10.0.0.2"), now).is_ok());
        let later = now + Duration::from_secs(5);
        assert!(tries.take(guesser, later).is_ok());
        assert!(tries.take(guesser, later).is_err());
        tries.succeeded(guesser);
        assert!(tries.take(guesser, later).is_ok());
    }

    #[test]
    fn all_addresses_together_get_fifty_tries_then_one_a_second() {
        let now = Instant::now();
        let tries = LoginTries::new(now);
        for n in 0..50u32 {
            let from = IpAddr::from(std::net::Ipv4Addr::from(0x0a01_0000 + n));
            assert!(tries.take(from, now).is_ok(), "{n}");
        }
        let another = address("10.2.0.1");
        assert!(matches!(tries.take(another, now), Err(Throttled::InAll(_))));
        assert!(tries.take(another, now + Duration::from_secs(1)).is_ok());
    }

    #[test]
    fn an_ipv6_network_counts_as_one_address() {
        let now = Instant::now();
        let tries = LoginTries::new(now);
        for n in 0..5 {
            assert!(tries.take(address(&format!("2001:db8::{n}")), now).is_ok());
        }
        assert!(tries.take(address("2001:db8::ffff:1"), now).is_err());
        assert!(tries.take(address("2001:db8:0:1::1"), now).is_ok());
        assert!(tries.take(address("::ffff:10.0.0.9"), now).is_ok());
    }
}
