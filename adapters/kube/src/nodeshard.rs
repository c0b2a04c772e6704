//! Volcano's `NodeShard` custom resource (`shard.volcano.sh/v1alpha1`, cluster-scoped, status
//! subresource; spec §7.1) as Rust types, plus the status arithmetic the shard coordinator needs
//! (§7.2). The types implement [`kube::Resource`] by hand (the workspace's `kube` has no `derive`
//! feature) and read every object Volcano's components write: missing or `null` lists are empty,
//! unknown fields are ignored. Writes stay minimal: empty status lists and an unset
//! `lastUpdateTime` are not serialised. The CRD Magma installs is upstream's, embedded from
//! `deploy/crd/` and returned by [`crd_yaml`]; `tests/nodeshard.rs` keeps the two in agreement.

use std::borrow::Cow;
use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::core::ClusterResourceScope;
use magma_engine::shard::status_lists;
use serde::{Deserialize, Deserializer, Serialize};

/// API group.
pub const GROUP: &str = "shard.volcano.sh";
/// API version (within [`GROUP`]).
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of the objects.
pub const API_VERSION: &str = "shard.volcano.sh/v1alpha1";
/// Kind.
pub const KIND: &str = "NodeShard";
/// List kind.
pub const LIST_KIND: &str = "NodeShardList";
/// Resource (plural) name.
pub const PLURAL: &str = "nodeshards";
/// Singular name.
pub const SINGULAR: &str = "nodeshard";
/// Short names (`kubectl get nsh`).
pub const SHORT_NAMES: &[&str] = &["nsh"];
/// Name of the CustomResourceDefinition object (`<plural>.<group>`).
pub const CRD_NAME: &str = "nodeshards.shard.volcano.sh";

/// The CRD Magma installs: Volcano's, unmodified in schema (`deploy/crd/`).
pub fn crd_yaml() -> &'static str {
    include_str!("../../../deploy/crd/shard.volcano.sh_nodeshards.yaml")
}

/// `spec` of a [`NodeShard`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeShardSpec {
    /// Nodes intended for this shard. Required by the schema and always serialised; a missing or
    /// `null` value reads as empty (the API server enforces presence, and a watch must not fail
    /// on a single odd object).
    #[serde(default, deserialize_with = "null_as_default")]
    pub nodes_desired: Vec<String>,
}

/// `status` of a [`NodeShard`], written only through the `/status` subresource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeShardStatus {
    /// Last time the status was updated (Volcano's schedulers do not set it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Nodes the owning scheduler currently schedules onto.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub nodes_in_use: Vec<String>,
    /// Desired nodes not yet in use (waiting for another shard to release them).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub nodes_to_add: Vec<String>,
    /// Nodes in use that are no longer desired (being released).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub nodes_to_remove: Vec<String>,
}

/// A `shard.volcano.sh/v1alpha1` `NodeShard`. `apiVersion` and `kind` are written on serialisation
/// and accepted (not checked) on deserialisation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeShard {
    /// Standard object metadata (cluster-scoped: no namespace).
    pub metadata: ObjectMeta,
    /// Desired nodes.
    pub spec: NodeShardSpec,
    /// Observed state, if any scheduler has written it.
    pub status: Option<NodeShardStatus>,
}

impl NodeShard {
    /// A NodeShard named `name` desiring `nodes_desired`, without status.
    pub fn new<S: AsRef<str>>(name: &str, nodes_desired: impl IntoIterator<Item = S>) -> Self {
        NodeShard {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            spec: NodeShardSpec {
                nodes_desired: nodes_desired
                    .into_iter()
                    .map(|s| s.as_ref().to_owned())
                    .collect(),
            },
            status: None,
        }
    }

    /// Whether writing `new` would change this object's status, ignoring `lastUpdateTime` and the
    /// order and duplicates of the lists. An absent status equals an all-empty one.
    pub fn status_differs(&self, new: &NodeShardStatus) -> bool {
        let empty = NodeShardStatus::default();
        let old = self.status.as_ref().unwrap_or(&empty);
        set(&old.nodes_in_use) != set(&new.nodes_in_use)
            || set(&old.nodes_to_add) != set(&new.nodes_to_add)
            || set(&old.nodes_to_remove) != set(&new.nodes_to_remove)
    }
}

/// The status a scheduler publishes when it uses `nodes_in_use` and its shard desires `desired`:
/// the engine's [`status_lists`] (`nodesInUse` as given, `nodesToRemove = inUse − desired`,
/// `nodesToAdd = desired − inUse`; sorted, deduplicated), `lastUpdateTime` unset (as upstream).
pub fn status_for<A, B>(
    nodes_in_use: impl IntoIterator<Item = A>,
    desired: impl IntoIterator<Item = B>,
) -> NodeShardStatus
where
    A: AsRef<str>,
    B: AsRef<str>,
{
    let lists = status_lists(nodes_in_use, desired);
    NodeShardStatus {
        last_update_time: None,
        nodes_in_use: lists.nodes_in_use,
        nodes_to_add: lists.nodes_to_add,
        nodes_to_remove: lists.nodes_to_remove,
    }
}

/// A JSON merge patch (`application/merge-patch+json`) for the `/status` subresource that sets
/// `status` to exactly `status`'s lists: empty lists become `null` (deleted), so a list that
/// empties is cleared rather than left behind as plain serialisation would. `lastUpdateTime` is
/// written when set and left untouched otherwise.
pub fn status_merge_patch(status: &NodeShardStatus) -> serde_json::Value {
    let list = |v: &Vec<String>| {
        if v.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::json!(v)
        }
    };
    let mut s = serde_json::Map::new();
    if let Some(t) = &status.last_update_time {
        s.insert(
            "lastUpdateTime".into(),
            serde_json::to_value(t).unwrap_or(serde_json::Value::Null),
        );
    }
    s.insert("nodesInUse".into(), list(&status.nodes_in_use));
    s.insert("nodesToAdd".into(), list(&status.nodes_to_add));
    s.insert("nodesToRemove".into(), list(&status.nodes_to_remove));
    serde_json::json!({ "status": s })
}

fn set(v: &[String]) -> BTreeSet<&str> {
    v.iter().map(String::as_str).collect()
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

impl kube::Resource for NodeShard {
    type DynamicType = ();
    type Scope = ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(KIND)
    }

    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(GROUP)
    }

    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(VERSION)
    }

    fn api_version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(API_VERSION)
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(PLURAL)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Wire form: `apiVersion`/`kind` added on write, tolerated (and ignored) on read.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireOut<'a> {
    api_version: &'static str,
    kind: &'static str,
    metadata: &'a ObjectMeta,
    spec: &'a NodeShardSpec,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a NodeShardStatus>,
}

#[derive(Deserialize)]
struct WireIn {
    #[serde(default)]
    metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_as_default")]
    spec: NodeShardSpec,
    #[serde(default)]
    status: Option<NodeShardStatus>,
}

impl Serialize for NodeShard {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        WireOut {
            api_version: API_VERSION,
            kind: KIND,
            metadata: &self.metadata,
            spec: &self.spec,
            status: self.status.as_ref(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for NodeShard {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = WireIn::deserialize(d)?;
        Ok(NodeShard {
            metadata: w.metadata,
            spec: w.spec,
            status: w.status,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_for_computes_differences_sorted() {
        let s = status_for(["c", "a", "b", "a"], ["b", "d", "c", "d"]);
        assert_eq!(s.nodes_in_use, ["a", "b", "c"]);
        assert_eq!(s.nodes_to_remove, ["a"]);
        assert_eq!(s.nodes_to_add, ["d"]);
        assert!(s.last_update_time.is_none());
        let empty = status_for(Vec::<String>::new(), Vec::<String>::new());
        assert_eq!(empty, NodeShardStatus::default());
    }

    #[test]
    fn status_differs_ignores_time_order_and_absence() {
        let mut ns = NodeShard::new("s", ["a", "b"]);
        assert!(!ns.status_differs(&NodeShardStatus::default()));
        let new = status_for(["a"], ["a", "b"]);
        assert!(ns.status_differs(&new));
        ns.status = Some(NodeShardStatus {
            last_update_time: Some(Time("2026-01-01T00:00:00Z".parse().expect("timestamp"))),
            nodes_in_use: vec!["a".into(), "a".into()],
            nodes_to_add: vec!["b".into()],
            nodes_to_remove: vec![],
        });
        assert!(!ns.status_differs(&new));
        assert!(ns.status_differs(&status_for(["a", "b"], ["a", "b"])));
        assert!(ns.status_differs(&status_for(["a", "c"], ["a", "b"])));
    }

    #[test]
    fn minimal_writes_and_null_clearing_patch() {
        let ns = NodeShard::new("s", Vec::<String>::new());
        let v = serde_json::to_value(&ns).expect("serialise");
        assert_eq!(
            v,
            serde_json::json!({"apiVersion": API_VERSION, "kind": KIND,
                "metadata": {"name": "s"}, "spec": {"nodesDesired": []}})
        );
        let st = status_for(["a"], ["a"]);
        assert_eq!(
            serde_json::to_value(&st).expect("serialise"),
            serde_json::json!({"nodesInUse": ["a"]})
        );
        assert_eq!(
            status_merge_patch(&st),
            serde_json::json!({"status": {"nodesInUse": ["a"], "nodesToAdd": null, "nodesToRemove": null}})
        );
    }

    #[test]
    fn resource_identity() {
        use kube::Resource;
        assert_eq!(NodeShard::api_version(&()), API_VERSION);
        assert_eq!(
            NodeShard::url_path(&(), None),
            "/apis/shard.volcano.sh/v1alpha1/nodeshards"
        );
    }
}
