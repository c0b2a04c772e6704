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

use bytes::Bytes;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use zstd_safe::{CCtx, CDict, DCtx, DDict};

/// Commits during which a version stays plain after its own.
pub(crate) const YOUNG: usize = 2048;
/// zstd's level (the fastest strategy: packing runs in the commit, under the state lock).
const LEVEL: i32 = 1;
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

/// The young versions, oldest first, and what packs them (module doc). Lives in the store's
/// state; [`Packer::push`] runs in each commit.
pub(crate) struct Packer<T> {
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
    pub(crate) fn push(&mut self, key: Arc<str>, v: Arc<T>) {
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
            *enc.lock() = Enc::Packed {
                dict: codec.dict.clone(),
                frame,
            };
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
}
