//! DefaultPreemption (kube-scheduler's PostFilter): when a pod fits no node, find a node where
//! removing pods of lower priority makes it fit, the fewest and least important of them, and
//! nominate the pod there. Decided by the driver on the cache as it stands (single writer, so
//! the decision sees every claim applied); the API calls (victims' deletion, the nomination)
//! are the adapter's, off the scheduling path (`core::Intent::Preempt`).
//!
//! The steps, as upstream's `preemption.Evaluator`:
//!
//! 1. **Eligibility** ([`eligible`]): not with `preemptionPolicy: Never`, and not while the pod
//!    is nominated to a node where a pod of lower priority is still terminating by a
//!    preemption, or is a victim of ours whose deletion the cache has not seen yet (its victims
//!    are on their way out: it waits for them instead of preempting more), unless removing
//!    pods can no longer make it fit there.
//! 2. **Candidates**: from a rotating offset, nodes the sharding view admits that hold pods of
//!    lower priority; a node is a candidate when the pod passes every filter there with all of
//!    them removed (a snapshot of the cache without them, `Cache::without`: resources, ports,
//!    affinity, spread and volumes alike). The search stops once it has
//!    `max(10 % of the nodes, 100)` candidates (`MinCandidateNodesPercentage`,
//!    `MinCandidateNodesAbsolute`), one of them without budget violations.
//! 3. **Victims** on a candidate (`SelectVictimsOnNode`): the lower-priority pods, most
//!    important first (priority, then the earliest start), those whose eviction would violate a
//!    PodDisruptionBudget first (`pdb`); each is put back (reprieved) if the pod still fits
//!    with it; those that cannot be are the victims.
//! 4. **The node** (`pickOneNodeForPreemption`): fewest budget violations, then the lowest
//!    highest victim priority, the lowest sum of victim priorities, the fewest victims, the
//!    latest start among the highest-priority victims, then the first found.
//! 5. The plan: the node, the victims, and the pods of lower priority nominated to that node
//!    (their nominations are cleared, as upstream).
//!
//! A pod whose filters depend only on the node's free resources (no pod affinity terms in the
//! cluster, no spread, host ports or volumes) is judged in steps 2–3 by arithmetic on the
//! node's free room and the victims' requests once its filters passed with all of them
//! removed: the same answer as re-running the filters, without a snapshot per reprieve.
//!
//! Owns the decision only; the cache keeps the nominations (`Cache::nominate`), the driver
//! holds the pod until the adapter reports its API calls done.
//!
//! ## The kept room, under concurrency (loom model `nominated_room`)
//!
//! 1. The driver (single writer) decides the preemption on the cache and nominates the pod:
//!    `Cache::nominate` records (uid, priority, requests) on the node's slot, **bumps the
//!    node's bind version**, and writes the slot, so the next published snapshot carries the
//!    nominee (node flag `NOMINATED`).
//! 2. A decision on a snapshot with the nomination: the NominatedRoom filter counts the
//!    nominees of no lower priority than the pod (other than the pod itself) as already on the
//!    node, so a pod of lower or equal priority does not fit in the kept room; a pod of higher
//!    priority may take it (the nominee is then decided again).
//! 3. A decision made on an older snapshot carries that snapshot's version of the node, which
//!    the bump of step 1 made stale: its claim fails and the pod is decided again on a newer
//!    snapshot (an urgent retry, `binder`).
//! 4. The nomination ends when its pod is claimed anywhere (`Cache::apply_claim`), bound, or
//!    deleted, when its preemption's calls failed or a later attempt found no candidate, or
//!    when a preemptor of higher priority takes the node (`Plan::lower_nominees`). Freeing room
//!    needs no bump; the node is judged again for the waiting pods (`event::ROOM_FREED`).

use crate::allocate::FailureSummary;
use crate::cache::{Cache, PlacedView};
use crate::dra::PodClaims;
use crate::model::{CompiledPod, PODS, ResourceList, Slot};
use crate::plugins::Reason;
use crate::plugins::noderesources::{Insufficient, TooManyPods};
use crate::plugins::{Cycle, Filters, Node};
use crate::snapshot::{CHUNK, Snapshot};
use crate::volumes::PodVolumes;
use std::cmp::Reverse;
use std::sync::Arc;

/// `MinCandidateNodesPercentage` and `MinCandidateNodesAbsolute` (kube-scheduler's defaults).
pub const MIN_CANDIDATE_PERCENT: usize = 10;
pub const MIN_CANDIDATE_NODES: usize = 100;

/// A pod preemption evicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Victim {
    pub uid: Arc<str>,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    /// Already being deleted: no API call is made for it (upstream skips it too).
    pub terminating: bool,
}

/// What preemption decided for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub slot: u32,
    pub node: Arc<str>,
    /// Most important first.
    pub victims: Vec<Victim>,
    /// How many of them violate a PodDisruptionBudget.
    pub pdb_violations: usize,
    /// Pods of lower priority nominated to the node: their nominations are cleared.
    pub lower_nominees: Vec<Arc<str>>,
}

/// Why a pod does not preempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotEligible {
    /// `preemptionPolicy: Never`.
    Never,
    /// A pod of lower priority on its nominated node is still terminating by a scheduler's
    /// preemption (its `DisruptionTarget` condition says so).
    VictimsTerminating,
}

impl NotEligible {
    /// Upstream's PostFilter message (`PodEligibleToPreemptOthers`).
    pub fn message(self) -> &'static str {
        match self {
            NotEligible::Never => "not eligible due to preemptionPolicy=Never.",
            NotEligible::VictimsTerminating => {
                "not eligible due to a terminating pod on the nominated node."
            }
        }
    }
}

/// Step 1. A nominated node that no pod's removal can make fit (not among the attempt's
/// `resolvable` nodes: tainted since, gone) does not hold the pod back.
pub fn eligible(
    cache: &Cache,
    pod: &CompiledPod,
    summary: &FailureSummary,
) -> Result<(), NotEligible> {
    if pod.preemption_never {
        return Err(NotEligible::Never);
    }
    if let Some(slot) = cache.nomination(&pod.uid)
        && summary.resolvable.contains(&slot)
        && cache
            .pods_on(slot)
            .any(|p| p.priority < pod.priority && (p.info.terminating && p.preempted || p.evicting))
    {
        return Err(NotEligible::VictimsTerminating);
    }
    Ok(())
}

/// How many candidates to look for among `nodes` (`calculateNumCandidates`).
pub fn candidates_wanted(nodes: usize) -> usize {
    (nodes * MIN_CANDIDATE_PERCENT / 100)
        .max(MIN_CANDIDATE_NODES)
        .min(nodes)
}

/// One candidate node (step 3's result).
struct Candidate<'a> {
    slot: u32,
    victims: Vec<PlacedView<'a>>,
    violations: usize,
}

/// Steps 2–5 over the node slots where preemption may help (`potential`: the attempt's
/// [`FailureSummary::resolvable`]), from the `offset`-th on. `None`: no node where removing
/// pods of lower priority makes the pod fit ([`no_plan_message`] says why).
pub fn plan(
    cache: &Cache,
    pod: &CompiledPod,
    volumes: Option<&PodVolumes>,
    claims: Option<&PodClaims>,
    potential: &[u32],
    offset: usize,
) -> Option<Plan> {
    let slots = potential.len();
    if slots == 0 {
        return None;
    }
    let wanted = candidates_wanted(cache.node_count());
    let arithmetic = by_arithmetic(cache, pod);
    // Candidates without and with budget violations, each list as long as `wanted` at most
    // (upstream's two candidate lists; further ones are dropped).
    let mut clean: Vec<Candidate<'_>> = Vec::new();
    let mut violating: Vec<Candidate<'_>> = Vec::new();
    for k in 0..slots {
        let slot = potential[(offset + k) % slots];
        if !cache.admits(slot) || !cache.has_lower(slot, pod.priority) {
            continue;
        }
        let Some(c) = victims_on(cache, pod, volumes, claims, slot, arithmetic) else {
            continue;
        };
        let list = if c.violations == 0 {
            &mut clean
        } else {
            &mut violating
        };
        if list.len() < wanted {
            list.push(c);
        }
        if !clean.is_empty() && clean.len() + violating.len() >= wanted {
            break;
        }
    }
    clean.append(&mut violating);
    let found = clean;
    let best = pick(&found)?;
    let c = &found[best];
    Some(Plan {
        slot: c.slot,
        node: cache.node_name(c.slot)?,
        victims: c
            .victims
            .iter()
            .map(|p| Victim {
                uid: p.uid.clone(),
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                terminating: p.info.terminating,
            })
            .collect(),
        pdb_violations: c.violations,
        lower_nominees: cache
            .nominees_on(c.slot)
            .iter()
            .filter(|n| n.priority < pod.priority && n.uid != pod.uid)
            .map(|n| n.uid.clone())
            .collect(),
    })
}

/// Only the node's resources and pod count depend on which pods leave (module doc).
fn by_arithmetic(cache: &Cache, pod: &CompiledPod) -> bool {
    !cache.has_affinity_pods()
        && pod.spread.is_empty()
        && pod.info.affinity.is_none()
        && pod.host_ports.is_empty()
        && pod.claims.is_empty()
        && pod.resource_claims.is_empty()
        && !cache.dra_extended(pod)
}

/// Step 3 on the node in `slot` (`SelectVictimsOnNode`): `None` when the pod does not fit even
/// with every pod of lower priority gone.
fn victims_on<'c>(
    cache: &'c Cache,
    pod: &CompiledPod,
    volumes: Option<&PodVolumes>,
    claims: Option<&PodClaims>,
    slot: u32,
    arithmetic: bool,
) -> Option<Candidate<'c>> {
    let mut lower: Vec<PlacedView<'_>> = cache
        .pods_on(slot)
        .filter(|p| p.priority < pod.priority)
        .collect();
    let room = Room::of(cache, slot, pod);
    if !room.fits(pod, lower.iter().map(|p| p.requests)) {
        return None;
    }
    let all: Vec<Arc<str>> = lower.iter().map(|p| p.uid.clone()).collect();
    if !fits_without(cache, pod, volumes, claims, slot, &all) {
        return None;
    }
    // Most important first: higher priority, then the earliest start.
    lower.sort_by_key(|p| (Reverse(p.priority), p.started_unix_ms.unwrap_or(i64::MAX)));
    let violates = cache
        .pdbs()
        .violations(lower.iter().map(|p| (&**p.name, &**p.info)));
    // Reprieve the budget-violating pods first, then the others, most important first.
    let order = lower
        .iter()
        .zip(&violates)
        .filter(|(_, v)| **v)
        .chain(lower.iter().zip(&violates).filter(|(_, v)| !**v));
    let mut removed: Vec<PlacedView<'_>> = lower.clone();
    let mut victims = Vec::new();
    let mut violations = 0;
    for (p, violates) in order {
        let without_p: Vec<PlacedView<'_>> =
            removed.iter().filter(|r| r.uid != p.uid).copied().collect();
        let fits = if arithmetic {
            room.fits(pod, without_p.iter().map(|r| r.requests))
        } else {
            let uids: Vec<Arc<str>> = without_p.iter().map(|r| r.uid.clone()).collect();
            fits_without(cache, pod, volumes, claims, slot, &uids)
        };
        if fits {
            removed = without_p;
        } else {
            victims.push(*p);
            violations += usize::from(*violates);
        }
    }
    victims.sort_by_key(|p| (Reverse(p.priority), p.started_unix_ms.unwrap_or(i64::MAX)));
    Some(Candidate {
        slot,
        victims,
        violations,
    })
}

/// Upstream's PostFilter message when no node can be made to fit (`preemption: 0/N nodes are
/// available: ...`, without the `preemption: ` prefix), from the attempt's `summary`: its
/// unresolvable nodes are `Preemption is not helpful for scheduling`; of the others, those
/// without pods of lower priority are `No preemption victims found for incoming pod`, and the
/// rest count the reasons they still reject the pod with all of those gone.
pub fn no_plan_message(
    cache: &Cache,
    summary: &FailureSummary,
    pod: &CompiledPod,
    volumes: Option<&PodVolumes>,
    claims: Option<&PodClaims>,
) -> String {
    const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
    const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
    let names = cache.names().for_task(pod, volumes, claims);
    let arithmetic = by_arithmetic(cache, pod);
    let mut counts: std::collections::BTreeMap<String, u32> = Default::default();
    if summary.unresolvable > 0 {
        counts.insert(NOT_HELPFUL.to_owned(), summary.unresolvable);
    }
    for &slot in &summary.resolvable {
        if cache.node_name(slot).is_none() {
            *counts.entry(NOT_HELPFUL.to_owned()).or_default() += 1;
            continue;
        }
        if !cache.has_lower(slot, pod.priority) {
            *counts.entry(NO_VICTIMS.to_owned()).or_default() += 1;
            continue;
        }
        let mut reasons: Vec<String> = Vec::new();
        if arithmetic {
            let lower = cache.pods_on(slot).filter(|p| p.priority < pod.priority);
            for r in Room::of(cache, slot, pod).short(pod, lower.map(|p| p.requests)) {
                reasons.push(if r == PODS {
                    TooManyPods.message(&names)
                } else {
                    Insufficient(r).message(&names)
                });
            }
        } else {
            let all: Vec<Arc<str>> = cache
                .pods_on(slot)
                .filter(|p| p.priority < pod.priority)
                .map(|p| p.uid.clone())
                .collect();
            let without = cache.without(slot, &all);
            let mut f = Filters::new(Cycle {
                pod,
                snap: &without,
                volumes,
                claims,
            });
            let chunk = without.arena.chunk(slot as usize / CHUNK);
            f.enter_chunk(chunk);
            f.explain(Node::new(chunk, slot as usize % CHUNK), &mut |r| {
                reasons.push(r.message(&names))
            });
        }
        if reasons.is_empty() {
            // It fits without them now: the cluster moved since the attempt.
            reasons.push(NO_VICTIMS.to_owned());
        }
        reasons.sort();
        reasons.dedup();
        for r in reasons {
            *counts.entry(r).or_default() += 1;
        }
    }
    let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    if parts.is_empty() {
        format!("0/{} nodes are available.", summary.nodes)
    } else {
        format!(
            "0/{} nodes are available: {}.",
            summary.nodes,
            parts.join(", ")
        )
    }
}

/// Step 4: the index of the best candidate.
fn pick(found: &[Candidate<'_>]) -> Option<usize> {
    let key = |c: &Candidate<'_>| {
        let highest = c.victims.first().map_or(i32::MIN, |p| p.priority);
        let sum: i64 = c
            .victims
            .iter()
            .map(|p| i64::from(p.priority) + i64::from(i32::MAX) + 1)
            .sum();
        // The earliest start among the highest-priority victims; later is better.
        let earliest = c
            .victims
            .iter()
            .filter(|p| p.priority == highest)
            .filter_map(|p| p.started_unix_ms)
            .min()
            .unwrap_or(i64::MIN);
        (
            c.violations,
            highest,
            sum,
            c.victims.len(),
            Reverse(earliest),
        )
    };
    (0..found.len()).min_by_key(|&i| key(&found[i]))
}

/// Whether the pod passes every filter on the node in `slot` with the pods `removed` gone.
fn fits_without(
    cache: &Cache,
    pod: &CompiledPod,
    volumes: Option<&PodVolumes>,
    claims: Option<&PodClaims>,
    slot: u32,
    removed: &[Arc<str>],
) -> bool {
    let snap: Snapshot = cache.without(slot, removed);
    let mut filters = Filters::new(Cycle {
        pod,
        snap: &snap,
        volumes,
        claims,
    });
    let chunk = snap.arena.chunk(slot as usize / CHUNK);
    filters.enter_chunk(chunk);
    filters.fits(Node::new(chunk, slot as usize % CHUNK))
}

/// A node's free room as the arithmetic path reads it: allocatable less what its pods use and
/// less the room kept for nominated pods of no lower priority than the preemptor.
struct Room {
    free: ResourceList,
}

impl Room {
    fn of(cache: &Cache, slot: u32, pod: &CompiledPod) -> Room {
        let (used, alloc) = cache.slot_usage(slot);
        let mut free = alloc;
        let mut sub = |list: &ResourceList| {
            for &(s, a) in list.iter() {
                match free.binary_search_by_key(&s, |&(x, _)| x) {
                    Ok(i) => free[i].1 -= a,
                    Err(i) => free.insert(i, (s, -a)),
                }
            }
        };
        sub(&used);
        for n in cache.nominees_on(slot) {
            if n.priority >= pod.priority && n.uid != pod.uid {
                sub(&n.requests);
            }
        }
        Room { free }
    }

    /// Does the pod fit with the pods whose requests are `freed` gone?
    fn fits<'a>(&self, pod: &CompiledPod, freed: impl Iterator<Item = &'a ResourceList>) -> bool {
        self.short(pod, freed).next().is_none()
    }

    /// The resources the pod still lacks with the pods whose requests are `freed` gone.
    fn short<'a, 'p>(
        &self,
        pod: &'p CompiledPod,
        freed: impl Iterator<Item = &'a ResourceList>,
    ) -> impl Iterator<Item = Slot> + 'p {
        let mut free = self.free.clone();
        for list in freed {
            for &(s, a) in list.iter() {
                if let Ok(i) = free.binary_search_by_key(&s, |&(x, _)| x) {
                    free[i].1 += a;
                }
            }
        }
        pod.requests
            .iter()
            .filter(move |&&(s, r)| {
                !free
                    .binary_search_by_key(&s, |&(x, _)| x)
                    .is_ok_and(|i| free[i].1 >= r)
            })
            .map(|&(s, _)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_wanted_is_ten_percent_at_least_a_hundred() {
        assert_eq!(candidates_wanted(5000), 500);
        assert_eq!(candidates_wanted(500), 100);
        assert_eq!(candidates_wanted(30), 30);
    }
}
