//! Filter and score plugins: one file per plugin, one line per filter or scorer in the chain
//! below.
//!
//! # Where a plugin lives
//!
//! Everything about a plugin is in its own file, as kube-scheduler keeps each plugin in one
//! folder (`pkg/scheduler/framework/plugins/<name>/`):
//!
//! - its **switch** (`Filter::SWITCH`: the `predicates` argument that turns it off, with its
//!   default) or **weight** (`Scorer::WEIGHT`: the `nodeorder` argument and its default);
//! - its **filter** (`Filter::filter`), written once for both uses: the fast check that stops at
//!   the first failure, and the explanation of a rejected node that reports every reason;
//! - its **failure reasons** ([`Reason`]): upstream's message text, and the cluster
//!   [`event`](crate::event)s that can make a rejected pod fit (its wake-ups);
//! - its **score** (`Scorer::score`) and, where kube-scheduler normalises it, its
//!   normalisation ([`Normalize`]);
//! - any **node flag** it wants precomputed per node slot (`FLAG`/`flag`), so the scan can skip
//!   it on nodes where it cannot matter without reading the node's description.
//!
//! [`conf`](crate::conf) reads switches and weights from this declaration (unknown-key warnings
//! included), the cache asks [`node_flags`] when it writes a slot, and `allocate` runs
//! [`Filters`] and [`Scores`]: none of them names a plugin. Only the profile's
//! [`FilterSwitches`] and [`ScoreWeights`] have a field per plugin: they are declared in
//! [`profile`](crate::profile), below the snapshot that carries them, and this chain gives them
//! their defaults, keys and reading.
//!
//! # The chain
//!
//! [`Filters`] runs the filters in the order declared below, which is Volcano's predicate order
//! (`volcano-agent-scheduler.md` §5.1): resource fit (the allocate action's own check), the pod
//! count, then NodeUnschedulable, NodeName, NodeAffinity, TaintToleration, NodePorts,
//! InterPodAffinity, NodeVolumeLimits, VolumeZone, PodTopologySpread, VolumeBinding. Pod affinity
//! and topology spread look at other nodes' pods:
//! `docs/constraints.md` says how their decisions stay exact under concurrency. The fast
//! check ([`Filters::fits`]) and the explanation ([`Filters::explain`]) are two
//! monomorphisations of the same chain and the same filter bodies ([`Check`] and [`Explain`]), so
//! they cannot disagree (a property test checks `fits == explain().is_empty()`). A filter whose
//! `ON_FAILURE` is [`OnFailure::Stop`] ends the explanation of a node it rejects, as upstream's
//! chain returns at the first hard failure; the pod count records its reason and goes on.
//!
//! A filter's `pre_filter` runs once per scheduling cycle and returns `None` when it cannot
//! reject any node for this pod (switched off, or the pod does not use the feature): the scan
//! then skips it on every node, so pods that do not use a feature do not pay for it. Scorers
//! likewise: weight 0 or nothing to score is `None`.
//!
//! # Adding a plugin (a worked example)
//!
//! Say a filter is to keep pods off nodes whose `Ready` condition is not `True` (kube-scheduler
//! leaves that to the `not-ready` taint; this is only an example). Its file, `node_ready.rs`:
//!
//! ```ignore
//! use super::{Cycle, Filter, Names, Node, NodeFacts, OnFailure, Reason, Switch, Verdict};
//! use crate::event::{self, Events};
//!
//! pub struct NodeReady;
//!
//! /// Flag of a node that is not Ready (a free bit: the chain checks they are distinct).
//! pub const NOT_READY: u8 = 1 << 6;
//!
//! #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
//! pub struct NotReady;
//!
//! impl Reason for NotReady {
//!     fn wake(self) -> Events {
//!         event::NODE_ADDED | event::NODE_READY // a new event in `event`, sent by the cache
//!     }
//!     fn message(self, _: &Names<'_>) -> String {
//!         "node(s) were not ready".to_owned()
//!     }
//! }
//!
//! impl Filter for NodeReady {
//!     const NAME: &'static str = "NodeReady";
//!     const SWITCH: Option<Switch> =
//!         Some(Switch { key: "predicate.NodeReadyEnable", default: true });
//!     const ON_FAILURE: OnFailure = OnFailure::Stop;
//!     const RARE: bool = false; // true for a filter most pods give nothing to check
//!     const FLAG: u8 = NOT_READY;
//!     type Reason = NotReady;
//!     type State<'a> = ();
//!
//!     fn flag(node: &NodeFacts<'_>) -> bool {
//!         !node.meta.ready
//!     }
//!
//!     fn pre_filter<'a>(_: Cycle<'a>) -> Option<()> {
//!         Some(()) // `None` would skip it for this pod on every node
//!     }
//!
//!     #[inline(always)]
//!     fn filter<V: Verdict<NotReady>>(_: &(), node: Node<'_>, v: &mut V) -> bool {
//!         if node.has(NOT_READY) {
//!             v.fail(NotReady);
//!             return false;
//!         }
//!         true
//!     }
//! }
//! ```
//!
//! then `pub mod node_ready;`, one line in the `filters` list at the bottom of this file, at
//! its place in upstream's order: `node_ready: NodeReady(node_ready::NodeReady),`, and its
//! field `node_ready: bool` at the same place in `profile::FilterSwitches` (the compiler points
//! at a missing one). That line gives its switch in `Profile::filters` its default (read by
//! `conf`, and its key known to the unknown-argument check), a variant `Failure::NodeReady`
//! whose message and wake-ups are the ones above, its flag in [`node_flags`], and its place in
//! both forms of the chain. A scorer is the same with [`Scorer`] (and [`Normalize`] when
//! kube-scheduler normalises it), a line under `scores` or `normalized`, and its field in
//! `profile::ScoreWeights`.
//!
//! The plugins own no state: they read snapshots and compiled pods only.

pub mod balanced_allocation;
pub mod dynamic_resources;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_name;
pub mod node_ports;
pub mod node_unschedulable;
pub mod node_volume_limits;
pub mod noderesources;
pub mod nominated_room;
pub mod pod_topology_spread;
pub mod taint_toleration;
pub mod volume_binding;
pub mod volume_zone;

#[cfg(test)]
mod tests;

use crate::dra::PodClaims;
use crate::event::Events;
use crate::model::{CompiledPod, HostPort, Interner, NodeMeta, PodNames, ResourceRegistry};
pub use crate::profile::{FilterSwitches, ScoreWeights};
use crate::snapshot::{Chunk, Snapshot, flags};
use crate::volumes::PodVolumes;

/// What a plugin sees of one scheduling cycle: the pod and the snapshot it is scheduled
/// against (the profile in force is `snap.profile`).
#[derive(Clone, Copy)]
pub struct Cycle<'a> {
    pub pod: &'a CompiledPod,
    pub snap: &'a Snapshot,
    /// The pod's claims, resolved when it was handed off (`volumes`); `None` without claims.
    pub volumes: Option<&'a PodVolumes>,
    /// The pod's ResourceClaims, resolved when it was handed off (`dra`); `None` without any.
    pub claims: Option<&'a PodClaims>,
}

/// One node slot as the scan visits it.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    pub chunk: &'a Chunk,
    /// Index within the chunk.
    pub i: usize,
    /// `chunk.flags[i]`.
    pub flags: u8,
}

impl<'a> Node<'a> {
    #[inline(always)]
    pub fn new(chunk: &'a Chunk, i: usize) -> Node<'a> {
        Node {
            chunk,
            i,
            flags: chunk.flags[i],
        }
    }

    /// The node's description (always there for a present slot).
    #[inline(always)]
    pub fn meta(&self) -> Option<&'a NodeMeta> {
        self.chunk.meta[self.i].as_deref()
    }

    #[inline(always)]
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// The node's slot in the snapshot.
    #[inline(always)]
    pub fn slot(&self) -> usize {
        self.chunk.base as usize + self.i
    }
}

/// What the cache knows of a node when it writes its slot, for plugins' node flags.
pub struct NodeFacts<'a> {
    pub meta: &'a NodeMeta,
    /// Host ports in use on the node, sorted.
    pub ports: &'a [HostPort],
    /// Some pod is nominated to the node (`preemption`).
    pub nominated: bool,
}

/// Names to render reasons with (the cache's registry and interner), and the pod they are
/// rendered for.
#[derive(Clone, Copy)]
pub struct Names<'a> {
    pub resources: &'a ResourceRegistry,
    pub strings: &'a Interner,
    pub pod: PodNames<'a>,
}

impl<'a> Names<'a> {
    /// The same names, rendering for `pod`.
    pub fn for_pod(self, pod: &'a CompiledPod) -> Names<'a> {
        Names {
            pod: PodNames::of(pod),
            ..self
        }
    }

    /// The same names, rendering for `pod` with its claims resolved as `volumes` and `claims`
    /// (what a reason reads there: `PodVolumes::detail`, `PodClaims::invalid`).
    pub fn for_task(
        self,
        pod: &'a CompiledPod,
        volumes: Option<&'a PodVolumes>,
        claims: Option<&'a PodClaims>,
    ) -> Names<'a> {
        let mut pod = PodNames::of(pod);
        if let Some(v) = volumes {
            pod = v.names(pod);
        }
        if let Some(c) = claims {
            pod = c.names(pod);
        }
        Names { pod, ..self }
    }
}

/// One reason a filter rejects a node.
pub trait Reason: Copy + Eq + std::fmt::Debug {
    /// Cluster events that can make a pod rejected for this reason fit (kube-scheduler's
    /// `EventsToRegister`): the pod is moved back from the unschedulable pool when one happens.
    fn wake(self) -> Events;
    /// Upstream's text for it, as it appears after the count in
    /// `0/N nodes are unavailable: <count> <text>, ...`.
    fn message(self, names: &Names<'_>) -> String;
}

/// Where a filter reports why it rejects a node. The fast check ([`Check`]) records nothing and
/// stops at the first failure; the explanation ([`Explain`]) records every reason. A filter
/// that can fail for several reasons at once reports them all unless `!V::EXPLAIN`, when it
/// returns at the first.
pub trait Verdict<R> {
    const EXPLAIN: bool;
    fn fail(&mut self, reason: R);
}

/// The fast check: `true`/`false` only.
pub struct Check;

impl<R> Verdict<R> for Check {
    const EXPLAIN: bool = false;
    #[inline(always)]
    fn fail(&mut self, _: R) {}
}

/// The explanation: every reason, as a [`Failure`], to the closure.
pub struct Explain<'o, F>(pub &'o mut F);

impl<R: Into<Failure>, F: FnMut(Failure)> Verdict<R> for Explain<'_, F> {
    const EXPLAIN: bool = true;
    #[inline]
    fn fail(&mut self, reason: R) {
        (self.0)(reason.into())
    }
}

/// Whether explaining a node goes on to the next filter after this one rejected it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// Upstream's chain returns at this filter's failure.
    Stop,
    /// Recorded, and the chain goes on (Volcano's pod-count check).
    Continue,
}

/// A boolean `predicates` argument switching a filter (`predicate.<Name>Enable`).
#[derive(Debug, Clone, Copy)]
pub struct Switch {
    pub key: &'static str,
    pub default: bool,
}

/// A `nodeorder` argument weighting a scorer (`<name>.weight`); 0 disables it.
#[derive(Debug, Clone, Copy)]
pub struct Weight {
    pub key: &'static str,
    pub default: i64,
}

/// What a filter's verdicts read beyond the node itself: after the claim, the worker checks that
/// those other nodes did not change since the snapshot (`binder` steps 5–6,
/// `docs/constraints.md`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reads {
    /// Topology keys whose domain around the chosen node the verdict depended on.
    pub domains: smallvec::SmallVec<[u32; 4]>,
    /// Of those, the keys of required anti-affinity terms: where such a domain holds other
    /// nodes, the claim bumps the anti-affinity epoch.
    pub anti: smallvec::SmallVec<[u32; 4]>,
    /// The verdict depended on every node (pod affinity's "first pod" exemption).
    pub everywhere: bool,
}

impl Reads {
    pub fn clear(&mut self) {
        self.domains.clear();
        self.anti.clear();
        self.everywhere = false;
    }

    pub fn is_empty(&self) -> bool {
        self.domains.is_empty() && !self.everywhere
    }
}

/// A filter (kube-scheduler's PreFilter + Filter).
pub trait Filter {
    /// kube-scheduler's plugin name.
    const NAME: &'static str;
    /// The switch that turns it off; `None`: always on (as upstream).
    const SWITCH: Option<Switch>;
    const ON_FAILURE: OnFailure;
    /// Most pods give it nothing to check (`pre_filter` is `None`): the fast check looks at all
    /// such filters behind one branch per node, so pods without the feature pay one branch.
    const RARE: bool = false;
    /// A node flag this filter has the cache precompute ([`node_flags`]), or 0.
    const FLAG: u8 = 0;
    type Reason: Reason;
    /// What `pre_filter` works out once per cycle, borrowed from the pod or the snapshot;
    /// [`Filter::enter_chunk`] may point it at each chunk's rows.
    type State<'a>;

    /// Whether node `facts` gets [`Filter::FLAG`].
    #[inline]
    fn flag(_facts: &NodeFacts<'_>) -> bool {
        false
    }

    /// PreFilter: `None` when the filter cannot reject any node for this pod (it is skipped).
    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<Self::State<'a>>;

    /// The scan moves to `chunk` (64 node slots).
    #[inline(always)]
    fn enter_chunk<'a>(_state: &mut Self::State<'a>, _chunk: &'a Chunk) {}

    /// Can the pod go on `node`? Report every reason it cannot to `v` (see [`Verdict`]).
    fn filter<V: Verdict<Self::Reason>>(state: &Self::State<'_>, node: Node<'_>, v: &mut V)
    -> bool;

    /// What its verdicts read beyond the node itself ([`Reads`]); nothing for a filter that
    /// looks at one node.
    #[inline]
    fn reads(_state: &Self::State<'_>, _reads: &mut Reads) {}
}

/// A scorer (kube-scheduler's PreScore + Score). Raw scores are 0..=100 unless the scorer
/// normalises them ([`Normalize`]); the chain multiplies by the weight.
pub trait Scorer {
    /// kube-scheduler's plugin name.
    const NAME: &'static str;
    const WEIGHT: Weight;
    /// Whether it implements [`Normalize`] (and must be listed under `normalized`).
    const NORMALIZED: bool;
    /// Most pods give it nothing to score: scored behind one branch per node (see `Filter::RARE`).
    const RARE: bool = false;
    /// A node flag this scorer has the cache precompute ([`node_flags`]), or 0.
    const FLAG: u8 = 0;
    type State<'a>;

    /// Whether node `facts` gets [`Scorer::FLAG`].
    #[inline]
    fn flag(_facts: &NodeFacts<'_>) -> bool {
        false
    }

    /// PreScore: `None` when it has nothing to score for this pod (it adds nothing).
    fn pre_score<'a>(cx: Cycle<'a>) -> Option<Self::State<'a>>;

    #[inline(always)]
    fn enter_chunk<'a>(_state: &mut Self::State<'a>, _chunk: &'a Chunk) {}

    /// The raw score of a feasible node.
    fn score(state: &Self::State<'_>, node: Node<'_>) -> i64;
}

/// The lowest and highest raw score of one scorer over the feasible nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub min: i64,
    pub max: i64,
}

impl Range {
    const EMPTY: Range = Range {
        min: i64::MAX,
        max: i64::MIN,
    };

    /// Widen by `v`; the minimum only when the normaliser reads it.
    #[inline(always)]
    fn add<const MIN: bool>(&mut self, v: i64) {
        if MIN {
            self.min = self.min.min(v);
        }
        self.max = self.max.max(v);
    }
}

/// A scorer whose raw scores kube-scheduler normalises over the feasible nodes
/// (`NormalizeScore`) into 0..=100.
pub trait Normalize: Scorer {
    /// Whether [`Normalize::normalize`] reads `range.min` (it is not tracked otherwise).
    const USES_MIN: bool;
    fn normalize(raw: i64, range: Range) -> i64;

    /// Whether a raw score takes part in the range (a scorer may mark ignored nodes).
    #[inline(always)]
    fn counts(_raw: i64) -> bool {
        true
    }
}

/// The highest node score a scorer gives (`framework.MaxNodeScore`).
pub const MAX_NODE_SCORE: i64 = 100;

macro_rules! plugins {
    (
        filters { $($f:ident: $Variant:ident($F:ty),)* }
        scores { $($s:ident: $S:ty,)* }
        normalized { $($n:ident: $N:ty,)* }
    ) => {
        // `FilterSwitches` and `ScoreWeights` are declared in `profile` (the snapshot carries
        // them): their fields must be exactly this chain's, which these literals check.
        impl FilterSwitches {
            /// Every switch at its default.
            pub const DEFAULT: FilterSwitches = FilterSwitches {
                $($f: match <$F as Filter>::SWITCH { Some(s) => s.default, None => true },)*
            };
            /// Without a `predicates` entry (or with `enablePredicate: false`): only the filters
            /// that are always on.
            pub const OFF: FilterSwitches = FilterSwitches {
                $($f: <$F as Filter>::SWITCH.is_none(),)*
            };
            /// The argument keys of the switchable filters.
            pub fn keys() -> impl Iterator<Item = &'static str> {
                [$(<$F as Filter>::SWITCH.map(|s| s.key),)*].into_iter().flatten()
            }

            /// Read the switches from a `predicates` entry's arguments; `get(key, default)`
            /// validates each value.
            pub fn read<E>(
                mut get: impl FnMut(&'static str, bool) -> Result<bool, E>,
            ) -> Result<FilterSwitches, E> {
                Ok(FilterSwitches {
                    $($f: match <$F as Filter>::SWITCH {
                        Some(s) => get(s.key, s.default)?,
                        None => true,
                    },)*
                })
            }
        }

        impl ScoreWeights {
            /// The highest total score a node can get (every scorer at `MAX_NODE_SCORE`).
            pub fn max_total(&self) -> i64 {
                0 $(+ self.$s)* $(+ self.$n)*
            }

            /// Every weight at its default.
            pub const DEFAULT: ScoreWeights = ScoreWeights {
                $($s: <$S as Scorer>::WEIGHT.default,)*
                $($n: <$N as Scorer>::WEIGHT.default,)*
            };
            /// Without a `nodeorder` entry (or with `enableNodeOrder: false`).
            pub const NONE: ScoreWeights = ScoreWeights {
                $($s: 0,)*
                $($n: 0,)*
            };
            /// The weights' argument keys.
            pub const KEYS: &'static [&'static str] = &[
                $(<$S as Scorer>::WEIGHT.key,)*
                $(<$N as Scorer>::WEIGHT.key,)*
            ];

            pub fn read<E>(
                mut get: impl FnMut(&'static str, i64) -> Result<i64, E>,
            ) -> Result<ScoreWeights, E> {
                Ok(ScoreWeights {
                    $($s: get(<$S as Scorer>::WEIGHT.key, <$S as Scorer>::WEIGHT.default)?,)*
                    $($n: get(<$N as Scorer>::WEIGHT.key, <$N as Scorer>::WEIGHT.default)?,)*
                })
            }
        }

        // Plain scorers give 0..=100 as they are; normalised ones are listed as such.
        const _: () = {
            $(assert!(!<$S as Scorer>::NORMALIZED, concat!(stringify!($S), " normalises: list it under `normalized`"));)*
            $(assert!(<$N as Scorer>::NORMALIZED, concat!(stringify!($N), " does not normalise: list it under `scores`"));)*
        };

        // Node flags are distinct bits, apart from `PRESENT`.
        const _: () = {
            let mut seen = flags::PRESENT;
            $(
                let f = <$F as Filter>::FLAG;
                assert!(f & seen == 0, concat!("node flag of ", stringify!($F), " is taken"));
                seen |= f;
            )*
            $(
                let f = <$S as Scorer>::FLAG;
                assert!(f & seen == 0, concat!("node flag of ", stringify!($S), " is taken"));
                seen |= f;
            )*
            $(
                let f = <$N as Scorer>::FLAG;
                assert!(f & seen == 0, concat!("node flag of ", stringify!($N), " is taken"));
                seen |= f;
            )*
            let _ = seen;
        };

        /// The flags of a present node slot: `PRESENT` and every plugin's flag that applies.
        pub fn node_flags(facts: &NodeFacts<'_>) -> u8 {
            let mut f = flags::PRESENT;
            $(if <$F as Filter>::FLAG != 0 && <$F as Filter>::flag(facts) { f |= <$F as Filter>::FLAG; })*
            $(if <$S as Scorer>::FLAG != 0 && <$S as Scorer>::flag(facts) { f |= <$S as Scorer>::FLAG; })*
            $(if <$N as Scorer>::FLAG != 0 && <$N as Scorer>::flag(facts) { f |= <$N as Scorer>::FLAG; })*
            f
        }

        /// One reason a node cannot take a pod: a filter's reason, or the sharding view's.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Failure {
            $($Variant(<$F as Filter>::Reason),)*
            /// Hard sharding mode: the node is outside this scheduler's NodeShard.
            NotInShard,
        }

        $(
            impl From<<$F as Filter>::Reason> for Failure {
                #[inline]
                fn from(r: <$F as Filter>::Reason) -> Failure {
                    Failure::$Variant(r)
                }
            }
        )*

        impl Failure {
            /// Cluster events that can make a pod rejected for this reason fit.
            pub fn wake(self) -> Events {
                match self {
                    $(Failure::$Variant(r) => r.wake(),)*
                    Failure::NotInShard => crate::shard::NOT_IN_SHARD_WAKE,
                }
            }

            /// Upstream's text for this reason.
            pub fn message(self, names: &Names<'_>) -> String {
                match self {
                    $(Failure::$Variant(r) => r.message(names),)*
                    Failure::NotInShard => crate::shard::NOT_IN_SHARD.to_owned(),
                }
            }
        }

        /// The filter chain for one pod (see the module doc).
        pub struct Filters<'a> {
            $($f: Option<<$F as Filter>::State<'a>>,)*
            /// Some `RARE` filter has something to check for this pod.
            rare: bool,
        }

        impl<'a> Filters<'a> {
            /// PreFilter of every filter that is switched on.
            #[inline(always)]
            pub fn new(cx: Cycle<'a>) -> Filters<'a> {
                let on = &cx.snap.profile.filters;
                let mut f = Filters {
                    $($f: if on.$f { <$F as Filter>::pre_filter(cx) } else { None },)*
                    rare: false,
                };
                f.rare = false $(|| (<$F as Filter>::RARE && f.$f.is_some()))*;
                f
            }

            #[inline(always)]
            pub fn enter_chunk(&mut self, chunk: &'a Chunk) {
                $(if let Some(s) = &mut self.$f { <$F as Filter>::enter_chunk(s, chunk); })*
            }

            /// Can the pod go on `node`? (the scan's hot path). The common filters first, in
            /// chain order, then the `RARE` ones behind one branch; the order of a fast check
            /// cannot change its answer.
            #[inline(always)]
            pub fn fits(&self, node: Node<'_>) -> bool {
                self.fits_in::<true>(node)
            }

            /// Some `RARE` filter has something to check for this pod.
            pub fn rare(&self) -> bool {
                self.rare
            }

            /// [`Filters::fits`] in a scan instantiated for pods with (`RARE`) or without any
            /// rare plugin: without, the check is compiled out of the per-node loop. `RARE`
            /// false requires `!self.rare()`.
            #[inline(always)]
            pub fn fits_in<const RARE: bool>(&self, node: Node<'_>) -> bool {
                debug_assert!(RARE || !self.rare);
                if !node.has(flags::PRESENT) {
                    return false;
                }
                $(
                    if !<$F as Filter>::RARE
                        && let Some(s) = &self.$f
                        && !<$F as Filter>::filter(s, node, &mut Check)
                    {
                        return false;
                    }
                )*
                if RARE && self.rare {
                    $(
                        if <$F as Filter>::RARE
                            && let Some(s) = &self.$f
                            && !<$F as Filter>::filter(s, node, &mut Check)
                        {
                            return false;
                        }
                    )*
                }
                true
            }

            /// What the verdicts read beyond each node (see [`Reads`]).
            pub fn reads(&self, out: &mut Reads) {
                out.clear();
                $(if let Some(s) = &self.$f { <$F as Filter>::reads(s, out); })*
            }

            /// Every reason `node` rejects the pod, in chain order, as upstream reports them.
            pub fn explain(&self, node: Node<'_>, out: &mut impl FnMut(Failure)) {
                if !node.has(flags::PRESENT) {
                    return;
                }
                $(
                    if let Some(s) = &self.$f
                        && !<$F as Filter>::filter(s, node, &mut Explain(out))
                        && <$F as Filter>::ON_FAILURE == OnFailure::Stop
                    {
                        return;
                    }
                )*
            }
        }

        /// The raw score parts of one feasible node: the weighted sum of the plain scorers, and
        /// each normalised scorer's raw score.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Raw {
            pub base: i64,
            $(pub $n: i64,)*
        }

        /// Each normalised scorer's range over the feasible nodes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Ranges {
            $(pub $n: Range,)*
        }

        impl Default for Ranges {
            fn default() -> Ranges {
                Ranges { $($n: Range::EMPTY,)* }
            }
        }

        /// The scorers for one pod, with their weights.
        pub struct Scores<'a> {
            $($s: Option<(<$S as Scorer>::State<'a>, i64)>,)*
            $($n: Option<(<$N as Scorer>::State<'a>, i64)>,)*
            /// Some `RARE` scorer has something to score for this pod.
            rare: bool,
        }

        impl<'a> Scores<'a> {
            /// PreScore of every scorer with a weight.
            #[inline(always)]
            pub fn new(cx: Cycle<'a>) -> Scores<'a> {
                let w = &cx.snap.profile.weights;
                let mut s = Scores {
                    $($s: if w.$s != 0 { <$S as Scorer>::pre_score(cx).map(|st| (st, w.$s)) } else { None },)*
                    $($n: if w.$n != 0 { <$N as Scorer>::pre_score(cx).map(|st| (st, w.$n)) } else { None },)*
                    rare: false,
                };
                s.rare = false
                    $(|| (<$S as Scorer>::RARE && s.$s.is_some()))*
                    $(|| (<$N as Scorer>::RARE && s.$n.is_some()))*;
                s
            }

            #[inline(always)]
            pub fn enter_chunk(&mut self, chunk: &'a Chunk) {
                $(if let Some((s, _)) = &mut self.$s { <$S as Scorer>::enter_chunk(s, chunk); })*
                $(if let Some((s, _)) = &mut self.$n { <$N as Scorer>::enter_chunk(s, chunk); })*
            }

            /// Some `RARE` scorer has something to score for this pod.
            pub fn rare(&self) -> bool {
                self.rare
            }

            /// Score a feasible node, widening `ranges` by its normalised parts.
            #[inline(always)]
            pub fn score(&self, node: Node<'_>, ranges: &mut Ranges) -> Raw {
                self.score_in::<true>(node, ranges)
            }

            /// [`Scores::score`] in a scan instantiated with or without rare plugins (as
            /// [`Filters::fits_in`]).
            #[inline(always)]
            pub fn score_in<const RARE: bool>(&self, node: Node<'_>, ranges: &mut Ranges) -> Raw {
                debug_assert!(RARE || !self.rare);
                let mut raw = Raw::default();
                // A plain or normalised scorer's part, if it has one for this pod.
                macro_rules! plain {
                    ($field:ident, $T:ty) => {
                        if let Some((s, w)) = &self.$field {
                            raw.base += w * <$T as Scorer>::score(s, node);
                        }
                    };
                }
                macro_rules! normalized {
                    ($field:ident, $T:ty) => {
                        if let Some((s, _)) = &self.$field {
                            raw.$field = <$T as Scorer>::score(s, node);
                            if <$T as Normalize>::counts(raw.$field) {
                                ranges.$field.add::<{ <$T as Normalize>::USES_MIN }>(raw.$field);
                            }
                        }
                    };
                }
                $(if !<$S as Scorer>::RARE { plain!($s, $S); })*
                $(if !<$N as Scorer>::RARE { normalized!($n, $N); })*
                if RARE && self.rare {
                    $(if <$S as Scorer>::RARE { plain!($s, $S); })*
                    $(if <$N as Scorer>::RARE { normalized!($n, $N); })*
                }
                raw
            }

            /// The final score of a node, once `ranges` covers every feasible node.
            #[inline]
            pub fn finish(&self, raw: &Raw, ranges: &Ranges) -> i64 {
                let mut total = raw.base;
                macro_rules! part {
                    ($field:ident, $T:ty) => {
                        if let Some((_, w)) = &self.$field {
                            total += w * <$T as Normalize>::normalize(raw.$field, ranges.$field);
                        }
                    };
                }
                $(if !<$N as Scorer>::RARE { part!($n, $N); })*
                if self.rare {
                    $(if <$N as Scorer>::RARE { part!($n, $N); })*
                }
                total
            }
        }
    };
}

plugins! {
    filters {
        fit: Fit(noderesources::Fit),
        nominated_room: NominatedRoom(nominated_room::NominatedRoom),
        pod_count: PodCount(noderesources::PodCount),
        node_unschedulable: NodeUnschedulable(node_unschedulable::NodeUnschedulable),
        node_name: NodeName(node_name::NodeName),
        node_affinity: NodeAffinity(node_affinity::NodeAffinity),
        taint_toleration: TaintToleration(taint_toleration::TaintToleration),
        node_ports: NodePorts(node_ports::NodePorts),
        inter_pod_affinity: InterPodAffinity(inter_pod_affinity::InterPodAffinity),
        node_volume_limits: NodeVolumeLimits(node_volume_limits::NodeVolumeLimits),
        volume_zone: VolumeZone(volume_zone::VolumeZone),
        pod_topology_spread: PodTopologySpread(pod_topology_spread::PodTopologySpread),
        volume_binding: VolumeBinding(volume_binding::VolumeBinding),
        dynamic_resources: DynamicResources(dynamic_resources::DynamicResources),
    }
    scores {
        least_allocated: noderesources::LeastAllocated,
        most_allocated: noderesources::MostAllocated,
        balanced_allocation: balanced_allocation::BalancedAllocation,
    }
    normalized {
        node_affinity: node_affinity::NodeAffinity,
        taint_toleration: taint_toleration::TaintToleration,
        inter_pod_affinity: inter_pod_affinity::InterPodAffinity,
        pod_topology_spread: pod_topology_spread::PodTopologySpread,
    }
}
