//! What one PreBind API call needs (the client, the rate limit, the per-call timeout) and how
//! its error reads in a condition. Used by `prebind` (volumes, and the context it runs in) and
//! `dra` (ResourceClaims); uses neither.

use crate::ratelimit::TokenBucket;
use kube::Client;
use std::sync::Arc;
use std::time::Duration;

/// The client, rate limit and timeout API calls go through.
pub trait Calls {
    fn client(&self) -> &Client;
    fn limiter(&self) -> &TokenBucket;
    /// Timeout of each API call.
    fn call_timeout(&self) -> Duration;
}

/// An API error as a condition message: the server's message and code.
pub fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
        other => other.to_string(),
    }
}

/// A client with its rate limit and per-call timeout: the [`Calls`] of work outside a bind.
#[derive(Clone)]
pub struct Caller {
    pub client: Client,
    pub limiter: Arc<TokenBucket>,
    pub call_timeout: Duration,
}

impl Calls for Caller {
    fn client(&self) -> &Client {
        &self.client
    }

    fn limiter(&self) -> &TokenBucket {
        &self.limiter
    }

    fn call_timeout(&self) -> Duration {
        self.call_timeout
    }
}
