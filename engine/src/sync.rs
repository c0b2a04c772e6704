//! Synchronisation shim. Every primitive that takes part in one of the engine's concurrent
//! protocols (bind-version counters, snapshot publication, worker epochs, the queue hand-off,
//! the stop flag) is imported from here, so that `RUSTFLAGS="--cfg loom"` swaps in loom's
//! model-checked versions and the loom models in `loom-tests/` exercise the real engine code.
//!
//! Immutable data (snapshot chunks, compiled pods) uses `std::sync::Arc` directly: it is shared,
//! never mutated in place, and not part of any protocol loom needs to explore.

#[cfg(not(loom))]
pub use std::sync::Arc as SyncArc;
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

#[cfg(loom)]
pub use loom::sync::Arc as SyncArc;
#[cfg(loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

use std::sync::Arc;

/// A cell holding the current value of something published by one writer and read by many
/// (the snapshot). Reading is one lock-free load; publishing swaps the pointer.
///
/// Production uses `arc-swap`; under loom the cell is a loom `Mutex<Arc<T>>` so the model checker
/// can explore the interleavings of publication against readers.
pub struct Published<T> {
    #[cfg(not(loom))]
    cell: arc_swap::ArcSwap<T>,
    #[cfg(loom)]
    cell: loom::sync::Mutex<Arc<T>>,
}

impl<T> Published<T> {
    pub fn new(value: Arc<T>) -> Self {
        Self {
            #[cfg(not(loom))]
            cell: arc_swap::ArcSwap::new(value),
            #[cfg(loom)]
            cell: loom::sync::Mutex::new(value),
        }
    }

    /// Take the current value: O(1), lock-free outside loom.
    pub fn load(&self) -> Arc<T> {
        #[cfg(not(loom))]
        {
            self.cell.load_full()
        }
        #[cfg(loom)]
        {
            self.cell.lock().unwrap().clone()
        }
    }

    /// Replace the current value. Readers that already hold the old value keep it alive.
    pub fn store(&self, value: Arc<T>) {
        #[cfg(not(loom))]
        {
            self.cell.store(value)
        }
        #[cfg(loom)]
        {
            *self.cell.lock().unwrap() = value;
        }
    }
}

/// The bounded multi-producer multi-consumer hand-off from the queue owner to the workers.
///
/// Outside loom this is a bounded `crossbeam-channel` (lock-free array queue; a receiver only
/// parks when the queue is empty). Under loom it is a small loom-mutex-protected ring so models
/// can interleave pushes, pops and deletes; blocking receive is not modelled.
pub struct HandOff<T> {
    #[cfg(not(loom))]
    tx: crossbeam_channel::Sender<T>,
    #[cfg(not(loom))]
    rx: crossbeam_channel::Receiver<T>,
    #[cfg(loom)]
    ring: SyncArc<loom::sync::Mutex<std::collections::VecDeque<T>>>,
    capacity: usize,
}

impl<T> Clone for HandOff<T> {
    fn clone(&self) -> Self {
        Self {
            #[cfg(not(loom))]
            tx: self.tx.clone(),
            #[cfg(not(loom))]
            rx: self.rx.clone(),
            #[cfg(loom)]
            ring: self.ring.clone(),
            capacity: self.capacity,
        }
    }
}

impl<T> HandOff<T> {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        #[cfg(not(loom))]
        {
            let (tx, rx) = crossbeam_channel::bounded(capacity);
            Self { tx, rx, capacity }
        }
        #[cfg(loom)]
        {
            Self {
                ring: SyncArc::new(loom::sync::Mutex::new(std::collections::VecDeque::new())),
                capacity,
            }
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn len(&self) -> usize {
        #[cfg(not(loom))]
        {
            self.rx.len()
        }
        #[cfg(loom)]
        {
            self.ring.lock().unwrap().len()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Offer an item; gives it back when the hand-off is full.
    pub fn try_push(&self, item: T) -> Result<(), T> {
        #[cfg(not(loom))]
        {
            self.tx.try_send(item).map_err(|e| e.into_inner())
        }
        #[cfg(loom)]
        {
            let mut ring = self.ring.lock().unwrap();
            if ring.len() >= self.capacity {
                return Err(item);
            }
            ring.push_back(item);
            Ok(())
        }
    }

    /// Take an item if one is ready.
    pub fn try_pop(&self) -> Option<T> {
        #[cfg(not(loom))]
        {
            self.rx.try_recv().ok()
        }
        #[cfg(loom)]
        {
            self.ring.lock().unwrap().pop_front()
        }
    }

    /// Wait for an item (workers) until `stop` disconnects: `None` then. A worker with nothing
    /// to do sleeps until there is, with no timer to wake it meanwhile (a 20 ms poll cost an idle
    /// scheduler a wake-up, a spin and four `sched_yield`s per worker each time).
    #[cfg(not(loom))]
    pub fn pop_until(
        &self,
        stop: &crossbeam_channel::Receiver<std::convert::Infallible>,
    ) -> Option<T> {
        if let Ok(item) = self.rx.try_recv() {
            return Some(item);
        }
        crossbeam_channel::select! {
            recv(self.rx) -> item => item.ok(),
            recv(stop) -> _ => None,
        }
    }
}
