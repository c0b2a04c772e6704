//! The in-memory object store: one global `resourceVersion` counter, objects per resource held as
//! their serialized bytes with a small selector index ([`Stored`]), a bounded history of watch
//! events, and the broadcast fan-out to watchers. Every write goes through [`State::commit`] under
//! the single state lock, which is held only for map updates and one serialization (never for
//! I/O, nor for packing: a commit only queues its version for the packer thread): it assigns the
//! next `resourceVersion`, appends the event to the history and broadcasts it, so a watcher that
//! subscribes and copies the history under the same lock sees every event exactly once.
//!
//! Memory: each version of an object exists once, as a [`Stored`] shared by the table (while it
//! is current), the history events that name it (as their object, or as the next event's
//! previous state) and the watches that have it queued; nothing keeps a version once the table
//! has replaced it and the history (`--history` events) has moved past every event naming it.
//! A version is never held as a `serde_json::Value` tree, which costs several times its
//! encoding (a bound pod was about 50–70 KB with its versions as trees, BENCHMARKS.md): writes,
//! controllers and the kubelet parse the current object once per operation, and selectors read
//! the index taken at commit. With `SimConfig::pack_versions` a version's encoding is plain for
//! the [`crate::pack::YOUNG`] commits after its own (what watches that keep up, the kubelet and
//! the controllers read), then packed by the packer thread against a dictionary of its
//! resource's recent versions, and swapped in under the version's own lock (`pack`'s module doc
//! numbers the protocol): a Running pod's 2.9 KB of JSON, current or in the history, is then
//! about 100 bytes against other Running pods (500 against created ones only), unpacked on each
//! read, and every reader sees the bytes the commit produced.
//!
//! The store is the bottom layer of the running simulator: it uses the object rules (`admission`,
//! `deletion`, `kinds`, `managed`, `pack`, `patch`, `storage`, …) and nothing that holds the shared state.
//! The controllers that follow its commits register with [`State::follow`], so it does not know
//! them.

use crate::admission::Admission;
use crate::deletion;
use crate::error::ApiError;
use crate::kinds;
use crate::managed::{self, Manager, Scope};
use crate::meta;
use crate::meta::Pointer;
use crate::pack::{Background, Encoding, Packable};
use crate::patch::{self, PatchKind};
use crate::resources::{Registry, ResourceDef};
use crate::selector::Index;
use crate::storage;
use bytes::Bytes;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use tokio::sync::broadcast;

/// The longest `generateName` base kept (`names.maxGeneratedNameLength`: 63 less the suffix).
const MAX_GENERATED_BASE: usize = 58;

/// One version of an object: its JSON encoding (computed once per write, shared by lists,
/// watches and the history; packed once the version is no longer young, [`crate::pack`]) and
/// what selectors read of it ([`Index`]). The object itself is not kept as a
/// `serde_json::Value`: a `Value` tree costs several times its encoding, and every retained
/// version of every object has one of these. Whoever needs the object parses it
/// ([`Stored::value`]), once per operation.
#[derive(Debug)]
pub struct Stored {
    enc: Encoding,
    index: Index,
}

impl Packable for Stored {
    fn encoding(&self) -> &Encoding {
        &self.enc
    }
}

impl Stored {
    /// Serializes `value`, an object of `def`.
    pub(crate) fn new(def: &ResourceDef, value: &Value) -> Arc<Self> {
        let mut json = serde_json::to_vec(value).expect("Value serializes");
        // Kept for as long as the version is young: no spare capacity.
        json.shrink_to_fit();
        Arc::new(Self {
            enc: Encoding::new(Bytes::from(json)),
            index: Index::new(&def.plural, value),
        })
    }

    /// `serde_json::to_vec` of the object (shared while the version is young, unpacked after).
    pub fn json(&self) -> Bytes {
        self.enc.bytes()
    }

    /// The object, parsed from its encoding (a new `Value` each call: parse once per use).
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json()).expect("a stored object parses")
    }

    /// The object without `metadata.managedFields`, for readers that never look at them (the
    /// controllers): the field sets are most of a written object's `Value` tree, so building
    /// and dropping them was most of what a controller's parse cost. A write built from this
    /// value loses nothing, since the store ignores the `managedFields` a write sends.
    pub fn value_without_managed_fields(&self) -> Value {
        let json = self.json();
        let mut de = serde_json::Deserializer::from_slice(&json);
        let v = serde::de::DeserializeSeed::deserialize(lean::Object { top: true }, &mut de)
            .and_then(|v| de.end().map(|()| v))
            .expect("a stored object parses");
        Value::Object(v)
    }

    /// What selectors read of it.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// `metadata.namespace`.
    pub fn namespace(&self) -> &str {
        self.index.field("metadata.namespace").unwrap_or("")
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.index.field("metadata.name").unwrap_or("")
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        self.index.field("metadata.uid").unwrap_or("")
    }

    /// `metadata.resourceVersion` (0 when missing).
    pub fn resource_version(&self) -> u64 {
        self.index
            .field("metadata.resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// Whether the encoding contains `needle` (a cheap test before parsing: an object whose
    /// encoding does not name a field cannot have it).
    pub fn mentions(&self, needle: &str) -> bool {
        memchr::memmem::find(&self.json(), needle.as_bytes()).is_some()
    }
}

/// Watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed change.
#[derive(Debug)]
pub struct Event {
    /// The `resourceVersion` the change produced.
    pub rv: u64,
    /// Storage key of the resource (`group/plural`).
    pub key: Arc<str>,
    /// Change type.
    pub etype: EventType,
    /// The object after the change (for `DELETED`, the last state with the deletion's version).
    pub obj: Arc<Stored>,
    /// The object before the change (None for `ADDED`): lists at an older version undo events
    /// with it, and watches with selectors tell an object entering or leaving their selection.
    pub prev: Option<Arc<Stored>>,
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The main resource (keeps `.status` when the resource has a status subresource).
    Main,
    /// `/status` (changes only `.status`).
    Status,
    /// `pods/<name>/resize` (changes only the containers' resources and resize policies).
    Resize,
}

type Objects = BTreeMap<(String, String), Arc<Stored>>;

/// Where a new watch starts.
#[derive(Debug)]
pub enum WatchStart {
    /// Events to send first, the receiver for live events, and the version they are current to.
    Ok(Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>, u64),
    /// The requested version is older than the retained history.
    Expired(ApiError),
}

/// Everything behind the state lock.
#[derive(Debug)]
pub struct State {
    rv: u64,
    /// Served resources (CRDs change it).
    pub registry: Registry,
    tables: HashMap<Arc<str>, Objects>,
    history: VecDeque<Arc<Event>>,
    history_cap: usize,
    evicted_rv: u64,
    tx: broadcast::Sender<Arc<Event>>,
    auto_create_namespaces: bool,
    /// The controllers that follow commits (the resource claim and disruption controllers,
    /// when they run), in the order they registered.
    followers: Vec<Follower>,
    /// The admission plugins that run.
    admission: Admission,
    /// The packer thread's queue (when packing): each commit hands it its version.
    packer: Option<Background<Stored>>,
    /// Suffixes the next generated names take, before random ones (tests).
    #[cfg(test)]
    forced_suffixes: VecDeque<String>,
}

/// A controller following the store's commits on its own channel (see [`State::follow`]).
struct Follower {
    /// Whether the controller follows a commit: decided under the state lock, so cheap.
    wants: fn(&Event, &State) -> bool,
    /// Hands a commit over.
    send: Box<dyn Fn(Arc<Event>) + Send>,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower").finish_non_exhaustive()
    }
}

/// What a DELETE request did.
#[derive(Debug)]
pub struct Deleted {
    /// The object: as deleted, or as updated when its deletion is graceful or waits for
    /// finalizers.
    pub obj: Arc<Stored>,
    /// Whether the object is gone.
    pub gone: bool,
}

fn name_of(obj: &Value) -> &str {
    meta::meta_str(obj, "name")
}

/// Whether anything but metadata and status differs (generation tracking), compared in
/// place: every update of a pod asks, and copying both objects to compare them cost two
/// copies of the pod per write.
fn spec_differs(old: &Value, new: &Value) -> bool {
    fn part(m: &serde_json::Map<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
        m.iter()
            .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status"))
    }
    match (old.as_object(), new.as_object()) {
        (Some(o), Some(n)) => part(o).ne(part(n)),
        _ => old != new,
    }
}

/// `metadata.generation` of `new` one past `old`'s when anything but metadata and status
/// changed, for kinds that track it.
fn bump_generation(def: &ResourceDef, old: &Value, new: &mut Value) {
    if def.generation && spec_differs(old, new) {
        let g = old
            .at("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        meta::metadata_mut(new).insert("generation".into(), json!(g + 1));
    }
}

impl State {
    /// A store with the built-in resources, the given history bound and broadcast capacity.
    pub fn new(history_cap: usize, watch_buffer: usize, auto_create_namespaces: bool) -> Self {
        let (tx, _) = broadcast::channel(watch_buffer.max(16));
        Self {
            rv: 1,
            registry: Registry::default(),
            tables: HashMap::new(),
            history: VecDeque::new(),
            history_cap: history_cap.max(1),
            evicted_rv: 0,
            tx,
            auto_create_namespaces,
            followers: Vec::new(),
            admission: Admission::default(),
            packer: None,
            #[cfg(test)]
            forced_suffixes: VecDeque::new(),
        }
    }

    /// The suffix of the next generated name (`meta::name_suffix`; a test can set them).
    fn next_suffix(&mut self) -> String {
        #[cfg(test)]
        if let Some(s) = self.forced_suffixes.pop_front() {
            return s;
        }
        meta::name_suffix()
    }

    /// Whether versions are packed once no longer young (`SimConfig::pack_versions`): on
    /// starts the packer thread, off stops it (what it has packed stays packed).
    pub(crate) fn set_packing(&mut self, on: bool) {
        match (on, &self.packer) {
            (true, None) => self.packer = Some(Background::start()),
            (false, Some(_)) => self.packer = None,
            _ => {}
        }
    }

    /// Waits until the packer thread has handled every version committed so far (`pack`'s
    /// steps 2–4), when packing.
    #[cfg(test)]
    pub(crate) fn settle_packing(&mut self) {
        if let Some(p) = &mut self.packer {
            p.settle();
        }
    }

    /// Versions left plain because the packer's queue was full (0 when not packing).
    pub(crate) fn packing_skipped(&self) -> u64 {
        self.packer.as_ref().map_or(0, Background::skipped)
    }

    /// Sets the admission plugins that run (all by default).
    pub(crate) fn set_admission(&mut self, admission: Admission) {
        self.admission = admission;
    }

    /// The stored PriorityClasses that may resolve a pod naming `named` ("" for none): that
    /// one and those whose encoding names `globalDefault` (the only ones that can be a default).
    fn priority_classes_for(&self, named: &str) -> Vec<Value> {
        self.tables
            .get(crate::scheduling::PC_KEY)
            .map(|t| {
                t.values()
                    .filter(|c| {
                        (!named.is_empty() && c.name() == named) || c.mentions("globalDefault")
                    })
                    .map(|c| c.value())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The stored PriorityClasses (for the Priority admission plugin).
    fn priority_classes(&self) -> Vec<Value> {
        self.tables
            .get(crate::scheduling::PC_KEY)
            .map(|t| t.values().map(|c| c.value()).collect())
            .unwrap_or_default()
    }

    /// Hands a controller, from now on, every commit `wants` accepts (called under the state
    /// lock, after the commit is in the history and before it is broadcast to watches), through
    /// `send`. This is how the controllers that run beside the server follow the store without
    /// the store knowing them.
    pub(crate) fn follow(
        &mut self,
        wants: fn(&Event, &State) -> bool,
        send: impl Fn(Arc<Event>) + Send + 'static,
    ) {
        self.followers.push(Follower {
            wants,
            send: Box::new(send),
        });
    }

    /// The current global resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// Assigns the next version, stores (or removes) the object, records and broadcasts the event.
    fn commit(&mut self, def: &ResourceDef, mut obj: Value, etype: EventType) -> Arc<Stored> {
        self.rv += 1;
        let rv = self.rv;
        meta::metadata_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let key = (
            meta::meta_str(&obj, "namespace").to_string(),
            name_of(&obj).to_string(),
        );
        let stored = Stored::new(def, &obj);
        let table = self.tables.entry(def.key.clone()).or_default();
        let prev = if etype == EventType::Deleted {
            table.remove(&key)
        } else {
            table.insert(key, stored.clone())
        };
        let ev = Arc::new(Event {
            rv,
            key: def.key.clone(),
            etype,
            obj: stored.clone(),
            prev,
        });
        if self.history.len() >= self.history_cap
            && let Some(old) = self.history.pop_front()
        {
            self.evicted_rv = old.rv;
        }
        self.history.push_back(ev.clone());
        if let Some(p) = &mut self.packer {
            p.push(def.key.clone(), stored.clone());
        }
        for f in &self.followers {
            if (f.wants)(&ev, self) {
                (f.send)(ev.clone());
            }
        }
        // No receivers is fine.
        let _ = self.tx.send(ev);
        stored
    }

    /// One object.
    pub fn get(&self, def: &ResourceDef, ns: &str, name: &str) -> Result<Arc<Stored>, ApiError> {
        self.tables
            .get(&def.key)
            .and_then(|t| t.get(&(ns.to_string(), name.to_string())))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&def.group, &def.plural, name))
    }

    /// All objects of a resource (in one namespace when `ns` is set), sorted by namespace/name.
    pub fn list(&self, def: &ResourceDef, ns: Option<&str>) -> (u64, Vec<Arc<Stored>>) {
        let items = match (self.tables.get(&def.key), ns) {
            (None, _) => Vec::new(),
            (Some(t), None) => t.values().cloned().collect(),
            (Some(t), Some(ns)) => t
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v.clone())
                .collect(),
        };
        (self.rv, items)
    }

    /// The objects of a resource as they were at version `at` (in one namespace when `ns` is
    /// set), sorted by namespace/name, rebuilt from the current state by undoing the retained
    /// events after `at`; None when the history no longer reaches back to `at`.
    pub fn list_at(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        at: u64,
    ) -> Option<Vec<Arc<Stored>>> {
        if at >= self.rv {
            return Some(self.list(def, ns).1);
        }
        if at < self.evicted_rv {
            return None;
        }
        let mut objs: BTreeMap<(String, String), Arc<Stored>> = self
            .list(def, ns)
            .1
            .into_iter()
            .map(|o| ((o.namespace().to_string(), o.name().to_string()), o))
            .collect();
        for e in self.history.iter().rev() {
            if e.rv <= at {
                break;
            }
            if e.key != def.key || ns.is_some_and(|n| e.obj.namespace() != n) {
                continue;
            }
            let key = (e.obj.namespace().to_string(), e.obj.name().to_string());
            match &e.prev {
                None => {
                    objs.remove(&key);
                }
                Some(p) => {
                    objs.insert(key, p.clone());
                }
            }
        }
        Some(objs.into_values().collect())
    }

    /// Number of objects of a resource.
    pub fn count(&self, key: &str) -> usize {
        self.tables.get(key).map_or(0, BTreeMap::len)
    }

    fn ensure_namespace(&mut self, ns: &str) -> Result<(), ApiError> {
        let ns_def = self
            .registry
            .get("", "v1", "namespaces")
            .expect("namespaces are built in");
        if self.get(&ns_def, "", ns).is_ok() {
            return Ok(());
        }
        if !self.auto_create_namespaces {
            return Err(ApiError::not_found("", "namespaces", ns));
        }
        self.create(&ns_def, None, json!({"metadata": {"name": ns}}))
            .map(|_| ())
    }

    /// Create; `ns` is the namespace from the URL. An internal write: no managedFields entry.
    pub fn create(
        &mut self,
        def: &ResourceDef,
        ns: Option<&str>,
        obj: Value,
    ) -> Result<Arc<Stored>, ApiError> {
        self.create_by(def, ns, obj, None, None)
    }

    /// Create by `manager` (recorded in `metadata.managedFields`); `applied` is the configuration
    /// of a server-side apply that creates the object.
    pub fn create_by(
        &mut self,
        def: &ResourceDef,
        ns: Option<&str>,
        mut obj: Value,
        manager: Option<&Manager>,
        applied: Option<&Value>,
    ) -> Result<Arc<Stored>, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        check_type(def, &mut obj)?;
        let body_ns = meta::meta_str(&obj, "namespace").to_string();
        let ns = match (def.namespaced, ns) {
            (true, Some(ns)) => {
                if !body_ns.is_empty() && body_ns != ns {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                ns.to_string()
            }
            (true, None) => return Err(ApiError::method_not_allowed()),
            (false, _) => String::new(),
        };
        let mut name = name_of(&obj).to_string();
        // The `generateName` base a generated name was made of (tried again when taken).
        let mut generated_from: Option<String> = None;
        // Mutating admission runs before anything is stored or validated: the Priority
        // plugin's 403s come first, naming the pod by its `generateName` when it has no name
        // yet. What it computed is written after the field manager has run.
        let mut pod_priority = None;
        if def.key.as_ref() == "/pods" {
            crate::scheduling::decode_pod(&obj)?;
            if self.admission.priority {
                let shown = if name.is_empty() {
                    meta::meta_str(&obj, "generateName")
                } else {
                    &name
                };
                // Only the classes the plugin can pick (the one named, any global default),
                // parsed: every pod create passes here.
                let named = obj
                    .at("/spec/priorityClassName")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let classes = self.priority_classes_for(named);
                pod_priority = Some(crate::scheduling::resolve_pod(&obj, shown, classes.iter())?);
            }
        }
        if name.is_empty() {
            let gen_name = meta::meta_str(&obj, "generateName").to_string();
            if gen_name.is_empty() {
                return Err(ApiError::invalid(
                    &def.group,
                    &def.kind,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
            // `names.SimpleNameGenerator`: the base is cut to 58 characters, so the name with
            // its 5-character suffix fits 63.
            let base = match gen_name.char_indices().nth(MAX_GENERATED_BASE) {
                Some((at, _)) => &gen_name[..at],
                None => gen_name.as_str(),
            };
            let base = base.to_owned();
            name = format!("{base}{}", self.next_suffix());
            generated_from = Some(base);
        }
        if def.namespaced && def.key.as_ref() != "/namespaces" {
            self.ensure_namespace(&ns)?;
        }
        let m = meta::metadata_mut(&mut obj);
        m.insert("name".into(), json!(name));
        if def.namespaced {
            m.insert("namespace".into(), json!(ns));
        } else {
            m.remove("namespace");
        }
        m.insert("uid".into(), json!(meta::new_uid()));
        m.insert("creationTimestamp".into(), json!(meta::now()));
        m.remove("deletionTimestamp");
        m.remove("deletionGracePeriodSeconds");
        m.remove("managedFields");
        if def.generation {
            m.insert("generation".into(), json!(1));
        }
        if def.drop_status_on_create
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        let mut crd_defs = Vec::new();
        match def.key.as_ref() {
            "/pods" => {
                kinds::default_pod(&mut obj);
                kinds::validate_pod_create(&obj, &name)?;
            }
            "/namespaces" => kinds::default_namespace(&mut obj),
            crate::policy::PDB_KEY => crate::policy::admit_create(&mut obj, &name)?,
            crate::scheduling::PC_KEY => {
                crate::scheduling::admit_create(&mut obj, &name)?;
                if self.admission.priority {
                    let classes = self.priority_classes();
                    crate::scheduling::check_global_default(&obj, &name, classes.iter(), false)?;
                }
            }
            k if crate::dra::handles(k) => crate::dra::admit_create(def, &mut obj, &name)?,
            k if storage::handles(k) => {
                let default_class = if k == storage::PVC_KEY && self.admission.default_storage_class
                {
                    self.storage_class_def().and_then(|sc| {
                        let classes: Vec<Value> =
                            self.list(&sc, None).1.iter().map(|s| s.value()).collect();
                        storage::default_class(classes.iter())
                    })
                } else {
                    None
                };
                storage::admit_create(def, &mut obj, &name, default_class)?;
            }
            "apiextensions.k8s.io/customresourcedefinitions" => {
                crd_defs = ResourceDef::from_crd(&obj)
                    .map_err(|e| ApiError::invalid(&def.group, &def.kind, &name, &e))?;
                kinds::crd_status(&mut obj);
            }
            _ => {}
        }
        // The storage's own refusal comes after validation and admission, as the real
        // server's `Store.Create` (a 422 before a 409), and before anything is registered. A
        // generated name found taken is generated again (RetryGenerateName).
        if self.get(def, &ns, &name).is_ok() {
            let retried = match &generated_from {
                Some(base) => {
                    let mut suffixes: VecDeque<String> = (1..meta::NAME_GENERATION_ATTEMPTS)
                        .map(|_| self.next_suffix())
                        .collect();
                    meta::retry_generated_name(
                        base,
                        name.clone(),
                        |n| self.get(def, &ns, n).is_ok(),
                        || suffixes.pop_front().unwrap_or_default(),
                    )
                }
                None => Err(name.clone()),
            };
            match retried {
                Ok(fresh) => {
                    name = fresh;
                    meta::metadata_mut(&mut obj).insert("name".into(), json!(name));
                }
                Err(last) => {
                    return Err(ApiError::already_exists(&def.group, &def.plural, &last));
                }
            }
        }
        for d in crd_defs {
            self.registry.add(d);
        }
        if let Some(mgr) = manager {
            managed::record(None, &mut obj, mgr, "", scope(def, Part::Main), applied);
        }
        // What admission and the serializer add after the field manager has run.
        if let Some(p) = pod_priority {
            crate::scheduling::apply_pod(&mut obj, p);
        }
        if crate::dra::handles(&def.key) {
            crate::dra::after_record(def, &mut obj);
        }
        Ok(self.commit(def, obj, EventType::Added))
    }

    /// Update (PUT) of the main resource or its status. An internal write: the managedFields
    /// entries are kept as they are.
    pub fn update(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        obj: Value,
        part: Part,
    ) -> Result<Arc<Stored>, ApiError> {
        self.update_by(def, ns, name, obj, part, None, None)
    }

    /// Update by `manager` (recorded in `metadata.managedFields`; `applied`: the configuration of
    /// a server-side apply).
    #[allow(clippy::too_many_arguments)]
    pub fn update_by(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        mut obj: Value,
        part: Part,
        manager: Option<&Manager>,
        applied: Option<&Value>,
    ) -> Result<Arc<Stored>, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        check_type(def, &mut obj)?;
        let body_name = name_of(&obj);
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let body_ns = meta::meta_str(&obj, "namespace");
        if def.namespaced && !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let old = self.get(def, ns, name)?;
        let old_v = old.value();
        let want_rv = meta::meta_str(&obj, "resourceVersion");
        if !want_rv.is_empty() && want_rv != meta::meta_str(&old_v, "resourceVersion") {
            return Err(ApiError::stale(&def.group, &def.plural, name));
        }
        let rv_given = !want_rv.is_empty();
        let mut new = match part {
            Part::Status => {
                let mut n = old_v.clone();
                match obj.get("status") {
                    Some(s) => n["status"] = s.clone(),
                    None => {
                        if let Some(o) = n.as_object_mut() {
                            o.remove("status");
                        }
                    }
                }
                if storage::handles(&def.key) {
                    storage::admit_status_update(def, &old_v, &mut n, name, rv_given)?;
                }
                if crate::dra::handles(&def.key) {
                    crate::dra::admit_status_update(def, &old_v, &mut n, name)?;
                }
                if def.key.as_ref() == crate::policy::PDB_KEY {
                    crate::policy::admit_status_update(&mut n, name)?;
                }
                if def.key.as_ref() == "/pods" {
                    crate::podstatus::validate_update(&n, name)?;
                }
                n
            }
            Part::Resize => {
                let mut n = crate::resize::resize(&old_v, obj, name)?;
                bump_generation(def, &old_v, &mut n);
                n
            }
            Part::Main => {
                let om = old_v.get("metadata").cloned().unwrap_or_default();
                let m = meta::metadata_mut(&mut obj);
                for f in [
                    "name",
                    "namespace",
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                    "managedFields",
                ] {
                    match om.get(f) {
                        Some(v) => m.insert(f.into(), v.clone()),
                        None => m.remove(f),
                    };
                }
                if def.status {
                    match old_v.get("status") {
                        Some(s) => obj["status"] = s.clone(),
                        None => {
                            if let Some(o) = obj.as_object_mut() {
                                o.remove("status");
                            }
                        }
                    }
                }
                if def.key.as_ref() == "/pods" {
                    crate::scheduling::decode_pod(&obj)?;
                    kinds::default_pod_update(&old_v, &mut obj, self.admission.priority);
                    kinds::validate_pod_update(&old_v, &obj, name)?;
                }
                if def.key.as_ref() == crate::scheduling::PC_KEY {
                    crate::scheduling::admit_update(&old_v, &mut obj, name)?;
                    if self.admission.priority {
                        let classes = self.priority_classes();
                        crate::scheduling::check_global_default(&obj, name, classes.iter(), true)?;
                    }
                }
                if crate::dra::handles(&def.key) {
                    crate::dra::admit_update(def, &old_v, &mut obj, name)?;
                }
                if def.key.as_ref() == crate::policy::PDB_KEY {
                    crate::policy::admit_update(&old_v, &mut obj, name)?;
                }
                if storage::handles(&def.key) {
                    storage::admit_update(def, &old_v, &mut obj, name)?;
                    if def.key.as_ref() == storage::PVC_KEY && self.admission.pvc_resize {
                        let sc = self.storage_class_def();
                        storage::resize_admission(&old_v, &obj, name, |class| {
                            let sc = sc.as_ref()?;
                            self.get(sc, "", class).ok().map(|s| s.value())
                        })?;
                    }
                }
                bump_generation(def, &old_v, &mut obj);
                obj
            }
        };
        meta::metadata_mut(&mut new).insert(
            "resourceVersion".into(),
            old_v["metadata"]["resourceVersion"].clone(),
        );
        if let Some(mgr) = manager {
            let sub = match part {
                Part::Main => "",
                Part::Status => "status",
                Part::Resize => "resize",
            };
            managed::record(Some(&old_v), &mut new, mgr, sub, scope(def, part), applied);
        }
        if new == old_v {
            // The real server does not write (nor bump the version) for a no-op update.
            return Ok(old);
        }
        if part == Part::Main && finalizes(def) && deletion::delete_during_update(&old_v, &new) {
            // `shouldDeleteDuringUpdate`: the last finalizer of an object whose deletion waited
            // for it is gone; the object is deleted (the event carries its stored state) and the
            // request gets the object it sent.
            self.commit(def, old_v.clone(), EventType::Deleted);
            return Ok(Stored::new(def, &new));
        }
        if def.key.as_ref() == "apiextensions.k8s.io/customresourcedefinitions"
            && part == Part::Main
        {
            let defs = ResourceDef::from_crd(&new)
                .map_err(|e| ApiError::invalid(&def.group, &def.kind, name, &e))?;
            for d in defs {
                self.registry.add(d);
            }
        }
        Ok(self.commit(def, new, EventType::Modified))
    }

    /// PATCH of the main resource or its status by `manager` (recorded in
    /// `metadata.managedFields`). Server-side apply creates a missing object.
    #[allow(clippy::too_many_arguments)]
    pub fn patch_by(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        kind: PatchKind,
        body: &Value,
        part: Part,
        manager: Option<&Manager>,
    ) -> Result<Arc<Stored>, ApiError> {
        let applied = (kind == PatchKind::Apply).then_some(body);
        let old = match self.get(def, ns, name) {
            Ok(o) => o.value(),
            Err(_) if kind == PatchKind::Apply && part == Part::Main => {
                let mut obj = body.clone();
                meta::metadata_mut(&mut obj).insert("name".into(), json!(name));
                return self.create_by(def, def.namespaced.then_some(ns), obj, manager, applied);
            }
            Err(e) => return Err(e),
        };
        let mut new = old;
        match kind {
            PatchKind::Merge | PatchKind::Apply => patch::merge_patch(&mut new, body),
            PatchKind::Strategic => {
                if def.custom {
                    return Err(ApiError::unsupported_media_type(
                        "application/strategic-merge-patch+json",
                    ));
                }
                patch::strategic_merge(&mut new, body);
                if def.key.as_ref() == crate::policy::PDB_KEY {
                    crate::policy::strategic_selector_replace(&mut new, body);
                }
            }
            PatchKind::Json => patch::json_patch(&mut new, body).map_err(|e| {
                ApiError::invalid(&def.group, &def.kind, name, &format!("json patch: {e}"))
            })?,
        }
        self.update_by(def, ns, name, new, part, manager, applied)
    }

    /// Delete, with optional `DeleteOptions.preconditions`.
    pub fn delete(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        preconditions: Option<&Value>,
    ) -> Result<Arc<Stored>, ApiError> {
        let old = self.get(def, ns, name)?;
        let old_v = old.value();
        if let Some(p) = preconditions {
            if let Some(uid) = p.get("uid").and_then(Value::as_str) {
                let have = meta::meta_str(&old_v, "uid");
                if uid != have {
                    return Err(ApiError::conflict(
                        &def.group,
                        &def.plural,
                        name,
                        &format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"
                        ),
                    ));
                }
            }
            if let Some(rv) = p.get("resourceVersion").and_then(Value::as_str) {
                let have = meta::meta_str(&old_v, "resourceVersion");
                if rv != have {
                    return Err(ApiError::conflict(
                        &def.group,
                        &def.plural,
                        name,
                        &format!(
                            "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}"
                        ),
                    ));
                }
            }
        }
        match def.key.as_ref() {
            "/namespaces" => self.delete_namespace_contents(name),
            "apiextensions.k8s.io/customresourcedefinitions" => {
                if let (Some(g), Some(p)) = (
                    old_v.at("/spec/group").and_then(Value::as_str),
                    old_v.at("/spec/names/plural").and_then(Value::as_str),
                ) {
                    let key: Arc<str> = format!("{g}/{p}").into();
                    if let Some(d) = self.registry.defs().iter().find(|d| d.key == key).cloned() {
                        let (_, items) = self.list(&d, None);
                        for it in items {
                            self.commit(&d, it.value(), EventType::Deleted);
                        }
                    }
                    self.registry.remove(g, p);
                }
            }
            _ => {}
        }
        Ok(self.commit(def, old_v.clone(), EventType::Deleted))
    }

    /// A DELETE request as the generic registry store serves it: the options validated, the
    /// preconditions checked (`BeforeDelete`'s messages), then for pods graceful deletion
    /// (`deletionTimestamp` and `deletionGracePeriodSeconds` set, or shortened, in an update;
    /// the object deleted in the same request when the grace period is 0) and for pods,
    /// PodDisruptionBudgets and ResourceClaims finalizers (the object stays, marked, until they
    /// are removed).
    /// Other resources are deleted at once.
    pub fn delete_request(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        opts: &deletion::DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        self.delete_object(def, ns, name, opts, true)
    }

    /// One object of a DeleteCollection: as [`State::delete_request`], except that upstream's
    /// `Store.DeleteCollection` calls the generic `Store.Delete` for each object, not the
    /// resource's own `REST.Delete`, so the system PriorityClasses' protection does not apply.
    pub(crate) fn delete_collection_item(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        opts: &deletion::DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        self.delete_object(def, ns, name, opts, false)
    }

    /// A delete, with the resource's `REST.Delete` checks when `rest_checks`.
    fn delete_object(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        opts: &deletion::DeleteOptions,
        rest_checks: bool,
    ) -> Result<Deleted, ApiError> {
        // The handler validates the options before the object is looked up (a 422 before a 404),
        // and the PriorityClasses' `REST.Delete` refuses a system class by its name before the
        // store looks it up (a 403 even once it is gone).
        opts.validate()?;
        if rest_checks && def.key.as_ref() == crate::scheduling::PC_KEY {
            crate::scheduling::check_delete(name)?;
        }
        let old = self.get(def, ns, name)?;
        let old_v = old.value();
        opts.check_preconditions(&def.group, &def.kind, &old_v)?;
        if !finalizes(def) {
            let obj = self.delete(def, ns, name, None)?;
            return Ok(Deleted { obj, gone: true });
        }
        let now = std::time::SystemTime::now();
        let mut obj = old_v.clone();
        let mut grace = opts.grace_period_seconds;
        let before = if def.key.as_ref() == "/pods" {
            deletion::before_delete_pod(&mut obj, &mut grace, now)
        } else {
            deletion::BeforeDelete {
                graceful: false,
                pending: false,
            }
        };
        if before.pending {
            return Ok(Deleted {
                obj: old,
                gone: false,
            });
        }
        let finalizers = deletion::has_finalizers(&obj);
        if !before.graceful && !finalizers {
            let obj = self.commit(def, old_v.clone(), EventType::Deleted);
            return Ok(Deleted { obj, gone: true });
        }
        if !before.graceful {
            // Waiting for finalizers: marked, not deleted (no write when already marked).
            deletion::mark_as_deleting(&mut obj, now);
            if obj == old_v {
                return Ok(Deleted {
                    obj: old,
                    gone: false,
                });
            }
            let obj = self.commit(def, obj, EventType::Modified);
            return Ok(Deleted { obj, gone: false });
        }
        let updated = self.commit(def, obj, EventType::Modified);
        if finalizers || grace.unwrap_or(0) > 0 {
            return Ok(Deleted {
                obj: updated,
                gone: false,
            });
        }
        let obj = self.commit(def, updated.value(), EventType::Deleted);
        Ok(Deleted { obj, gone: true })
    }

    fn delete_namespace_contents(&mut self, ns: &str) {
        let defs: Vec<Arc<ResourceDef>> = self
            .registry
            .defs()
            .iter()
            .filter(|d| d.namespaced)
            .cloned()
            .collect();
        let mut seen: Vec<Arc<str>> = Vec::new();
        for d in defs {
            if seen.contains(&d.key) {
                continue;
            }
            seen.push(d.key.clone());
            let (_, items) = self.list(&d, Some(ns));
            for it in items {
                self.commit(&d, it.value(), EventType::Deleted);
            }
        }
    }

    /// `pods/binding`; returns the bound pod and the node name.
    pub fn bind(
        &mut self,
        ns: &str,
        name: &str,
        binding: &Value,
    ) -> Result<(Arc<Stored>, String), ApiError> {
        let def = self
            .registry
            .get("", "v1", "pods")
            .expect("pods are built in");
        let old = self.get(&def, ns, name)?;
        let old_v = old.value();
        let mut pod = old_v.clone();
        let node = kinds::apply_binding(&mut pod, binding, name)?;
        Ok((self.commit(&def, pod, EventType::Modified), node))
    }

    /// The StorageClass resource.
    fn storage_class_def(&self) -> Option<Arc<ResourceDef>> {
        self.registry.get("storage.k8s.io", "v1", "storageclasses")
    }

    /// A receiver of every event committed from now on (the simulator's controllers).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    /// Internal read-modify-write of a status (KWOK): `f` returns false to skip the write;
    /// `manager` owns the status fields it changes (subresource `status`).
    pub fn modify_status(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        manager: &Manager,
        f: impl FnOnce(&mut Value) -> bool,
    ) -> Option<Arc<Stored>> {
        let old = self.get(def, ns, name).ok()?;
        let old_v = old.value();
        let mut v = old_v.clone();
        if !f(&mut v) {
            return None;
        }
        managed::record(Some(&old_v), &mut v, manager, "status", Scope::Status, None);
        Some(self.commit(def, v, EventType::Modified))
    }

    /// Internal read-modify-write of a status by a server-side apply of `applied` (the apply
    /// configuration, for managedFields): `f` returns false to skip the write.
    pub fn apply_status(
        &mut self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        manager: &Manager,
        applied: &Value,
        f: impl FnOnce(&mut Value) -> bool,
    ) -> Option<Arc<Stored>> {
        let old = self.get(def, ns, name).ok()?;
        let old_v = old.value();
        let mut v = old_v.clone();
        if !f(&mut v) || v == old_v {
            return None;
        }
        managed::record(
            Some(&old_v),
            &mut v,
            manager,
            "status",
            Scope::Status,
            Some(applied),
        );
        Some(self.commit(def, v, EventType::Modified))
    }

    /// Starts a watch of `key` (in `ns` if set) after version `from` (None/0: current state first).
    pub fn watch(&self, key: &Arc<str>, ns: Option<&str>, from: Option<u64>) -> WatchStart {
        let rx = self.tx.subscribe();
        let initial = match from {
            None | Some(0) => {
                let def = self.registry.defs().iter().find(|d| &d.key == key).cloned();
                let items = def.map(|d| self.list(&d, ns).1).unwrap_or_default();
                items
                    .into_iter()
                    .map(|obj| {
                        let rv = obj.resource_version();
                        Arc::new(Event {
                            rv,
                            key: key.clone(),
                            etype: EventType::Added,
                            obj,
                            prev: None,
                        })
                    })
                    .collect()
            }
            Some(from) if from < self.evicted_rv => {
                let oldest = self.history.front().map_or(self.rv, |e| e.rv);
                return WatchStart::Expired(ApiError::expired(from, oldest));
            }
            Some(from) => {
                let start = self.history.partition_point(|e| e.rv <= from);
                self.history
                    .range(start..)
                    .filter(|e| &e.key == key && ns.is_none_or(|n| e.obj.namespace() == n))
                    .cloned()
                    .collect()
            }
        };
        WatchStart::Ok(initial, rx, self.rv)
    }
}

/// Whether deletions of `def` honour finalizers (pods and PodDisruptionBudgets; pods also
/// delete gracefully).
fn finalizes(def: &ResourceDef) -> bool {
    matches!(
        def.key.as_ref(),
        "/pods" | crate::policy::PDB_KEY | crate::dra::CLAIM_KEY
    )
}

/// The fields a write to `part` of `def` can own.
fn scope(def: &ResourceDef, part: Part) -> Scope {
    match part {
        Part::Status => Scope::Status,
        Part::Resize => Scope::Resize,
        Part::Main if def.status => Scope::NoStatus,
        Part::Main => Scope::All,
    }
}

/// Fills or checks `apiVersion`/`kind` against the resource.
fn check_type(def: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    let api_version = def.api_version();
    let o = obj.as_object_mut().expect("checked object");
    match o.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            o.insert("kind".into(), json!(def.kind));
        }
        Some(k) if k == def.kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({}) does not match the expected API version ({api_version}) or kind {k:?} is not {:?}",
                o.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
                def.kind
            )));
        }
    }
    match o.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            o.insert("apiVersion".into(), json!(api_version));
        }
        Some(v) if v == api_version => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({api_version})"
            )));
        }
    }
    Ok(())
}

/// The parse behind [`Stored::value_without_managed_fields`]: an object whose `metadata` map
/// skips `managedFields` (read past, nothing built).
mod lean {
    use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
    use serde_json::{Map, Value};
    use std::fmt;

    /// The top-level object (`top`), or its `metadata`.
    pub(super) struct Object {
        pub(super) top: bool,
    }

    impl<'de> DeserializeSeed<'de> for Object {
        type Value = Map<String, Value>;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for Object {
        type Value = Map<String, Value>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            let mut m = Map::new();
            while let Some(k) = a.next_key::<String>()? {
                if self.top && k == "metadata" {
                    let meta = a.next_value_seed(Object { top: false })?;
                    m.insert(k, Value::Object(meta));
                } else if !self.top && k == "managedFields" {
                    a.next_value::<IgnoredAny>()?;
                } else {
                    let v = a.next_value::<Value>()?;
                    m.insert(k, v);
                }
            }
            Ok(m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> (State, Arc<ResourceDef>, Arc<ResourceDef>) {
        state_with_history(4)
    }

    /// A state keeping `history` events, the `default` namespace, and the namespaces and
    /// configmaps definitions.
    fn state_with_history(history: usize) -> (State, Arc<ResourceDef>, Arc<ResourceDef>) {
        let mut s = State::new(history, 64, false);
        let ns = s.registry.get("", "v1", "namespaces").unwrap();
        s.create(&ns, None, json!({"metadata": {"name": "default"}}))
            .unwrap();
        let cm = s.registry.get("", "v1", "configmaps").unwrap();
        (s, ns, cm)
    }

    /// A create with `generateName` whose name is found taken is made again under a new
    /// name, eight names in all (RetryGenerateName); a name the client gave is not.
    #[test]
    fn a_taken_generated_name_is_generated_again() {
        let (mut s, _, cm) = state();
        let generated = || json!({"metadata": {"generateName": "gen-"}});
        s.forced_suffixes = ["aaaaa", "aaaaa", "bbbbb"].map(String::from).into();
        let first = s.create(&cm, Some("default"), generated()).unwrap();
        let second = s.create(&cm, Some("default"), generated()).unwrap();
        assert_eq!(
            (
                name_of(&first.value()).to_owned(),
                name_of(&second.value()).to_owned()
            ),
            ("gen-aaaaa".to_owned(), "gen-bbbbb".to_owned())
        );
        s.forced_suffixes = std::iter::repeat_n("aaaaa".to_owned(), 8).collect();
        let err = s.create(&cm, Some("default"), generated()).unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (409, "configmaps \"gen-aaaaa\" already exists")
        );
        assert!(s.forced_suffixes.is_empty(), "eight names tried");
        let err = s
            .create(
                &cm,
                Some("default"),
                json!({"metadata": {"name": "gen-bbbbb"}}),
            )
            .unwrap_err();
        assert_eq!(err.code, 409);
    }

    /// Generation tracking compares everything but metadata and status, in place.
    #[test]
    fn only_what_is_not_metadata_or_status_moves_the_generation() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"a": 1}, "status": {"phase": "P"}});
        let mut other = pod.clone();
        other["metadata"]["labels"] = json!({"k": "v"});
        other["status"]["phase"] = json!("Running");
        assert!(!spec_differs(&pod, &other));
        other["spec"]["a"] = json!(2);
        assert!(spec_differs(&pod, &other));
        let mut extra = pod.clone();
        extra["data"] = json!({});
        assert!(spec_differs(&pod, &extra) && spec_differs(&extra, &pod));
        let mut fewer = pod.clone();
        fewer.as_object_mut().unwrap().remove("status");
        assert!(!spec_differs(&pod, &fewer));
        assert!(spec_differs(&pod, &json!(null)));
        assert!(!spec_differs(&json!(1), &json!(1)));
    }

    #[test]
    fn value_without_managed_fields_drops_only_them() {
        let (mut s, _, cm) = state();
        let a = s
            .create_by(
                &cm,
                Some("default"),
                json!({"metadata": {"name": "a", "labels": {"managedFields": "kept"}},
                       "data": {"managedFields": "kept"}}),
                Some(&Manager::update("me")),
                None,
            )
            .unwrap();
        let full = a.value();
        assert!(full["metadata"]["managedFields"].is_array(), "{full}");
        let mut want = full.clone();
        want["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert_eq!(a.value_without_managed_fields(), want);
        // An object without them parses whole.
        let b = s
            .create(&cm, Some("default"), json!({"metadata": {"name": "b"}}))
            .unwrap();
        assert_eq!(b.value_without_managed_fields(), b.value());
    }

    #[test]
    fn create_update_conflict_delete() {
        let (mut s, _, cm) = state();
        let a = s
            .create(
                &cm,
                Some("default"),
                json!({"metadata": {"name": "a"}, "data": {"k": "v"}}),
            )
            .unwrap();
        assert_eq!(a.value()["kind"], "ConfigMap");
        let e = s
            .create(&cm, Some("default"), json!({"metadata": {"name": "a"}}))
            .unwrap_err();
        assert_eq!(e.reason, "AlreadyExists");
        let mut upd = a.value();
        upd["data"]["k"] = json!("w");
        let b = s
            .update(&cm, "default", "a", upd.clone(), Part::Main)
            .unwrap();
        assert_ne!(
            b.value()["metadata"]["resourceVersion"],
            a.value()["metadata"]["resourceVersion"]
        );
        assert_eq!(
            s.update(&cm, "default", "a", upd, Part::Main)
                .unwrap_err()
                .code,
            409
        );
        let e = s
            .create(&cm, Some("missing"), json!({"metadata": {"name": "a"}}))
            .unwrap_err();
        assert_eq!(e.message, "namespaces \"missing\" not found");
        s.delete(&cm, "default", "a", None).unwrap();
        assert_eq!(s.get(&cm, "default", "a").unwrap_err().code, 404);
    }

    #[test]
    fn watch_replays_history_and_expires() {
        let (mut s, _, cm) = state();
        let start = s.rv();
        for i in 0..3 {
            s.create(
                &cm,
                Some("default"),
                json!({"metadata": {"name": format!("c{i}")}}),
            )
            .unwrap();
        }
        match s.watch(&cm.key, None, Some(start)) {
            WatchStart::Ok(backlog, _, _) => assert_eq!(backlog.len(), 3),
            WatchStart::Expired(e) => panic!("{e}"),
        }
        for i in 3..6 {
            s.create(
                &cm,
                Some("default"),
                json!({"metadata": {"name": format!("c{i}")}}),
            )
            .unwrap();
        }
        assert!(
            matches!(s.watch(&cm.key, None, Some(start)), WatchStart::Expired(e) if e.code == 410)
        );
        match s.watch(&cm.key, Some("default"), None) {
            WatchStart::Ok(initial, _, _) => assert_eq!(initial.len(), 6),
            WatchStart::Expired(e) => panic!("{e}"),
        }
    }

    #[test]
    fn packed_versions_read_as_committed() {
        let (mut s, _, cm) = state_with_history(100_000);
        s.set_packing(true);
        let start = s.rv();
        let n = crate::pack::YOUNG * 2;
        let data = |i: usize| json!({"k": format!("value {i} of a map long enough to be packed")});
        let mut committed = Vec::new();
        for i in 0..n {
            let c = s
                .create(
                    &cm,
                    Some("default"),
                    json!({"metadata": {"name": format!("c{i}")}, "data": data(i)}),
                )
                .unwrap();
            committed.push(c.json());
        }
        // Every other one replaced: its first version is only in the history.
        for i in (0..n).step_by(2) {
            let mut v = s.get(&cm, "default", &format!("c{i}")).unwrap().value();
            v["data"] = data(i + 1);
            let c = s
                .update(&cm, "default", &format!("c{i}"), v, Part::Main)
                .unwrap();
            committed.push(c.json());
        }
        // What is packed is then what the protocol packs, whatever the packer thread's pace.
        s.settle_packing();
        assert_eq!(s.packing_skipped(), 0);
        let WatchStart::Ok(backlog, _, _) = s.watch(&cm.key, None, Some(start)) else {
            panic!("history kept");
        };
        let replayed: Vec<Bytes> = backlog.iter().map(|e| e.obj.json()).collect();
        assert_eq!(replayed, committed);
        assert!(backlog[0].obj.enc.is_packed(), "an old version is packed");
        assert!(
            !backlog.last().unwrap().obj.enc.is_packed(),
            "a young one is not"
        );
        let prev = backlog[n].prev.as_ref().unwrap();
        assert!(prev.enc.is_packed());
        assert_eq!(prev.json(), committed[0]);
        assert_eq!(prev.value()["data"], data(0));
    }

    /// Gets, lists and history replays, on other threads while versions are committed and
    /// the packer thread packs them, always read the bytes the commit produced (`pack`'s
    /// protocol, steps 3–5).
    #[test]
    fn reads_racing_the_packer_read_as_committed() {
        use std::sync::Mutex;
        use std::sync::atomic::{AtomicBool, Ordering};
        const READERS: usize = 2;
        let (mut s, _, cm) = state_with_history(100_000);
        s.set_packing(true);
        let start = s.rv();
        let s = Mutex::new(s);
        // Every version's bytes as its commit returned them, by resourceVersion: recorded
        // before the state lock is released, so a reader finds whatever it can see.
        let committed: Mutex<HashMap<u64, Bytes>> = Mutex::default();
        let done = AtomicBool::new(false);
        let n = crate::pack::YOUNG * 2;
        let data = |i: usize, g: usize| json!({"k": format!("c{i}: generation {g} of a map long enough to be packed")});
        let check = |objs: &[Arc<Stored>]| {
            let mut packed = 0;
            for o in objs {
                let rv = o.resource_version();
                let want = committed.lock().unwrap().get(&rv).cloned();
                assert_eq!(Some(o.json()), want, "version {rv}");
                packed += usize::from(o.enc.is_packed());
            }
            packed
        };
        std::thread::scope(|sc| {
            let readers: Vec<_> = (0..READERS)
                .map(|_| {
                    let (s, cm, done, check) = (&s, &cm, &done, &check);
                    sc.spawn(move || {
                        let (mut rounds, mut packed) = (0usize, 0usize);
                        loop {
                            let last = done.load(Ordering::Acquire);
                            let (objs, replayed) = {
                                let s = s.lock().unwrap();
                                let mut objs = s.list(cm, Some("default")).1;
                                let name = format!("c{}", rounds * 7 % n);
                                objs.extend(s.get(cm, "default", &name).ok());
                                let WatchStart::Ok(backlog, _, _) =
                                    s.watch(&cm.key, None, Some(start))
                                else {
                                    panic!("history kept");
                                };
                                (objs, backlog)
                            };
                            // Read outside the state lock too, as the handlers serialize.
                            packed += check(&objs);
                            let evs: Vec<Arc<Stored>> = replayed
                                .iter()
                                .flat_map(|e| std::iter::once(e.obj.clone()).chain(e.prev.clone()))
                                .collect();
                            packed += check(&evs);
                            rounds += 1;
                            if last {
                                break;
                            }
                        }
                        (rounds, packed)
                    })
                })
                .collect();
            for g in 0..2 {
                for i in 0..n {
                    let mut s = s.lock().unwrap();
                    let c = if g == 0 {
                        s.create(
                            cm.as_ref(),
                            Some("default"),
                            json!({"metadata": {"name": format!("c{i}")}, "data": data(i, g)}),
                        )
                    } else {
                        let mut v = s.get(&cm, "default", &format!("c{i}")).unwrap().value();
                        v["data"] = data(i, g);
                        s.update(&cm, "default", &format!("c{i}"), v, Part::Main)
                    }
                    .unwrap();
                    committed
                        .lock()
                        .unwrap()
                        .insert(c.resource_version(), c.json());
                }
            }
            s.lock().unwrap().settle_packing();
            done.store(true, Ordering::Release);
            for r in readers {
                let (rounds, packed) = r.join().unwrap();
                assert!(
                    rounds >= 2 && packed > 0,
                    "{rounds} rounds, {packed} packed reads"
                );
            }
        });
        let s = s.into_inner().unwrap();
        assert_eq!(s.packing_skipped(), 0);
        let WatchStart::Ok(backlog, _, _) = s.watch(&cm.key, None, Some(start)) else {
            panic!("history kept");
        };
        assert_eq!(backlog.len(), 2 * n);
        let all: Vec<Arc<Stored>> = backlog.iter().map(|e| e.obj.clone()).collect();
        assert_eq!(
            check(&all),
            2 * n - crate::pack::YOUNG,
            "all but the young versions packed"
        );
    }

    #[test]
    fn noop_update_keeps_version() {
        let (mut s, _, cm) = state();
        let a = s
            .create(&cm, Some("default"), json!({"metadata": {"name": "a"}}))
            .unwrap();
        let b = s
            .update(&cm, "default", "a", a.value(), Part::Main)
            .unwrap();
        assert_eq!(a.value(), b.value());
    }
}
