//! A test-owned API server for unit tests of the reconcilers: a [`kube::Client`] whose requests
//! are recorded and answered here, without a network. Real: kube's client stack (its request
//! building, serialisation, status-code handling). Injected: the server — each write is answered
//! with its own body (what a server that accepted a merge patch or a create sends back, near
//! enough for the reconcilers, which read only success), or with the failure a test sets for a
//! request whose path contains a given text. The testenv's real API server is for the
//! integration tests (tests/live.rs); this one is for a reconciler's decisions on one view.
//!
//! Optimistic locks are kept for the objects a test names ([`FakeApi::object`]): a write to one
//! (or to its status) bumps its resourceVersion, and a write locked on another version is refused
//! with 409 Conflict, as the API server does.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use kube::client::Body;
use serde_json::{json, Value};
use tower_service::Service;

/// One request the client made.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub method: String,
    /// The path (without the query).
    pub path: String,
    /// The JSON body (`Null` when none).
    pub body: Value,
    /// The HTTP status it was answered with.
    pub status: u16,
}

#[derive(Debug, Default)]
struct State {
    requests: Vec<Recorded>,
    /// (text the path contains, HTTP status, reads only): the first that matches answers.
    failures: Vec<(String, u16, bool)>,
    /// The resourceVersion of each object kept (by its path).
    versions: std::collections::HashMap<String, u64>,
    /// What a GET of each path answers (by its path); any other GET answers `null`.
    bodies: std::collections::HashMap<String, Value>,
}

/// The fake server; clones share it.
#[derive(Debug, Clone, Default)]
pub struct FakeApi(Arc<Mutex<State>>);

impl FakeApi {
    /// A client of this server.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.clone(), "default")
    }

    /// Keeps the resourceVersion of the object at `path` (e.g.
    /// `/apis/karpenter.sh/v1/nodepools/default`), starting at `version`.
    pub fn object(&self, path: &str, version: u64) {
        self.state().versions.insert(path.to_string(), version);
    }

    /// A GET of `path` answers `body` from now on.
    pub fn answer(&self, path: &str, body: Value) {
        self.state().bodies.insert(path.to_string(), body);
    }

    /// The resourceVersion kept for the object at `path`.
    pub fn version(&self, path: &str) -> Option<u64> {
        self.state().versions.get(path).copied()
    }

    /// Requests whose path contains `path` are answered with `status` (a `Status` body, as the
    /// API server's), from now on.
    pub fn fail(&self, path: &str, status: u16) {
        self.state().failures.push((path.to_string(), status, false));
    }

    /// As [`FakeApi::fail`], for GETs alone (a read that finds nothing, the write after it
    /// answered as usual).
    pub fn fail_reads(&self, path: &str, status: u16) {
        self.state().failures.push((path.to_string(), status, true));
    }

    /// The requests made so far (events left out: recorded apart in [`FakeApi::events`]).
    pub fn writes(&self) -> Vec<Recorded> {
        self.state().requests.iter().filter(|r| !r.path.contains("/events")).cloned().collect()
    }

    /// The events posted so far: each one's reason and note.
    pub fn events(&self) -> Vec<(String, String)> {
        let state = self.state();
        let events = state.requests.iter().filter(|r| r.path.contains("/events") && r.method == "POST");
        events
            .map(|r| {
                let text = |k: &str| r.body[k].as_str().unwrap_or_default().to_string();
                (text("reason"), text("note"))
            })
            .collect()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The API server's `Status` body for a failure.
fn failure(code: u16, message: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "message": message,
        "reason": match code { 404 => "NotFound", 409 => "Conflict", _ => "Injected" }, "code": code})
}

impl Service<http::Request<Body>> for FakeApi {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let api = self.clone();
        Box::pin(async move {
            let method = request.method().to_string();
            let path = request.uri().path().to_string();
            let bytes = request.into_body().collect_bytes().await.unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let (status, answer) = {
                let mut state = api.state();
                let writes = method != "GET";
                let injected = state
                    .failures
                    .iter()
                    .find(|(p, _, reads_only)| path.contains(p.as_str()) && (!writes || !reads_only))
                    .map(|(_, code, _)| *code);
                let object = path.strip_suffix("/status").unwrap_or(&path).to_string();
                let locked = body["metadata"]["resourceVersion"].as_str().map(str::to_string);
                let stored = state.bodies.get(&path).filter(|_| !writes).cloned();
                let (status, answer) = match (injected, state.versions.get_mut(&object).filter(|_| writes)) {
                    (Some(code), _) => (code, failure(code, "injected")),
                    (None, _) if stored.is_some() => (200, stored.unwrap_or_default()),
                    (None, Some(current)) if locked.as_ref().is_some_and(|l| *l != current.to_string()) => {
                        (409, failure(409, "the object has been modified"))
                    }
                    (None, Some(current)) => {
                        *current += 1;
                        let mut answer = body.clone();
                        answer["metadata"]["resourceVersion"] = json!(current.to_string());
                        (200, answer)
                    }
                    (None, None) => (200, body.clone()),
                };
                state.requests.push(Recorded { method, path: path.clone(), body, status });
                (status, answer)
            };
            let response = http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&answer).unwrap_or_default()))
                .unwrap_or_else(|_| http::Response::new(Body::from(Vec::new())));
            Ok(response)
        })
    }
}
