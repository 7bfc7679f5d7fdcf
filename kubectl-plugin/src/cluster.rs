//! Reading a live cluster with kube-rs: one list call per kind, no watches, no writes.
//!
//! The objects are listed as JSON (paginated, 500 a page, as kubectl does), given their
//! `apiVersion`/`kind`, stripped of `metadata.managedFields`, and loaded by the loader that reads
//! `--from-file` ([`carpentry_core::manifest::load_from_api_server`]: the same, except that a
//! newer API server's Kubernetes fields are warnings), so a command answers the same on a cluster
//! and on its snapshot. An object that does not load is left out with a warning
//! ([`carpentry_core::manifest::load_from_api_server_skipping`]).
//!
//! Authentication is kube-rs's kubeconfig loader: client certificates, bearer tokens and token
//! files, exec credential plugins (`aws eks get-token`, `aws-iam-authenticator`,
//! `kubelogin`, `gke-gcloud-auth-plugin`…) and the `oidc` auth provider with refresh.

use std::fmt::Write as _;
use std::time::Duration;

use carpentry_core::manifest::{self, Manifests};
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use serde_json::Value;

use crate::common::ReadArgs;
use crate::Failure;

/// What a live read returns.
pub struct LiveRead {
    pub manifests: Manifests,
    /// Objects that do not load, left out of `manifests`.
    pub left_out: Vec<manifest::Skipped>,
    /// `context NAME (SERVER)`.
    pub source: String,
    /// RFC 3339, seconds: when the lists were read (the simulation's start).
    pub read_at: String,
    /// The context's namespace (`default` when it sets none): where `explain pod NAME` without
    /// `-n` looks, as kubectl does.
    pub default_namespace: String,
}

/// Objects per list page (kubectl's `--chunk-size` default).
const PAGE: u32 = 500;
/// Overrides [`PAGE`] (for tests: pagination with a handful of objects).
const PAGE_VAR: &str = "KUBECTL_KARPENTER_PAGE_SIZE";

fn page_size() -> u32 {
    std::env::var(PAGE_VAR).ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(PAGE)
}

/// What the plugin lists, cluster-wide, in the order the objects are loaded (and `snapshot` writes
/// them): core's list.
pub use carpentry_core::manifest::{ListedResource as Resource, LISTED_RESOURCES as RESOURCES};

/// Reads the cluster the kubeconfig flags name.
pub fn read_live(common: &ReadArgs) -> Result<LiveRead, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Other(anyhow::anyhow!("cannot start the I/O runtime: {e}")))?;
    runtime.block_on(read(common))
}

async fn read(common: &ReadArgs) -> Result<LiveRead, Failure> {
    let (client, context, server, default_namespace) = connect(common).await?;
    let source = format!("context {context} ({server})");
    let read_at = crate::source::now_rfc3339();
    let mut lists = tokio::task::JoinSet::new();
    for (i, resource) in RESOURCES.iter().enumerate() {
        let client = client.clone();
        lists.spawn(async move { (i, list_all(&client, resource).await) });
    }
    let mut results: Vec<Option<Result<Vec<String>, kube::Error>>> = RESOURCES.iter().map(|_| None).collect();
    while let Some(joined) = lists.join_next().await {
        let (i, result) = joined.map_err(|e| Failure::Other(anyhow::anyhow!("a list call panicked: {e}")))?;
        results[i] = Some(result);
    }
    let mut failed = Vec::new();
    let mut listed = Vec::new();
    for (resource, result) in RESOURCES.iter().zip(results) {
        match result.expect("every list call joined") {
            Ok(items) => listed.push((resource, items)),
            Err(e) => failed.push((*resource, e)),
        }
    }
    if !failed.is_empty() {
        return Err(Failure::Input(describe_failures(&failed, &context, &server)));
    }
    let text = manifest::api_documents(listed.iter().flat_map(|(_, items)| items.iter().map(String::as_str)));
    // One object that does not load (a newer Karpenter's field, a NodePool its CRD's schema admits
    // and Karpenter's validation refuses) leaves that object out, said on stderr and in a
    // snapshot's header, rather than failing the read.
    let live = manifest::load_from_api_server_skipping(&text).map_err(|e| {
        let mut message = String::new();
        for p in &e.problems {
            let object = p.object.as_ref().map_or_else(|| format!("document {}", p.document), ToString::to_string);
            let field = p.field.as_ref().map(|f| format!(", field {f}")).unwrap_or_default();
            let _ = writeln!(message, "error: {source}: {object}{field}: {}", p.message);
        }
        message.push_str("the cluster's objects do not read as Kubernetes and Karpenter v1.14.1 objects");
        Failure::Input(message)
    })?;
    let (manifests, left_out) = (live.manifests, live.skipped);
    for w in &manifests.warnings {
        eprintln!("warning: {source}: {w}");
    }
    for s in &left_out {
        let object = s.object.as_ref().map_or_else(|| format!("document {}", s.document), ToString::to_string);
        eprintln!(
            "warning: {source}: {object} is left out: it does not read as a Karpenter v1.14.1 or Kubernetes object \
             ({}); please report it if the cluster's Karpenter accepts it",
            s.summary()
        );
    }
    Ok(LiveRead { manifests, source, read_at, default_namespace, left_out })
}

/// The client for the context the flags (or the kubeconfig) name, its name, server and default
/// namespace.
async fn connect(common: &ReadArgs) -> Result<(kube::Client, String, String, String), Failure> {
    let kubeconfig = match &common.kubeconfig {
        Some(path) => Kubeconfig::read_from(path),
        None => Kubeconfig::read(),
    }
    .map_err(|e| Failure::Input(kubeconfig_problem(common, &e)))?;
    let context = match &common.context {
        Some(c) => {
            if !kubeconfig.contexts.iter().any(|n| &n.name == c) {
                let known: Vec<&str> = kubeconfig.contexts.iter().map(|n| n.name.as_str()).collect();
                return Err(Failure::Input(format!(
                    "context {c:?} is not in {} (it has: {})",
                    kubeconfig_name(common),
                    if known.is_empty() { "no contexts".to_string() } else { known.join(", ") }
                )));
            }
            c.clone()
        }
        None => match &kubeconfig.current_context {
            Some(c) if !c.is_empty() => c.clone(),
            _ => {
                return Err(Failure::Input(format!(
                    "{} sets no current-context: choose one with --context (or `kubectl config use-context`), \
                     or read a snapshot with --from-file",
                    kubeconfig_name(common)
                )))
            }
        },
    };
    let options = KubeConfigOptions { context: Some(context.clone()), ..Default::default() };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| Failure::Input(format!("context {context} of {}: {}", kubeconfig_name(common), chain(&e))))?;
    config.connect_timeout = Some(Duration::from_secs(15));
    config.read_timeout = Some(Duration::from_secs(120));
    let server = config.cluster_url.to_string().trim_end_matches('/').to_string();
    let namespace = config.default_namespace.clone();
    let client = kube::Client::try_from(config).map_err(|e| {
        Failure::Input(format!("context {context} ({server}): cannot set up the client: {}", chain(&e)))
    })?;
    Ok((client, context, server, namespace))
}

fn kubeconfig_name(common: &ReadArgs) -> String {
    match &common.kubeconfig {
        Some(p) => format!("kubeconfig {}", p.display()),
        None => match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
            Some(v) => format!("the kubeconfig $KUBECONFIG={}", v.to_string_lossy()),
            None => "the kubeconfig ~/.kube/config".to_string(),
        },
    }
}

fn kubeconfig_problem(common: &ReadArgs, e: &KubeconfigError) -> String {
    let hint = "use --kubeconfig or $KUBECONFIG, or read a snapshot with --from-file";
    match e {
        KubeconfigError::FindPath => format!("no kubeconfig: $HOME is unknown and $KUBECONFIG is not set ({hint})"),
        KubeconfigError::ReadConfig(io, path) if io.kind() == std::io::ErrorKind::NotFound => {
            format!("no kubeconfig at {} ({hint})", path.display())
        }
        _ => format!("{}: {} ({hint})", kubeconfig_name(common), chain(e)),
    }
}

/// Every page of one resource, cluster-wide: each object with its `apiVersion` and `kind`, as
/// compact JSON (text holds a large cluster in far less memory than JSON values).
async fn list_all(client: &kube::Client, resource: &Resource) -> Result<Vec<String>, kube::Error> {
    let request = kube::core::Request::new(resource.path());
    let mut items = Vec::new();
    let mut token: Option<String> = None;
    let page_size = page_size();
    loop {
        let mut params = ListParams::default().limit(page_size);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let http = request.list(&params).map_err(kube::Error::BuildRequest)?;
        let page: Value = client.request(http).await?;
        let Value::Object(mut page) = page else { break };
        if let Some(Value::Array(list)) = page.remove("items") {
            items.extend(
                list.into_iter()
                    .map(|item| serde_json::to_string(&resource.prepare(item)).expect("JSON values serialise")),
            );
        }
        token = page
            .get("metadata")
            .and_then(|m| m.get("continue"))
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    Ok(items)
}

/// Sets the type of a list item (built-in kinds' items have none) and drops `managedFields`.
/// The message for failed list calls: the forbidden ones together with the rules they need,
/// missing Karpenter CRDs, or the first other failure.
pub(crate) fn describe_failures(failed: &[(Resource, kube::Error)], context: &str, server: &str) -> String {
    let status = |e: &kube::Error| match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    };
    let forbidden: Vec<&(Resource, kube::Error)> = failed.iter().filter(|(_, e)| status(e) == Some(403)).collect();
    if !forbidden.is_empty() {
        let mut m = String::new();
        for (r, _) in &forbidden {
            let _ = writeln!(
                m,
                "forbidden: cannot list {} at the cluster scope: add {} to your ClusterRole",
                r.name(),
                r.rule()
            );
        }
        if let (_, kube::Error::Api(s)) = forbidden[0] {
            let _ = writeln!(m, "(the API server at {server}, context {context}, said: {})", s.message);
        }
        m.push_str(
            "kubectl karpenter only lists (no get, watch or write); the ClusterRole it needs is in the README \
             (\"RBAC the plugin needs\")",
        );
        return m;
    }
    // Built-in types missing: not a Kubernetes API server (or a wrong path in the server URL).
    if let Some((r, kube::Error::Api(s))) = failed.iter().find(|(r, e)| !r.karpenter && status(e) == Some(404)) {
        return format!(
            "the server at {server} (context {context}) does not serve {} ({}): {}; is it a Kubernetes API server \
             (check the server URL of the context)?",
            r.name(),
            r.api_version(),
            s.message
        );
    }
    let missing: Vec<&Resource> =
        failed.iter().filter(|(r, e)| r.karpenter && status(e) == Some(404)).map(|(r, _)| r).collect();
    if !missing.is_empty() {
        let names: Vec<String> =
            missing.iter().map(|r| format!("{} ({}/{})", r.name(), r.api_version(), r.kind)).collect();
        let all = missing.len() == RESOURCES.iter().filter(|r| r.karpenter).count();
        return format!(
            "Karpenter's CRDs are not installed on this cluster (context {context}, {server}): it does not serve {}{}; \
             install Karpenter v1 (its CRDs), or read a snapshot with --from-file",
            names.join(" nor "),
            if all { "" } else { " (the other Karpenter CRDs are there: a partial or older Karpenter install)" }
        );
    }
    let (resource, e) = &failed[0];
    match e {
        kube::Error::Api(s) if s.code == 401 => format!(
            "the API server at {server} rejected the credentials of context {context} (401 Unauthorized): {}; \
             log in again (an expired token or exec plugin credential?)",
            s.message
        ),
        kube::Error::Api(s) => format!(
            "listing {} on {server} (context {context}) failed: {} {}: {}",
            resource.name(),
            s.code,
            s.reason,
            s.message
        ),
        kube::Error::Auth(_) => format!("context {context} ({server}): cannot get credentials: {}", chain(e)),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::RustlsTls(_) => {
            format!("cannot reach the API server at {server} (context {context}): {}", chain(e))
        }
        _ => format!("listing {} on {server} (context {context}) failed: {}", resource.name(), chain(e)),
    }
}

/// An error and its sources, `: `-separated, without repeats.
fn chain(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
        let status = kube::core::Status::failure(message, reason).with_code(code);
        kube::Error::Api(Box::new(status))
    }

    fn resource(plural: &str) -> Resource {
        *RESOURCES.iter().find(|r| r.plural == plural).unwrap()
    }

    #[test]
    fn forbidden_lists_name_the_rule() {
        let failed = vec![
            (resource("nodepools"), api_error(403, "Forbidden", "nodepools.karpenter.sh is forbidden: User \"x\"")),
            (resource("pods"), api_error(403, "Forbidden", "pods is forbidden")),
        ];
        let m = describe_failures(&failed, "ctx", "https://h");
        assert!(m.contains(
            "forbidden: cannot list nodepools.karpenter.sh at the cluster scope: add {apiGroups: [karpenter.sh], \
             resources: [nodepools], verbs: [list]} to your ClusterRole"
        ));
        assert!(m.contains(
            "cannot list pods at the cluster scope: add {apiGroups: [\"\"], resources: [pods], verbs: [list]}"
        ));
        assert!(m.contains("User \"x\""), "{m}");
    }

    #[test]
    fn missing_karpenter_crds_are_named() {
        let nf = || api_error(404, "NotFound", "the server could not find the requested resource");
        let all: Vec<_> = ["nodepools", "ec2nodeclasses", "nodeclaims"].iter().map(|p| (resource(p), nf())).collect();
        let m = describe_failures(&all, "ctx", "https://h");
        assert!(m.starts_with("Karpenter's CRDs are not installed on this cluster"), "{m}");
        assert!(m.contains("nodepools.karpenter.sh (karpenter.sh/v1/NodePool)"), "{m}");
        assert!(m.contains("ec2nodeclasses.karpenter.k8s.aws"), "{m}");
        assert!(!m.contains("partial"), "{m}");
        let some = vec![(resource("nodeclaims"), nf())];
        let m = describe_failures(&some, "ctx", "https://h");
        assert!(m.contains("does not serve nodeclaims.karpenter.sh (karpenter.sh/v1/NodeClaim)"), "{m}");
        assert!(m.contains("partial"), "{m}");
        assert!(!m.contains("nodepools"), "{m}");
    }

    #[test]
    fn other_failures() {
        let m = describe_failures(&[(resource("pods"), api_error(401, "Unauthorized", "Unauthorized"))], "c", "s");
        assert!(m.contains("rejected the credentials of context c"), "{m}");
        let m = describe_failures(&[(resource("csinodes"), api_error(404, "NotFound", "nope"))], "c", "s");
        assert!(m.contains("does not serve csinodes.storage.k8s.io"), "{m}");
        assert!(!m.contains("Karpenter"), "{m}");
    }
}
