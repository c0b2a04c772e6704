//! The indexes a snapshot carries against a recomputation from its own nodes and pods,
//! after every step of a deterministic random sequence of node and pod changes.

use super::*;
use crate::binder::BindVersions;
use crate::cache::Cache;
use crate::conf::Profile;
use crate::model::{
    ContainerInput, LabelSelectorInput, NodeInput, PodAffinityInput, PodAffinityTermInput,
    PodInput, TopologySpreadInput,
};
use crate::snapshot::Snapshot;
use std::collections::BTreeMap;

const ZONE: &str = "zone";
const RACK: &str = "rack";

fn node(i: u64, zone: u64, rack: u64) -> NodeInput {
    NodeInput {
        name: format!("n{i}"),
        labels: vec![
            (ZONE.into(), format!("z{zone}")),
            // Racks cross zones (a node may move rack alone); only preferred terms name
            // them.
            (RACK.into(), format!("r{}", rack)),
        ],
        allocatable: vec![("cpu".into(), "64".into()), ("pods".into(), "110".into())],
        ready: true,
        ..Default::default()
    }
}

fn pod(i: u64, app: u64, anti: bool) -> PodInput {
    let selector = LabelSelectorInput {
        match_labels: vec![("app".into(), format!("a{app}"))],
        match_expressions: vec![],
    };
    PodInput {
        uid: format!("p{i}"),
        name: format!("p{i}"),
        namespace: format!("ns{}", app % 2),
        // `app` is what the terms select; `tier` is indexed from step 300 on (its pods
        // counted then); `id`, one value per pod, is never selected, so never indexed.
        labels: vec![
            ("app".into(), format!("a{app}")),
            ("id".into(), format!("p{i}")),
            ("tier".into(), format!("t{}", i % 3)),
        ],
        // Spread counts skip terminating pods; affinity terms count them.
        terminating: i.is_multiple_of(7),
        containers: vec![ContainerInput {
            requests: vec![("cpu".into(), "10m".into())],
            ..Default::default()
        }],
        pod_affinity: if anti {
            Some(PodAffinityInput {
                required_anti: vec![PodAffinityTermInput {
                    label_selector: Some(selector),
                    topology_key: ZONE.into(),
                    ..Default::default()
                }],
                ..Default::default()
            })
        } else if i % 5 == 1 {
            // Preferred terms, one by namespace labels (`index::terms` carries both).
            let by_team = PodAffinityTermInput {
                label_selector: Some(selector.clone()),
                namespace_selector: Some(LabelSelectorInput {
                    match_labels: vec![("team".into(), "t".into())],
                    match_expressions: vec![],
                }),
                topology_key: ZONE.into(),
                ..Default::default()
            };
            Some(PodAffinityInput {
                preferred: vec![(3, by_team)],
                preferred_anti: vec![(
                    2,
                    PodAffinityTermInput {
                        label_selector: Some(selector),
                        topology_key: RACK.into(),
                        ..Default::default()
                    },
                )],
                ..Default::default()
            })
        } else if i.is_multiple_of(3) {
            // Required affinity: a pod whose terms score others (`ScoringPods`).
            Some(PodAffinityInput {
                required: vec![PodAffinityTermInput {
                    label_selector: Some(selector),
                    topology_key: ZONE.into(),
                    ..Default::default()
                }],
                ..Default::default()
            })
        } else {
            None
        },
        ..Default::default()
    }
}

/// The term aggregates against a recount of the snapshot's placed pods.
fn check_terms(snap: &Snapshot) {
    use crate::model::AffinityTerm;
    type Counts = BTreeMap<u32, i64>;
    let ns = &*snap.namespaces;
    let terms = &snap.index().terms;
    let placed: Vec<(&NodeMeta, &Arc<PodInfo>)> = (0..snap.arena.slots())
        .filter_map(|slot| Some((&**snap.node(slot)?, snap.pods_on(slot))))
        .flat_map(|(meta, pods)| pods.iter().map(move |p| (meta, p)))
        .collect();
    let sorted = |sums: &terms::Sums| {
        let mut v: Vec<(u32, i64)> = sums.iter().collect();
        v.sort_unstable();
        v
    };
    // The slots whose domain of `key` has a non-zero count.
    let blocked = |key: u32, counts: &Counts| -> Vec<usize> {
        (0..snap.arena.slots())
            .filter(|&s| {
                snap.node(s)
                    .and_then(|m| m.label(key))
                    .is_some_and(|l| counts.get(&l.value).is_some_and(|&n| n != 0))
            })
            .collect()
    };
    let nonzero =
        |m: Counts| -> Vec<(u32, i64)> { m.into_iter().filter(|&(_, n)| n != 0).collect() };
    let add = |m: &mut Counts, meta: &NodeMeta, t: &AffinityTerm, d: i64| {
        if let Some(l) = meta.label(t.topology_key) {
            *m.entry(l.value).or_default() += d;
        }
    };
    for w in terms.watched_all() {
        let mut counts = Counts::new();
        for &(meta, p) in &placed {
            if !(w.live_only && p.terminating) && w.term.matches(p, ns) {
                add(&mut counts, meta, &w.term, 1);
            }
        }
        let key = w.term.topology_key;
        assert_eq!(
            w.matching.blocked().iter().collect::<Vec<_>>(),
            blocked(key, &counts)
        );
        assert_eq!(
            sorted(&w.matching.sums),
            nonzero(counts),
            "watched {:?}",
            w.term
        );
    }
    type Recount = BTreeMap<String, (AffinityTerm, Counts, Counts)>;
    fn entry<'m>(m: &'m mut Recount, t: &AffinityTerm) -> &'m mut (AffinityTerm, Counts, Counts) {
        m.entry(format!("{t:?}"))
            .or_insert_with(|| (t.clone(), Counts::new(), Counts::new()))
    }
    let mut carried = Recount::new();
    for &(meta, p) in &placed {
        let Some(a) = p.affinity.as_deref() else {
            continue;
        };
        for t in a.required_anti.iter() {
            add(&mut entry(&mut carried, t).1, meta, t, 1);
        }
        for t in a.required.iter() {
            add(
                &mut entry(&mut carried, t).2,
                meta,
                t,
                terms::HARD_POD_AFFINITY_WEIGHT,
            );
        }
        for (w, t) in a.preferred.iter() {
            add(&mut entry(&mut carried, t).2, meta, t, i64::from(*w));
        }
        for (w, t) in a.preferred_anti.iter() {
            add(&mut entry(&mut carried, t).2, meta, t, -i64::from(*w));
        }
    }
    let listed: Vec<_> = terms.carried().expect("exact").collect();
    assert_eq!(
        listed.len(),
        carried.len(),
        "one aggregate per carried term"
    );
    for (t, anti, score) in carried.into_values() {
        let (_, c) = listed
            .iter()
            .find(|(x, _)| **x == t)
            .expect("a carried term has its aggregate");
        let key = t.topology_key;
        assert_eq!(
            c.anti.blocked().iter().collect::<Vec<_>>(),
            blocked(key, &anti)
        );
        assert_eq!(sorted(&c.anti.sums), nonzero(anti), "anti {t:?}");
        assert_eq!(sorted(&c.score.sums), nonzero(score), "score {t:?}");
    }
}

fn check(snap: &Snapshot, zone: u32) {
    check_terms(snap);
    let mut domains: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut labels: BTreeMap<(u32, u32, u32), Vec<(u32, u32)>> = BTreeMap::new();
    let mut anti = 0;
    let mut scoring: Vec<(u32, usize)> = Vec::new();
    for slot in 0..snap.arena.slots() {
        let Some(meta) = snap.node(slot) else {
            continue;
        };
        let slot = slot as u32;
        if let Some(l) = meta.label(zone) {
            domains.entry(l.value).or_default().push(slot);
        }
        for p in snap.pods_on(slot as usize) {
            if crate::plugins::inter_pod_affinity::scores_others(p) {
                scoring.push((slot, Arc::as_ptr(p) as usize));
            }
            for &(k, v) in p.labels.iter() {
                if !snap.index().pod_labels.indexes(k) {
                    continue;
                }
                let e = labels.entry((p.namespace, k, v)).or_default();
                match e.last_mut() {
                    Some((s, n)) if *s == slot => *n += 1,
                    _ => e.push((slot, 1)),
                }
            }
            if p.has_required_anti() {
                // The test's terms select their own pod's labels in its namespace.
                anti += 1;
                let mut found = Vec::new();
                snap.index()
                    .anti_terms
                    .candidates(p.namespace, &p.labels, &mut found);
                assert!(found.contains(&slot), "a placed anti-affinity pod is found");
            }
        }
    }
    assert_eq!(
        snap.index().domains.values(zone).unwrap(),
        domains.keys().copied().collect::<Vec<_>>()
    );
    for (v, slots) in &domains {
        assert_eq!(snap.index().domains.slots(zone, *v).unwrap(), &slots[..]);
    }
    for (k, e) in &labels {
        assert_eq!(
            snap.index()
                .pod_labels
                .slots(k.0, k.1, k.2)
                .copied()
                .collect::<Vec<_>>(),
            e[..],
            "{k:?}"
        );
    }
    assert_eq!(snap.index().pod_labels.slots.len(), labels.len());
    // Blocks: sorted, none empty, each slot in its block's range.
    let index = snap.index();
    let lists = [&index.pod_labels.slots, &index.anti_terms.keyed]
        .into_iter()
        .flat_map(|m| m.shards.iter().flat_map(|s| s.values()))
        .map(|v| &v[..])
        .chain([&index.anti_terms.unkeyed[..]]);
    for blocks in lists {
        assert!(blocks.is_sorted_by_key(|b| b.block));
        for b in blocks {
            assert!(!b.slots.is_empty(), "an empty block is dropped");
            assert!(b.slots.iter().all(|&(s, _)| s / SLOT_BLOCK == b.block));
        }
    }
    let listed: u32 = snap
        .index()
        .anti_terms
        .keyed
        .shards
        .iter()
        .flat_map(|s| s.values())
        .flat_map(|v| block_slots(v).map(|&(_, n)| n))
        .sum();
    assert_eq!(listed as usize, anti);
    let mut listed: Vec<(u32, usize)> = snap
        .affinity_pods
        .iter()
        .map(|(slot, p)| (*slot, Arc::as_ptr(p) as usize))
        .collect();
    assert!(listed.is_sorted_by_key(|&(slot, _)| slot), "in slot order");
    assert_eq!(listed.len(), snap.affinity_pods.len());
    listed.sort_unstable();
    scoring.sort_unstable();
    assert_eq!(
        listed, scoring,
        "the scoring pods are the placed pods with scoring terms"
    );
}

#[test]
fn snapshots_carry_indexes_equal_to_their_nodes_and_pods() {
    let mut cache = Cache::new(
        Arc::new(BindVersions::default()),
        Arc::new(Profile::default()),
    );
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut placed: Vec<u64> = Vec::new();
    for step in 0..600u64 {
        match next(6) {
            0 | 1 => {
                // Half the time a node keeps its zone (and may move rack alone).
                let n = next(12);
                let zone = if next(2) == 0 { n % 4 } else { next(4) };
                cache.apply_node(&node(n, zone, next(3)), 0).unwrap();
            }
            2 => {
                cache.delete_node(&format!("n{}", next(12)));
            }
            3 | 4 => {
                let p = pod(step, next(3), next(2) == 0);
                let c = cache.compile_pod(&p).unwrap();
                cache.apply_bound_pod(&c, &format!("n{}", next(12)), false);
                placed.push(step);
            }
            _ => {
                if !placed.is_empty() {
                    let i = placed.swap_remove(next(placed.len() as u64) as usize);
                    cache.remove_pod(&format!("p{i}"));
                }
            }
        }
        if step == 100 {
            cache.enable_pod_index();
            let anti = cache.compile_pod(&pod(0, 0, true)).unwrap();
            cache.index_domains(anti.required_keys());
            cache.index_label_keys(anti.selector_keys());
            // Watched from here on: a required anti-affinity term and preferred terms, one
            // by namespace labels (counted again when a namespace's labels change).
            cache.watch_terms(&anti);
            for (i, app) in [(1, 1), (6, 2)] {
                let preferred = cache.compile_pod(&pod(i, app, false)).unwrap();
                cache.watch_terms(&preferred);
            }
            // A spread constraint: live pods of its namespace (terminating ones are not
            // counted).
            let mut spread = pod(2, 1, false);
            spread.topology_spread = vec![TopologySpreadInput {
                max_skew: 1,
                topology_key: ZONE.into(),
                when_unsatisfiable: "DoNotSchedule".into(),
                label_selector: Some(LabelSelectorInput {
                    match_labels: vec![("app".into(), "a1".into())],
                    match_expressions: vec![],
                }),
                ..Default::default()
            }];
            let spread = cache.compile_pod(&spread).unwrap();
            cache.watch_terms(&spread);
            assert_eq!(
                cache.watched_terms(),
                6,
                "two pods' two preferred terms, an anti one, a spread"
            );
        }
        if step % 37 == 0 {
            let team = [("team".to_owned(), "t".to_owned())];
            let labels = next(2) == 0;
            cache.set_namespace(
                &format!("ns{}", next(2)),
                Some(if labels { &team } else { &[] }),
            );
        }
        if step == 300 {
            // The first selector reading `tier`: the placed pods compiled before carry it as
            // a string (`PodInfo::raw`) until the compile converts them (`sync_labels`),
            // then the key is indexed from them.
            let mut p = pod(step, 0, false);
            p.pod_affinity = Some(PodAffinityInput {
                preferred: vec![(
                    1,
                    PodAffinityTermInput {
                        label_selector: Some(LabelSelectorInput {
                            match_labels: vec![("tier".into(), "t1".into())],
                            match_expressions: vec![],
                        }),
                        topology_key: ZONE.into(),
                        ..Default::default()
                    },
                )],
                ..Default::default()
            });
            let p = cache.compile_pod(&p).unwrap();
            cache.index_label_keys(p.selector_keys());
        }
        if step >= 100
            && let Some(snap) = cache.publish()
        {
            let key = |k: &str| cache.interner().get(k);
            let labels = &snap.index().pod_labels;
            assert!(labels.indexes(key("app").unwrap()));
            assert_eq!(key("tier").is_some_and(|t| labels.indexes(t)), step >= 300);
            assert!(
                !labels.indexes(key("id").unwrap()),
                "a label no selector reads"
            );
            assert!(
                (0..step).all(|i| key(&format!("p{i}")).is_none()),
                "its values are not interned"
            );
            for slot in 0..snap.arena.slots() {
                assert!(
                    snap.pods_on(slot)
                        .iter()
                        .all(|p| !p.has_selectable_raw(cache.interner())),
                    "a placed pod's label a selector reads is interned"
                );
            }
            check(&snap, key(ZONE).unwrap());
        }
    }
}
