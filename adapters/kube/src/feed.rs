//! The relist feeder: the one adapter from kube-runtime's `watcher` to [`Change`]s, used by
//! every watch of both binaries.
//!
//! kube-runtime's watcher lists, then watches, and relists after `410 Gone` or a reconnect. A
//! (re)list arrives as `Init`, `InitApply`×n, `InitDone`; the consumer must treat it as the
//! complete set, replacing what it knew (an object deleted while the watch was down appears in
//! no event at all). The feeder folds that sequence into one [`Change::Reset`] carrying the
//! converted complete set, so no consumer writes the accumulator again, nothing is lost or
//! duplicated across a relist, and a relist's memory is the converted items, not the objects.
//!
//! Owns: the relist accumulator and the error log of one watch. Touches nothing else: the
//! consumer decides what a [`Change`] means. Conversion (`convert`) runs once per event; an
//! object it rejects (`None`) is left out of a reset and not applied, and the consumer never
//! sees it.
//!
//! Tested from a plain stream of watcher events, without HTTP (`tests` below).

use futures::{Stream, StreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use std::fmt::{Debug, Display};

/// What one watch event means to a consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<T, K> {
    /// A list (the first, or a relist) completed: the complete set of converted objects, in
    /// list order. Everything known before is replaced.
    Reset(Vec<T>),
    /// An object was added or changed (converted).
    Apply(T),
    /// An object was deleted: its last state as the server reported it.
    Delete(K),
}

/// The relist accumulator: turns watcher events into [`Change`]s, one at a time.
pub struct Relist<K, T, F> {
    convert: F,
    /// `Some` between `Init` and `InitDone`.
    pending: Option<Vec<T>>,
    _kind: std::marker::PhantomData<fn(K)>,
}

impl<K, T, F: FnMut(K) -> Option<T>> Relist<K, T, F> {
    pub fn new(convert: F) -> Self {
        Relist {
            convert,
            pending: None,
            _kind: std::marker::PhantomData,
        }
    }

    /// The change an event completes, if any (`Init` and `InitApply` only accumulate).
    pub fn step(&mut self, ev: Event<K>) -> Option<Change<T, K>> {
        match ev {
            Event::Init => {
                // A relist that restarts before it finished drops its partial set.
                self.pending = Some(Vec::new());
                None
            }
            Event::InitApply(o) => {
                let item = (self.convert)(o);
                // An `InitApply` outside `Init…InitDone` cannot come from kube-runtime; keep
                // it in a set rather than lose it.
                self.pending.get_or_insert_default().extend(item);
                None
            }
            Event::InitDone => Some(Change::Reset(self.pending.take().unwrap_or_default())),
            Event::Apply(o) => (self.convert)(o).map(Change::Apply),
            Event::Delete(o) => Some(Change::Delete(o)),
        }
    }
}

/// The changes of a stream of watcher events. Errors are logged with `what` and skipped: the
/// watcher retries with backoff and the next list is a [`Change::Reset`].
pub fn changes<K, T, F, S>(
    events: S,
    what: impl Display + Send + 'static,
    convert: F,
) -> impl Stream<Item = Change<T, K>> + Send
where
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send,
    F: FnMut(K) -> Option<T> + Send,
    K: Send,
    T: Send,
{
    let mut relist = Relist::new(convert);
    events.filter_map(move |ev| {
        let change = match ev {
            Ok(ev) => relist.step(ev),
            Err(e) => {
                tracing::warn!(error = %e, "{what} watch error; retrying");
                None
            }
        };
        std::future::ready(change)
    })
}

/// Watch `api` with `config` (kube-runtime's watcher with its default backoff) and feed the
/// converted changes.
pub fn watch<K, T, F>(
    api: Api<K>,
    config: watcher::Config,
    what: impl Display + Send + 'static,
    convert: F,
) -> impl Stream<Item = Change<T, K>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    F: FnMut(K) -> Option<T> + Send,
    T: Send,
{
    changes(
        watcher::watcher(api, config).default_backoff(),
        what,
        convert,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream;

    fn err() -> watcher::Error {
        watcher::Error::NoResourceVersion
    }

    async fn run(events: Vec<Result<Event<i32>, watcher::Error>>) -> Vec<Change<i32, i32>> {
        // Odd numbers are objects the conversion rejects.
        changes(stream::iter(events), "test", |o: i32| {
            (o % 2 == 0).then_some(o * 10)
        })
        .collect()
        .await
    }

    #[tokio::test]
    async fn a_list_is_one_reset_of_the_converted_set() {
        let got = run(vec![
            Ok(Event::Init),
            Ok(Event::InitApply(2)),
            Ok(Event::InitApply(3)),
            Ok(Event::InitApply(4)),
            Ok(Event::InitDone),
        ])
        .await;
        assert_eq!(got, vec![Change::Reset(vec![20, 40])]);
    }

    #[tokio::test]
    async fn applies_and_deletes_pass_through_in_order() {
        let got = run(vec![
            Ok(Event::Init),
            Ok(Event::InitDone),
            Ok(Event::Apply(2)),
            Ok(Event::Apply(3)),
            Ok(Event::Delete(3)),
            Ok(Event::Delete(2)),
        ])
        .await;
        assert_eq!(
            got,
            vec![
                Change::Reset(vec![]),
                Change::Apply(20),
                // A rejected object's delete still reaches the consumer (it may have been
                // accepted in an earlier form).
                Change::Delete(3),
                Change::Delete(2),
            ]
        );
    }

    #[tokio::test]
    async fn a_relist_replaces_and_an_interrupted_one_starts_over() {
        let got = run(vec![
            Ok(Event::Init),
            Ok(Event::InitApply(2)),
            Ok(Event::InitDone),
            Ok(Event::Apply(4)),
            // The watch broke: a relist starts, breaks half way, and starts again.
            Err(err()),
            Ok(Event::Init),
            Ok(Event::InitApply(6)),
            Err(err()),
            Ok(Event::Init),
            Ok(Event::InitApply(8)),
            Ok(Event::InitApply(4)),
            Ok(Event::InitDone),
        ])
        .await;
        assert_eq!(
            got,
            vec![
                Change::Reset(vec![20]),
                Change::Apply(40),
                // 6 was only in the abandoned relist; 2 is gone without a delete event.
                Change::Reset(vec![80, 40]),
            ]
        );
    }

    #[tokio::test]
    async fn errors_are_skipped_not_fatal() {
        let got = run(vec![Err(err()), Ok(Event::Apply(2)), Err(err())]).await;
        assert_eq!(got, vec![Change::Apply(20)]);
    }

    #[test]
    fn step_by_step() {
        let mut r = Relist::new(|o: i32| Some(o));
        assert_eq!(r.step(Event::Init), None);
        assert_eq!(r.step(Event::InitApply(1)), None);
        assert_eq!(r.step(Event::InitDone), Some(Change::Reset(vec![1])));
        // A second InitDone without Init is an empty set, never the previous one again.
        assert_eq!(r.step(Event::InitDone), Some(Change::Reset(vec![])));
    }
}
