//! Lists as the real API server serves them: `ValidateListOptions` (a 422 `Invalid` on
//! `ListOptions.meta.k8s.io`), `resourceVersion` + `resourceVersionMatch` (most recent, not older
//! than, exact), `limit`/`continue` pagination with the real opaque token format and
//! `metadata.remainingItemCount`, and the 400 / 410 / 504 answers for a bad or expired token and
//! a version the server has not reached.
//!
//! It uses the shared state (`inner`) and the store; the server calls it.

use crate::error::ApiError;
use crate::inner::Inner;
use crate::resources::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::Stored;
use crate::validation::{self, FieldError};
use base64::Engine as _;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How long a read at a future version waits for the server to reach it (the watch cache's
/// `blockTimeout`) before the 504.
const TOO_LARGE_WAIT: Duration = Duration::from_secs(3);

const TOKEN_VERSION: &str = "meta.k8s.io/v1";

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Which state a list reads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Read {
    /// No `resourceVersion`: the most recent state (a quorum read).
    Latest,
    /// `resourceVersion=0`: any state (the watch cache's); `limit` is ignored, as the watch cache
    /// serves the whole list.
    Any,
    /// `resourceVersion=N` (unset match or `NotOlderThan`): at least as new as N.
    NotOlderThan(u64),
    /// `resourceVersionMatch=Exact`: the state at exactly N.
    Exact(u64),
    /// A continue token: the state of the first page, from after its last key.
    Continue(u64, String),
}

/// A validated list request.
#[derive(Debug)]
pub(crate) struct ListRequest {
    read: Read,
    limit: Option<usize>,
}

/// `storage.EncodeContinue`: base64url (no padding) of `{"v":…,"rv":…,"start":…}`; `start` is
/// the key after which the next page begins (the last key returned plus `\0`).
fn encode_continue(rv: u64, start: &str) -> String {
    let body = json!({"v": TOKEN_VERSION, "rv": rv, "start": start});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(body.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, String), ApiError> {
    let invalid = |why: &str| {
        ApiError::bad_request(format!(
            "invalid continue token: continue key is not valid: {why}"
        ))
    };
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim_end_matches('='))
        .map_err(|e| invalid(&e.to_string()))?;
    let v: serde_json::Value = serde_json::from_slice(&raw).map_err(|e| invalid(&e.to_string()))?;
    if v["v"] != TOKEN_VERSION {
        return Err(invalid("server does not recognize this encoded version"));
    }
    let rv = v["rv"].as_i64().filter(|rv| *rv > 0).ok_or_else(|| {
        invalid(&format!(
            "incorrect encoded start resourceVersion (version {TOKEN_VERSION})"
        ))
    })?;
    let start = v["start"]
        .as_str()
        .filter(|s| !s.is_empty() && !s.contains(".."))
        .ok_or_else(|| invalid("encoded start key is invalid"))?;
    Ok((rv as u64, start.to_string()))
}

impl ListRequest {
    /// Validates the query as `ValidateListOptions` and the storage layer do.
    pub(crate) fn parse(q: &HashMap<String, String>) -> Result<Self, ApiError> {
        let get = |k: &str| q.get(k).map_or("", String::as_str);
        let rv = get("resourceVersion");
        let matching = get("resourceVersionMatch");
        let cont = get("continue");
        let mut errs = Vec::new();
        if !matching.is_empty() {
            if rv.is_empty() {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if !cont.is_empty() {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if matching != "Exact" && matching != "NotOlderThan" {
                errs.push(FieldError::not_supported(
                    "resourceVersionMatch",
                    validation::quote(matching),
                    &["Exact", "NotOlderThan", ""],
                ));
            }
            if matching == "Exact" && rv == "0" {
                errs.push(FieldError::forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if q.contains_key("sendInitialEvents") {
            errs.push(FieldError::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
        validation::check("meta.k8s.io", "ListOptions", "", errs)?;
        let limit = match get("limit") {
            "" => None,
            l => {
                let n: i64 = l.parse().map_err(|_| {
                    ApiError::bad_request(format!(
                        "limit: Invalid value: {}: must be an integer",
                        validation::quote(l)
                    ))
                })?;
                // The storage layer pages only for a positive limit.
                usize::try_from(n).ok().filter(|n| *n > 0)
            }
        };
        let parse_rv = |v: &str| {
            v.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "resourceVersion: Invalid value: {}: must be an unsigned integer",
                    validation::quote(v)
                ))
            })
        };
        let read = if !cont.is_empty() {
            if !rv.is_empty() && rv != "0" {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            let (rv, start) = decode_continue(cont)?;
            Read::Continue(rv, start)
        } else {
            match (rv, matching) {
                ("", _) => Read::Latest,
                ("0", _) => Read::Any,
                (v, "Exact") => Read::Exact(parse_rv(v)?),
                (v, _) => Read::NotOlderThan(parse_rv(v)?),
            }
        };
        Ok(Self { read, limit })
    }
}

/// Waits until the store reaches `rv` (up to [`TOO_LARGE_WAIT`]); the 504 otherwise.
async fn wait_for(inner: &Arc<Inner>, rv: u64) -> Result<(), ApiError> {
    let mut events = {
        let st = inner.state();
        if st.rv() >= rv {
            return Ok(());
        }
        st.subscribe()
    };
    let deadline = tokio::time::Instant::now() + TOO_LARGE_WAIT;
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Ok(ev)) if ev.rv >= rv => return Ok(()),
            Ok(Ok(_)) => {}
            Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {
                if inner.state().rv() >= rv {
                    return Ok(());
                }
            }
            Ok(Err(_)) | Err(_) => {
                return Err(ApiError::too_large_resource_version(rv, inner.state().rv()));
            }
        }
    }
}

/// The key a page continues after: `ns/name` across namespaces, `name` otherwise.
fn item_key(def: &ResourceDef, all_namespaces: bool, o: &Stored) -> String {
    let name = o.name();
    if def.namespaced && all_namespaces {
        format!("{}/{name}", o.namespace())
    } else {
        name.to_string()
    }
}

/// Serves one page: the list body (`kind`, `apiVersion`, `metadata.resourceVersion`,
/// `continue`, `remainingItemCount`, `items`).
pub(crate) async fn serve(
    inner: &Arc<Inner>,
    def: &ResourceDef,
    ns: Option<&str>,
    req: &ListRequest,
    labels: &LabelSelector,
    fields: &FieldSelector,
) -> Result<Vec<u8>, ApiError> {
    match req.read {
        Read::NotOlderThan(rv) | Read::Exact(rv) => wait_for(inner, rv).await?,
        _ => {}
    }
    let (rv, items, start) = {
        let st = inner.state();
        match &req.read {
            Read::Latest | Read::Any | Read::NotOlderThan(_) => {
                let (rv, items) = st.list(def, ns);
                (rv, items, None)
            }
            Read::Exact(at) => {
                let items = st.list_at(def, ns, *at).ok_or_else(|| {
                    ApiError::gone("The resourceVersion for the provided list is too old.")
                })?;
                (*at, items, None)
            }
            Read::Continue(at, start) => {
                let items = st
                    .list_at(def, ns, *at)
                    .ok_or_else(|| ApiError::gone(CONTINUE_EXPIRED))?;
                (*at, items, Some(start.trim_end_matches('\0').to_string()))
            }
        }
    };
    let limit = if req.read == Read::Any {
        None
    } else {
        req.limit
    };
    let all_namespaces = ns.is_none();
    let from = match &start {
        // Keys sort as the items do (namespace, then name): skip up to and including `start`.
        Some(s) => {
            items.partition_point(|o| item_key(def, all_namespaces, o).as_str() <= s.as_str())
        }
        None => 0,
    };
    let mut out = Vec::new();
    let mut picked = 0usize;
    let mut last = None;
    let mut body = Vec::new();
    let mut i = from;
    while i < items.len() {
        let it = &items[i];
        i += 1;
        if !labels.matches(it.index()) || !fields.matches(it.index()) {
            continue;
        }
        if picked > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&it.json());
        picked += 1;
        if limit.is_some_and(|l| picked >= l) {
            last = Some(it.clone());
            break;
        }
    }
    let has_more = last.is_some() && i < items.len();
    let mut meta = format!("{{\"resourceVersion\":\"{rv}\"");
    if has_more && let Some(last) = &last {
        let token = encode_continue(rv, &format!("{}\0", item_key(def, all_namespaces, last)));
        meta.push_str(&format!(",\"continue\":\"{token}\""));
        // Only without selectors: with them the server cannot count what would match.
        if labels.is_empty() && fields.is_empty() {
            meta.push_str(&format!(",\"remainingItemCount\":{}", items.len() - i));
        }
    }
    meta.push('}');
    out.extend_from_slice(
        format!(
            "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{meta},\"items\":[",
            def.kind,
            def.api_version()
        )
        .as_bytes(),
    );
    out.extend_from_slice(&body);
    out.extend_from_slice(b"]}");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_reject_garbage() {
        let t = encode_continue(42, "default/p1\0");
        assert_eq!(
            decode_continue(&t).unwrap(),
            (42, "default/p1\0".to_string())
        );
        let e = decode_continue("not-a-token").unwrap_err();
        assert_eq!(e.code, 400);
        assert!(
            e.message.starts_with("invalid continue token: "),
            "{}",
            e.message
        );
        let other = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"v":"x","rv":1,"start":"a"}"#);
        assert!(
            decode_continue(&other)
                .unwrap_err()
                .message
                .contains("encoded version")
        );
    }
}
