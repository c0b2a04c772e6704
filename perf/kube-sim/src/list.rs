//! Lists as the real API server serves them: `ValidateListOptions` (a 422 `Invalid` on
//! `ListOptions.meta.k8s.io`), `resourceVersion` + `resourceVersionMatch` (most recent, not older
//! than, exact), `limit`/`continue` pagination with the real opaque token format and
//! `metadata.remainingItemCount`, and the 400 / 410 / 504 answers for a bad or expired token and
//! a version the server has not reached. The page selection ([`Listing::next_page`]) is also
//! what a DeleteCollection lists ([`for_delete_collection`]: that one page with a `limit`,
//! else every match in pages of 10,000, as `Store.DeleteCollection` reads them).
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

/// The page size a DeleteCollection without `limit` lists in (upstream's
/// `deleteCollectionPageSize`).
const DELETE_COLLECTION_PAGE_SIZE: usize = 10_000;

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

    /// The page size the storage applies for `limit`: none for a `resourceVersion=0` read,
    /// which the watch cache serves whole.
    fn page_size(&self, limit: Option<usize>) -> Option<usize> {
        if self.read == Read::Any { None } else { limit }
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

/// The objects a list reads, at one version, sorted by key, and where its next page starts.
pub(crate) struct Listing {
    rv: u64,
    items: Vec<Arc<Stored>>,
    /// The index of the next page's first candidate.
    next: usize,
    all_namespaces: bool,
}

/// One page of a list.
pub(crate) struct Page {
    /// The version the list read (`metadata.resourceVersion`).
    pub rv: u64,
    /// The matching objects as they were at `rv`.
    pub items: Vec<Arc<Stored>>,
    /// `metadata.continue`, while objects follow the page.
    pub continue_token: Option<String>,
    /// `metadata.remainingItemCount`: with a continue token and no selectors.
    pub remaining: Option<usize>,
}

/// Reads the state a list request names: the latest, or a version (waiting for one the server
/// has not reached, then 504), or a continue token's (410 once the history no longer reaches
/// it), from where the token's page ends.
pub(crate) async fn read(
    inner: &Arc<Inner>,
    def: &ResourceDef,
    ns: Option<&str>,
    req: &ListRequest,
) -> Result<Listing, ApiError> {
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
    let all_namespaces = ns.is_none();
    let next = match &start {
        // Keys sort as the items do (namespace, then name): skip up to and including `start`.
        Some(s) => {
            items.partition_point(|o| item_key(def, all_namespaces, o).as_str() <= s.as_str())
        }
        None => 0,
    };
    Ok(Listing {
        rv,
        items,
        next,
        all_namespaces,
    })
}

impl Listing {
    /// The next page: up to `limit` objects (all without one) matching the selectors, in key
    /// order, after the previous page; its continue token names the version read and the last
    /// key returned, as the real storage's does.
    pub(crate) fn next_page(
        &mut self,
        def: &ResourceDef,
        limit: Option<usize>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> Page {
        let mut picked = Vec::new();
        let mut full = false;
        while self.next < self.items.len() {
            let it = &self.items[self.next];
            self.next += 1;
            if !labels.matches(it.index()) || !fields.matches(it.index()) {
                continue;
            }
            picked.push(it.clone());
            if limit.is_some_and(|l| picked.len() >= l) {
                full = true;
                break;
            }
        }
        let more = full && self.next < self.items.len();
        let (continue_token, remaining) = match picked.last() {
            Some(last) if more => (
                Some(encode_continue(
                    self.rv,
                    &format!("{}\0", item_key(def, self.all_namespaces, last)),
                )),
                // Only without selectors: with them the server cannot count what would match.
                (labels.is_empty() && fields.is_empty()).then(|| self.items.len() - self.next),
            ),
            _ => (None, None),
        };
        Page {
            rv: self.rv,
            items: picked,
            continue_token,
            remaining,
        }
    }
}

impl Page {
    /// The list body: `kind`, `apiVersion`, `metadata` (`resourceVersion`, `continue`,
    /// `remainingItemCount`) and `items`, each as stored.
    pub(crate) fn encode(&self, def: &ResourceDef) -> Vec<u8> {
        let mut meta = format!("{{\"resourceVersion\":\"{}\"", self.rv);
        if let Some(token) = &self.continue_token {
            meta.push_str(&format!(",\"continue\":\"{token}\""));
        }
        if let Some(n) = self.remaining {
            meta.push_str(&format!(",\"remainingItemCount\":{n}"));
        }
        meta.push('}');
        let mut out = format!(
            "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{meta},\"items\":[",
            def.kind,
            def.api_version()
        )
        .into_bytes();
        for (i, it) in self.items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&it.json());
        }
        out.extend_from_slice(b"]}");
        out
    }
}

/// Serves one page of a list.
pub(crate) async fn serve(
    inner: &Arc<Inner>,
    def: &ResourceDef,
    ns: Option<&str>,
    req: &ListRequest,
    labels: &LabelSelector,
    fields: &FieldSelector,
) -> Result<Vec<u8>, ApiError> {
    let mut listing = read(inner, def, ns, req).await?;
    let page = listing.next_page(def, req.page_size(req.limit), labels, fields);
    Ok(page.encode(def))
}

/// What a DeleteCollection lists (`Store.DeleteCollection`): with a `limit`, that one page
/// (its continue token included); without, every matching object, read in pages of
/// [`DELETE_COLLECTION_PAGE_SIZE`] at the first page's version and answered with the first
/// page's metadata, as upstream clears the first page's items and appends all of them.
pub(crate) async fn for_delete_collection(
    inner: &Arc<Inner>,
    def: &ResourceDef,
    ns: Option<&str>,
    req: &ListRequest,
    labels: &LabelSelector,
    fields: &FieldSelector,
) -> Result<Page, ApiError> {
    let mut listing = read(inner, def, ns, req).await?;
    if req.limit.is_some() {
        return Ok(listing.next_page(def, req.page_size(req.limit), labels, fields));
    }
    let size = req.page_size(Some(DELETE_COLLECTION_PAGE_SIZE));
    let mut all = listing.next_page(def, size, labels, fields);
    let mut more = all.continue_token.is_some();
    while more {
        let page = listing.next_page(def, size, labels, fields);
        more = page.continue_token.is_some();
        all.items.extend(page.items);
    }
    Ok(all)
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
