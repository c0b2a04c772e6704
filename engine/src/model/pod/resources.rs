//! Pod-level resources (`spec.resources`, KEP-2837, `PodLevelResources`, on by default since
//! Kubernetes 1.34): what they change in a pod's request, and the API server's checks of them.
//!
//! - **Requests** ([`apply`]), as `resourcehelper.PodRequests`: when the pod sets a pod-level
//!   request for a supported resource (cpu, memory, `hugepages-*`), that value replaces the
//!   containers' aggregate for it, in the request the filters count and in the non-zero request
//!   the scorers read (whose container defaults it then overrides too); every other resource is
//!   the containers' aggregate; the overhead is added after. While the kubelet reports a pod-level
//!   in-place resize (`status.resources.requests`, `status.allocatedResources`,
//!   `InPlacePodLevelResourcesVerticalScaling`), the pod counts at the largest of its spec and
//!   what it holds (each less the overhead), and at what it holds alone while the resize is
//!   `Infeasible`, as for containers.
//! - **Validation** ([`validate`]), as `validatePodResources` and
//!   `validatePodResourceConsistency`: a pod the real API server would refuse is refused here
//!   with the server's cause text, so a pod that reaches the scheduler some other way is never
//!   placed on a reading of its spec the server would not have allowed.
//!
//! Owns only these two rules; uses the pod's inputs (`pod`), the model's quantity parser and
//! resource lists, nothing else.

use super::{ContainerInput, PodInput, PodResourcesInput};
use crate::model::quantity::parse_scaled;
use crate::model::{
    ModelError, ResourceList, ResourceRegistry, Side, Slot, max_into, slot_of,
    validate_resource_name,
};

const HUGEPAGES: &str = "hugepages-";

/// `resourcehelper.IsSupportedPodLevelResource`.
pub fn is_supported(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with(HUGEPAGES)
}

/// Native resources other than huge pages may be overcommitted (`IsOvercommitAllowed`).
fn overcommit_allowed(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    native && !name.starts_with(HUGEPAGES)
}

/// Parse `pairs` keeping zero amounts (a pod-level request of 0 is a request).
fn parse_kept(
    registry: &mut ResourceRegistry,
    side: Side,
    pairs: &[(String, String)],
) -> Result<ResourceList, ModelError> {
    let mut out = ResourceList::new();
    for (name, q) in pairs {
        let slot = slot_of(registry, side, name)?;
        let amount = parse_scaled(name, q, ResourceRegistry::scale(slot))?;
        match out.binary_search_by_key(&slot, |&(s, _)| s) {
            Ok(i) => out[i].1 = amount,
            Err(i) => out.insert(i, (slot, amount)),
        }
    }
    Ok(out)
}

/// `list - overhead`, each at least 0 (`subtractResourceList`).
fn less_overhead(mut list: ResourceList, overhead: &ResourceList) -> ResourceList {
    for (slot, amount) in list.iter_mut() {
        if let Ok(i) = overhead.binary_search_by_key(slot, |&(s, _)| s) {
            *amount = (*amount - overhead[i].1).max(0);
        }
    }
    list
}

/// Set `slot` to `amount` in `list` (a zero amount removes it: lists omit zeros).
fn set(list: &mut ResourceList, slot: Slot, amount: i64) {
    match list.binary_search_by_key(&slot, |&(s, _)| s) {
        Ok(i) if amount == 0 => {
            list.remove(i);
        }
        Ok(i) => list[i].1 = amount,
        Err(_) if amount == 0 => {}
        Err(i) => list.insert(i, (slot, amount)),
    }
}

/// Replace the containers' aggregate (`requests`, and `nonzero` with the scorers' defaults) by
/// the pod-level requests of the supported resources, if the pod sets any (the module doc).
/// `overhead` is what the caller adds afterwards.
pub(super) fn apply(
    registry: &mut ResourceRegistry,
    side: Side,
    pod: &PodInput,
    r: &PodResourcesInput,
    overhead: &ResourceList,
    requests: &mut ResourceList,
    nonzero: &mut ResourceList,
) -> Result<(), ModelError> {
    // `IsPodLevelRequestsSet`: some supported resource has a pod-level request.
    if !r.requests.iter().any(|(n, _)| is_supported(n)) {
        return Ok(());
    }
    let supported: Vec<(String, String)> = r
        .requests
        .iter()
        .filter(|(n, _)| is_supported(n))
        .cloned()
        .collect();
    let mut effective = parse_kept(registry, side, &supported)?;
    if r.status_requests.is_some() || r.allocated.is_some() {
        // `effectivePodLevelResources`: max(spec, actuated, allocated), the spec left out while
        // the resize is infeasible; the status values include the overhead.
        if pod.resize_infeasible {
            effective.clear();
        }
        for held in [&r.status_requests, &r.allocated].into_iter().flatten() {
            let held = less_overhead(parse_kept(registry, side, held)?, overhead);
            max_into(&mut effective, &held);
        }
    }
    for &(slot, amount) in &effective {
        if is_supported(registry.name(slot)) {
            set(requests, slot, amount);
            set(nonzero, slot, amount);
        }
    }
    Ok(())
}

/// How a quantity prints (`resource.Quantity` keeps the format it was parsed in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Decimal,
    Binary,
}

fn format_of(q: &str) -> Format {
    let q = q.trim();
    if ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
        .iter()
        .any(|s| q.ends_with(s))
    {
        Format::Binary
    } else {
        Format::Decimal
    }
}

/// `amount` (in the engine's unit for `name`: millicores for cpu) as `Quantity.String()` prints
/// it in `format`: the largest suffix that keeps the number whole.
fn render(name: &str, amount: i64, format: Format) -> String {
    let milli = if name == "cpu" {
        amount as i128
    } else {
        amount as i128 * 1000
    };
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    let value = milli / 1000;
    // `BinarySI` values strictly between -1024 and 1024 print as decimal, like Go.
    if format == Format::Binary && value.abs() >= 1024 {
        let suffixes = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        let (mut v, mut k) = (value, 0);
        while k + 1 < suffixes.len() && v != 0 && v % 1024 == 0 {
            v /= 1024;
            k += 1;
        }
        return format!("{v}{}", suffixes[k]);
    }
    let suffixes = ["", "k", "M", "G", "T", "P", "E"];
    let (mut v, mut k) = (value, 0);
    while k + 1 < suffixes.len() && v != 0 && v % 1000 == 0 {
        v /= 1000;
        k += 1;
    }
    format!("{v}{}", suffixes[k])
}

/// One parsed pod-level or container quantity: its amount and how it prints.
#[derive(Debug, Clone)]
struct Q {
    amount: i64,
    format: Format,
}

fn parse_q(name: &str, q: &str) -> Result<Q, ModelError> {
    let scale = if name == "cpu" { 1000 } else { 1 };
    Ok(Q {
        amount: parse_scaled(name, q, scale)?,
        format: format_of(q),
    })
}

/// A name → quantity list, by name (Go iterates maps; the server's messages come sorted here,
/// as in its responses).
type Named = std::collections::BTreeMap<String, Q>;

fn named(pairs: &[(String, String)]) -> Result<Named, ModelError> {
    pairs
        .iter()
        .map(|(n, q)| Ok((n.clone(), parse_q(n, q)?)))
        .collect()
}

/// `AggregateContainerRequests` (or limits) of the spec: regular containers and sidecars summed,
/// then the largest need at any init step (each init container plus the sidecars before it).
/// A sum prints in the format of its first term, as `Quantity.Add` keeps the receiver's.
fn aggregate(
    pod: &PodInput,
    of: impl Fn(&ContainerInput) -> Vec<(String, String)>,
) -> Result<Named, ModelError> {
    fn add(into: &mut Named, list: &Named) {
        for (n, q) in list {
            into.entry(n.clone())
                .and_modify(|a| a.amount = a.amount.saturating_add(q.amount))
                .or_insert_with(|| q.clone());
        }
    }
    fn max(into: &mut Named, list: &Named) {
        for (n, q) in list {
            match into.get_mut(n) {
                Some(a) if a.amount >= q.amount => {}
                Some(a) => *a = q.clone(),
                None => {
                    into.insert(n.clone(), q.clone());
                }
            }
        }
    }
    let mut total = Named::new();
    for c in &pod.containers {
        add(&mut total, &named(&of(c))?);
    }
    let (mut sidecars, mut init_max) = (Named::new(), Named::new());
    for c in &pod.init_containers {
        let own = named(&of(c))?;
        if c.restartable {
            add(&mut total, &own);
            add(&mut sidecars, &own);
            max(&mut init_max, &sidecars);
        } else {
            let mut step = own;
            add(&mut step, &sidecars);
            max(&mut init_max, &step);
        }
    }
    max(&mut total, &init_max);
    Ok(total)
}

/// A container's effective spec requests: limits stand in for missing requests, as the API
/// server defaults them.
fn container_requests(c: &ContainerInput) -> Vec<(String, String)> {
    let mut out = c.requests.clone();
    for (n, q) in &c.limits {
        if !c.requests.iter().any(|(r, _)| r == n) {
            out.push((n.clone(), q.clone()));
        }
    }
    out
}

/// Page size of a `hugepages-<size>` name, in bytes.
fn page_size(name: &str) -> Option<i64> {
    parse_scaled(name, name.strip_prefix(HUGEPAGES)?, 1)
        .ok()
        .filter(|&s| s > 0)
}

/// The API server's checks of pod-level resources (the module doc). The error lists every
/// cause, in the server's words and order.
pub(super) fn validate(pod: &PodInput, r: &PodResourcesInput) -> Result<(), ModelError> {
    let mut causes = Vec::new();
    for (n, _) in r.requests.iter().chain(&r.limits) {
        validate_resource_name(n)?;
    }
    let limits = named(&r.limits)?;
    let requests = named(&r.requests)?;
    let unsupported = |field: &str, n: &str| {
        format!(
            "spec.resources.{field}[{n}]: Unsupported value: \"{n}\": supported values: \
             \"cpu\", \"hugepages-\", \"memory\""
        )
    };
    let huge_multiple = |field: &str, n: &str, q: &Q| {
        let ok = page_size(n).is_some_and(|p| q.amount % p == 0);
        let shown = render(n, q.amount, q.format);
        (!ok).then(|| {
            format!(
                "spec.resources.{field}[{n}]: Invalid value: \"{shown}\": {shown} is not positive \
                 integer multiple of {n}"
            )
        })
    };
    let (mut cpu_or_memory, mut huge) = (false, false);
    for (n, q) in &limits {
        if !is_supported(n) {
            causes.push(unsupported("limits", n));
        }
        if n.starts_with(HUGEPAGES) {
            huge = true;
            causes.extend(huge_multiple("limits", n, q));
        }
        cpu_or_memory |= n == "cpu" || n == "memory";
    }
    for (n, q) in &requests {
        if !is_supported(n) {
            causes.push(unsupported("requests", n));
        }
        let shown = render(n, q.amount, q.format);
        match limits.get(n) {
            Some(l) if q.amount != l.amount && !overcommit_allowed(n) => causes.push(format!(
                "spec.resources.requests: Invalid value: \"{shown}\": must be equal to {n} limit \
                 of {}",
                render(n, l.amount, l.format)
            )),
            Some(l) if q.amount > l.amount => causes.push(format!(
                "spec.resources.requests: Invalid value: \"{shown}\": must be less than or equal \
                 to {n} limit of {}",
                render(n, l.amount, l.format)
            )),
            Some(_) => {}
            None if !overcommit_allowed(n) => causes.push(
                "spec.resources.limits: Required value: Limit must be set for non overcommitable \
                 resources"
                    .to_owned(),
            ),
            None => {}
        }
        if n.starts_with(HUGEPAGES) {
            huge = true;
            causes.extend(huge_multiple("requests", n, q));
        }
        cpu_or_memory |= n == "cpu" || n == "memory";
    }
    if huge && !cpu_or_memory {
        causes.push("spec.resources: Forbidden: HugePages require cpu or memory".to_owned());
    }
    // validatePodResourceConsistency.
    let agg_requests = aggregate(pod, container_requests)?;
    for (n, agg) in &agg_requests {
        if let Some(q) = requests.get(n)
            && agg.amount > q.amount
        {
            causes.push(format!(
                "spec.resources.requests[{n}]: Invalid value: \"{}\": must be greater than or \
                 equal to aggregate container requests of {}",
                render(n, q.amount, q.format),
                render(n, agg.amount, agg.format)
            ));
        }
    }
    let agg_limits = aggregate(pod, |c| c.limits.clone())?;
    for (n, agg) in agg_limits.iter().filter(|(n, _)| n.starts_with(HUGEPAGES)) {
        if let Some(l) = limits.get(n)
            && agg.amount > l.amount
        {
            causes.push(format!(
                "spec.resources.limits[{n}]: Invalid value: \"{}\": must be greater than or equal \
                 to aggregate container limits of {}",
                render(n, l.amount, l.format),
                render(n, agg.amount, agg.format)
            ));
        }
    }
    for (i, c) in pod.containers.iter().enumerate() {
        for (n, cl) in &named(&c.limits)? {
            if let Some(pl) = limits.get(n)
                && cl.amount > pl.amount
            {
                causes.push(format!(
                    "spec.resources.containers[{i}][{n}].limits: Invalid value: \"{}\": must be \
                     less than or equal to pod limits of {}",
                    render(n, cl.amount, cl.format),
                    render(n, pl.amount, pl.format)
                ));
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ModelError::PodResources(causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_print_as_go_prints_them() {
        assert_eq!(render("cpu", 3000, Format::Decimal), "3");
        assert_eq!(render("cpu", 1500, Format::Decimal), "1500m");
        assert_eq!(render("cpu", 2000, Format::Decimal), "2");
        assert_eq!(render("memory", 1 << 30, Format::Binary), "1Gi");
        assert_eq!(render("memory", 1536 << 20, Format::Binary), "1536Mi");
        assert_eq!(render("memory", 1000, Format::Binary), "1k");
        assert_eq!(render("memory", 1500, Format::Binary), "1500");
        assert_eq!(render("memory", 1_500_000_000, Format::Decimal), "1500M");
        assert_eq!(render("memory", 2_000, Format::Decimal), "2k");
        assert_eq!(render("nvidia.com/gpu", 1, Format::Decimal), "1");
    }
}
