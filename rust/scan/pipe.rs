//! The hand-over between a scan's producer thread and the scan object: a bounded queue of
//! batches that either side can end, and the register of a store's open scans, which closing
//! the store ends and waits for.
//!
//! The queue holds at most [`CAPACITY`] batches. With the batch the producer is building and the
//! one the consumer last took, a scan holds `CAPACITY + 2` batches at most, whatever its size,
//! and the producer reads the next batch while the consumer works on the previous one.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};

use arrow_array::RecordBatch;

use crate::error::{Error, Result};

/// Batches waiting for the consumer.
pub(crate) const CAPACITY: usize = 1;

/// What the producer hands over.
pub(crate) type Item = Result<RecordBatch>;

/// Who ended a scan before its producer finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Nobody: the scan runs.
    No,
    /// The scan object was closed or dropped.
    ByConsumer,
    /// The store was closed.
    ByStore,
}

struct Shared {
    queue: VecDeque<Item>,
    /// The producer took its snapshot.
    started: bool,
    /// The producer sent its last item.
    finished: bool,
    ended: Ended,
}

/// What the consumer gets.
#[derive(Debug)]
pub(crate) enum Received {
    Item(Item),
    /// The producer sent everything.
    Finished,
    /// The store was closed before the producer finished.
    StoreClosed,
}

/// A bounded queue between one producer and one consumer.
pub(crate) struct Pipe {
    shared: Mutex<Shared>,
    changed: Condvar,
    /// `shared.ended != No`, readable without the lock (checked once per key by the producer).
    ended: AtomicBool,
}

impl Pipe {
    pub(crate) fn new() -> Self {
        Self {
            shared: Mutex::new(Shared {
                queue: VecDeque::with_capacity(CAPACITY),
                started: false,
                finished: false,
                ended: Ended::No,
            }),
            changed: Condvar::new(),
            ended: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'g>(&self, guard: MutexGuard<'g, Shared>) -> MutexGuard<'g, Shared> {
        self.changed
            .wait(guard)
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Producer: queues `item`, waiting for room. `false` when the scan was ended: stop.
    pub(crate) fn send(&self, item: Item) -> bool {
        let mut shared = self.lock();
        while shared.queue.len() >= CAPACITY && shared.ended == Ended::No {
            shared = self.wait(shared);
        }
        if shared.ended != Ended::No {
            return false;
        }
        shared.queue.push_back(item);
        self.changed.notify_all();
        true
    }

    /// Producer: whether the scan was ended (stop producing).
    pub(crate) fn is_ended(&self) -> bool {
        self.ended.load(Ordering::Relaxed)
    }

    /// Producer: the snapshot is taken; the scan may be handed to its caller.
    pub(crate) fn mark_started(&self) {
        self.lock().started = true;
        self.changed.notify_all();
    }

    /// Producer: nothing more will come. `error` is queued first, whatever the room.
    fn mark_finished(&self, error: Option<Error>) {
        let mut shared = self.lock();
        if let Some(error) = error {
            shared.queue.push_back(Err(error));
        }
        shared.started = true;
        shared.finished = true;
        self.changed.notify_all();
    }

    /// Consumer: waits until the producer has its snapshot (or has stopped).
    pub(crate) fn wait_started(&self) {
        let mut shared = self.lock();
        while !shared.started {
            shared = self.wait(shared);
        }
    }

    /// Consumer: the next item, waiting for the producer.
    pub(crate) fn recv(&self) -> Received {
        let mut shared = self.lock();
        loop {
            if shared.ended == Ended::ByStore {
                return Received::StoreClosed;
            }
            if let Some(item) = shared.queue.pop_front() {
                self.changed.notify_all();
                return Received::Item(item);
            }
            if shared.finished {
                return Received::Finished;
            }
            shared = self.wait(shared);
        }
    }

    /// Ends the scan: the producer stops at its next key, queued batches are dropped.
    fn end(&self, by: Ended) {
        let mut shared = self.lock();
        if shared.ended == Ended::No {
            shared.ended = by;
        }
        shared.queue.clear();
        self.ended.store(true, Ordering::Relaxed);
        self.changed.notify_all();
    }

    /// Consumer: ends the scan (closed or dropped).
    pub(crate) fn end_by_consumer(&self) {
        self.end(Ended::ByConsumer);
    }
}

/// The scans of one store whose producers may still run.
#[derive(Default)]
pub(crate) struct OpenScans {
    register: Arc<Register>,
}

#[derive(Default)]
struct Register {
    state: Mutex<RegisterState>,
    exited: Condvar,
}

#[derive(Default)]
struct RegisterState {
    pipes: Vec<Weak<Pipe>>,
    /// Producers that have not exited.
    running: usize,
}

impl Register {
    fn lock(&self) -> MutexGuard<'_, RegisterState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl OpenScans {
    /// Registers the producer of a new scan; the guard it returns must live on the producer's
    /// thread until the producer let go of the store's data.
    pub(crate) fn register(&self, pipe: &Arc<Pipe>) -> Producer {
        let mut state = self.register.lock();
        state.pipes.retain(|p| p.strong_count() > 0);
        state.pipes.push(Arc::downgrade(pipe));
        state.running += 1;
        Producer {
            register: Arc::clone(&self.register),
            pipe: Arc::clone(pipe),
        }
    }

    /// Whether a scan's producer may still read the store's data (its snapshot).
    pub(crate) fn any_running(&self) -> bool {
        self.register.lock().running > 0
    }

    /// Proof that no scan reads the store's data now, or `None` while one may.
    pub(crate) fn none_open(&self) -> Option<NoScanOpen<'_>> {
        (!self.any_running()).then_some(NoScanOpen {
            _scans: PhantomData,
        })
    }

    /// Ends every open scan (their consumers get `Error::Closed`) and waits until every
    /// producer has exited, so that nothing reads the store's data any more.
    pub(crate) fn close(&self) {
        let mut state = self.register.lock();
        for pipe in state.pipes.drain(..).filter_map(|p| p.upgrade()) {
            pipe.end(Ended::ByStore);
        }
        while state.running > 0 {
            state = self
                .register
                .exited
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// That no scan of a store reads its data ([`OpenScans::none_open`]), for as long as it lives: a
/// scan starts only through the store borrowed mutably, and this borrows the store's register, so
/// none can start meanwhile (one that ends changes nothing). What must not happen under an open
/// scan (the TTL horizon's move: `store/expiry.rs`) takes it.
pub(crate) struct NoScanOpen<'a> {
    _scans: PhantomData<&'a OpenScans>,
}

/// Held by a producer thread while it runs; dropping it (also when the thread panics) marks the
/// scan finished and tells the register.
pub(crate) struct Producer {
    register: Arc<Register>,
    pipe: Arc<Pipe>,
}

impl Drop for Producer {
    fn drop(&mut self) {
        // A panic is a bug; the consumer must not take the truncated scan for a whole one.
        let error = std::thread::panicking().then(|| Error::Io {
            path: std::path::PathBuf::new(),
            source: std::io::Error::other("the scan's thread panicked"),
        });
        self.pipe.mark_finished(error);
        let mut state = self.register.lock();
        state.running -= 1;
        self.register.exited.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(rows: i64) -> Item {
        let column: arrow_array::ArrayRef =
            Arc::new(arrow_array::Int64Array::from_iter_values(0..rows));
        RecordBatch::try_from_iter([("n", column)])
            .map_err(|e| Error::corrupt("test", e.to_string()))
    }

    /// A pipe, its register, and a producer thread registered on it that runs `produce`.
    fn produce<T: Send + 'static>(
        produce: impl FnOnce(&Pipe) -> T + Send + 'static,
    ) -> (Arc<Pipe>, OpenScans, std::thread::JoinHandle<T>) {
        let pipe = Arc::new(Pipe::new());
        let scans = OpenScans::default();
        let producer = scans.register(&pipe);
        let thread = std::thread::spawn({
            let pipe = Arc::clone(&pipe);
            move || {
                let _producer = producer;
                produce(&pipe)
            }
        });
        (pipe, scans, thread)
    }

    fn rows(received: Received) -> Option<usize> {
        match received {
            Received::Item(Ok(batch)) => Some(batch.num_rows()),
            _ => None,
        }
    }

    #[test]
    fn hands_over_in_order_with_bounded_room() {
        let (pipe, _scans, thread) = produce(|pipe| {
            pipe.mark_started();
            for n in 1..=5 {
                assert!(pipe.send(batch(n)));
            }
        });
        pipe.wait_started();
        for n in 1..=5 {
            assert_eq!(rows(pipe.recv()), Some(n));
            assert!(pipe.lock().queue.len() <= CAPACITY);
        }
        assert!(matches!(pipe.recv(), Received::Finished));
        thread.join().expect("the producer");
    }

    #[test]
    fn a_consumer_end_stops_a_blocked_producer() {
        let (pipe, scans, thread) = produce(|pipe| {
            let mut sent = 0;
            while pipe.send(batch(1)) {
                sent += 1;
            }
            sent
        });
        while pipe.lock().queue.len() < CAPACITY {
            std::thread::yield_now();
        }
        pipe.end_by_consumer();
        assert_eq!(thread.join().expect("the producer"), CAPACITY);
        // Closing the store finds nothing running.
        scans.close();
    }

    #[test]
    fn no_scan_is_open_only_once_every_producer_exited() {
        let scans = OpenScans::default();
        assert!(scans.none_open().is_some());
        let (pipe, scans, thread) = produce(|pipe| while pipe.send(batch(1)) {});
        assert!(scans.none_open().is_none());
        pipe.end_by_consumer();
        thread.join().expect("the producer");
        assert!(scans.none_open().is_some());
    }

    #[test]
    fn closing_the_store_ends_scans_and_waits_for_producers() {
        let (pipe, scans, thread) = produce(|pipe| while pipe.send(batch(1)) {});
        scans.close();
        assert!(pipe.is_ended());
        assert!(matches!(pipe.recv(), Received::StoreClosed));
        assert!(matches!(pipe.recv(), Received::StoreClosed));
        thread.join().expect("the producer");
    }

    #[test]
    fn a_panicking_producer_reports_an_error() {
        let (pipe, scans, thread) = produce(|_| panic!("a bug"));
        assert!(thread.join().is_err());
        pipe.wait_started();
        assert!(matches!(pipe.recv(), Received::Item(Err(Error::Io { .. }))));
        assert!(matches!(pipe.recv(), Received::Finished));
        scans.close();
    }
}
