//! Runs one workload's ops against a cluster, as upstream's `WorkloadExecutor`:
//!
//! - pods of `createPods` go to `namespace-<op index>` unless the op names one; the namespace
//!   is created first; `collectMetrics` runs a throughput collector over that namespace from
//!   before the first create until every pod of the namespace is scheduled;
//!   `skipWaitToCompletion` adds the count to the namespace's expected pods for later barriers;
//!   otherwise the op waits until the namespace has `count` scheduled pods;
//! - `createNodes` renders the template per node (`.Index`, `.Count`), names it
//!   `generateName` + 5 random characters, labels it `kubernetes.io/hostname`, and applies the
//!   prepare strategy in the same create (upstream patches it right after; the scheduler may
//!   see the unpatched node for a moment there, not here);
//! - `churn` runs in the background until the workload ends; create failures are counted per
//!   template and reported (upstream drops them silently);
//! - `deletePods` deletes the pods the watch shows in the namespace (matching the labels),
//!   at `deletePodsPerSecond` or all at once (upstream: one DeleteCollection; here one DELETE
//!   per pod);
//! - the steady state of `createPods` deletes each scheduled batch with one DeleteCollection,
//!   as upstream;
//! - `barrier` waits for every expected pod of the namespaces (all known ones when none are
//!   given) to be scheduled, or with `stageRequirement: Attempted` to carry a `PodScheduled`
//!   condition; a Scheduled barrier forgets the namespaces it waited for.
//!
//! Every pod gets `spec.schedulerName` set to the scheduler under test.

use super::config::{ChurnMode, NodeStrategy, Op, PodVolumeTemplates, TemplateRef};
use super::dra;
use super::objects::{self, Template};
use super::throughput::{SAMPLE_INTERVAL, Sampler, Summary, Waiting, summarize, waiting};
use super::tracker::{self, Counter, Filter, Tracker};
use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::discovery::Scope;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// scheduler_perf's pod creators run 30 requests in parallel.
pub const CREATE_PARALLELISM: usize = 30;

/// One throughput measurement (a `collectMetrics` op or a start/stop pair).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Measurement {
    /// `<testcase>/<workload>/<namespace or collector name>`, as upstream labels it.
    pub name: String,
    pub namespaces: Vec<String>,
    pub label_selector: BTreeMap<String, String>,
    /// Measured pods seen scheduled while the collector ran.
    pub pods_measured: usize,
    pub duration_s: f64,
    /// `None`: fewer than two sampling intervals with progress (upstream reports nothing).
    pub scheduling_throughput: Option<Summary>,
    /// Not upstream's: measured pods created and not yet scheduled at the samples (few: the
    /// throughput is the pods' creation rate, not the scheduler's).
    pub waiting: Option<Waiting>,
}

/// What one churn template did.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChurnStat {
    pub template: String,
    pub kind: String,
    pub created: u64,
    pub deleted: u64,
    pub failed: u64,
    pub first_error: Option<String>,
}

/// Per template, shared with the churn task.
type ChurnStats = Arc<Mutex<Vec<ChurnStat>>>;

struct Active {
    name: String,
    filter: Filter,
    counter: Arc<Counter>,
    started: Instant,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Sampler>,
}

pub struct Executor {
    client: kube::Client,
    tracker: Arc<Tracker>,
    scheduler: String,
    timeout: Duration,
    prefix: String,
    pods_per_ns: BTreeMap<String, usize>,
    namespaces: Vec<String>,
    nodes: Vec<String>,
    node_names: std::collections::HashSet<String>,
    csinodes: Vec<String>,
    background: Vec<tokio::task::JoinHandle<anyhow::Result<()>>>,
    churns: Vec<(tokio::task::JoinHandle<()>, ChurnStats)>,
    collector: Option<Active>,
    resources: HashMap<String, (ApiResource, Scope)>,
    /// Cluster-scoped objects created by `createAny` and `createResourceDriver`, deleted by
    /// [`Executor::cleanup`].
    cluster_objects: Vec<(Api<DynamicObject>, String)>,
    pub measurements: Vec<Measurement>,
}

/// Runs `create` again while it answers 409 AlreadyExists for an object that asks for a
/// generated name, 7 more attempts, as a v1.32+ API server's store does itself
/// (RetryGenerateName, which kube-sim follows): the harness keeps the retry for older servers.
async fn retry_taken_name<T, Fut>(
    generated: bool,
    mut create: impl FnMut() -> Fut,
) -> kube::Result<T>
where
    Fut: std::future::Future<Output = kube::Result<T>>,
{
    let mut attempt = 0;
    loop {
        match create().await {
            Err(e) if generated && attempt < 7 && api_err(&e) == Some(409) => attempt += 1,
            r => return r,
        }
    }
}

/// Creates `obj`, its generated name retried when taken ([`retry_taken_name`]).
async fn create_generated<K>(api: &Api<K>, obj: &K) -> kube::Result<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Serialize + std::fmt::Debug,
{
    let generated =
        obj.meta().name.as_deref().is_none_or(str::is_empty) && obj.meta().generate_name.is_some();
    let pp = PostParams::default();
    retry_taken_name(generated, || api.create(&pp, obj)).await
}

/// Creates a pod from its JSON as [`create_generated`] does, reading back only what the
/// tracker reads ([`tracker::Pod`]): the harness shares the machine with what it measures, and
/// building a k8s-openapi pod to post, then decoding the whole pod the API returns, cost it
/// about as much as its watch did.
async fn create_pod(client: &kube::Client, ns: &str, pod: &Value) -> kube::Result<tracker::Pod> {
    let generated = pod["metadata"]["name"].as_str().is_none_or(str::is_empty)
        && pod["metadata"]["generateName"].is_string();
    let body = serde_json::to_vec(pod).map_err(kube::Error::SerdeError)?;
    let req = kube::core::Request::new(<tracker::Pod as kube::Resource>::url_path(&(), Some(ns)));
    retry_taken_name(generated, || async {
        let r = req
            .create(&PostParams::default(), body.clone())
            .map_err(kube::Error::BuildRequest)?;
        client.request::<tracker::Pod>(r).await
    })
    .await
}

/// Upstream's `CreatePodWithPersistentVolume` with `bindVolume` for pod `i` of namespace `ns`:
/// the PV `<ns>-vol-<i>` (its CSI volume handle or EBS volume ID `vol-<i>`) bound to the claim
/// `pvc-<i>` and the claim to it, both `Bound` (each status written after its creation, which
/// resets it, as upstream does).
async fn create_bound_claim(
    client: &kube::Client,
    ns: &str,
    i: usize,
    mut pv: Value,
    mut pvc: Value,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        pv["kind"] == "PersistentVolume",
        "persistent volume template is a {}",
        pv["kind"]
    );
    anyhow::ensure!(
        pvc["kind"] == "PersistentVolumeClaim",
        "persistent volume claim template is a {}",
        pvc["kind"]
    );
    let (pv_name, claim) = (format!("{ns}-vol-{i}"), format!("pvc-{i}"));
    pv["metadata"]["name"] = json!(pv_name);
    if pv["spec"]["csi"].is_object() {
        pv["spec"]["csi"]["volumeHandle"] = json!(format!("vol-{i}"));
    } else if pv["spec"]["awsElasticBlockStore"].is_object() {
        pv["spec"]["awsElasticBlockStore"]["volumeID"] = json!(format!("vol-{i}"));
    }
    pv["spec"]["claimRef"] = json!({
        "kind": "PersistentVolumeClaim", "namespace": ns, "name": claim, "apiVersion": "v1"
    });
    pvc["metadata"]["name"] = json!(claim);
    pvc["spec"]["volumeName"] = json!(pv_name);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    create_then_status(&pvs, &pv_name, pv, |v: &mut PersistentVolume| {
        v.status.get_or_insert_default().phase = Some("Bound".into())
    })
    .await?;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    create_then_status(&pvcs, &claim, pvc, |c: &mut PersistentVolumeClaim| {
        c.status.get_or_insert_default().phase = Some("Bound".into())
    })
    .await
}

/// Create `obj`, then write the status `set` gives the created object (creation resets it).
async fn create_then_status<K>(
    api: &Api<K>,
    name: &str,
    obj: Value,
    set: impl FnOnce(&mut K),
) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Serialize + std::fmt::Debug,
{
    let mut created = api
        .create(&PostParams::default(), &serde_json::from_value(obj)?)
        .await?;
    set(&mut created);
    api.replace_status(name, &PostParams::default(), &created)
        .await?;
    Ok(())
}

fn api_err(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

impl Executor {
    /// `name_prefix` is `<testcase>/<workload>` for the measurement names.
    pub fn new(
        client: kube::Client,
        tracker: Arc<Tracker>,
        scheduler: &str,
        timeout: Duration,
        name_prefix: &str,
    ) -> Executor {
        Executor {
            client,
            tracker,
            scheduler: scheduler.to_string(),
            timeout,
            prefix: name_prefix.to_string(),
            pods_per_ns: BTreeMap::new(),
            namespaces: Vec::new(),
            nodes: Vec::new(),
            node_names: Default::default(),
            csinodes: Vec::new(),
            background: Vec::new(),
            churns: Vec::new(),
            collector: None,
            resources: HashMap::new(),
            cluster_objects: Vec::new(),
            measurements: Vec::new(),
        }
    }

    pub async fn run_op(&mut self, index: usize, op: &Op) -> anyhow::Result<()> {
        match op {
            Op::CreateNodes {
                count,
                template,
                strategy,
            } => {
                self.create_nodes(index, *count, template.as_ref(), strategy)
                    .await
            }
            Op::CreateNamespaces {
                prefix,
                count,
                template,
            } => {
                let base = match template {
                    Some(p) => Template::load(p, &BTreeMap::new())?.render(0, 1)?,
                    None => json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {}}),
                };
                for i in 0..*count {
                    let mut ns = base.clone();
                    ns["metadata"]["name"] = Value::String(format!("{prefix}-{i}"));
                    self.create_namespace(ns).await?;
                    self.pods_per_ns.entry(format!("{prefix}-{i}")).or_insert(0);
                }
                Ok(())
            }
            Op::CreatePods {
                count,
                namespace,
                template,
                collect_metrics,
                skip_wait,
                signature_batch,
                volumes,
                steady_state,
            } => {
                let ns = namespace
                    .clone()
                    .unwrap_or_else(|| format!("namespace-{index}"));
                self.ensure_namespace(&ns).await?;
                if *collect_metrics {
                    self.start_collecting(&ns, vec![ns.clone()], BTreeMap::new())?;
                }
                if let Some(duration) = steady_state {
                    self.create_pods_steadily(
                        &ns,
                        *count,
                        template.as_ref(),
                        *signature_batch,
                        *duration,
                    )
                    .await?;
                    if *collect_metrics {
                        self.stop_collecting().await?;
                    }
                    return Ok(());
                }
                self.create_pods(
                    &ns,
                    *count,
                    template.as_ref(),
                    *signature_batch,
                    volumes.as_ref(),
                )
                .await?;
                if *skip_wait {
                    *self.pods_per_ns.entry(ns).or_insert(0) += count;
                } else {
                    let want = *count;
                    let empty = BTreeMap::new();
                    self.tracker
                        .wait_until(self.timeout, |t| {
                            let c = t.counts(&ns, &empty);
                            if c.scheduled >= want {
                                Ok(())
                            } else {
                                Err(format!(
                                    "namespace {ns}: {} of {want} pods scheduled ({} attempted and unschedulable)",
                                    c.scheduled, c.attempted
                                ))
                            }
                        })
                        .await
                        .context("waiting for pods to get scheduled")?;
                }
                if *collect_metrics {
                    self.stop_collecting().await?;
                }
                Ok(())
            }
            Op::CreatePodSets(ops) => {
                for op in ops {
                    Box::pin(self.run_op(index, op)).await?;
                }
                Ok(())
            }
            Op::DeletePods {
                namespace,
                labels,
                per_second,
                skip_wait,
            } => {
                // The tracker's pod: a DeleteCollection answers with every pod it deleted,
                // and the harness reads none of their fields.
                let api: Api<tracker::Pod> = Api::namespaced(self.client.clone(), namespace);
                let per_second = *per_second;
                // Upstream's `runDeletePodsOp`: at a rate, one DELETE per pod its informer
                // lists; all at once, one DeleteCollection with the op's labels.
                let doomed = if per_second > 0 {
                    Doomed::Named(self.tracker.pod_names(namespace, labels))
                } else {
                    Doomed::Selected(
                        labels
                            .iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(","),
                    )
                };
                let work = async move {
                    delete_all(&api, doomed, per_second).await;
                    Ok(())
                };
                if *skip_wait {
                    self.background.push(tokio::spawn(work));
                    Ok(())
                } else {
                    work.await
                }
            }
            Op::Churn {
                mode,
                number,
                interval,
                namespace,
                templates,
            } => {
                let ns = namespace
                    .clone()
                    .unwrap_or_else(|| format!("namespace-{index}"));
                let ns_obj =
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                self.create_namespace(ns_obj).await?;
                self.churn(&ns, *mode, *number, *interval, templates).await
            }
            Op::Barrier {
                namespaces,
                labels,
                attempted,
            } => {
                for n in namespaces {
                    anyhow::ensure!(self.pods_per_ns.contains_key(n), "unknown namespace {n}");
                }
                let nss: Vec<String> = if namespaces.is_empty() {
                    self.pods_per_ns.keys().cloned().collect()
                } else {
                    namespaces.clone()
                };
                for ns in &nss {
                    let want = self.pods_per_ns[ns];
                    let attempted = *attempted;
                    self.tracker
                        .wait_until(self.timeout, |t| {
                            let c = t.counts(ns, labels);
                            let got = if attempted {
                                c.scheduled + c.attempted
                            } else {
                                c.scheduled
                            };
                            if got >= want {
                                Ok(())
                            } else {
                                Err(format!(
                                    "barrier: namespace {ns}: {got} of {want} pods {}",
                                    if attempted { "attempted" } else { "scheduled" }
                                ))
                            }
                        })
                        .await?;
                }
                if !*attempted {
                    for ns in &nss {
                        self.pods_per_ns.remove(ns);
                    }
                }
                Ok(())
            }
            Op::Sleep(d) => {
                tokio::time::sleep(*d).await;
                Ok(())
            }
            Op::StartCollectingMetrics {
                name,
                namespaces,
                labels,
            } => self.start_collecting(name, namespaces.clone(), labels.clone()),
            Op::StopCollectingMetrics => self.stop_collecting().await,
            Op::CreateAny {
                template,
                count,
                namespace,
            } => {
                if let Some(ns) = namespace {
                    self.ensure_namespace(ns).await?;
                }
                let t = Template::from_ref(template)?;
                for i in 0..*count {
                    self.create_any(&t, i, *count, namespace.as_deref()).await?;
                }
                Ok(())
            }
            Op::CreateResourceDriver {
                driver,
                max_claims_per_node,
                nodes,
            } => {
                let made =
                    dra::create_resource_driver(&self.client, driver, nodes, *max_claims_per_node)
                        .await?;
                let api = dra::api(&self.client, "ResourceSlice", "resourceslices", None);
                self.cluster_objects
                    .extend(made.into_iter().map(|n| (api.clone(), n)));
                Ok(())
            }
            Op::AllocResourceClaims { namespace } => {
                let started = Instant::now();
                let n = dra::alloc_resource_claims(&self.client, namespace.as_deref()).await?;
                eprintln!(
                    "scheduler-perf: allocResourceClaims: allocated {n} claims in {:.1} s",
                    started.elapsed().as_secs_f64()
                );
                Ok(())
            }
            Op::UpdateAny {
                template,
                count,
                namespace,
                per_second,
                subresources,
            } => {
                if let Some(ns) = namespace {
                    self.ensure_namespace(ns).await?;
                }
                let t = Template::load(template, &BTreeMap::new())?;
                let every = (*per_second > 0).then(|| Duration::from_secs(1) / *per_second);
                let mut ticker =
                    every.map(|e| tokio::time::interval_at(tokio::time::Instant::now() + e, e));
                for i in 0..*count {
                    if let Some(t) = ticker.as_mut() {
                        t.tick().await;
                    }
                    let mut obj = t.render(i, *count)?;
                    match obj["kind"].as_str() {
                        Some("Node") => objects::default_allocatable(&mut obj),
                        // As created: the scheduler's name replaces the default one (an update
                        // that changed it would be refused, as any change of it is).
                        Some("Pod") => objects::set_scheduler(&mut obj, &self.scheduler),
                        _ => {}
                    }
                    let api = self.api_for(&obj, namespace.as_deref()).await?;
                    let name = obj["metadata"]["name"]
                        .as_str()
                        .ok_or_else(|| {
                            anyhow::anyhow!("{}: updateAny needs metadata.name", template.display())
                        })?
                        .to_string();
                    let d: DynamicObject = serde_json::from_value(obj)?;
                    // As upstream's updateAny: the object (or only the subresources named, e.g.
                    // `resize`), then its status.
                    if subresources.is_empty() {
                        api.replace(&name, &PostParams::default(), &d)
                            .await
                            .with_context(|| format!("updating {name}"))?;
                    }
                    for sub in subresources {
                        api.replace_subresource(sub, &name, &PostParams::default(), &d)
                            .await
                            .with_context(|| format!("updating {name}/{sub}"))?;
                    }
                    api.replace_status(&name, &PostParams::default(), &d)
                        .await
                        .with_context(|| format!("updating the status of {name}"))?;
                }
                Ok(())
            }
        }
    }

    /// Ends background work: churn stops, pending deletes finish, an open collector stops.
    pub async fn finish(&mut self) -> anyhow::Result<Vec<ChurnStat>> {
        let mut stats = Vec::new();
        for (task, s) in self.churns.drain(..) {
            task.abort();
            let _ = task.await;
            stats.extend(s.lock().unwrap_or_else(|e| e.into_inner()).iter().cloned());
        }
        for t in self.background.drain(..) {
            t.await.context("background op panicked")??;
        }
        if self.collector.is_some() {
            self.stop_collecting().await?;
        }
        Ok(stats)
    }

    /// Deletes the namespaces, nodes and CSINodes this workload created (a real cluster is
    /// reused between workloads; the simulator is simply dropped).
    pub async fn cleanup(&mut self) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        for n in self.nodes.drain(..) {
            let _ = nodes.delete(&n, &DeleteParams::default()).await;
        }
        let csi: Api<k8s_openapi::api::storage::v1::CSINode> = Api::all(self.client.clone());
        for n in self.csinodes.drain(..) {
            let _ = csi.delete(&n, &DeleteParams::default()).await;
        }
        for (api, n) in self.cluster_objects.drain(..) {
            let _ = api.delete(&n, &DeleteParams::default()).await;
        }
        let nss: Api<Namespace> = Api::all(self.client.clone());
        for n in self.namespaces.drain(..) {
            let _ = nss.delete(&n, &DeleteParams::default()).await;
        }
    }

    fn start_collecting(
        &mut self,
        name: &str,
        namespaces: Vec<String>,
        labels: BTreeMap<String, String>,
    ) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.collector.is_none(),
            "metrics collection is overlapping. Probably second collector was started before stopping a previous one"
        );
        let filter = Filter {
            namespaces: namespaces.into_iter().collect(),
            labels,
        };
        let counter = self.tracker.counter(filter.clone());
        let (stop, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let c = counter.clone();
        let started = Instant::now();
        let task = tokio::spawn(async move {
            let mut sampler = Sampler::default();
            let mut iv = tokio::time::interval_at(
                tokio::time::Instant::now() + SAMPLE_INTERVAL,
                SAMPLE_INTERVAL,
            );
            iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tokio::select! {
                    _ = &mut stop_rx => break,
                    _ = iv.tick() => sampler.tick(started.elapsed(), c.scheduled(), c.waiting()),
                }
            }
            sampler
        });
        self.collector = Some(Active {
            name: name.to_string(),
            filter,
            counter,
            started,
            stop,
            task,
        });
        Ok(())
    }

    async fn stop_collecting(&mut self) -> anyhow::Result<()> {
        let a = self.collector.take().ok_or_else(|| {
            anyhow::anyhow!("missing startCollectingMetrics operation before stopping")
        })?;
        let _ = a.stop.send(());
        let sampler = a.task.await.context("collector panicked")?;
        self.tracker.drop_counter(&a.counter);
        let mut namespaces: Vec<String> = a.filter.namespaces.into_iter().collect();
        namespaces.sort();
        self.measurements.push(Measurement {
            name: format!("{}/{}", self.prefix, a.name),
            namespaces,
            label_selector: a.filter.labels,
            pods_measured: a.counter.scheduled(),
            duration_s: a.started.elapsed().as_secs_f64(),
            scheduling_throughput: summarize(&sampler.throughputs),
            waiting: waiting(&sampler.waiting),
        });
        Ok(())
    }

    async fn ensure_namespace(&mut self, ns: &str) -> anyhow::Result<()> {
        if self.pods_per_ns.contains_key(ns) {
            return Ok(());
        }
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        self.create_namespace(obj).await?;
        self.pods_per_ns.insert(ns.to_string(), 0);
        Ok(())
    }

    /// Creates a namespace; one that already exists from this workload is fine.
    async fn create_namespace(&mut self, obj: Value) -> anyhow::Result<()> {
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        if self.namespaces.contains(&name) {
            return Ok(());
        }
        let api: Api<Namespace> = Api::all(self.client.clone());
        let ns: Namespace = serde_json::from_value(obj)?;
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => {
                self.namespaces.push(name);
                Ok(())
            }
            Err(e) => Err(anyhow::Error::new(e).context(format!(
                "failed to create namespace {name} (on a reused cluster: delete it first)"
            ))),
        }
    }

    async fn create_nodes(
        &mut self,
        index: usize,
        count: usize,
        template: Option<&TemplateRef>,
        strategy: &NodeStrategy,
    ) -> anyhow::Result<()> {
        let template = template.map(Template::from_ref).transpose()?;
        let base = objects::base_node(&format!("node-{index}-"));
        let mut nodes = Vec::with_capacity(count);
        let mut csinodes = Vec::new();
        for i in 0..count {
            let mut node = match &template {
                Some(t) => t.render(i, count)?,
                None => base.clone(),
            };
            anyhow::ensure!(
                node["kind"] == "Node",
                "node template is a {}",
                node["kind"]
            );
            let generated = node["metadata"]["name"].as_str().is_none_or(str::is_empty);
            let name = if generated {
                // upstream draws the name client-side (to label it) and retries a taken one.
                let prefix = node["metadata"]["generateName"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                loop {
                    let n = format!("{prefix}{}", objects::random_suffix(5));
                    if self.node_names.insert(n.clone()) {
                        break n;
                    }
                }
            } else {
                node["metadata"]["name"].as_str().unwrap_or("").to_string()
            };
            node["metadata"]["name"] = Value::String(name.clone());
            objects::label_mut(&mut node)
                .insert("kubernetes.io/hostname".into(), name.clone().into());
            objects::default_allocatable(&mut node);
            match strategy {
                NodeStrategy::Trivial => {}
                NodeStrategy::Label { key, values } => {
                    objects::label_mut(&mut node)
                        .insert(key.clone(), values[i % values.len()].clone().into());
                }
                NodeStrategy::UniqueLabel { key } => {
                    let v = format!("{:032x}", rand::random::<u128>());
                    objects::label_mut(&mut node).insert(key.clone(), v.into());
                }
                NodeStrategy::Allocatable { node: alloc, csi } => {
                    let st = node
                        .as_object_mut()
                        .expect("an object")
                        .entry("status")
                        .or_insert_with(|| json!({}));
                    if !st["allocatable"].is_object() {
                        st["allocatable"] = json!({});
                    }
                    for (k, v) in alloc {
                        st["allocatable"][k] = Value::String(v.clone());
                    }
                    if !csi.is_empty() {
                        let drivers: Vec<Value> = csi
                            .iter()
                            .map(|(d, c)| {
                                let mut drv = json!({"name": d, "nodeID": name});
                                if let Some(c) = c {
                                    drv["allocatable"] = json!({"count": c});
                                }
                                drv
                            })
                            .collect();
                        csinodes.push(json!({
                            "apiVersion": "storage.k8s.io/v1",
                            "kind": "CSINode",
                            "metadata": {"name": name, "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": ""}},
                            "spec": {"drivers": drivers}
                        }));
                    }
                }
            }
            nodes.push((name, node, generated));
        }
        let api: Api<DynamicObject> = self.api_for(&objects::base_node(""), None).await?;
        let mut results =
            futures::stream::iter(nodes.into_iter().map(|(name, mut node, generated)| {
                let api = api.clone();
                async move {
                    let mut name = name;
                    for attempt in 0.. {
                        let d: DynamicObject = serde_json::from_value(node.clone())?;
                        match api.create(&PostParams::default(), &d).await {
                            Ok(_) => break,
                            // Taken by an object this harness did not create (a reused cluster).
                            Err(e) if generated && attempt < 5 && api_err(&e) == Some(409) => {
                                let prefix =
                                    node["metadata"]["generateName"].as_str().unwrap_or("");
                                name = format!("{prefix}{}", objects::random_suffix(5));
                                node["metadata"]["name"] = Value::String(name.clone());
                                objects::label_mut(&mut node)
                                    .insert("kubernetes.io/hostname".into(), name.clone().into());
                            }
                            Err(e) => {
                                return Err(
                                    anyhow::Error::new(e).context(format!("creating node {name}"))
                                );
                            }
                        }
                    }
                    anyhow::Ok(name)
                }
            }))
            .buffer_unordered(CREATE_PARALLELISM);
        while let Some(r) = results.next().await {
            self.nodes.push(r?);
        }
        drop(results);
        if !csinodes.is_empty() {
            let api = self.api_for(&csinodes[0], None).await?;
            for c in csinodes {
                let name = c["metadata"]["name"].as_str().unwrap_or("").to_string();
                let d: DynamicObject = serde_json::from_value(c)?;
                api.create(&PostParams::default(), &d)
                    .await
                    .with_context(|| format!("creating CSINode {name}"))?;
                self.csinodes.push(name);
            }
        }
        Ok(())
    }

    async fn create_pods(
        &mut self,
        ns: &str,
        count: usize,
        template: Option<&TemplateRef>,
        batch: usize,
        volumes: Option<&PodVolumeTemplates>,
    ) -> anyhow::Result<()> {
        let template = template.map(Template::from_ref).transpose()?;
        let volumes = volumes
            .map(|v| {
                let empty = BTreeMap::new();
                anyhow::Ok((
                    Template::load(&v.pv, &empty)?,
                    Template::load(&v.pvc, &empty)?,
                ))
            })
            .transpose()?;
        let base = objects::base_pod();
        let scheduler = self.scheduler.clone();
        let render = |i: usize| -> anyhow::Result<Value> {
            let mut pod = match &template {
                Some(t) => t.render(i, count)?,
                None => base.clone(),
            };
            anyhow::ensure!(pod["kind"] == "Pod", "pod template is a {}", pod["kind"]);
            objects::label_mut(&mut pod).insert(
                "signature".into(),
                format!("signature-label-{}", i / batch.max(1)).into(),
            );
            objects::set_scheduler(&mut pod, &scheduler);
            if volumes.is_some() {
                pod["spec"]["volumes"] = json!([
                    {"name": "vol", "persistentVolumeClaim": {"claimName": format!("pvc-{i}")}}
                ]);
            }
            Ok(pod)
        };
        // Decoded as a pod once, as upstream's harness decodes its template: a field of the
        // wrong type is the template's error, not each pod's 422.
        if count > 0 {
            serde_json::from_value::<Pod>(render(0)?).context("pod template")?;
        }
        let mut results = futures::stream::iter((0..count).map(|i| {
            let pod = render(i);
            let bound_claim = volumes
                .as_ref()
                .map(|(pv, pvc)| anyhow::Ok((pv.render(i, count)?, pvc.render(i, count)?)));
            let client = self.client.clone();
            let ns = ns.to_string();
            async move {
                if let Some(objects) = bound_claim {
                    let (pv, pvc) = objects?;
                    create_bound_claim(&client, &ns, i, pv, pvc)
                        .await
                        .with_context(|| format!("creating pvc-{i} and its volume"))?;
                }
                create_pod(&client, &ns, &pod?)
                    .await
                    .context("creating pod")?;
                anyhow::Ok(())
            }
        }))
        .buffer_unordered(CREATE_PARALLELISM);
        while let Some(r) = results.next().await {
            r.with_context(|| format!("namespace {ns}"))?;
        }
        Ok(())
    }

    /// Upstream's `createPodsSteadily`: `count` pods, and each time `count` more of the
    /// namespace's pods got scheduled, every pod of the namespace deleted with one
    /// DeleteCollection (grace period 0, background propagation) and the next `count` created,
    /// until `duration` is over. No pod scheduled at all is an error, as upstream, and so is a
    /// DeleteCollection that fails before the deadline.
    async fn create_pods_steadily(
        &mut self,
        ns: &str,
        count: usize,
        template: Option<&TemplateRef>,
        batch: usize,
        duration: Duration,
    ) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + duration;
        let counter = self.tracker.counter(Filter {
            namespaces: [ns.to_string()].into(),
            labels: BTreeMap::new(),
        });
        let result = async {
            let mut next = count;
            loop {
                match tokio::time::timeout_at(
                    deadline,
                    self.create_pods(ns, count, template, batch, None),
                )
                .await
                {
                    Err(_) => break,
                    Ok(r) => r.context("create the next batch of pods")?,
                }
                let c = counter.clone();
                let want = next;
                let all_scheduled = self.tracker.wait_until(self.timeout, |_| {
                    if c.scheduled() >= want {
                        Ok(())
                    } else {
                        Err(format!("namespace {ns}: {} of {want} pods scheduled", c.scheduled()))
                    }
                });
                match tokio::time::timeout_at(deadline, all_scheduled).await {
                    Err(_) => break,
                    Ok(r) => r?,
                }
                next += count;
                // Upstream (`[...]`: left out here):
                //   err := tCtx.Client().CoreV1().Pods(namespace).DeleteCollection(tCtx,
                //       metav1.DeleteOptions{
                //           GracePeriodSeconds: ptr.To(int64(0)),
                //           PropagationPolicy:  ptr.To(metav1.DeletePropagationBackground), [...]
                //       }, metav1.ListOptions{})
                //   // Ignore errors when the time is up. [...]
                //   if tCtx.Err() != nil {
                //       continue
                //   }
                //   if err != nil {
                //       // [...] sometimes rate limiting gives up *before* the context
                //       // deadline is reached. [...]
                //       if strings.Contains(err.Error(), "would exceed context deadline") {
                //           continue
                //       }
                //       return fmt.Errorf("delete scheduled pods: %w", err)
                //   }
                // kube's client has no rate limiter that gives up early: only the deadline
                // excuses a failure.
                // The tracker's pod: the answer lists every pod deleted, read no further.
                let api: Api<tracker::Pod> = Api::namespaced(self.client.clone(), ns);
                let dp = DeleteParams {
                    grace_period_seconds: Some(0),
                    propagation_policy: Some(kube::api::PropagationPolicy::Background),
                    ..DeleteParams::default()
                };
                let all = ListParams::default();
                match tokio::time::timeout_at(deadline, api.delete_collection(&dp, &all)).await {
                    Err(_) => break,
                    Ok(_) if tokio::time::Instant::now() >= deadline => break,
                    Ok(r) => {
                        r.with_context(|| format!("namespace {ns}: delete scheduled pods"))?;
                    }
                }
            }
            anyhow::ensure!(
                counter.scheduled() > 0,
                "no pod at all got scheduled, either because of a problem or because the test interval was too small"
            );
            Ok(())
        }
        .await;
        self.tracker.drop_counter(&counter);
        result
    }

    /// One object of a `createAny` op. Upstream retries any failure once a second for 20 s (a
    /// kind just registered may not be served yet); here only failures that can pass are
    /// retried (transport errors, 404, 429, 5xx), the others fail at once.
    async fn create_any(
        &mut self,
        t: &Template,
        index: usize,
        count: usize,
        namespace: Option<&str>,
    ) -> anyhow::Result<()> {
        let mut obj = t.render(index, count)?;
        // `resource.k8s.io/v1beta2` has `v1`'s schema: a target serving only `v1` (kube-sim)
        // gets the object as `v1`, as the real API server converts it.
        if obj["apiVersion"] == dra::V1BETA2
            && !self.resources.contains_key(&format!(
                "{}/{}",
                dra::V1BETA2,
                obj["kind"].as_str().unwrap_or("")
            ))
        {
            obj["apiVersion"] = dra::API_VERSION.into();
        }
        let api = self
            .api_for(&obj, namespace)
            .await
            .with_context(|| t.path.display().to_string())?;
        let namespaced = self
            .resources
            .get(&format!(
                "{}/{}",
                obj["apiVersion"].as_str().unwrap_or(""),
                obj["kind"].as_str().unwrap_or("")
            ))
            .is_some_and(|(_, scope)| matches!(scope, Scope::Namespaced));
        let d: DynamicObject = serde_json::from_value(obj)?;
        let give_up = Instant::now() + Duration::from_secs(20);
        loop {
            match create_generated(&api, &d).await {
                Ok(o) => {
                    if !namespaced && let Some(name) = o.metadata.name {
                        self.cluster_objects.push((api, name));
                    }
                    return Ok(());
                }
                Err(e)
                    if Instant::now() < give_up
                        && api_err(&e).is_none_or(|c| c == 404 || c == 429 || c >= 500) =>
                {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => {
                    return Err(anyhow::Error::new(e).context(format!(
                        "{}: creating object {index} of {count}",
                        t.path.display()
                    )));
                }
            }
        }
    }

    async fn churn(
        &mut self,
        ns: &str,
        mode: ChurnMode,
        number: usize,
        interval: Duration,
        templates: &[std::path::PathBuf],
    ) -> anyhow::Result<()> {
        let stats: ChurnStats = Arc::default();
        let mut makers = Vec::new();
        for (i, path) in templates.iter().enumerate() {
            let mut obj = Template::load(path, &BTreeMap::new())?.render(0, 1)?;
            let kind = obj["kind"].as_str().unwrap_or("").to_string();
            match kind.as_str() {
                "Pod" => objects::set_scheduler(&mut obj, &self.scheduler),
                "Node" => objects::default_allocatable(&mut obj),
                _ => {}
            }
            stats
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(ChurnStat {
                    template: path.display().to_string(),
                    kind: kind.clone(),
                    ..ChurnStat::default()
                });
            match self.api_for(&obj, Some(ns)).await {
                Ok(api) => makers.push((i, api, serde_json::from_value::<DynamicObject>(obj)?)),
                Err(e) => {
                    let mut s = stats.lock().unwrap_or_else(|e| e.into_inner());
                    s[i].first_error = Some(format!("{e:#}"));
                }
            }
        }
        let st = stats.clone();
        let task = tokio::spawn(async move {
            let mut iv = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
            let mut slots: Vec<Vec<Option<String>>> = vec![vec![None; number.max(1)]; makers.len()];
            let mut count = 0usize;
            loop {
                if mode == ChurnMode::Create && number > 0 && count >= number {
                    return;
                }
                iv.tick().await;
                for (m, (i, api, obj)) in makers.iter().enumerate() {
                    let slot = count % number.max(1);
                    if mode == ChurnMode::Recreate
                        && let Some(name) = slots[m][slot].take()
                    {
                        let r = api.delete(&name, &DeleteParams::default()).await;
                        let mut s = st.lock().unwrap_or_else(|e| e.into_inner());
                        match r {
                            Ok(_) => s[*i].deleted += 1,
                            Err(e) => {
                                s[*i].failed += 1;
                                s[*i].first_error.get_or_insert(format!("delete: {e}"));
                            }
                        }
                        continue;
                    }
                    let r = create_generated(api, obj).await;
                    let mut s = st.lock().unwrap_or_else(|e| e.into_inner());
                    match r {
                        Ok(o) => {
                            s[*i].created += 1;
                            if mode == ChurnMode::Recreate {
                                slots[m][slot] = o.metadata.name;
                            }
                        }
                        Err(e) => {
                            s[*i].failed += 1;
                            s[*i].first_error.get_or_insert(format!("create: {e}"));
                        }
                    }
                }
                count += 1;
            }
        });
        self.churns.push((task, stats));
        Ok(())
    }

    /// The API for an object's kind (discovery, cached), namespaced in `ns` where the kind is.
    async fn api_for(
        &mut self,
        obj: &Value,
        ns: Option<&str>,
    ) -> anyhow::Result<Api<DynamicObject>> {
        let api_version = obj["apiVersion"].as_str().unwrap_or("");
        let kind = obj["kind"].as_str().unwrap_or("");
        let key = format!("{api_version}/{kind}");
        if !self.resources.contains_key(&key) {
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let gvk = GroupVersionKind::gvk(group, version, kind);
            let (ar, caps) = kube::discovery::pinned_kind(&self.client, &gvk)
                .await
                .with_context(|| format!("the cluster does not serve {key}"))?;
            self.resources.insert(key.clone(), (ar, caps.scope));
        }
        let (ar, scope) = &self.resources[&key];
        Ok(match (scope, ns) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, ar),
            (Scope::Namespaced, None) => {
                anyhow::bail!("namespace not set for {key}, which is namespaced")
            }
            (Scope::Cluster, _) => Api::all_with(self.client.clone(), ar),
        })
    }
}

/// The pods a `deletePods` op deletes.
enum Doomed {
    /// These, one DELETE each.
    Named(Vec<String>),
    /// Those the label selector selects, in one DeleteCollection.
    Selected(String),
}

/// Deletes the pods at `per_second` (a tick per pod, the first after one period, as Go's
/// ticker), or those selected in one DeleteCollection. A pod already gone (404) is fine; other
/// failures are reported on stderr as upstream logs them.
async fn delete_all(api: &Api<tracker::Pod>, doomed: Doomed, per_second: u32) {
    let dp = DeleteParams::default();
    let names = match doomed {
        Doomed::Named(names) => names,
        Doomed::Selected(selector) => {
            let lp = ListParams::default().labels(&selector);
            if let Err(e) = api.delete_collection(&dp, &lp).await {
                eprintln!("scheduler-perf: unable to delete pods ({selector:?}): {e}");
            }
            return;
        }
    };
    let one = |n: String| {
        let api = api.clone();
        let dp = dp.clone();
        async move {
            if let Err(e) = api.delete(&n, &dp).await
                && api_err(&e) != Some(404)
            {
                eprintln!("scheduler-perf: unable to delete pod {n}: {e}");
            }
        }
    };
    let every = Duration::from_secs(1) / per_second.max(1);
    let mut iv = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    for n in names {
        iv.tick().await;
        one(n).await;
    }
}
