//! Finishing a reservation: ack (done), nack (failed, try again later), give back (untried),
//! touch (more time).

use std::borrow::Cow;
use std::collections::HashSet;
use std::time::Duration;

use super::{Client, check_id};
use crate::error::{Error, Result};
use crate::job::Receipt;
use crate::settings::{MAX_BATCH, MAX_DELAY};
use delayer_wire::history::field;
use delayer_wire::keys::Keys;
use delayer_wire::name::{JobId, Topic};
use delayer_wire::scripts::Named;
use delayer_wire::scripts::ack::Outcome;
use delayer_wire::scripts::release::Released;

/// What an ack did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acked {
    /// The reservation was current: the job is finished, never delivered again.
    Done,
    /// Its time to run had passed (or it was nacked), but nothing happened to the job since:
    /// finished all the same.
    Late,
    /// Stale: the job was reserved again since (by another consumer, perhaps running it now),
    /// pushed again or requeued. Nothing changed.
    Stale,
}

/// What became of a nacked (or given back) job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nacked {
    /// Back in the pool, due again after the delay given (or at the time it was pushed again
    /// for, when it was pushed again while reserved).
    Retry,
    /// It had been reserved `max_attempts` times: on its topic's dead list.
    Dead,
    /// Its data had expired meanwhile: nothing left to deliver.
    Gone,
}

/// What the release of one reservation of job `id` did.
fn released_as(id: JobId, released: &Released) -> Result<Nacked> {
    if released.token_needed {
        Err(Error::TokenNeeded(id))
    } else if released.ended == 0 {
        Err(Error::NotReserved(id))
    } else if !released.dead.is_empty() {
        Ok(Nacked::Dead)
    } else if !released.dropped.is_empty() {
        Ok(Nacked::Gone)
    } else {
        Ok(Nacked::Retry)
    }
}

impl Client {
    /// Finishes a reserved job: it is deleted and never delivered again. Names the reservation
    /// (`client.ack(&job)`): a stale one changes nothing (see [`Acked`]). An error when there is
    /// no such job, or when a receipt without a token cannot name one reservation
    /// ([`Error::TokenNeeded`]).
    pub async fn ack(&self, reservation: impl Into<Receipt>) -> Result<Acked> {
        let mut acked = self.ack_many([reservation]).await;
        acked.pop().expect("one result a reservation")
    }

    /// Acks several reservations in one round trip (in the cluster layout, one a topic), as
    /// [`ack`](Client::ack) acks one: what each ack did, in order. Each has its own result: one
    /// that fails (a bad id, a topic whose keys are broken) does not keep the others from being
    /// acked.
    pub async fn ack_many<R: Into<Receipt>>(
        &self,
        reservations: impl IntoIterator<Item = R>,
    ) -> Vec<Result<Acked>> {
        self.ack_keeping(reservations, None).await
    }

    /// Acks as [`ack_many`](Client::ack_many) does, but with `keep` the finished jobs' data stays
    /// readable by [`get`](Client::get) that long (state [`Delivered`](crate::State::Delivered)):
    /// for jobs handed on by their id alone, as the daemon's Kafka link does.
    pub async fn ack_keeping<R: Into<Receipt>>(
        &self,
        reservations: impl IntoIterator<Item = R>,
        keep: Option<Duration>,
    ) -> Vec<Result<Acked>> {
        let reservations: Vec<Receipt> = reservations.into_iter().map(Into::into).collect();
        let mut acked: Vec<Result<Acked>> = reservations
            .iter()
            .map(|reservation| Err(Error::UnknownJob(reservation.id.clone())))
            .collect();
        // The reservations of each topic's keys (all of them but in the cluster layout).
        let mut groups: Vec<(Cow<'_, Keys>, Vec<usize>)> = Vec::new();
        let mut named = HashSet::new();
        for (index, reservation) in reservations.iter().enumerate() {
            let keys = match check_id(reservation.id.as_bytes()) {
                Ok(()) => {
                    self.keys_of(reservation.id.as_bytes(), reservation.topic.as_ref())
                        .await
                }
                Err(error) => Err(error),
            };
            match keys {
                // A job named again (under the same keys) is acked once: its second ack would
                // find the job lapsed, and finish it even if it was pushed again after the first
                // ended the reservation.
                Ok(Some(keys)) if !named.insert((&reservation.id, keys.pool().to_string())) => {}
                Ok(Some(keys)) => match groups.iter_mut().find(|(known, _)| *known == keys) {
                    Some((_, members)) => members.push(index),
                    None => groups.push((keys, vec![index])),
                },
                Ok(None) => {}
                Err(error) => acked[index] = Err(error),
            }
        }
        if groups.is_empty() {
            return acked;
        }
        let mut connection = match self.connection().await {
            Ok(connection) => connection,
            Err(error) => {
                for &index in groups.iter().flat_map(|(_, members)| members) {
                    acked[index] = Err(error.clone().into());
                }
                return acked;
            }
        };
        for (keys, members) in &groups {
            for members in members.chunks(MAX_BATCH) {
                let named: Vec<(&[u8], u32, &str)> = members
                    .iter()
                    .map(|&index| {
                        let Receipt {
                            id, attempt, token, ..
                        } = &reservations[index];
                        (id.as_bytes(), *attempt, token.as_deref().unwrap_or(""))
                    })
                    .collect();
                let codes = self
                    .inner
                    .scripts
                    .ack
                    .run(&mut connection, keys, &named, keep)
                    .await
                    .map_err(|error| Error::about_key(error, keys.pool()));
                match codes {
                    Ok(codes) => {
                        // In the cluster layout the keys name the topic a receipt may not.
                        let of_keys = keys
                            .per_topic()
                            .then(|| Topic::from(keys.topic_for_scripts()));
                        let finished = members
                            .iter()
                            .zip(&codes)
                            .filter(|(_, code)| matches!(code, Outcome::Done | Outcome::Late))
                            .map(|(&index, _)| {
                                reservations[index].topic.as_ref().or(of_keys.as_ref())
                            });
                        self.counted(field::ACKED, finished);
                        for (&index, code) in members.iter().zip(codes) {
                            let id = || reservations[index].id.clone();
                            acked[index] = match code {
                                Outcome::Done => Ok(Acked::Done),
                                Outcome::Late => Ok(Acked::Late),
                                Outcome::Stale => Ok(Acked::Stale),
                                Outcome::Unknown => Err(Error::UnknownJob(id())),
                                Outcome::TokenNeeded => Err(Error::TokenNeeded(id())),
                            };
                        }
                    }
                    Err(error) => {
                        for &index in members {
                            acked[index] = Err(error.clone());
                        }
                    }
                }
            }
        }
        acked
    }

    /// Gives a reserved job back after a failed attempt, to be delivered again after
    /// `retry_in`, or, when it was reserved `max_attempts` times, sent to its topic's dead list.
    /// An error when that reservation is not current (its time ran out first), or when a receipt
    /// without a token cannot name one reservation ([`Error::TokenNeeded`]).
    pub async fn nack(
        &self,
        reservation: impl Into<Receipt>,
        retry_in: Duration,
    ) -> Result<Nacked> {
        self.release(reservation.into(), true, retry_in).await
    }

    /// Gives a reserved job back untried (a consumer that stops before running it): due again at
    /// once, and the attempt not counted, so it never goes to the dead list for it.
    pub async fn give_back(&self, reservation: impl Into<Receipt>) -> Result<Nacked> {
        self.release(reservation.into(), false, Duration::ZERO)
            .await
    }

    /// Sends a reserved job to its topic's dead list at once, whatever its attempts, with `why`
    /// (shown by `get`, `delayer dead` and the console): for a job that can never be delivered,
    /// as one Kafka refuses. An error when that reservation is not current.
    pub async fn bury(&self, reservation: impl Into<Receipt>, why: &str) -> Result<Nacked> {
        let reservation = reservation.into();
        let keys = self.reserved_keys(&reservation).await?;
        let Receipt {
            id, attempt, token, ..
        } = reservation;
        let receipt = (attempt, token.as_deref().unwrap_or(""));
        let released = self
            .inner
            .scripts
            .release
            .bury(
                &mut self.connection().await?,
                &keys,
                id.as_bytes(),
                receipt,
                why,
            )
            .await
            .map_err(|error| Error::about_key(error, keys.reserved()))?;
        released_as(id, &released)
    }

    async fn release(
        &self,
        reservation: Receipt,
        counted: bool,
        retry_in: Duration,
    ) -> Result<Nacked> {
        let Receipt {
            id,
            attempt,
            token,
            topic,
        } = reservation;
        check_id(id.as_bytes())?;
        if retry_in > MAX_DELAY {
            return Err(Error::TooFar(retry_in.as_secs_f64()));
        }
        let Some(keys) = self.keys_of(id.as_bytes(), topic.as_ref()).await? else {
            return Err(Error::NotReserved(id));
        };
        let released = self
            .inner
            .scripts
            .release
            .one(
                &mut self.connection().await?,
                &keys,
                id.as_bytes(),
                (attempt, token.as_deref().unwrap_or("")),
                counted,
                retry_in.as_secs_f64(),
                // Bounded as a push's delay is: the TTL must stay a number Redis takes.
                self.inner
                    .settings
                    .ready_max_lifetime
                    .min(MAX_DELAY)
                    .as_secs_f64(),
                self.inner.settings.max_attempts,
            )
            .await
            .map_err(|error| Error::about_key(error, keys.reserved()))?;
        released_as(id, &released)
    }

    /// Extends a reservation: the job must be acked within `ttr` (at least
    /// [`MIN_TTR`](crate::MIN_TTR), at most [`Settings::max_ttr`](crate::Settings::max_ttr))
    /// from now. An error when that reservation is not current, or
    /// when a receipt without a token cannot name one ([`Error::TokenNeeded`]).
    pub async fn touch(&self, reservation: impl Into<Receipt>, ttr: Duration) -> Result<()> {
        let reservation = reservation.into();
        let keys = self.reserved_keys(&reservation).await?;
        let Receipt {
            id, attempt, token, ..
        } = reservation;
        let ttr = self.checked_ttr(ttr)?;
        let touched = self
            .inner
            .scripts
            .touch
            .run(
                &mut self.connection().await?,
                &keys,
                id.as_bytes(),
                (attempt, token.as_deref().unwrap_or("")),
                ttr,
            )
            .await
            .map_err(|error| Error::about_key(error, keys.reserved()))?;
        match touched {
            Named::Current => Ok(()),
            Named::NotCurrent => Err(Error::NotReserved(id)),
            Named::TokenNeeded => Err(Error::TokenNeeded(id)),
        }
    }

    /// The keys of the job `reservation` names (its id checked first), or
    /// [`Error::NotReserved`] when none can be found.
    async fn reserved_keys(&self, reservation: &Receipt) -> Result<Cow<'_, Keys>> {
        let id = &reservation.id;
        check_id(id.as_bytes())?;
        self.keys_of(id.as_bytes(), reservation.topic.as_ref())
            .await?
            .ok_or_else(|| Error::NotReserved(id.clone()))
    }
}
