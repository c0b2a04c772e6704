//! Consumable capacity (`DRAConsumableCapacity`, beta and on by default since Kubernetes 1.36):
//! what one allocation of a device takes of each capacity it publishes, as upstream's structured
//! allocator computes it (`calculateConsumedCapacity`, `violatesPolicy`,
//! `CmpRequestOverCapacity`).
//!
//! - A request may ask for amounts of a device's capacities (`capacity.requests`). A device
//!   lacking one of the capacities asked for does not serve the request.
//! - Per capacity of the device: the amount asked for, rounded up by the capacity's
//!   `requestPolicy` (to `validRange.min`, then to `min` plus a whole number of `step`s, or to
//!   the smallest of `validValues` not below it); not asked for, the policy's `default`, or
//!   else all of it. The amount must then satisfy the policy (not above `max`, on a step, one
//!   of `validValues`; the `default` always does) and, with what is consumed already, not
//!   exceed the capacity's `value`.
//! - Only devices with `allowMultipleAllocations` are shared: each allocation of one is a share
//!   (a `shareID` and its `consumedCapacity` in the claim's status) and what the shares
//!   consume is in use. An ordinary device is taken whole; the amounts asked for only select it.
//!
//! Amounts are milli-units (`i128`). Pure: owns these rules and nothing else.

use crate::model::{ModelError, parse_scaled};
use std::sync::Arc;

/// `capacity[].requestPolicy` of a device, as published.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestPolicyInput {
    pub default: Option<String>,
    pub valid_values: Vec<String>,
    /// `validRange`: (min, max, step).
    pub valid_range: Option<(Option<String>, Option<String>, Option<String>)>,
}

/// A compiled request policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    pub default: Option<i128>,
    /// Ascending (the API server requires it).
    pub valid_values: Box<[i128]>,
    pub range: Option<Range>,
}

/// `validRange`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Range {
    pub min: Option<i128>,
    pub max: Option<i128>,
    pub step: Option<i128>,
}

/// One capacity of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacity {
    /// As published (what `consumedCapacity` names).
    pub name: Arc<str>,
    /// `domain/name`, a name without a domain belonging to the driver's.
    pub key: Arc<str>,
    pub value: i128,
    pub policy: Option<Policy>,
}

fn milli(what: &str, q: &str) -> Result<i128, ModelError> {
    parse_scaled(what, q, 1000).map(i128::from)
}

/// `domain/name` of a capacity name as a device of `driver` publishes or a request names it.
pub fn qualified(driver: &str, name: &str) -> Arc<str> {
    if name.contains('/') {
        Arc::from(name)
    } else {
        Arc::from(format!("{driver}/{name}").as_str())
    }
}

/// Compile a device's capacities (`(name, quantity)`) and their policies (by name).
pub fn compile(
    driver: &str,
    capacity: &[(String, String)],
    policies: &[(String, RequestPolicyInput)],
) -> Result<Box<[Capacity]>, ModelError> {
    let mut out = Vec::with_capacity(capacity.len());
    for (name, q) in capacity {
        let policy = match policies.iter().find(|(n, _)| n == name) {
            None => None,
            Some((_, p)) => {
                let opt =
                    |q: &Option<String>| q.as_deref().map(|q| milli("capacity", q)).transpose();
                let mut valid_values = p
                    .valid_values
                    .iter()
                    .map(|q| milli("capacity", q))
                    .collect::<Result<Vec<_>, _>>()?;
                valid_values.sort_unstable();
                Some(Policy {
                    default: opt(&p.default)?,
                    valid_values: valid_values.into(),
                    range: match &p.valid_range {
                        None => None,
                        Some((min, max, step)) => Some(Range {
                            min: opt(min)?,
                            max: opt(max)?,
                            step: opt(step)?.filter(|s| *s > 0),
                        }),
                    },
                })
            }
        };
        out.push(Capacity {
            name: Arc::from(name.as_str()),
            key: qualified(driver, name),
            value: milli("capacity", q)?,
            policy,
        });
    }
    Ok(out.into())
}

/// `calculateConsumedCapacity`: what one allocation takes of `cap` when `requested` is asked.
fn consumed(requested: Option<i128>, cap: &Capacity) -> i128 {
    let Some(r) = requested else {
        return cap
            .policy
            .as_ref()
            .and_then(|p| p.default)
            .unwrap_or(cap.value);
    };
    let Some(p) = &cap.policy else {
        return r;
    };
    match (&p.range, p.valid_values.is_empty()) {
        (
            Some(Range {
                min: Some(min),
                step,
                ..
            }),
            _,
        ) => {
            if r < *min {
                *min
            } else if let Some(step) = step {
                let n = (r - min + step - 1) / step;
                min + n * step
            } else {
                r
            }
        }
        (_, false) => p
            .valid_values
            .iter()
            .copied()
            .find(|v| *v >= r)
            .unwrap_or(r),
        _ => r,
    }
}

/// The least one share of `cap` consumes, whatever the request asks: the policy's `default`
/// (not asked) or the smallest amount an asked one is rounded up to (`validRange.min`, the
/// first of `validValues`); 0 when an asked amount is taken as it is. A device whose capacity
/// has less than this left can take no more shares.
pub fn least_share(cap: &Capacity) -> i128 {
    let not_asked = cap
        .policy
        .as_ref()
        .and_then(|p| p.default)
        .unwrap_or(cap.value);
    let asked = match &cap.policy {
        None => 0,
        Some(p) => match (&p.range, p.valid_values.first()) {
            (Some(Range { min: Some(min), .. }), _) => *min,
            (_, Some(v)) => *v,
            _ => 0,
        },
    };
    asked.min(not_asked).max(0)
}

/// `violatesPolicy`.
fn violates(amount: i128, p: &Policy) -> bool {
    if p.default == Some(amount) {
        return false;
    }
    if let Some(r) = &p.range {
        if r.max.is_some_and(|max| amount > max) {
            return true;
        }
        if let Some(step) = r.step
            && (amount - r.min.unwrap_or(0)) % step != 0
        {
            return true;
        }
        return false;
    }
    !p.valid_values.is_empty() && !p.valid_values.contains(&amount)
}

/// Does the capacity `key` (`domain/name`) of a device of `driver` answer to `name` as a request
/// writes it (without a domain: the driver's)?
fn names(key: &str, driver: &str, name: &str) -> bool {
    if name.contains('/') {
        return key == name;
    }
    key.len() == driver.len() + 1 + name.len()
        && key.starts_with(driver)
        && key[driver.len()..].starts_with('/')
        && key.ends_with(name)
}

/// What one allocation for a request asking `requested` (`(name, milli)`) takes of each
/// capacity of a device of `driver` (in the device's order), or `None` when the device cannot
/// serve the request: it lacks a capacity asked for, an amount breaks its policy, or an amount
/// alone exceeds the capacity.
pub fn consumption(
    requested: &[(Arc<str>, i128)],
    driver: &str,
    caps: &[Capacity],
) -> Option<Box<[i128]>> {
    if requested
        .iter()
        .any(|(n, _)| !caps.iter().any(|c| names(&c.key, driver, n)))
    {
        return None;
    }
    let mut out = Vec::with_capacity(caps.len());
    for c in caps {
        let asked = requested
            .iter()
            .find(|(n, _)| names(&c.key, driver, n))
            .map(|&(_, v)| v);
        let amount = consumed(asked, c);
        if amount < 0 || amount > c.value || c.policy.as_ref().is_some_and(|p| violates(amount, p))
        {
            return None;
        }
        out.push(amount);
    }
    Some(out.into())
}

/// Does `amount` (per capacity) still fit beside `used` (per capacity, empty: nothing)?
pub fn fits(caps: &[Capacity], used: &[i128], amount: &[i128]) -> bool {
    caps.iter().enumerate().all(|(i, c)| {
        used.get(i).copied().unwrap_or(0) + amount.get(i).copied().unwrap_or(0) <= c.value
    })
}

/// A device's capacities consumed by a written share (`consumedCapacity`: (name, quantity)),
/// per capacity in the device's order. Names it does not publish are ignored; an unreadable
/// quantity counts as the whole capacity (the device is not over-committed by a bad write).
pub fn read_consumed(
    caps: &[Capacity],
    driver: &str,
    consumed: &[(String, String)],
) -> Box<[i128]> {
    caps.iter()
        .map(|c| {
            consumed
                .iter()
                .find(|(n, _)| *n == *c.name || qualified(driver, n) == c.key)
                .map_or(0, |(_, q)| milli("capacity", q).unwrap_or(c.value))
        })
        .collect()
}

/// A quantity for milli-units, as the API server would print it: the shortest of a whole
/// number of the largest binary (`Ki`..`Ei`) or decimal (`k`..`E`) unit dividing it exactly and
/// plain digits (binary on a tie); `<n>m` when it is not whole.
pub fn format_milli(m: i128) -> String {
    if m % 1000 != 0 {
        return format!("{m}m");
    }
    let v = m / 1000;
    let mut best = v.to_string();
    if v == 0 {
        return best;
    }
    let largest = |units: &[(i128, &str)]| {
        units
            .iter()
            .find(|(unit, _)| v % unit == 0)
            .map(|(unit, suffix)| format!("{}{suffix}", v / unit))
    };
    let binary = largest(&[
        (1 << 60, "Ei"),
        (1 << 50, "Pi"),
        (1 << 40, "Ti"),
        (1 << 30, "Gi"),
        (1 << 20, "Mi"),
        (1 << 10, "Ki"),
    ]);
    let decimal = largest(&[
        (1_000_000_000_000_000_000, "E"),
        (1_000_000_000_000_000, "P"),
        (1_000_000_000_000, "T"),
        (1_000_000_000, "G"),
        (1_000_000, "M"),
        (1_000, "k"),
    ]);
    for c in [decimal, binary].into_iter().flatten() {
        if c.len() <= best.len() {
            best = c;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    const GI: i128 = 1 << 30;

    fn cap(value: &str, policy: Option<RequestPolicyInput>) -> Box<[Capacity]> {
        let policies: Vec<_> = policy
            .into_iter()
            .map(|p| ("memory".to_string(), p))
            .collect();
        compile("drv", &[("memory".into(), value.into())], &policies).unwrap()
    }

    fn ask(q: &str) -> Vec<(Arc<str>, i128)> {
        vec![(Arc::from("memory"), milli("q", q).unwrap())]
    }

    fn consumption_of(asked: &[(Arc<str>, i128)], c: &[Capacity]) -> Option<Box<[i128]>> {
        consumption(asked, "drv", c)
    }

    fn range(min: &str, max: Option<&str>, step: Option<&str>) -> RequestPolicyInput {
        RequestPolicyInput {
            default: Some(min.into()),
            valid_range: Some((Some(min.into()), max.map(Into::into), step.map(Into::into))),
            ..Default::default()
        }
    }

    /// The least a share consumes bounds every consumption: no asked amount gives less.
    #[test]
    fn least_share_is_a_floor_of_every_consumption() {
        let values = RequestPolicyInput {
            default: Some("2Gi".into()),
            valid_values: vec!["1Gi".into(), "2Gi".into(), "4Gi".into()],
            ..Default::default()
        };
        for (c, least) in [
            (cap("8Gi", None), 0),
            (cap("8Gi", Some(range("1Gi", None, Some("1Gi")))), GI * 1000),
            (cap("8Gi", Some(values)), GI * 1000),
        ] {
            assert_eq!(least_share(&c[0]), least);
            for q in ["0", "1", "512Mi", "1Gi", "3Gi", "8Gi"] {
                if let Some(amount) = consumption_of(&ask(q), &c) {
                    assert!(amount[0] >= least, "{q}: {} < {least}", amount[0]);
                }
            }
            if let Some(amount) = consumption_of(&[], &c) {
                assert!(amount[0] >= least);
            }
        }
    }

    // Cases after upstream's consumable_capacity_test.go (TestCmpRequestOverCapacity,
    // TestCalculateConsumedCapacity), k8s.io/dynamic-resource-allocation/structured.
    #[test]
    fn amounts_are_rounded_up_by_the_policy() {
        let c = cap("80Gi", Some(range("1Gi", None, None)));
        assert_eq!(
            consumption_of(&ask("40Gi"), &c).as_deref(),
            Some(&[40 * GI * 1000][..])
        );
        assert_eq!(
            consumption_of(&ask("100Mi"), &c).as_deref(),
            Some(&[GI * 1000][..]),
            "below min: min"
        );
        assert_eq!(
            consumption_of(&[], &c).as_deref(),
            Some(&[GI * 1000][..]),
            "not asked: the default"
        );
        let c = cap("10Gi", Some(range("1Gi", Some("8Gi"), Some("2Gi"))));
        assert_eq!(
            consumption_of(&ask("2Gi"), &c).as_deref(),
            Some(&[3 * GI * 1000][..]),
            "to a step"
        );
        assert_eq!(consumption_of(&ask("8Gi"), &c), None, "9Gi is above max");
        let c = cap(
            "10",
            Some(RequestPolicyInput {
                default: Some("2".into()),
                valid_values: vec!["2".into(), "4".into(), "8".into()],
                ..Default::default()
            }),
        );
        assert_eq!(consumption_of(&ask("3"), &c).as_deref(), Some(&[4000][..]));
        assert_eq!(
            consumption_of(&ask("9"), &c),
            None,
            "no valid value is large enough"
        );
    }

    #[test]
    fn without_a_policy_the_whole_capacity_or_what_is_asked() {
        let c = cap("80Gi", None);
        assert_eq!(
            consumption_of(&[], &c).as_deref(),
            Some(&[80 * GI * 1000][..])
        );
        assert_eq!(
            consumption_of(&ask("10Gi"), &c).as_deref(),
            Some(&[10 * GI * 1000][..])
        );
        assert_eq!(consumption_of(&ask("81Gi"), &c), None);
        let other = vec![(Arc::from("bandwidth"), 1000)];
        assert_eq!(
            consumption_of(&other, &c),
            None,
            "a capacity the device lacks"
        );
        let explicit = vec![(Arc::from("drv/memory"), 1000)];
        assert!(
            consumption_of(&explicit, &c).is_some(),
            "the driver's domain spelled out"
        );
    }

    #[test]
    fn shares_fit_until_the_capacity_is_used_up() {
        let c = cap("80Gi", Some(range("1Gi", None, None)));
        let half = consumption_of(&ask("40Gi"), &c).unwrap();
        assert!(fits(&c, &[], &half));
        assert!(fits(&c, &half, &half));
        let two: Vec<i128> = half.iter().map(|h| h * 2).collect();
        assert!(!fits(&c, &two, &half));
    }

    #[test]
    fn written_shares_are_read_back_and_quantities_print_as_the_api_does() {
        let c = cap("80Gi", None);
        let got = read_consumed(&c, "drv", &[("memory".into(), "40Gi".into())]);
        assert_eq!(&*got, &[40 * GI * 1000]);
        assert_eq!(format_milli(40 * GI * 1000), "40Gi");
        assert_eq!(format_milli(10_000_000_000_000), "10G");
        assert_eq!(format_milli(1500), "1500m");
        assert_eq!(format_milli(3000), "3");
        assert_eq!(format_milli(0), "0");
    }
}
