//! How the store keeps the encodings of the versions it retains ([`Encoding`]): plain while
//! they are young, then packed. A version is young for the [`YOUNG`] commits that follow its
//! own, which is when watches that keep up, the kubelet and the controllers read it, so they
//! read its bytes as they are (one reference count, no copy); after that the [`Packer`] turns it
//! into a zstd frame against a dictionary of its resource's young versions, if anything still
//! holds it (the table while it is current, the history, a lagging watch's queue). A packed
//! version is unpacked on each read (a get, a list, a write's parse, a watch that lags or
//! replays the history), with a per-thread decompression context; the bytes are the same.
//!
//! Why a dictionary: the objects of one resource in a workload are nearly the same (a bound
//! pod's `managedFields`, spec and status differ from its neighbours' in names, uids, times and
//! addresses), so a frame against recent objects of the same resource holds mostly what differs,
//! where one version alone compresses about 2×. The dictionary is raw content (recent encodings
//! side by side, no training), built again every [`DICT_USES`] versions packed so it follows
//! the workload; each packed version holds the dictionary it was packed with.
//!
//! Where it runs: on its own thread ([`Background`]), never under the store's state lock. The
//! protocol between the commits, the packer thread and the readers:
//!
//! 1. A commit (under the state lock) makes the version's [`Encoding`] plain and adds
//!    `(resource, version)` to the packer's next batch with [`Background::push`]: a reference
//!    count and a push to a vector, nothing else. Every [`HANDOFF`] versions the batch goes to
//!    the packer's queue in one non-blocking send, so the packer thread wakes once per batch,
//!    not once per commit (a wake-up per commit, two context switches, cost kube-sim more than
//!    the compression). When the queue is full (the packer has fallen [`QUEUE`] versions
//!    behind) the batch is not queued and its versions stay plain for good, counted in
//!    [`Background::skipped`]: memory, never correctness, is what a full queue costs.
//! 2. The packer thread takes the batches' versions in commit order into its young window
//!    ([`Packer::push`]);
//!    a version stops being young when [`YOUNG`] later ones have arrived. If nothing but the
//!    packer holds it any more (its reference count is 1) it is dropped unpacked.
//! 3. Otherwise the packer copies out the plain bytes' handle (a `Bytes` clone under the
//!    version's own lock, released at once) and compresses them holding no lock at all.
//! 4. It swaps the frame in: under the version's lock, `Plain(b)` becomes `Packed { dict,
//!    frame }` in one assignment, and only if the encoding is still that very buffer (the
//!    packer is its only writer after the commit, so it always is; the check makes a stale swap
//!    a no-op rather than a wrong one). The plain buffer is freed when the last reader's clone
//!    of it drops.
//! 5. Every reader (gets, lists, watches, history replays, writes' parses) takes the version's
//!    lock and either clones the plain `Bytes` or unpacks the frame, which holds exactly the
//!    bytes of step 3: it sees the committed bytes before the swap and after it, never a state
//!    in between (there is none outside the lock).
//! 6. When the store is dropped the queue's sender is dropped with it; the thread finishes what
//!    is queued, sees the disconnection, and exits, releasing the young versions it held.
//!
//! Contention: the state lock holds only step 1; a version's own lock is taken by the packer
//! twice (steps 3 and 4, each a few instructions) and by readers of that one version.

use bytes::Bytes;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use zstd_safe::{CCtx, CDict, DCtx, DDict};

/// Commits during which a version stays plain after its own.
pub(crate) const YOUNG: usize = 2048;
/// zstd's level (the fastest strategy: the packer shares the machine with what it serves).
const LEVEL: i32 = 1;
/// Versions queued for the packer thread at most (step 1 of the module doc): four young
/// windows behind, a few hundred KB of queue (allocated when the thread starts).
pub(crate) const QUEUE: usize = 4 * YOUNG;
/// Versions handed to the packer thread at once (step 1): a batch waits at most this many
/// commits, a few percent of the young window, for its thread to wake.
pub(crate) const HANDOFF: usize = 64;
/// At most this many bytes of samples in a dictionary.
const DICT_BYTES: usize = 32 << 10;
/// At most this many young versions sampled for a dictionary.
const DICT_SAMPLES: usize = 16;
/// Versions of a resource packed with one dictionary before the next is built.
const DICT_USES: u32 = 4096;
/// Encodings shorter than this stay plain (a frame would hardly be shorter).
const MIN_PACKED: usize = 64;

/// A digested dictionary for unpacking, shared by the versions packed with it.
struct Dict(DDict<'static>);

enum Enc {
    Plain(Bytes),
    Packed { dict: Arc<Dict>, frame: Box<[u8]> },
}

/// One version's JSON encoding, plain or packed (module doc).
pub(crate) struct Encoding(Mutex<Enc>);

impl std::fmt::Debug for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &*self.lock() {
            Enc::Plain(b) => write!(f, "Plain({} bytes)", b.len()),
            Enc::Packed { frame, .. } => write!(f, "Packed({} bytes)", frame.len()),
        }
    }
}

thread_local! {
    static DCTX: RefCell<DCtx<'static>> = RefCell::new(DCtx::create());
}

impl Encoding {
    /// A plain encoding.
    pub(crate) fn new(bytes: Bytes) -> Self {
        Self(Mutex::new(Enc::Plain(bytes)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Enc> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bytes (shared when plain, unpacked when packed).
    pub(crate) fn bytes(&self) -> Bytes {
        match &*self.lock() {
            Enc::Plain(b) => b.clone(),
            Enc::Packed { dict, frame } => Bytes::from(unpack(dict, frame)),
        }
    }

    /// The bytes while plain.
    fn plain(&self) -> Option<Bytes> {
        match &*self.lock() {
            Enc::Plain(b) => Some(b.clone()),
            Enc::Packed { .. } => None,
        }
    }

    /// Step 4: replaces the plain `was` by `packed`, if the encoding is still `was`.
    fn swap_in(&self, was: &Bytes, packed: Enc) -> bool {
        let mut enc = self.lock();
        match &*enc {
            Enc::Plain(b) if b.as_ptr() == was.as_ptr() && b.len() == was.len() => {
                *enc = packed;
                true
            }
            _ => false,
        }
    }

    /// Whether it is packed.
    #[cfg(test)]
    pub(crate) fn is_packed(&self) -> bool {
        matches!(&*self.lock(), Enc::Packed { .. })
    }
}

fn unpack(dict: &Dict, frame: &[u8]) -> Vec<u8> {
    let len = zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten()
        .expect("a packed frame records its size") as usize;
    let mut out = Vec::with_capacity(len);
    DCTX.with(|d| {
        d.borrow_mut()
            .decompress_using_ddict(&mut out, frame, &dict.0)
            .expect("a packed frame unpacks")
    });
    debug_assert_eq!(out.len(), len);
    out
}

/// What the packer keeps of a version: its encoding, reachable while anything holds it.
pub(crate) trait Packable {
    /// The version's encoding.
    fn encoding(&self) -> &Encoding;
}

/// A resource's current dictionary.
struct Codec {
    cdict: CDict<'static>,
    dict: Arc<Dict>,
    uses: u32,
}

/// The young versions, oldest first, and what packs them (module doc, step 2). Lives on the
/// packer thread ([`Background`]).
struct Packer<T> {
    young: VecDeque<(Arc<str>, Arc<T>)>,
    cctx: CCtx<'static>,
    codecs: HashMap<Arc<str>, Codec>,
    scratch: Vec<u8>,
}

impl<T> std::fmt::Debug for Packer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packer")
            .field("young", &self.young.len())
            .field("dictionaries", &self.codecs.len())
            .finish_non_exhaustive()
    }
}

impl<T: Packable> Default for Packer<T> {
    fn default() -> Self {
        Self {
            young: VecDeque::with_capacity(YOUNG + 1),
            cctx: CCtx::create(),
            codecs: HashMap::new(),
            scratch: Vec::new(),
        }
    }
}

impl<T: Packable> Packer<T> {
    /// Takes a version of resource `key` just committed, and packs the one that stops being
    /// young with it if anything but the packer still holds it.
    fn push(&mut self, key: Arc<str>, v: Arc<T>) {
        self.young.push_back((key, v));
        if self.young.len() <= YOUNG {
            return;
        }
        let (key, v) = self.young.pop_front().expect("more than YOUNG");
        if Arc::strong_count(&v) > 1 {
            self.pack(&key, v.encoding());
        }
    }

    fn pack(&mut self, key: &Arc<str>, enc: &Encoding) {
        let Some(plain) = enc.plain() else { return };
        if plain.len() < MIN_PACKED {
            return;
        }
        let stale = self.codecs.get(key).is_none_or(|c| c.uses >= DICT_USES);
        if stale {
            let codec = self.codec(key, &plain);
            self.codecs.insert(key.clone(), codec);
        }
        let codec = self.codecs.get_mut(key).expect("built above");
        codec.uses += 1;
        self.scratch.clear();
        self.scratch.reserve(zstd_safe::compress_bound(plain.len()));
        let Ok(n) = self
            .cctx
            .compress_using_cdict(&mut self.scratch, &plain, &codec.cdict)
        else {
            return;
        };
        if n < plain.len() {
            let frame = Box::from(&self.scratch[..n]);
            enc.swap_in(
                &plain,
                Enc::Packed {
                    dict: codec.dict.clone(),
                    frame,
                },
            );
        }
    }

    /// A dictionary of `key`'s young versions (up to [`DICT_SAMPLES`], spread over the young
    /// window, the newest last), or of `plain` when there are none.
    fn codec(&self, key: &Arc<str>, plain: &Bytes) -> Codec {
        let same: Vec<Bytes> = self
            .young
            .iter()
            .filter(|(k, _)| k == key)
            .filter_map(|(_, v)| v.encoding().plain())
            .collect();
        let step = same.len().div_ceil(DICT_SAMPLES).max(1);
        let mut content = Vec::with_capacity(DICT_BYTES);
        for s in same.iter().rev().step_by(step) {
            if content.len() + s.len() > DICT_BYTES {
                break;
            }
            // Newest first here, reversed below: the newest ends up nearest the data.
            content.extend(s.iter().rev());
        }
        if content.is_empty() {
            content.extend(plain.iter().rev());
        }
        content.reverse();
        Codec {
            cdict: CDict::create(&content, LEVEL),
            dict: Arc::new(Dict(DDict::create(&content))),
            uses: 0,
        }
    }
}

/// What the packer thread is sent.
enum Msg<T> {
    /// Versions just committed, in commit order, each with the resource it is of.
    Versions(Vec<(Arc<str>, Arc<T>)>),
    /// Answer once everything sent before is handled.
    #[cfg(test)]
    Settle(SyncSender<()>),
}

/// The store's handle on the packer thread (module doc): commits [`push`](Self::push) their
/// versions; dropping it ends the thread.
pub(crate) struct Background<T> {
    tx: SyncSender<Msg<T>>,
    /// The batch being filled (step 1).
    batch: Vec<(Arc<str>, Arc<T>)>,
    skipped: Arc<AtomicU64>,
}

impl<T> std::fmt::Debug for Background<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Background")
            .field("skipped", &self.skipped.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<T: Packable + Send + Sync + 'static> Background<T> {
    /// Starts the packer thread.
    pub(crate) fn start() -> Self {
        let (tx, rx) = mpsc::sync_channel(QUEUE / HANDOFF);
        std::thread::Builder::new()
            .name("kube-sim-pack".into())
            .spawn(move || run(rx))
            .expect("the packer thread starts");
        Self {
            tx,
            batch: Vec::with_capacity(HANDOFF),
            skipped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Step 1: adds a version just committed to the batch, and queues a full batch (never
    /// blocks; a full queue leaves its versions plain).
    pub(crate) fn push(&mut self, key: Arc<str>, v: Arc<T>) {
        self.batch.push((key, v));
        if self.batch.len() >= HANDOFF {
            self.hand_off();
        }
    }

    /// Queues the batch, if any.
    fn hand_off(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(HANDOFF));
        match self.tx.try_send(Msg::Versions(batch)) {
            Ok(()) => {}
            Err(TrySendError::Full(Msg::Versions(b))) => {
                self.skipped.fetch_add(b.len() as u64, Ordering::Relaxed);
            }
            #[cfg(test)]
            Err(TrySendError::Full(Msg::Settle(_))) => unreachable!("a batch was sent"),
            // The thread is gone (it panicked): versions stay plain.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Waits until the packer has handled every version pushed before, the batch being filled
    /// included (tests: what is packed is then what the protocol packs, whatever the threads'
    /// timing).
    #[cfg(test)]
    pub(crate) fn settle(&mut self) {
        self.hand_off();
        let (tx, rx) = mpsc::sync_channel(1);
        if self.tx.send(Msg::Settle(tx)).is_ok() {
            let _ = rx.recv();
        }
    }

    /// Versions left plain because the queue was full.
    pub(crate) fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }
}

/// The packer thread: steps 2–4 for each version, in commit order, until the store is dropped.
fn run<T: Packable>(rx: Receiver<Msg<T>>) {
    let mut packer = Packer::default();
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Versions(batch) => {
                for (key, v) in batch {
                    packer.push(key, v);
                }
            }
            #[cfg(test)]
            Msg::Settle(done) => {
                let _ = done.send(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct V(Encoding);

    impl Packable for V {
        fn encoding(&self) -> &Encoding {
            &self.0
        }
    }

    fn object(i: usize) -> Bytes {
        Bytes::from(format!(
            r#"{{"kind":"Pod","metadata":{{"name":"p{i}","uid":"{i:08x}-0000","labels":{{"app":"x"}}}},"spec":{{"nodeName":"node-{}"}},"status":{{"phase":"Running"}}}}"#,
            i % 7
        ))
    }

    #[test]
    fn versions_pack_once_old_and_read_back_the_same() {
        let mut p: Packer<V> = Packer::default();
        let mut kept = Vec::new();
        let n = YOUNG * 3;
        for i in 0..n {
            let v = Arc::new(V(Encoding::new(object(i))));
            // Every other version is held elsewhere; the others are dropped unpacked.
            if i % 2 == 0 {
                kept.push((i, v.clone()));
            }
            let key: Arc<str> = if i % 3 == 0 { "/a".into() } else { "/b".into() };
            p.push(key, v);
        }
        for (i, v) in &kept {
            assert_eq!(v.0.bytes(), object(*i), "version {i}");
            assert_eq!(v.0.is_packed(), *i < n - YOUNG, "version {i}");
        }
        assert_eq!(p.young.len(), YOUNG);
    }

    #[test]
    fn short_encodings_stay_plain() {
        let mut p: Packer<V> = Packer::default();
        let short = Arc::new(V(Encoding::new(Bytes::from_static(b"{}"))));
        p.push("/a".into(), short.clone());
        for i in 0..YOUNG {
            p.push("/a".into(), Arc::new(V(Encoding::new(object(i)))));
        }
        assert!(!short.0.is_packed());
        assert_eq!(short.0.bytes(), Bytes::from_static(b"{}"));
    }

    #[test]
    fn reads_racing_the_packer_thread_see_the_committed_bytes() {
        const READERS: usize = 2;
        let mut bg: Background<V> = Background::start();
        let n = YOUNG * 3;
        let versions: Vec<Arc<V>> = (0..n)
            .map(|i| Arc::new(V(Encoding::new(object(i)))))
            .collect();
        // The versions that must end packed: held here, and no longer young.
        let old = n - YOUNG;
        let settled = std::sync::atomic::AtomicBool::new(false);
        let go = std::sync::Barrier::new(READERS + 1);
        std::thread::scope(|s| {
            for _ in 0..READERS {
                let (versions, go, settled) = (&versions, &go, &settled);
                s.spawn(move || {
                    go.wait();
                    // The packer packs in commit order: read where it is swapping (the first
                    // version not packed yet, and the next), so reads meet the swaps.
                    let mut front = 0;
                    while front < old {
                        let done = settled.load(Ordering::Acquire);
                        while front < old && versions[front].0.is_packed() {
                            front += 1;
                        }
                        for (i, v) in versions.iter().enumerate().skip(front).take(2) {
                            assert_eq!(v.0.bytes(), object(i), "version {i}");
                        }
                        assert!(
                            !done || front == old,
                            "version {front} not packed once the packer settled"
                        );
                    }
                    for (i, v) in versions.iter().enumerate() {
                        assert_eq!(v.0.bytes(), object(i), "version {i}");
                    }
                });
            }
            go.wait();
            for (i, v) in versions.iter().enumerate() {
                let key: Arc<str> = if i % 3 == 0 { "/a".into() } else { "/b".into() };
                bg.push(key, v.clone());
            }
            bg.settle();
            settled.store(true, Ordering::Release);
        });
        assert_eq!(bg.skipped(), 0);
        for (i, v) in versions.iter().enumerate() {
            assert_eq!(v.0.bytes(), object(i), "version {i}");
            assert_eq!(v.0.is_packed(), i < old, "version {i}");
        }
    }

    #[test]
    fn a_full_queue_leaves_versions_plain() {
        // A packer that cannot take anything: its queue is full.
        let (tx, rx) = mpsc::sync_channel(QUEUE / HANDOFF);
        let mut bg: Background<V> = Background {
            tx,
            batch: Vec::new(),
            skipped: Arc::new(AtomicU64::new(0)),
        };
        for i in 0..QUEUE + HANDOFF + 3 {
            bg.push("/a".into(), Arc::new(V(Encoding::new(object(i)))));
        }
        // The queue took QUEUE versions; the next batch found it full; 3 wait in a batch.
        assert_eq!(bg.skipped(), HANDOFF as u64);
        assert_eq!(bg.batch.len(), 3);
        drop(rx);
    }
}
