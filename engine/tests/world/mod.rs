//! The cluster of one row of a ported upstream plugin table (`upstream_interpodaffinity`,
//! `upstream_podtopologyspread`): a real `Cache` with one plugin switched on, its nodes, the
//! pods bound there, and per node the plugin's filter verdict and normalised score, read as
//! upstream's tests read them (PreFilter skipped or not, one reason per node).

#![allow(dead_code)]

use magma_engine::binder::BindVersions;
use magma_engine::cache::Cache;
use magma_engine::conf::Profile;
use magma_engine::model::{CompiledPod, NodeInput, PodInput};
use magma_engine::plugins::{Cycle, Filter, Filters, Node, Ranges, Scorer, Scores};
use magma_engine::snapshot::{CHUNK, Snapshot};
use std::sync::Arc;

/// A ready node with `labels` and room for anything the tables ask (8 CPUs, 16Gi, 110 pods).
pub fn node(name: &str, labels: &[(&str, &str)]) -> NodeInput {
    NodeInput {
        name: name.to_string(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        allocatable: vec![
            ("cpu".into(), "8".into()),
            ("memory".into(), "16Gi".into()),
            ("pods".into(), "110".into()),
        ],
        ready: true,
        ..Default::default()
    }
}

/// How InterPodAffinity finds placed pods' terms (`index::terms`): every table runs each way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Terms {
    /// As the driver: the incoming pod's terms watched, placed pods' terms carried.
    Watched,
    /// The incoming pod's terms not (yet) watched: its own terms scan placed pods.
    Carried,
    /// A snapshot without aggregates (as preemption's): everything scans.
    Scanned,
}

pub const ALL_TERMS: [Terms; 3] = [Terms::Watched, Terms::Carried, Terms::Scanned];

pub struct World {
    pub cache: Cache,
    pub terms: Terms,
    snap: Option<Arc<Snapshot>>,
    /// The nodes, in the order given.
    pub nodes: Vec<String>,
    next: usize,
}

impl World {
    /// `profile`'s plugins on `nodes`; the pod index is on (constraint plugins read it).
    pub fn new(profile: Profile, nodes: Vec<NodeInput>) -> World {
        let mut cache = Cache::new(Arc::new(BindVersions::default()), Arc::new(profile));
        cache.enable_pod_index();
        let mut names = Vec::new();
        for n in nodes {
            cache.apply_node(&n, 0).expect("valid node");
            names.push(n.name);
        }
        World {
            cache,
            terms: Terms::Watched,
            snap: None,
            nodes: names,
            next: 0,
        }
    }

    /// An existing pod, bound to `node` (which need not exist, as upstream's snapshots allow).
    pub fn bind(&mut self, p: &PodInput, node: &str) {
        self.next += 1;
        let mut input = p.clone();
        input.uid = format!("existing-{}", self.next);
        input.name = input.uid.clone();
        let c = self.cache.compile_pod(&input).expect("valid existing pod");
        self.cache.apply_bound_pod(&c, node, false);
    }

    pub fn snapshot(&mut self) -> Arc<Snapshot> {
        if let Some(s) = self.cache.publish() {
            self.snap = Some(s);
        }
        let snap = self.snap.clone().expect("published");
        match self.terms {
            // A snapshot of the same pods without aggregates.
            Terms::Scanned if !self.nodes.is_empty() => Arc::new(self.cache.without(0, &[])),
            _ => snap,
        }
    }

    /// The pod being scheduled, compiled as the driver compiles it, its topology and label keys
    /// indexed as the driver indexes them (so the tables check the plugins' indexed paths).
    pub fn incoming(&mut self, p: &PodInput) -> CompiledPod {
        let mut input = p.clone();
        input.uid = "incoming".into();
        input.name = "incoming".into();
        let pod = self.cache.compile_pod(&input).expect("valid incoming pod");
        let spread = pod.spread.iter().map(|c| c.topology_key);
        self.cache.index_domains(pod.required_keys().chain(spread));
        self.cache.index_label_keys(pod.selector_keys());
        if self.terms == Terms::Watched {
            self.cache.watch_terms(&pod);
        }
        pod
    }

    pub fn slot(&self, name: &str) -> usize {
        self.cache.node_slot(name).expect("node") as usize
    }

    /// Whether `F`'s PreFilter skips, and per node of `on` `None` when the pod passes every
    /// filter of the profile or the text of its one failure.
    pub fn filter<F: Filter>(&mut self, p: &PodInput, on: &[&str]) -> (bool, Vec<Option<String>>) {
        let pod = self.incoming(p);
        let snap = self.snapshot();
        let cx = Cycle {
            pod: &pod,
            snap: &snap,
            volumes: None,
            claims: None,
        };
        let skip = F::pre_filter(cx).is_none();
        let mut f = Filters::new(cx);
        let names = self.cache.names().for_pod(&pod);
        let mut out = Vec::new();
        for name in on {
            let slot = self.slot(name);
            let chunk = snap.arena.chunk(slot / CHUNK);
            f.enter_chunk(chunk);
            let at = Node::new(chunk, slot % CHUNK);
            let mut why: Vec<String> = Vec::new();
            f.explain(at, &mut |r| why.push(r.message(&names)));
            assert_eq!(
                f.fits(at),
                why.is_empty(),
                "fits vs explain on {name}: {why:?}"
            );
            assert!(why.len() <= 1, "one reason per node, as upstream: {why:?}");
            out.push(why.pop());
        }
        (skip, out)
    }

    /// The normalised scores on the nodes `on`, or `None` when `S`'s PreScore skips.
    pub fn scores<S: Scorer>(&mut self, p: &PodInput, on: &[&str]) -> Option<Vec<i64>> {
        let pod = self.incoming(p);
        let snap = self.snapshot();
        let cx = Cycle {
            pod: &pod,
            snap: &snap,
            volumes: None,
            claims: None,
        };
        S::pre_score(cx)?;
        let mut sc = Scores::new(cx);
        let mut ranges = Ranges::default();
        let mut raw = Vec::new();
        for name in on {
            let slot = self.slot(name);
            let chunk = snap.arena.chunk(slot / CHUNK);
            sc.enter_chunk(chunk);
            raw.push(sc.score(Node::new(chunk, slot % CHUNK), &mut ranges));
        }
        Some(raw.iter().map(|r| sc.finish(r, &ranges)).collect())
    }
}
