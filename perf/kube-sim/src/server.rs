//! The HTTP surface: routing of discovery, resource and admin paths, query parsing, fault
//! injection, request decoding and the verbs (get, list, watch, create, update, patch, delete,
//! deletecollection, `pods/binding`, `pods/resize`), with request and write recording. It holds
//! the state lock only inside single store calls and never across an await.
//!
//! It uses the shared state (`inner`), the list and watch handlers and the object rules below
//! them; `sim` builds its router. The simulated kubelet's reactions (`Inner::after_bound`, …)
//! are `kwok`'s.

use crate::deletion::DeleteOptions;
use crate::error::{ApiError, json_response, success_status};
use crate::faults::Faults;
use crate::inner::Inner;
use crate::list::{self, ListRequest};
use crate::managed::{Manager, Operation};
use crate::meta::Pointer;
use crate::patch::PatchKind;
use crate::records::RequestRecord;
use crate::resources::{self, ResourceDef};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{Deleted, Part, Stored};
use crate::watch::{self, WatchRequest};
use axum::Router;
use axum::extract::{Json, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use http::{HeaderMap, Method, Uri, header};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The router for a simulator.
pub(crate) fn router(inner: Arc<Inner>) -> Router {
    Router::new()
        .route("/sim/faults", get(get_faults).post(set_faults))
        .route("/sim/faults/expire-watches", post(expire_watches))
        .route("/sim/faults/drop-watches", post(drop_watches))
        .route("/sim/bindings", get(get_bindings))
        .route("/sim/writes", get(get_writes))
        .route("/sim/requests", get(get_requests))
        .route("/sim/stats", get(get_stats))
        .fallback(api)
        .with_state(inner)
}

async fn get_faults(State(inner): State<Arc<Inner>>) -> Json<Faults> {
    Json(inner.faults.get())
}

async fn set_faults(State(inner): State<Arc<Inner>>, Json(f): Json<Faults>) -> Json<Faults> {
    inner.faults.set(f);
    Json(inner.faults.get())
}

#[derive(serde::Deserialize)]
struct Count {
    #[serde(default = "one")]
    count: u32,
}

fn one() -> u32 {
    1
}

async fn expire_watches(State(inner): State<Arc<Inner>>, body: Bytes) -> Response {
    let n = serde_json::from_slice::<Count>(&body).map_or(1, |c| c.count);
    inner.faults.expire_next_watches(n);
    json_response(
        200,
        serde_json::to_vec(&json!({"expireNextWatches": n})).unwrap_or_default(),
    )
}

async fn drop_watches(State(inner): State<Arc<Inner>>) -> Response {
    inner.faults.drop_all_watches();
    json_response(200, b"{}".to_vec())
}

async fn get_bindings(State(inner): State<Arc<Inner>>) -> Response {
    let recs = handle_records(&inner).0;
    json_response(200, serde_json::to_vec(&recs).unwrap_or_default())
}

async fn get_writes(State(inner): State<Arc<Inner>>) -> Response {
    let recs = handle_records(&inner).1;
    json_response(200, serde_json::to_vec(&recs).unwrap_or_default())
}

async fn get_requests(State(inner): State<Arc<Inner>>) -> Response {
    json_response(
        200,
        serde_json::to_vec(&inner.requests()).unwrap_or_default(),
    )
}

async fn get_stats(State(inner): State<Arc<Inner>>) -> Json<crate::SimStats> {
    Json(inner.sim_stats())
}

fn handle_records(inner: &Arc<Inner>) -> (Vec<crate::BindingRecord>, Vec<crate::WriteRecord>) {
    inner.snapshot_records()
}

fn percent_decode(s: &str) -> String {
    fn hex(c: u8) -> Option<u8> {
        (c as char).to_digit(16).map(|d| d as u8)
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                match (
                    b.get(i + 1).copied().and_then(hex),
                    b.get(i + 2).copied().and_then(hex),
                ) {
                    (Some(h), Some(l)) => {
                        out.push(h * 16 + l);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Query string to a map (last value wins; empty pairs such as kube's leading `&` are skipped).
pub(crate) fn parse_query(q: &str) -> HashMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn json_value(code: u16, v: &Value) -> Response {
    json_response(code, serde_json::to_vec(v).unwrap_or_default())
}

fn stored_response(code: u16, s: &Stored) -> Response {
    json_response(code, s.json().to_vec())
}

fn version_info() -> Value {
    json!({"major": "1", "minor": "34", "gitVersion": "v1.34.0-kube-sim", "gitCommit": "0000000000000000000000000000000000000000",
           "gitTreeState": "clean", "buildDate": "2025-08-27T00:00:00Z", "goVersion": "go1.24.6", "compiler": "gc",
           "platform": "linux/amd64"})
}

async fn api(
    State(inner): State<Arc<Inner>>,
    method: Method,
    proto: axum::http::Version,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let segs: Vec<String> = uri
        .path()
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let q = parse_query(uri.query().unwrap_or(""));
    let discovery = |v: Option<Value>| -> Response {
        if method != Method::GET {
            return ApiError::method_not_allowed().into_response();
        }
        match v {
            Some(v) => json_value(200, &v),
            None => ApiError::no_route().into_response(),
        }
    };
    match segs.as_slice() {
        ["version"] => discovery(Some(version_info())),
        ["healthz" | "readyz" | "livez"] => "ok".into_response(),
        ["openapi", "v3"] => discovery(Some(resources::openapi_v3_root(&inner.state().registry))),
        ["openapi", "v3", "api", "v1"] => {
            discovery(resources::openapi_v3_gv(&inner.state().registry, "", "v1"))
        }
        ["openapi", "v3", "apis", g, v] => {
            discovery(resources::openapi_v3_gv(&inner.state().registry, g, v))
        }
        ["api"] => {
            let addr = inner
                .addr
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .map(|a| a.to_string())
                .unwrap_or_default();
            discovery(Some(resources::api_versions(&addr)))
        }
        ["apis"] => discovery(Some(resources::api_group_list(&inner.state().registry))),
        ["api", "v1"] => discovery(resources::api_resource_list(
            &inner.state().registry,
            "",
            "v1",
        )),
        ["apis", g] => discovery(resources::api_group(&inner.state().registry, g)),
        ["apis", g, v] => discovery(resources::api_resource_list(&inner.state().registry, g, v)),
        ["api", "v1", rest @ ..] => {
            resource(&inner, &method, proto, "", "v1", rest, &q, &headers, &body).await
        }
        ["apis", g, v, rest @ ..] => {
            resource(&inner, &method, proto, g, v, rest, &q, &headers, &body).await
        }
        _ => ApiError::no_route().into_response(),
    }
}

/// A resolved resource path.
struct Target {
    def: Arc<ResourceDef>,
    ns: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

fn parse_target(
    inner: &Inner,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Target, ApiError> {
    let st = inner.state();
    let reg = &st.registry;
    let (ns, rest) = match rest {
        ["namespaces", ns, plural, ..]
            if reg
                .get(group, version, plural)
                .is_some_and(|d| d.namespaced) =>
        {
            (Some(ns.to_string()), &rest[2..])
        }
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(n.to_string()), None),
        [p, n, s] => (*p, Some(n.to_string()), Some(s.to_string())),
        _ => return Err(ApiError::no_route()),
    };
    let def = reg
        .get(group, version, plural)
        .ok_or_else(ApiError::no_route)?;
    if def.namespaced && ns.is_none() && name.is_some() {
        return Err(ApiError::no_route());
    }
    match sub.as_deref() {
        None => {}
        Some("status") if def.status => {}
        Some("binding" | "resize") if def.key.as_ref() == "/pods" => {}
        Some(_) => return Err(ApiError::no_route()),
    }
    Ok(Target { def, ns, name, sub })
}

/// The object of a create or update: JSON, or protobuf for the kinds `protobuf.rs` decodes.
fn parse_object(def: &ResourceDef, headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if ct.split(';').next().map(str::trim) == Some(crate::protobuf::CONTENT_TYPE) {
        return crate::protobuf::decode(body, &def.group, &def.kind);
    }
    parse_body(body)
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("the body of the request could not be decoded: {e}"))
    })
}

fn parse_yaml_or_json(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice(body) {
        return Ok(v);
    }
    let s = std::str::from_utf8(body)
        .map_err(|e| ApiError::bad_request(format!("invalid UTF-8 body: {e}")))?;
    serde_saphyr::from_str(s)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

#[allow(clippy::too_many_arguments)]
async fn resource(
    inner: &Arc<Inner>,
    method: &Method,
    proto: axum::http::Version,
    group: &str,
    version: &str,
    rest: &[&str],
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    // Legacy `/api/v1/watch/...` paths.
    let (legacy_watch, rest) = match rest {
        ["watch", r @ ..] => (true, r),
        r => (false, r),
    };
    let watching = legacy_watch || matches!(q.get("watch").map(String::as_str), Some("true" | "1"));
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let t = match parse_target(inner, group, version, rest) {
        Ok(t) => t,
        Err(e) => {
            // Still recorded: a client asking for a resource we do not serve needs RBAC for it.
            if let Some(rec) = unrouted_request(group, rest, method, watching, user_agent, proto) {
                inner.record_request(rec);
            }
            return e.into_response();
        }
    };
    let Some(verb) = verb_of(method, t.name.is_some(), t.sub.as_deref(), watching) else {
        return ApiError::method_not_allowed().into_response();
    };
    let is_write = writes(verb);
    let mut rec = RequestRecord {
        verb,
        group: group.to_string(),
        resource: t.def.plural.clone(),
        subresource: t.sub.clone().unwrap_or_default(),
        namespace: t.ns.clone().unwrap_or_default(),
        name: t.name.clone().unwrap_or_default(),
        user_agent,
        write: is_write,
        code: 0,
        http_version: http_version(proto),
    };
    let allowed = match t.sub.as_deref() {
        Some("binding") => verb == "create",
        Some("resize") => matches!(verb, "get" | "update" | "patch"),
        // The installer registers DELETE on a namespaced resource's collection only under
        // `namespaces/<ns>/` (the all-namespaces path has LIST and WATCH), and the namespace
        // storage has no DeleteCollection at all.
        None if verb == "deletecollection" => {
            (t.ns.is_some() || !t.def.namespaced) && t.def.key.as_ref() != "/namespaces"
        }
        _ => true,
    };
    if !allowed {
        rec.code = 405;
        inner.record_request(rec);
        return ApiError::method_not_allowed().into_response();
    }
    let resource_name = match &t.sub {
        Some(s) => format!("{}/{s}", t.def.plural),
        None => t.def.plural.clone(),
    };
    let (latency, fault) = inner.faults.decide(verb, &resource_name);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let ns = t.ns.clone().unwrap_or_default();
    let name = t.name.clone().unwrap_or_default();
    let result = match fault {
        Some(e) => Err(e),
        None if q.contains_key("dryRun") && is_write => Err(dry_run_refused()),
        None => match serve_verb(inner, verb, &t, q, headers, body) {
            Ok(Served::List(req, labels, fields)) => {
                list::serve(inner, &t.def, t.ns.as_deref(), &req, &labels, &fields)
                    .await
                    .map(|b| Served::Response(200, json_response(200, b), None))
            }
            Ok(Served::DeleteCollection(c)) => delete_collection(inner, &t, &resource_name, &c)
                .await
                .map(|b| Served::Response(200, json_response(200, b), None)),
            other => other,
        },
    };
    let (code, resp, written_name) = match result {
        Ok(Served::Response(code, resp, n)) => (code, resp, n),
        Ok(Served::List(..) | Served::DeleteCollection(..)) => {
            unreachable!("lists and collection deletes are served above")
        }
        Ok(Served::Watch(req)) => {
            // A watch answers 200 and streams (an expired version is an ERROR event inside).
            rec.code = 200;
            inner.record_request(rec);
            return watch::serve(inner.clone(), req);
        }
        Err(e) => (e.code, e.into_response(), None),
    };
    rec.code = code;
    if let Some(n) = &written_name {
        rec.name.clone_from(n);
    }
    inner.record_request(rec);
    // A deletecollection that succeeded has recorded each object it deleted.
    if is_write && !(verb == "deletecollection" && code == 200) {
        inner.record_write(
            verb,
            resource_name,
            &ns,
            written_name.as_deref().unwrap_or(&name),
            code,
        );
    }
    resp
}

/// The Kubernetes verb of a request (`None`: no verb, 405).
fn verb_of(
    method: &Method,
    named: bool,
    sub: Option<&str>,
    watching: bool,
) -> Option<&'static str> {
    Some(match (method.as_str(), named, sub) {
        ("GET", false, _) if watching => "watch",
        ("GET", false, _) => "list",
        ("GET", true, _) => "get",
        ("POST", false, None) => "create",
        ("POST", true, Some("binding")) => "create",
        ("PUT", true, _) => "update",
        ("PATCH", true, _) => "patch",
        ("DELETE", true, _) => "delete",
        ("DELETE", false, None) => "deletecollection",
        _ => return None,
    })
}

/// Whether a verb writes.
fn writes(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

/// kube-sim's answer to a dry run, in the query of any write or in a `DeleteOptions` body.
fn dry_run_refused() -> ApiError {
    ApiError::bad_request("dryRun is not supported by kube-sim")
}

/// The RBAC view of a request for a resource the registry does not know, read from the path
/// alone: `namespaces/<ns>/<plural>[/<name>[/<sub>]]` or `<plural>[/<name>[/<sub>]]`.
fn unrouted_request(
    group: &str,
    rest: &[&str],
    method: &Method,
    watching: bool,
    user_agent: String,
    proto: axum::http::Version,
) -> Option<RequestRecord> {
    let (ns, rest) = match rest {
        ["namespaces", ns, p, tail @ ..] if !matches!(*p, "status" | "finalize") => (
            *ns,
            std::iter::once(*p)
                .chain(tail.iter().copied())
                .collect::<Vec<_>>(),
        ),
        _ => ("", rest.to_vec()),
    };
    let (resource, name, sub) = match rest.as_slice() {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(*n), None),
        [p, n, s] => (*p, Some(*n), Some(*s)),
        _ => return None,
    };
    let named = name.is_some();
    let verb = verb_of(method, named, sub, watching)?;
    Some(RequestRecord {
        verb,
        group: group.to_string(),
        resource: resource.to_string(),
        subresource: sub.unwrap_or("").to_string(),
        namespace: ns.to_string(),
        name: name.unwrap_or("").to_string(),
        user_agent,
        write: writes(verb),
        code: 404,
        http_version: http_version(proto),
    })
}

/// The request's protocol as the record names it.
fn http_version(v: axum::http::Version) -> &'static str {
    match v {
        axum::http::Version::HTTP_2 => "HTTP/2",
        axum::http::Version::HTTP_11 => "HTTP/1.1",
        axum::http::Version::HTTP_10 => "HTTP/1.0",
        _ => "other",
    }
}

enum Served {
    /// Code, response, and the object name when the URL did not carry it (generateName).
    Response(u16, Response, Option<String>),
    /// A validated list, served (possibly after waiting for a future version) outside the lock.
    List(ListRequest, LabelSelector, FieldSelector),
    /// A validated DeleteCollection, served as a list is.
    DeleteCollection(Collection),
    Watch(WatchRequest),
}

/// What a DeleteCollection lists and the options it deletes each object with.
struct Collection {
    list: ListRequest,
    labels: LabelSelector,
    fields: FieldSelector,
    opts: DeleteOptions,
}

/// `Store.DeleteCollection`: the objects listed ([`list::for_delete_collection`]), then each
/// deleted as a DELETE with the request's options deletes it ([`delete_one`]); one already gone
/// is skipped, any other failure ends the request with its error (what was deleted stays
/// deleted: the real one is not atomic either). Answers the list as listed, before deletion,
/// and records a write (`deletecollection`, 200) per object deleted.
async fn delete_collection(
    inner: &Arc<Inner>,
    t: &Target,
    resource_name: &str,
    c: &Collection,
) -> Result<Vec<u8>, ApiError> {
    let page = list::for_delete_collection(
        inner,
        &t.def,
        t.ns.as_deref(),
        &c.list,
        &c.labels,
        &c.fields,
    )
    .await?;
    for it in &page.items {
        let (ns, name) = (it.namespace(), it.name());
        match delete_one(inner, &t.def, ns, name, &c.opts, true) {
            Ok(_) => {
                inner.record_write("deletecollection", resource_name.to_string(), ns, name, 200)
            }
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(page.encode(&t.def))
}

/// One object deleted (`in_collection`: as a DeleteCollection deletes it, see
/// [`crate::store::State::delete_collection_item`]), and the simulated kubelet told of a pod
/// left terminating.
fn delete_one(
    inner: &Arc<Inner>,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
    in_collection: bool,
) -> Result<Deleted, ApiError> {
    let d = if in_collection {
        inner.state().delete_collection_item(def, ns, name, opts)?
    } else {
        inner.state().delete_request(def, ns, name, opts)?
    };
    if def.key.as_ref() == "/pods" && !d.gone {
        inner.after_graceful_delete(&d.obj);
    }
    Ok(d)
}

fn selectors(
    q: &HashMap<String, String>,
    def: &ResourceDef,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").map_or("", String::as_str))
        .map_err(ApiError::bad_request)?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector").map_or("", String::as_str),
        &def.plural,
    )
    .map_err(ApiError::bad_request)?;
    Ok((labels, fields))
}

fn serve_verb(
    inner: &Arc<Inner>,
    verb: &str,
    t: &Target,
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Served, ApiError> {
    let def = &t.def;
    let ns = t.ns.as_deref().unwrap_or("");
    let name = t.name.as_deref().unwrap_or("");
    let part = match t.sub.as_deref() {
        Some("status") => Part::Status,
        Some("resize") => Part::Resize,
        _ => Part::Main,
    };
    let ok =
        |code: u16, s: Arc<Stored>| Ok(Served::Response(code, stored_response(code, &s), None));
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let manager = |operation: Operation, options_kind: &str| {
        Manager::from_request(
            q.get("fieldManager").map(String::as_str),
            user_agent,
            operation,
            options_kind,
        )
    };
    match verb {
        "get" => ok(200, inner.state().get(def, ns, name)?),
        "list" => {
            let (labels, fields) = selectors(q, def)?;
            let req = ListRequest::parse(q)?;
            Ok(Served::List(req, labels, fields))
        }
        "watch" => {
            let (labels, fields) = selectors(q, def)?;
            let from = match q.get("resourceVersion").map(String::as_str) {
                None | Some("") => None,
                Some(v) => Some(v.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "invalid resource version {v:?}: must be an integer"
                    ))
                })?),
            };
            let timeout = q
                .get("timeoutSeconds")
                .and_then(|s| s.parse::<u64>().ok())
                .map_or(Duration::from_secs(1800), Duration::from_secs);
            Ok(Served::Watch(WatchRequest {
                def: def.clone(),
                ns: t.ns.clone(),
                from,
                labels,
                fields,
                bookmarks: q
                    .get("allowWatchBookmarks")
                    .is_some_and(|v| v == "true" || v == "1"),
                timeout,
                send_initial_events: q.get("sendInitialEvents").is_some_and(|v| v == "true"),
            }))
        }
        "create" if t.sub.as_deref() == Some("binding") => {
            // Validated as for any create, but the binding storage writes the pod without the
            // field manager: the real server records no managedFields entry for a binding.
            manager(Operation::Update, "CreateOptions")?;
            let b = parse_body(body)?;
            let bname = b
                .at("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or(name);
            if bname != name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({bname}) does not match the name on the URL ({name})"
                )));
            }
            let mut st = inner.state();
            let (pod, node) = st.bind(ns, name, &b)?;
            // Recorded under the state lock so the records are in commit order.
            inner.record_binding(&pod, &node);
            drop(st);
            inner.after_bound(&pod);
            Ok(Served::Response(
                201,
                json_value(201, &success_status(201)),
                None,
            ))
        }
        "create" => {
            let mgr = manager(Operation::Update, "CreateOptions")?;
            let obj = parse_object(def, headers, body)?;
            let created = inner
                .state()
                .create_by(def, t.ns.as_deref(), obj, Some(&mgr), None)?;
            if def.key.as_ref() == "/pods"
                && created
                    .index()
                    .field("spec.nodeName")
                    .is_some_and(|n| !n.is_empty())
            {
                inner.after_bound(&created);
            }
            let n = created.name().to_string();
            Ok(Served::Response(
                201,
                stored_response(201, &created),
                Some(n),
            ))
        }
        "update" => {
            let mgr = manager(Operation::Update, "UpdateOptions")?;
            let obj = parse_object(def, headers, body)?;
            let s = inner
                .state()
                .update_by(def, ns, name, obj, part, Some(&mgr), None)?;
            if part == Part::Resize {
                inner.after_resized(&s);
            }
            ok(200, s)
        }
        "patch" => {
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let kind = PatchKind::from_content_type(ct)
                .ok_or_else(|| ApiError::unsupported_media_type(ct))?;
            let op = if kind == PatchKind::Apply {
                Operation::Apply
            } else {
                Operation::Update
            };
            let mgr = manager(op, "PatchOptions")?;
            let patch = if kind == PatchKind::Apply {
                parse_yaml_or_json(body)?
            } else {
                parse_body(body)?
            };
            let s = inner
                .state()
                .patch_by(def, ns, name, kind, &patch, part, Some(&mgr))?;
            if part == Part::Resize {
                inner.after_resized(&s);
            }
            ok(200, s)
        }
        "delete" => {
            let opts = DeleteOptions::parse(body, q)?;
            if opts.dry_run {
                return Err(dry_run_refused());
            }
            let d = delete_one(inner, def, ns, name, &opts, false)?;
            // 202 when dependents were asked not to be orphaned and the object is still there.
            let code = if !d.gone && opts.orphan_dependents == Some(false) {
                202
            } else {
                200
            };
            if d.gone && def.key.as_ref() == crate::policy::PDB_KEY {
                // Stores without `ReturnDeletedObject` answer a Status naming what went.
                let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Success", "details": {"name": name, "group": def.group,
                    "kind": def.plural, "uid": d.obj.uid()}});
                return Ok(Served::Response(code, json_value(code, &status), None));
            }
            ok(code, d.obj)
        }
        "deletecollection" => {
            // The handler's order: ListOptions, then DeleteOptions.
            let (labels, fields) = selectors(q, def)?;
            let list = ListRequest::parse(q)?;
            let opts = DeleteOptions::parse(body, q)?;
            if opts.dry_run {
                return Err(dry_run_refused());
            }
            opts.validate()?;
            Ok(Served::DeleteCollection(Collection {
                list,
                labels,
                fields,
                opts,
            }))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parsing() {
        let q = parse_query(
            "&watch=true&fieldSelector=spec.nodeName%3D%2Cmetadata.name%3Dp&labelSelector=a+in+(b)",
        );
        assert_eq!(q["watch"], "true");
        assert_eq!(q["fieldSelector"], "spec.nodeName=,metadata.name=p");
        assert_eq!(q["labelSelector"], "a in (b)");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
