//! What one PreBind API call needs (the client, the rate limit, the per-call timeout) and how
//! its error reads in a condition. Used by `prebind` (volumes, and the context it runs in) and
//! `dra` (ResourceClaims); uses neither.

use crate::ratelimit::TokenBucket;
use kube::Client;
use std::sync::Arc;
use std::time::Duration;

/// An API error as a condition message: the server's message and code.
pub fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
        other => other.to_string(),
    }
}

/// A client with its rate limit and per-call timeout: what each PreBind call, and PostFilter's
/// deallocation, goes through.
#[derive(Clone)]
pub struct Caller {
    pub client: Client,
    pub limiter: Arc<TokenBucket>,
    pub call_timeout: Duration,
}

impl Caller {
    /// `f` under the rate limit and the per-call timeout: the server's answer, or the
    /// timeout's message.
    pub async fn call<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<Result<T, kube::Error>, String> {
        self.limiter.acquire().await;
        tokio::time::timeout(self.call_timeout, f)
            .await
            .map_err(|_| format!("timed out after {:?}", self.call_timeout))
    }
}
