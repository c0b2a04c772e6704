//! API errors rendered as Kubernetes `Status` objects: the reasons, codes and message formats the
//! real API server uses (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid` with its field
//! causes, `Forbidden`, `BadRequest`, `MethodNotAllowed`, `Expired`/`Gone`, `TooManyRequests`,
//! `InternalError`).

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

/// A failed API call, as the real server would describe it in a `Status` object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code (also `Status.code`).
    pub code: u16,
    /// `Status.reason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details` name, group and kind (boxed to keep results small).
    pub details: Option<Box<Details>>,
    /// `Retry-After` header and `Status.details.retryAfterSeconds`.
    pub retry_after: Option<u32>,
}

/// The object a failure is about (`Status.details`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Details {
    /// `details.name`.
    pub name: String,
    /// `details.group` ("" for core, then omitted).
    pub group: String,
    /// `details.kind` (the resource, as the real server reports it).
    pub kind: String,
    /// `details.causes` (one per field error of a `422 Invalid`).
    pub causes: Vec<Cause>,
}

/// One `Status.details.causes` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `reason`, e.g. `FieldValueRequired`.
    pub reason: String,
    /// `message`: the error without the field path, e.g. `Required value`.
    pub message: String,
    /// `field`, e.g. `spec.accessModes`.
    pub field: String,
}

/// `pods` for the core group, `leases.coordination.k8s.io` otherwise.
pub(crate) fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: String) -> Self {
        Self {
            code,
            reason,
            message,
            details: None,
            retry_after: None,
        }
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.details = Some(Box::new(Details {
            name: name.into(),
            group: group.into(),
            kind: kind.into(),
            causes: Vec::new(),
        }));
        self
    }

    /// Sets `details.causes`.
    pub(crate) fn with_causes(mut self, causes: Vec<Cause>) -> Self {
        if let Some(d) = self.details.as_mut() {
            d.causes = causes;
        }
        self
    }

    /// `pods "x" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// The generic 404 for paths the server does not serve.
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        )
    }

    /// `pods "x" already exists`.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// `Operation cannot be fulfilled on pods "x": <why>`.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, plural)
            ),
        )
        .with_details(group, plural, name)
    }

    /// The optimistic-concurrency conflict of a stale `resourceVersion`.
    pub fn stale(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// `Pod "x" is invalid: <field>: <what>` (422).
    pub fn invalid(group: &str, kind: &str, name: &str, causes: &str) -> Self {
        let qkind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        Self::new(
            422,
            "Invalid",
            format!("{qkind} \"{name}\" is invalid: {causes}"),
        )
        .with_details(group, kind, name)
    }

    /// `persistentvolumeclaims "x" is forbidden: <why>` (403), as admission plugins answer.
    pub fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!(
                "{} \"{name}\" is forbidden: {why}",
                qualified(group, plural)
            ),
        )
        .with_details(group, plural, name)
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message.into())
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource".into(),
        )
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"
            ),
        )
    }

    /// 415 UnsupportedMediaType for a request body (not a patch) in a media type the server
    /// cannot decode for the resource; `accepted` lists those it can.
    pub(crate) fn unsupported_body_media_type(ct: &str, accepted: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted} (got {ct:?})"
            ),
        )
    }

    /// 410 Expired, as sent inside a watch `ERROR` event.
    pub fn expired(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// 410 Expired for a list (`Exact` read or continue token) older than the retained history.
    pub fn gone(message: &str) -> Self {
        Self::new(410, "Expired", message.into())
    }

    /// 504 Timeout of a read at a version the server has not reached (`Too large resource
    /// version`, cause `ResourceVersionTooLarge`, retry after 1 s), as the watch cache answers
    /// after waiting for it.
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
        );
        e.details = Some(Box::new(Details {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            causes: vec![Cause {
                reason: "ResourceVersionTooLarge".into(),
                message: "Too large resource version".into(),
                field: String::new(),
            }],
        }));
        e.retry_after = Some(1);
        e
    }

    /// 429 TooManyRequests with `Retry-After`.
    pub fn too_many_requests(retry_after: u32) -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.".into(),
        );
        e.retry_after = Some(retry_after);
        e
    }

    /// 500 InternalError.
    pub fn internal(message: &str) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
    }

    /// The `Status` object for this error.
    pub fn status(&self) -> Value {
        let mut details = serde_json::Map::new();
        if let Some(d) = &self.details {
            // Go's `omitempty`: empty strings are left out.
            if !d.name.is_empty() {
                details.insert("name".into(), json!(d.name));
            }
            if !d.group.is_empty() {
                details.insert("group".into(), json!(d.group));
            }
            if !d.kind.is_empty() {
                details.insert("kind".into(), json!(d.kind));
            }
            if !d.causes.is_empty() {
                let causes: Vec<Value> = d
                    .causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
                details.insert("causes".into(), Value::Array(causes));
            }
        }
        if let Some(r) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(r));
        }
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if !details.is_empty() {
            s["details"] = Value::Object(details);
        }
        s
    }
}

/// A `Status` object with `status: Success`.
pub(crate) fn success_status(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

/// A JSON response with the given code.
pub(crate) fn json_response(code: u16, body: Vec<u8>) -> Response {
    let mut resp = Response::new(axum::body::Body::from(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.status()).unwrap_or_default();
        let mut resp = json_response(self.code, body);
        if let Some(r) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(r));
        }
        resp
    }
}
