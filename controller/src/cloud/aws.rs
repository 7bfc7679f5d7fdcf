//! The `aws` cloud provider (upstream karpenter-provider-aws v1.14.1 `pkg/cloudprovider`,
//! `pkg/providers/{instance,launchtemplate,subnet,securitygroup,amifamily}`,
//! `pkg/controllers/nodeclass`): EC2 through the AWS SDK for Rust. Every decision is core's
//! ([`carpentry_core::providers`]): which queries a NodeClass's selectors make and what its status
//! becomes, which launch templates and CreateFleet request a launch sends, what an
//! insufficient-capacity answer marks unavailable. This file makes the calls and translates.
//!
//! - EC2NodeClass status: DescribeSubnets, DescribeSecurityGroups, DescribeImages and SSM
//!   GetParameter (AMI aliases, for the API server's Kubernetes version), at most once a minute
//!   per NodeClass and on every generation (upstream requeues subnets every minute, security
//!   groups and AMIs every 5). `spec.instanceProfile` is used as given; for `spec.role` an
//!   instance profile is found or made (IAM GetInstanceProfile, CreateInstanceProfile with its
//!   path and tags, Remove/AddRoleToInstanceProfile), as core's plan says.
//! - Create: the NodeClass must be Ready; launch templates found by name (DescribeLaunchTemplates)
//!   or created; CreateFleet `instant`; its insufficient-capacity errors mark offerings
//!   unavailable for 3 minutes; no instance → the NodeClaim's launch fails with
//!   insufficient capacity and its pods are provisioned again without those offerings.
//! - Delete: DescribeInstances, then TerminateInstances unless it is shutting down; gone once EC2
//!   says terminated or does not know it. List: DescribeInstances by the cluster's tags.
//!
//! - A deleted EC2NodeClass that no NodeClaim uses: the instance profiles under its IAM path and
//!   its legacy name (RemoveRoleFromInstanceProfile, DeleteInstanceProfile), then its launch
//!   templates (DescribeLaunchTemplates by the cluster and NodeClass tags, DeleteLaunchTemplate).
//!   Every 30 minutes, the cluster's profiles nothing uses are deleted (ListInstanceProfiles).
//! - Tagging: once a NodeClaim's Node registered, its instance gets `Name`,
//!   `karpenter.sh/nodeclaim` and `eks:eks-cluster-name` where it lacks them (CreateTags, at most
//!   one call a second).
//!
//! - Interruption (`--interruption-queue`): while the leader runs, one SQS long poll (20 s, 10
//!   messages) is kept in flight; core parses each message and says what it asks
//!   ([`carpentry_core::providers::interruption`]); a handled or malformed message is deleted.
//!
//! - Instance types and prices (`refresh_catalogue`, every 12 h from the reconciler):
//!   DescribeInstanceTypes, DescribeInstanceTypeOfferings by zone ID, DescribeSpotPriceHistory and
//!   the Pricing API's GetProducts, each SDK answer handed to core field for field
//!   ([`carpentry_core::Catalogue::live`] applies the rules); a price API that fails leaves its
//!   last answer, or the embedded catalogue's prices.
//!
//! Not done yet (the issue stays open, docs/controller.md lists them): bootstrap user data,
//! dry-run validation, DescribeInstanceStatus, reserved capacity.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types as ec2;
use carpentry_core::api::{EC2NodeClass, NodeClaim};
use carpentry_core::catalogue::{
    pricing, DescribedInstanceType, InstanceType, LiveAnswers, LivePrices, SpotRecord, UnavailableOffering,
};
use carpentry_core::labels;
use carpentry_core::manifest::scenario::TimingOverrides;
use carpentry_core::manifest::Manifests;
use carpentry_core::nodeclaim::garbagecollection::CloudInstance;
use carpentry_core::nodeclaim::lifecycle::Instance;
use carpentry_core::providers::amifamily::AmiQuery;
use carpentry_core::providers::instanceprofile::{self, ExistingProfile, ManagedProfile, ProfilePlan};
use carpentry_core::providers::{
    self, ClusterBootstrap, Filter, FleetError, Lookup, LookupError, UnavailableOfferings,
};
use carpentry_core::Catalogue;
use tracing::{info, warn};

use super::{CloudProvider, CreateError, Deletion, QueuedMessage, ResolvedStatus, Tagged};

/// Every IAM action this provider needs: the ones it calls, and the ones AWS authorizes with
/// them (CreateFleet launches through RunInstances, tags through CreateTags and passes the
/// instance profile's role; CreateInstanceProfile with tags needs TagInstanceProfile). `controller/deploy/iam/controller-policy.json` allows exactly these
/// (a unit test compares them) and the moto test checks that every call it saw is among them.
pub const IAM_ACTIONS: &[&str] = &[
    "ec2:CreateFleet",
    "ec2:CreateLaunchTemplate",
    "ec2:CreateTags",
    "ec2:DeleteLaunchTemplate",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeInstances",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
    "ec2:RunInstances",
    "ec2:TerminateInstances",
    "eks:DescribeCluster",
    "iam:AddRoleToInstanceProfile",
    "iam:CreateInstanceProfile",
    "iam:DeleteInstanceProfile",
    "iam:GetInstanceProfile",
    "iam:ListInstanceProfiles",
    "iam:PassRole",
    "iam:RemoveRoleFromInstanceProfile",
    "iam:TagInstanceProfile",
    "pricing:GetProducts",
    "sqs:DeleteMessage",
    "sqs:GetQueueUrl",
    "sqs:ReceiveMessage",
    "ssm:GetParameter",
];

/// How soon a cluster fact the nodes' bootstrap lacks (the endpoint and service CIDR from
/// DescribeCluster, the kube-dns address) is asked again (core's).
const BOOTSTRAP_RETRY: Duration = Duration::from_secs(providers::refresh::LOOKUP_TTL_SECONDS);
/// How often the API server's Kubernetes version is read again (core's, upstream `providers.version`).
const VERSION_REFRESH: Duration = Duration::from_secs(providers::refresh::VERSION_REFRESH_SECONDS);

/// EC2's answer codes for a missing IAM permission.
fn is_denied(code: &str) -> bool {
    matches!(code, "UnauthorizedOperation" | "AccessDenied" | "AccessDeniedException")
}

/// A failed call as a [`LookupError`] naming the IAM action.
fn lookup_error<E>(action: &str, e: &aws_sdk_ec2::error::SdkError<E>) -> LookupError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let message =
        e.message().map(str::to_string).unwrap_or_else(|| format!("{}", aws_sdk_ec2::error::DisplayErrorContext(e)));
    match e.code() {
        Some(code) if is_denied(code) => LookupError::Denied { action: action.to_string(), message },
        _ => LookupError::Failed { action: action.to_string(), message },
    }
}

fn filters(list: &[Filter]) -> Vec<ec2::Filter> {
    list.iter().map(|f| ec2::Filter::builder().name(&f.name).set_values(Some(f.values.clone())).build()).collect()
}

fn tags_of(map: &std::collections::BTreeMap<String, String>) -> Vec<ec2::Tag> {
    map.iter().map(|(k, v)| ec2::Tag::builder().key(k).value(v).build()).collect()
}

fn tag_spec(resource: ec2::ResourceType, map: &std::collections::BTreeMap<String, String>) -> ec2::TagSpecification {
    ec2::TagSpecification::builder().resource_type(resource).set_tags(Some(tags_of(map))).build()
}

/// The interruption queue (upstream `pkg/providers/sqs`).
#[derive(Default)]
struct Interruption {
    queue: String,
    url: tokio::sync::Mutex<Option<String>>,
    poll: tokio::sync::Mutex<Option<tokio::task::JoinHandle<anyhow::Result<Vec<QueuedMessage>>>>>,
}

/// upstream `GetSQSMessages`: a long poll of up to 20 s for at most 10 messages, each hidden from
/// other readers for 20 s (it comes back if it is not deleted by then).
async fn receive(sqs: aws_sdk_sqs::Client, url: String) -> anyhow::Result<Vec<QueuedMessage>> {
    let answer = sqs
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .visibility_timeout(20)
        .wait_time_seconds(20)
        .send()
        .await
        .map_err(|e| sdk_error("sqs:ReceiveMessage", e))?;
    Ok(answer
        .messages()
        .iter()
        .filter_map(|m| {
            Some(QueuedMessage {
                receipt: m.receipt_handle()?.to_string(),
                body: m.body().unwrap_or_default().to_string(),
            })
        })
        .collect())
}

/// What the nodes' bootstrap user data says about the cluster, and when a missing part was last
/// asked for.
struct BootstrapFacts {
    known: ClusterBootstrap,
    asked_eks: Option<Instant>,
    asked_dns: Option<Instant>,
}

/// The node bootstrap settings the operator gives (upstream `CLUSTER_ENDPOINT`,
/// `CLUSTER_CA_BUNDLE`); what is not given is discovered.
#[derive(Debug, Clone, Default)]
pub struct BootstrapSettings {
    pub cluster_endpoint: Option<String>,
    /// Base64 of the PEM bundle.
    pub cluster_ca_bundle: Option<String>,
}

/// The last on-demand and spot prices the APIs answered.
#[derive(Clone, Default)]
struct KeptPrices {
    on_demand: Option<Arc<LivePrices>>,
    spot: Option<Arc<LivePrices>>,
}

pub struct Aws {
    ec2: aws_sdk_ec2::Client,
    ssm: aws_sdk_ssm::Client,
    iam: aws_sdk_iam::Client,
    sqs: aws_sdk_sqs::Client,
    eks: aws_sdk_eks::Client,
    /// The cluster as the nodes' user data describes it.
    bootstrap: tokio::sync::Mutex<BootstrapFacts>,
    /// The Pricing API, in its endpoint region for this region.
    pricing: aws_sdk_pricing::Client,
    /// The last prices each API answered (a failed refresh keeps them, as upstream does).
    live_prices: Mutex<KeptPrices>,
    /// The interruption queue's name, its URL once GetQueueUrl answered, and the long poll in
    /// flight.
    interruption: Option<Interruption>,
    kube: kube::Client,
    cluster: String,
    region: String,
    /// Instance profiles a NodeClass just made or moved away from, and since when: not collected
    /// for an hour (the view may not show their users yet).
    protected: Mutex<HashMap<String, Instant>>,
    /// The API server's `major.minor`, and when it was read.
    kubernetes: tokio::sync::Mutex<Option<(String, Instant)>>,
    /// Launch templates known to exist.
    templates: Mutex<HashSet<String>>,
    unavailable: Mutex<UnavailableOfferings>,
    /// upstream's instance cache (`instance.DefaultProvider`, v1.14.1, made in `operator.go`
    /// with no expiry): the instances last seen not terminated. [`CloudProvider::list`] (the
    /// garbage collector's, every 2 minutes) replaces it; [`CloudProvider::exists`] answers from
    /// it and fills a miss from DescribeInstances, so that a deleting Node that is not Ready asks
    /// EC2 once rather than on every termination pass.
    known_instances: Mutex<KnownInstances>,
}

/// The instance cache's contents.
#[derive(Default)]
struct KnownInstances {
    ids: HashSet<String>,
    /// Instances found gone since the oldest list under way began, with when: a list whose pages
    /// still showed one (shutting down) does not bring it back.
    gone: HashMap<String, Instant>,
}

impl KnownInstances {
    fn found(&mut self, id: &str, exists: bool) {
        if exists {
            self.ids.insert(id.to_string());
            self.gone.remove(id);
        } else {
            self.ids.remove(id);
            self.gone.insert(id.to_string(), Instant::now());
        }
    }

    /// What a list that began at `began` saw replaces the cache, less what was found gone since.
    fn listed(&mut self, mut seen: HashSet<String>, began: Instant) {
        seen.retain(|id| self.gone.get(id).is_none_or(|at| *at < began));
        self.gone.retain(|_, at| *at >= began);
        self.ids = seen;
    }
}

/// Every AWS call is bounded, so a hung endpoint fails a call (retried by the next pass) instead
/// of stopping the loop: a connection within 10 s, each attempt within 40 s (above SQS's 20 s
/// long poll), the whole call with the SDK's retries (standard mode, 3 attempts) within 2 minutes.
fn timeouts() -> aws_config::timeout::TimeoutConfig {
    aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(10))
        .operation_attempt_timeout(Duration::from_secs(40))
        .operation_timeout(Duration::from_secs(120))
        .build()
}

/// The SDK's HTTPS client: rustls with ring (the project's one TLS stack).
fn https_client() -> aws_sdk_ec2::config::SharedHttpClient {
    use aws_smithy_http_client::tls;
    aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(tls::rustls_provider::CryptoMode::Ring))
        .build_https()
}

/// The region the controller works in: `given` (`--region`, `AWS_REGION`), else what the SDK's
/// region chain finds (`AWS_DEFAULT_REGION`, the profile, instance metadata), as the chart
/// promises for an empty `settings.region`; an error naming the ways to set it when none does.
pub async fn region(given: Option<String>) -> anyhow::Result<String> {
    if let Some(region) = given {
        return Ok(region);
    }
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(https_client())
        .timeout_config(timeouts())
        .load()
        .await;
    config.region().map(|r| r.to_string()).ok_or_else(|| {
        anyhow::anyhow!(
            "no AWS region: set --region, AWS_REGION or the chart's settings.region (nor did AWS_DEFAULT_REGION, \
             the AWS profile or instance metadata name one)"
        )
    })
}

impl Aws {
    /// The provider for cluster `cluster` in `region`, with credentials from the standard chain
    /// (environment, profile, IRSA web identity, EKS Pod Identity, IMDS) and `AWS_ENDPOINT_URL`
    /// honoured, over HTTPS on rustls with ring. The nodes' bootstrap takes `bootstrap`'s
    /// endpoint and CA bundle where given.
    pub async fn new(
        kube: kube::Client,
        region: &str,
        cluster: String,
        interruption_queue: Option<String>,
        bootstrap: BootstrapSettings,
    ) -> anyhow::Result<Aws> {
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .http_client(https_client())
            .timeout_config(timeouts())
            .region(aws_config::Region::new(region.to_string()))
            .load()
            .await;
        Ok(Aws::with_config(&config, kube, region, cluster, interruption_queue, bootstrap))
    }

    /// The provider on an SDK configuration already loaded.
    fn with_config(
        config: &aws_config::SdkConfig,
        kube: kube::Client,
        region: &str,
        cluster: String,
        interruption_queue: Option<String>,
        bootstrap: BootstrapSettings,
    ) -> Aws {
        info!(region, cluster = %cluster, iam_actions = ?IAM_ACTIONS,
            "aws: the IAM actions this controller needs (controller/deploy/iam/controller-policy.json)");
        Aws {
            ec2: aws_sdk_ec2::Client::new(config),
            ssm: aws_sdk_ssm::Client::new(config),
            iam: aws_sdk_iam::Client::new(config),
            sqs: aws_sdk_sqs::Client::new(config),
            eks: aws_sdk_eks::Client::new(config),
            bootstrap: tokio::sync::Mutex::new(BootstrapFacts {
                known: ClusterBootstrap {
                    name: cluster.clone(),
                    endpoint: bootstrap.cluster_endpoint.filter(|e| !e.is_empty()),
                    ca_bundle: bootstrap.cluster_ca_bundle.filter(|c| !c.is_empty()),
                    cidr: None,
                    kube_dns_ip: None,
                },
                asked_eks: None,
                asked_dns: None,
            }),
            pricing: aws_sdk_pricing::Client::from_conf(
                aws_sdk_pricing::config::Builder::from(config)
                    .region(aws_config::Region::new(pricing::pricing_api_region(region)))
                    .build(),
            ),
            live_prices: Mutex::default(),
            interruption: interruption_queue.map(|queue| Interruption { queue, ..Default::default() }),
            kube,
            cluster,
            region: region.to_string(),
            protected: Mutex::default(),
            kubernetes: tokio::sync::Mutex::new(None),
            templates: Mutex::default(),
            unavailable: Mutex::default(),
            known_instances: Mutex::default(),
        }
    }

    /// The cluster as the nodes' user data describes it: the endpoint and service CIDR from EKS
    /// DescribeCluster where not given (upstream `ResolveClusterEndpoint`, `ResolveClusterCIDR`),
    /// the cluster DNS address from the `kube-system/kube-dns` Service (upstream `KubeDNSIP`);
    /// what is missing is asked again after [`BOOTSTRAP_RETRY`], what was found is kept.
    async fn cluster_bootstrap(&self) -> ClusterBootstrap {
        let mut facts = self.bootstrap.lock().await;
        let due = |at: Option<Instant>| at.is_none_or(|t| t.elapsed() >= BOOTSTRAP_RETRY);
        if (facts.known.endpoint.is_none() || facts.known.cidr.is_none()) && due(facts.asked_eks) {
            facts.asked_eks = Some(Instant::now());
            match self.eks.describe_cluster().name(&self.cluster).send().await {
                Ok(answer) => {
                    let found = answer.cluster();
                    if facts.known.endpoint.is_none() {
                        facts.known.endpoint = found.and_then(|c| c.endpoint()).map(str::to_string);
                    }
                    let network = found.and_then(|c| c.kubernetes_network_config());
                    facts.known.cidr =
                        network.and_then(|n| n.service_ipv4_cidr().or(n.service_ipv6_cidr())).map(str::to_string);
                    info!(endpoint = ?facts.known.endpoint, cidr = ?facts.known.cidr,
                        "aws: the cluster's endpoint and service CIDR (eks:DescribeCluster)");
                }
                Err(e) => warn!(error = %format!("{:#}", sdk_error("eks:DescribeCluster", e)),
                    "aws: the cluster's endpoint and service CIDR are not known; nodes' user data needs them"),
            }
        }
        if facts.known.kube_dns_ip.is_none() && due(facts.asked_dns) {
            facts.asked_dns = Some(Instant::now());
            let services: kube::Api<k8s_openapi::api::core::v1::Service> =
                kube::Api::namespaced(self.kube.clone(), "kube-system");
            match services.get_opt("kube-dns").await {
                Ok(found) => {
                    let ip = found.and_then(|s| s.spec).and_then(|s| s.cluster_ip);
                    facts.known.kube_dns_ip = ip.filter(|ip| ip.parse::<std::net::IpAddr>().is_ok());
                    if facts.known.kube_dns_ip.is_none() {
                        warn!(
                            "aws: no kube-system/kube-dns Service with a cluster IP; nodes get the AMI's DNS default"
                        );
                    }
                }
                Err(e) => warn!(error = %e, "aws: cannot read kube-system/kube-dns for the nodes' cluster DNS"),
            }
        }
        facts.known.clone()
    }

    /// `DescribeInstanceTypes` as upstream asks it (hvm, x86_64 or arm64; pages of 100).
    async fn described_types(&self) -> anyhow::Result<Vec<DescribedInstanceType>> {
        let mut pages = self
            .ec2
            .describe_instance_types()
            .filters(ec2::Filter::builder().name("supported-virtualization-type").values("hvm").build())
            .filters(
                ec2::Filter::builder()
                    .name("processor-info.supported-architecture")
                    .values("x86_64")
                    .values("arm64")
                    .build(),
            )
            .max_results(100)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_error("ec2:DescribeInstanceTypes", e))?;
            out.extend(page.instance_types().iter().map(described));
        }
        Ok(out)
    }

    /// `DescribeInstanceTypeOfferings` by zone ID (pages of 1000): (type, zone ID).
    async fn zone_offerings(&self) -> anyhow::Result<Vec<(String, String)>> {
        let mut pages = self
            .ec2
            .describe_instance_type_offerings()
            .location_type(ec2::LocationType::AvailabilityZoneId)
            .max_results(1000)
            .into_paginator()
            .send();
        let mut out = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_error("ec2:DescribeInstanceTypeOfferings", e))?;
            out.extend(
                page.instance_type_offerings()
                    .iter()
                    .filter_map(|o| Some((o.instance_type()?.as_str().to_string(), o.location()?.to_string()))),
            );
        }
        Ok(out)
    }

    /// The current spot prices (`DescribeSpotPriceHistory` from now, Linux, pages of 2000).
    async fn spot_prices(&self, now: &str) -> anyhow::Result<Option<LivePrices>> {
        let mut request = self
            .ec2
            .describe_spot_price_history()
            .start_time(aws_smithy_types::DateTime::from(std::time::SystemTime::now()))
            .max_results(2000);
        for d in pricing::SPOT_PRODUCT_DESCRIPTIONS {
            request = request.product_descriptions(d);
        }
        let mut pages = request.into_paginator().send();
        let mut records = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_error("ec2:DescribeSpotPriceHistory", e))?;
            records.extend(page.spot_price_history().iter().filter_map(|p| {
                Some(SpotRecord {
                    instance_type: p.instance_type()?.as_str().to_string(),
                    zone: p.availability_zone()?.to_string(),
                    price: p.spot_price()?.to_string(),
                    has_timestamp: p.timestamp().is_some(),
                })
            }));
        }
        Ok(LivePrices::spot(&records, now))
    }

    /// On-demand prices from the Pricing API (`GetProducts`, the two queries upstream makes).
    async fn on_demand_prices(&self, now: &str) -> anyhow::Result<Option<LivePrices>> {
        if !pricing::asks_pricing_api(&self.region) {
            return Ok(None);
        }
        let mut prices = HashMap::new();
        for query in pricing::on_demand_queries(&self.region) {
            let mut request = self.pricing.get_products().service_code("AmazonEC2").max_results(100);
            for (field, value) in query {
                request = request.filters(
                    aws_sdk_pricing::types::Filter::builder()
                        .r#type(aws_sdk_pricing::types::FilterType::TermMatch)
                        .field(field)
                        .value(value)
                        .build()
                        .context("a GetProducts filter")?,
                );
            }
            let mut pages = request.into_paginator().send();
            while let Some(page) = pages.next().await {
                let page = page.map_err(|e| {
                    let code = e.code().unwrap_or("-").to_string();
                    anyhow::anyhow!("pricing:GetProducts failed ({code}): {}", carpentry_core::error_chain(&e))
                })?;
                let (found, unreadable) = pricing::on_demand_from_price_list(
                    page.price_list().iter().map(String::as_str),
                    pricing::currency(&self.region),
                );
                if unreadable > 0 {
                    warn!(unreadable, "aws: GetProducts answered price documents that are not JSON; they are skipped");
                }
                prices.extend(found);
            }
        }
        Ok((!prices.is_empty()).then(|| LivePrices::on_demand(prices, now)))
    }

    /// The region's catalogue from EC2, priced by the APIs that answer and by `base` otherwise.
    async fn live_catalogue(&self, base: &Catalogue) -> anyhow::Result<Catalogue> {
        let now = crate::clock::now_rfc3339();
        let types = self.described_types().await?;
        let offerings = self.zone_offerings().await?;
        let KeptPrices { on_demand: previous_on_demand, spot: previous_spot } =
            self.live_prices.lock().map(|p| p.clone()).unwrap_or_default();
        let on_demand = match self.on_demand_prices(&now).await {
            Ok(Some(p)) => Some(Arc::new(p.merged_over(previous_on_demand.as_deref()))),
            Ok(None) => previous_on_demand,
            Err(e) => {
                warn!(error = %format!("{e:#}"), kept = previous_on_demand.is_some(),
                    "aws: on-demand prices not refreshed; the last answer or the embedded table prices them");
                previous_on_demand
            }
        };
        let spot = match self.spot_prices(&now).await {
            Ok(Some(p)) => Some(Arc::new(p.merged_over(previous_spot.as_deref()))),
            Ok(None) => {
                warn!("aws: DescribeSpotPriceHistory found no spot prices; the last answer or synthetic prices stand");
                previous_spot
            }
            Err(e) => {
                warn!(error = %format!("{e:#}"), kept = previous_spot.is_some(),
                    "aws: spot prices not refreshed; the last answer or synthetic prices stand");
                previous_spot
            }
        };
        if let Ok(mut kept) = self.live_prices.lock() {
            *kept = KeptPrices { on_demand: on_demand.clone(), spot: spot.clone() };
        }
        let catalogue = base.live(LiveAnswers {
            region: &self.region,
            types: &types,
            offerings: &offerings,
            on_demand,
            spot,
            fetched_at: &now,
        })?;
        Ok(catalogue)
    }

    /// The cluster's Kubernetes `major.minor` (for AMI aliases).
    async fn kubernetes_version(&self) -> Lookup<String> {
        let mut cached = self.kubernetes.lock().await;
        if let Some((v, at)) = cached.as_ref() {
            if at.elapsed() < VERSION_REFRESH {
                return Ok(v.clone());
            }
        }
        let info = self.kube.apiserver_version().await.map_err(|e| LookupError::Failed {
            action: "GET /version (the API server's Kubernetes version)".into(),
            message: carpentry_core::error_chain(&e),
        })?;
        let minor: String = info.minor.chars().take_while(char::is_ascii_digit).collect();
        let version = format!("{}.{minor}", info.major);
        *cached = Some((version.clone(), Instant::now()));
        Ok(version)
    }

    async fn subnets(&self, class: &EC2NodeClass) -> Lookup<Vec<providers::DiscoveredSubnet>> {
        let mut out = Vec::new();
        for query in providers::subnet_queries(&class.spec.subnet_selector_terms) {
            let answer = self
                .ec2
                .describe_subnets()
                .set_filters(Some(filters(&query)))
                .send()
                .await
                .map_err(|e| lookup_error("ec2:DescribeSubnets", &e))?;
            out.extend(answer.subnets().iter().map(|s| providers::DiscoveredSubnet {
                id: s.subnet_id().unwrap_or_default().to_string(),
                zone: s.availability_zone().unwrap_or_default().to_string(),
                zone_id: s.availability_zone_id().unwrap_or_default().to_string(),
                available_ips: i64::from(s.available_ip_address_count().unwrap_or(0)),
            }));
        }
        Ok(out)
    }

    async fn security_groups(&self, class: &EC2NodeClass) -> Lookup<Vec<providers::DiscoveredSecurityGroup>> {
        let mut out = Vec::new();
        for query in providers::security_group_queries(&class.spec.security_group_selector_terms) {
            let answer = self
                .ec2
                .describe_security_groups()
                .set_filters(Some(filters(&query)))
                .send()
                .await
                .map_err(|e| lookup_error("ec2:DescribeSecurityGroups", &e))?;
            out.extend(answer.security_groups().iter().map(|g| providers::DiscoveredSecurityGroup {
                id: g.group_id().unwrap_or_default().to_string(),
                name: g.group_name().unwrap_or_default().to_string(),
            }));
        }
        Ok(out)
    }

    /// An SSM parameter's value; `None` when it does not exist.
    async fn parameter(&self, name: &str) -> Lookup<Option<String>> {
        match self.ssm.get_parameter().name(name).send().await {
            Ok(answer) => Ok(answer.parameter().and_then(|p| p.value()).map(str::to_string)),
            Err(e) if e.code() == Some("ParameterNotFound") => Ok(None),
            Err(e) => {
                let message = e.message().map(str::to_string).unwrap_or_else(|| e.to_string());
                Err(match e.code() {
                    Some(code) if is_denied(code) => LookupError::Denied { action: "ssm:GetParameter".into(), message },
                    _ => LookupError::Failed { action: "ssm:GetParameter".into(), message },
                })
            }
        }
    }

    async fn describe_images(
        &self,
        filter_list: &[Filter],
        owners: &[String],
        requirements: Option<&[k8s_openapi::api::core::v1::NodeSelectorRequirement]>,
    ) -> Lookup<Vec<providers::Image>> {
        let answer = self
            .ec2
            .describe_images()
            .set_filters(Some(filters(filter_list)))
            .set_owners((!owners.is_empty()).then(|| owners.to_vec()))
            .include_deprecated(true)
            .send()
            .await
            .map_err(|e| lookup_error("ec2:DescribeImages", &e))?;
        let now = crate::clock::now_rfc3339();
        Ok(answer
            .images()
            .iter()
            .map(|i| providers::Image {
                id: i.image_id().unwrap_or_default().to_string(),
                name: i.name().unwrap_or_default().to_string(),
                creation_date: i.creation_date().unwrap_or_default().to_string(),
                deprecated: i.deprecation_time().is_some_and(|t| t <= now.as_str()),
                architecture: i.architecture().map(|a| a.as_str().to_string()).unwrap_or_default(),
                requirements: requirements.map(<[_]>::to_vec),
            })
            .collect())
    }

    async fn images(&self, class: &EC2NodeClass) -> Lookup<Vec<providers::Image>> {
        let mut out = Vec::new();
        if let Some(alias) = class.spec.ami_selector_terms.iter().find_map(|t| t.alias.as_deref()) {
            let version = self.kubernetes_version().await?;
            let parameters =
                providers::alias_parameters(alias, &version).map_err(|e| LookupError::Unsupported(e.to_string()))?;
            for p in parameters {
                if let Some(id) = self.parameter(&p.path).await? {
                    let found =
                        self.describe_images(&[Filter::new("image-id", &[&id])], &[], Some(&p.requirements)).await?;
                    out.extend(found);
                }
            }
            return Ok(out);
        }
        for query in providers::ami_queries(&class.spec.ami_selector_terms) {
            match query {
                AmiQuery::Images { filters, owners } => {
                    out.extend(self.describe_images(&filters, &owners, None).await?)
                }
                AmiQuery::Parameter(name) => {
                    if let Some(id) = self.parameter(&name).await? {
                        out.extend(self.describe_images(&[Filter::new("image-id", &[&id])], &[], None).await?);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The instance profile `name` as IAM has it; `None` when IAM does not know it.
    async fn get_profile(&self, name: &str) -> Lookup<Option<aws_sdk_iam::types::InstanceProfile>> {
        match self.iam.get_instance_profile().instance_profile_name(name).send().await {
            Ok(answer) => Ok(answer.instance_profile().cloned()),
            Err(e) if e.code() == Some("NoSuchEntity") => Ok(None),
            Err(e) => Err(lookup_error("iam:GetInstanceProfile", &e)),
        }
    }

    /// The profile core's plan names for `class`: made or fixed up when the plan says so.
    async fn instance_profile(&self, class: &EC2NodeClass) -> Lookup<String> {
        let in_status = class.status.as_ref().map(|s| s.instance_profile.clone()).filter(|n| !n.is_empty());
        let status_role = match (&class.spec.role, &in_status) {
            (Some(_), Some(name)) => {
                self.get_profile(name).await?.and_then(|p| p.roles().first().map(|r| r.role_name().to_string()))
            }
            _ => None,
        };
        let plan = providers::profile_plan(class, &self.cluster, &self.region, status_role.as_deref())?;
        if let ProfilePlan::Ensure(profile) = &plan {
            // Protected before it is made: garbage collection runs beside the reconcile and
            // must not find it made and not yet protected.
            self.protect(&profile.name);
            self.ensure_profile(profile).await?;
        }
        if let Some(old) = in_status.filter(|old| old != plan.name()) {
            self.protect(&old);
        }
        Ok(plan.name().to_string())
    }

    fn protect(&self, profile: &str) {
        if let Ok(mut p) = self.protected.lock() {
            p.insert(profile.to_string(), Instant::now());
        }
    }

    /// upstream `instanceprofile.Create`: the profile found or made, holding exactly its role.
    async fn ensure_profile(&self, profile: &ManagedProfile) -> Lookup<()> {
        let existing = match self.get_profile(&profile.name).await? {
            Some(existing) => existing,
            None => {
                let tags = profile
                    .tags
                    .iter()
                    .map(|(k, v)| aws_sdk_iam::types::Tag::builder().key(k).value(v).build())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| LookupError::Failed {
                        action: "iam:CreateInstanceProfile".into(),
                        message: e.to_string(),
                    })?;
                let created = self
                    .iam
                    .create_instance_profile()
                    .instance_profile_name(&profile.name)
                    .path(&profile.path)
                    .set_tags(Some(tags))
                    .send()
                    .await;
                match created {
                    Ok(answer) => {
                        info!(instance_profile = %profile.name, path = %profile.path, "aws: created the instance profile");
                        answer.instance_profile().cloned().ok_or_else(|| LookupError::Failed {
                            action: "iam:CreateInstanceProfile".into(),
                            message: "the answer has no instance profile".into(),
                        })?
                    }
                    // Another replica (or an earlier pass) made it meanwhile.
                    Err(e) if e.code() == Some("EntityAlreadyExists") => {
                        self.get_profile(&profile.name).await?.ok_or_else(|| LookupError::Failed {
                            action: "iam:GetInstanceProfile".into(),
                            message: format!("{} exists and yet cannot be read", profile.name),
                        })?
                    }
                    Err(e) => return Err(lookup_error("iam:CreateInstanceProfile", &e)),
                }
            }
        };
        let roles: Vec<&str> = existing.roles().iter().map(|r| r.role_name()).collect();
        if roles == [profile.role.as_str()] {
            return Ok(());
        }
        // A profile holds at most one role.
        for other in roles {
            self.iam
                .remove_role_from_instance_profile()
                .instance_profile_name(&profile.name)
                .role_name(other)
                .send()
                .await
                .map_err(|e| lookup_error("iam:RemoveRoleFromInstanceProfile", &e))?;
        }
        match self
            .iam
            .add_role_to_instance_profile()
            .instance_profile_name(&profile.name)
            .role_name(&profile.role)
            .send()
            .await
        {
            Ok(_) => {
                info!(instance_profile = %profile.name, role = %profile.role, "aws: the instance profile holds the role");
                Ok(())
            }
            Err(e) => {
                let mut error = lookup_error("iam:AddRoleToInstanceProfile", &e);
                if e.code() == Some("NoSuchEntity") {
                    if let LookupError::Failed { message, .. } = &mut error {
                        *message = format!("IAM has no role {} (create it, or fix spec.role): {message}", profile.role);
                    }
                }
                Err(error)
            }
        }
    }

    /// The profiles IAM lists under `path` (every one, on an endpoint that ignores the prefix).
    async fn list_profiles(&self, path: &str) -> anyhow::Result<Vec<ExistingProfile>> {
        let mut out = Vec::new();
        let mut pages = self.iam.list_instance_profiles().path_prefix(path).into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_error("iam:ListInstanceProfiles", e))?;
            out.extend(
                page.instance_profiles().iter().map(|p| ExistingProfile {
                    name: p.instance_profile_name().to_string(),
                    path: p.path().to_string(),
                }),
            );
        }
        Ok(out)
    }

    /// upstream `instanceprofile.Delete`: its role removed, then the profile; gone already is done.
    async fn delete_profile(&self, name: &str) -> anyhow::Result<()> {
        let existing = match self.iam.get_instance_profile().instance_profile_name(name).send().await {
            Ok(answer) => answer.instance_profile().cloned(),
            Err(e) if e.code() == Some("NoSuchEntity") => None,
            Err(e) => return Err(sdk_error("iam:GetInstanceProfile", e)),
        };
        let Some(existing) = existing else { return Ok(()) };
        for role in existing.roles() {
            self.iam
                .remove_role_from_instance_profile()
                .instance_profile_name(name)
                .role_name(role.role_name())
                .send()
                .await
                .map_err(|e| sdk_error("iam:RemoveRoleFromInstanceProfile", e))?;
        }
        match self.iam.delete_instance_profile().instance_profile_name(name).send().await {
            Ok(_) => info!(instance_profile = %name, "aws: deleted the instance profile"),
            Err(e) if e.code() == Some("NoSuchEntity") => {}
            Err(e) => return Err(sdk_error("iam:DeleteInstanceProfile", e)),
        }
        if let Ok(mut p) = self.protected.lock() {
            p.remove(name);
        }
        Ok(())
    }

    /// upstream `launchtemplate.DeleteAll`: every launch template the cluster made for `class`.
    async fn delete_templates(&self, class: &EC2NodeClass) -> anyhow::Result<()> {
        let query = providers::launchtemplate::nodeclass_template_filters(&self.cluster, class);
        let mut names = Vec::new();
        let mut pages = self
            .ec2
            .describe_launch_templates()
            .set_filters(Some(filters(&query)))
            .max_results(200)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_error("ec2:DescribeLaunchTemplates", e))?;
            names.extend(page.launch_templates().iter().filter_map(|t| t.launch_template_name().map(str::to_string)));
        }
        for name in names {
            match self.ec2.delete_launch_template().launch_template_name(&name).send().await {
                Ok(_) => info!(launch_template = %name, "aws: deleted the launch template"),
                Err(e) if e.code() == Some("InvalidLaunchTemplateName.NotFoundException") => {}
                Err(e) => return Err(sdk_error("ec2:DeleteLaunchTemplate", e)),
            }
            if let Ok(mut t) = self.templates.lock() {
                t.remove(&name);
            }
        }
        Ok(())
    }

    /// Finds the launch template by name, or creates it.
    async fn ensure_template(&self, lt: &providers::LaunchTemplate) -> anyhow::Result<()> {
        if self.templates.lock().is_ok_and(|t| t.contains(&lt.name)) {
            return Ok(());
        }
        match self.ec2.describe_launch_templates().launch_template_names(&lt.name).send().await {
            Ok(found) if !found.launch_templates().is_empty() => {}
            Err(e) if e.code() != Some("InvalidLaunchTemplateName.NotFoundException") => {
                return Err(sdk_error("ec2:DescribeLaunchTemplates", e));
            }
            _ => self.create_template(lt).await?,
        }
        if let Ok(mut t) = self.templates.lock() {
            t.insert(lt.name.clone());
        }
        Ok(())
    }

    async fn create_template(&self, lt: &providers::LaunchTemplate) -> anyhow::Result<()> {
        let devices = lt
            .block_devices
            .iter()
            .map(|b| {
                ec2::LaunchTemplateBlockDeviceMappingRequest::builder()
                    .device_name(&b.device_name)
                    .ebs(
                        ec2::LaunchTemplateEbsBlockDeviceRequest::builder()
                            .volume_size(b.volume_size_gib as i32)
                            .volume_type(ec2::VolumeType::from(b.volume_type.as_str()))
                            .encrypted(b.encrypted)
                            .delete_on_termination(b.delete_on_termination)
                            .set_iops(b.iops.map(|n| n as i32))
                            .set_throughput(b.throughput.map(|n| n as i32))
                            .set_kms_key_id(b.kms_key_id.clone())
                            .set_snapshot_id(b.snapshot_id.clone())
                            .build(),
                    )
                    .build()
            })
            .collect();
        let m = &lt.metadata_options;
        let data = ec2::RequestLaunchTemplateData::builder()
            .image_id(&lt.image_id)
            .iam_instance_profile(
                ec2::LaunchTemplateIamInstanceProfileSpecificationRequest::builder().name(&lt.instance_profile).build(),
            )
            .set_security_group_ids(Some(lt.security_group_ids.clone()))
            .set_block_device_mappings(Some(devices))
            .metadata_options(
                ec2::LaunchTemplateInstanceMetadataOptionsRequest::builder()
                    .http_endpoint(ec2::LaunchTemplateInstanceMetadataEndpointState::from(m.http_endpoint.as_str()))
                    .http_protocol_ipv6(ec2::LaunchTemplateInstanceMetadataProtocolIpv6::from(
                        m.http_protocol_ipv6.as_str(),
                    ))
                    .http_put_response_hop_limit(m.http_put_response_hop_limit as i32)
                    .http_tokens(ec2::LaunchTemplateHttpTokensState::from(m.http_tokens.as_str()))
                    .instance_metadata_tags(ec2::LaunchTemplateInstanceMetadataTagsState::Disabled)
                    .build(),
            )
            .monitoring(ec2::LaunchTemplatesMonitoringRequest::builder().enabled(lt.detailed_monitoring).build())
            // EC2 takes a launch template's user data base64-encoded.
            .set_user_data(lt.user_data.as_ref().map(aws_smithy_types::base64::encode))
            .build();
        let created = self
            .ec2
            .create_launch_template()
            .launch_template_name(&lt.name)
            .launch_template_data(data)
            .tag_specifications(tag_spec(ec2::ResourceType::LaunchTemplate, &lt.tags))
            .send()
            .await;
        match created {
            Ok(_) => {
                info!(launch_template = %lt.name, image = %lt.image_id, "aws: created the launch template");
                Ok(())
            }
            // Another replica (or an earlier pass) made it meanwhile.
            Err(e) if e.code() == Some("InvalidLaunchTemplateName.AlreadyExistsException") => Ok(()),
            Err(e) => Err(sdk_error("ec2:CreateLaunchTemplate", e)),
        }
    }

    /// The instance `id` as EC2 describes it, `None` when EC2 does not know it.
    async fn instance(&self, id: &str) -> anyhow::Result<Option<ec2::Instance>> {
        match self.ec2.describe_instances().instance_ids(id).send().await {
            Ok(answer) => Ok(answer.reservations().iter().flat_map(|r| r.instances()).next().cloned()),
            Err(e) if e.code() == Some("InvalidInstanceID.NotFound") => Ok(None),
            Err(e) => Err(sdk_error("ec2:DescribeInstances", e)),
        }
    }

    async fn terminate(&self, id: &str) -> anyhow::Result<Deletion> {
        let deletion = self.terminate_uncached(id).await;
        if matches!(deletion, Ok(Deletion::Gone)) {
            // upstream `Delete` asks past the cache, and drops an instance EC2 no longer has.
            crate::view::lock(&self.known_instances).found(id, false);
        }
        deletion
    }

    async fn terminate_uncached(&self, id: &str) -> anyhow::Result<Deletion> {
        let Some(instance) = self.instance(id).await? else { return Ok(Deletion::Gone) };
        match instance.state().and_then(|s| s.name()) {
            Some(ec2::InstanceStateName::Terminated) => return Ok(Deletion::Gone),
            Some(ec2::InstanceStateName::ShuttingDown) => return Ok(Deletion::Terminating),
            _ => {}
        }
        match self.ec2.terminate_instances().instance_ids(id).send().await {
            Ok(_) => {
                info!(instance = %id, "aws: terminating the instance");
                Ok(Deletion::Terminating)
            }
            Err(e) if e.code() == Some("InvalidInstanceID.NotFound") => Ok(Deletion::Gone),
            Err(e) => Err(sdk_error("ec2:TerminateInstances", e)),
        }
    }
}

/// An SDK error as an error naming the IAM action and EC2's code and message.
/// An SDK `InstanceTypeInfo` as core reads it (field for field; the rules are core's).
fn described(t: &ec2::InstanceTypeInfo) -> DescribedInstanceType {
    use carpentry_core::catalogue::described::*;
    let strings = |v: Vec<&str>| v.into_iter().map(str::to_string).collect::<Vec<_>>();
    let processor = t.processor_info();
    let network = t.network_info();
    let device = |name: Option<&str>, manufacturer: Option<&str>, count: Option<i32>| DescribedDevice {
        name: name.map(str::to_string),
        manufacturer: manufacturer.map(str::to_string),
        count: count.map(i64::from),
        ..Default::default()
    };
    DescribedInstanceType {
        instance_type: t.instance_type().map(|i| i.as_str().to_string()).unwrap_or_default(),
        virtualization_types: strings(t.supported_virtualization_types().iter().map(|v| v.as_str()).collect()),
        processor: DescribedProcessor {
            architectures: strings(
                processor.map(|p| p.supported_architectures().iter().map(|a| a.as_str()).collect()).unwrap_or_default(),
            ),
            manufacturer: processor.and_then(|p| p.manufacturer()).map(str::to_string),
            sustained_clock_ghz: processor.and_then(|p| p.sustained_clock_speed_in_ghz()),
            features: strings(
                processor.map(|p| p.supported_features().iter().map(|f| f.as_str()).collect()).unwrap_or_default(),
            ),
        },
        vcpu: DescribedVCpu { default_vcpus: t.v_cpu_info().and_then(|v| v.default_v_cpus()).map(i64::from) },
        memory: DescribedMemory { size_mib: t.memory_info().and_then(|m| m.size_in_mib()) },
        hypervisor: t.hypervisor().map(|h| h.as_str().to_string()),
        bare_metal: t.bare_metal(),
        usage_classes: strings(t.supported_usage_classes().iter().map(|u| u.as_str()).collect()),
        network: DescribedNetwork {
            default_card: network.and_then(|n| n.default_network_card_index()).map(i64::from),
            cards: network
                .map(|n| {
                    n.network_cards()
                        .iter()
                        .map(|c| DescribedNetworkCard {
                            index: c.network_card_index().map(i64::from),
                            max_interfaces: c.maximum_network_interfaces().map(i64::from),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            ipv4_per_interface: network.and_then(|n| n.ipv4_addresses_per_interface()).map(i64::from),
            ena_support: network.and_then(|n| n.ena_support()).map(|e| e.as_str().to_string()),
            efa: network
                .and_then(|n| n.efa_info())
                .map(|e| DescribedEfa { max_interfaces: e.maximum_efa_interfaces().map(i64::from) }),
            encryption_in_transit: network.and_then(|n| n.encryption_in_transit_supported()),
        },
        gpu: t.gpu_info().map(|g| DescribedGpuInfo {
            gpus: g
                .gpus()
                .iter()
                .map(|d| DescribedDevice {
                    memory: DescribedMemory { size_mib: d.memory_info().and_then(|m| m.size_in_mib()).map(i64::from) },
                    ..device(d.name(), d.manufacturer(), d.count())
                })
                .collect(),
        }),
        inference_accelerators: t.inference_accelerator_info().map(|a| DescribedAcceleratorInfo {
            accelerators: a.accelerators().iter().map(|d| device(d.name(), d.manufacturer(), d.count())).collect(),
        }),
        neuron: t.neuron_info().map(|n| DescribedNeuronInfo {
            devices: n
                .neuron_devices()
                .iter()
                .map(|d| DescribedDevice {
                    cores: DescribedCoreInfo { count: d.core_info().and_then(|c| c.count()).map(i64::from) },
                    ..device(d.name(), None, d.count())
                })
                .collect(),
        }),
        instance_storage: t.instance_storage_info().map(|s| DescribedInstanceStorage {
            total_gb: s.total_size_in_gb(),
            nvme_support: s.nvme_support().map(|n| n.as_str().to_string()),
        }),
        ebs: DescribedEbs {
            optimized_support: t.ebs_info().and_then(|e| e.ebs_optimized_support()).map(|e| e.as_str().to_string()),
            optimized: DescribedEbsOptimized {
                max_bandwidth_mbps: t
                    .ebs_info()
                    .and_then(|e| e.ebs_optimized_info())
                    .and_then(|o| o.maximum_bandwidth_in_mbps())
                    .map(i64::from),
            },
        },
        nitro_enclaves_support: t.nitro_enclaves_support().map(|n| n.as_str().to_string()),
    }
}

fn sdk_error<E>(action: &str, e: aws_sdk_ec2::error::SdkError<E>) -> anyhow::Error
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let code = e.code().unwrap_or("no error code").to_string();
    let message = e.message().unwrap_or_default().to_string();
    anyhow::Error::new(e).context(format!("{action} failed ({code}: {message})"))
}

impl CloudProvider for Aws {
    fn name(&self) -> &'static str {
        "aws"
    }

    async fn create(
        &self,
        nodeclaim: &NodeClaim,
        class: &EC2NodeClass,
        instance_types: &[InstanceType],
    ) -> Result<Instance, CreateError> {
        if !providers::nodeclass::is_ready(class) {
            let why = class
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                .and_then(|c| c.message.clone())
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "its status is not resolved yet".into());
            return Err(CreateError::NodeClassNotReady { nodeclass: class.name().to_string(), why });
        }
        let cluster = self.cluster_bootstrap().await;
        let now = crate::clock::now_seconds();
        let request = {
            let unavailable = self
                .unavailable
                .lock()
                .map_err(|_| CreateError::cloud("the unavailable-offerings cache is poisoned"))?;
            let ctx = providers::LaunchContext { cluster: &cluster, class };
            providers::fleet_request(nodeclaim, instance_types, ctx, |t, z, c| unavailable.is_unavailable(t, z, c, now))
                .map_err(|e| match e {
                    FleetError::NoLaunch(no) => CreateError::NoLaunch(no),
                    FleetError::UserData { nodeclass, source } => CreateError::UserData { nodeclass, source },
                })?
        };
        for lt in &request.launch_templates {
            self.ensure_template(&lt.template).await.map_err(CreateError::Cloud)?;
        }
        let configs: Vec<ec2::FleetLaunchTemplateConfigRequest> = request
            .launch_templates
            .iter()
            .map(|lt| {
                let overrides = lt
                    .overrides
                    .iter()
                    .map(|o| {
                        ec2::FleetLaunchTemplateOverridesRequest::builder()
                            .instance_type(ec2::InstanceType::from(o.instance_type.as_str()))
                            .subnet_id(&o.subnet_id)
                            .availability_zone(&o.zone)
                            .image_id(&o.image_id)
                            .priority(o.priority)
                            .build()
                    })
                    .collect();
                ec2::FleetLaunchTemplateConfigRequest::builder()
                    .launch_template_specification(
                        ec2::FleetLaunchTemplateSpecificationRequest::builder()
                            .launch_template_name(&lt.template.name)
                            .version("$Latest")
                            .build(),
                    )
                    .set_overrides(Some(overrides))
                    .build()
            })
            .collect();
        let spot = request.capacity_type == "spot";
        let mut fleet = self
            .ec2
            .create_fleet()
            .r#type(ec2::FleetType::Instant)
            .target_capacity_specification(
                ec2::TargetCapacitySpecificationRequest::builder()
                    .total_target_capacity(1)
                    .default_target_capacity_type(ec2::DefaultTargetCapacityType::from(request.capacity_type.as_str()))
                    .build(),
            )
            .set_launch_template_configs(Some(configs))
            .tag_specifications(tag_spec(ec2::ResourceType::Instance, &request.tags))
            .tag_specifications(tag_spec(ec2::ResourceType::Volume, &request.tags))
            .tag_specifications(tag_spec(ec2::ResourceType::Fleet, &request.tags))
            .set_context(request.context.clone());
        fleet = if spot {
            fleet.spot_options(
                ec2::SpotOptionsRequest::builder()
                    .allocation_strategy(ec2::SpotAllocationStrategy::from(request.allocation_strategy.as_str()))
                    .build(),
            )
        } else {
            fleet.on_demand_options(
                ec2::OnDemandOptionsRequest::builder()
                    .allocation_strategy(ec2::FleetOnDemandAllocationStrategy::from(
                        request.allocation_strategy.as_str(),
                    ))
                    .build(),
            )
        };
        let answer = match fleet.send().await {
            Ok(a) => a,
            Err(e) => {
                let code = e.code().unwrap_or_default().to_string();
                if providers::fleet::is_launch_template_not_found(&code) {
                    // Deleted behind our back: found or made again on the next try.
                    if let Ok(mut t) = self.templates.lock() {
                        t.clear();
                    }
                }
                let Some(message) = e.message().map(str::to_string) else {
                    return Err(CreateError::Cloud(sdk_error("ec2:CreateFleet", e)));
                };
                return Err(providers::fleet_call_failure(&code, &message).into());
            }
        };
        let errors: Vec<providers::FleetErrorEntry> = answer
            .errors()
            .iter()
            .map(|error| {
                let o = error.launch_template_and_overrides().and_then(|l| l.overrides());
                providers::FleetErrorEntry {
                    code: error.error_code().unwrap_or_default().to_string(),
                    message: error.error_message().unwrap_or_default().to_string(),
                    instance_type: o.and_then(|o| o.instance_type()).map(|t| t.as_str().to_string()),
                    zone: o.and_then(|o| o.availability_zone()).map(str::to_string),
                }
            })
            .collect();
        let marks = providers::unavailable_marks(&errors, &request.capacity_type);
        if !marks.is_empty() {
            if let Ok(mut unavailable) = self.unavailable.lock() {
                for mark in &marks {
                    mark.apply(&mut unavailable, now);
                }
            }
            warn!(nodeclaim = %nodeclaim.name(), unavailable = ?marks,
                "aws: CreateFleet reported insufficient capacity; unavailable for 3 minutes");
        }
        let launched = answer.instances().iter().find_map(|i| {
            let id = i.instance_ids().first()?;
            let o = i.launch_template_and_overrides()?.overrides()?;
            Some((
                id.clone(),
                i.instance_type()?.as_str().to_string(),
                o.availability_zone()?.to_string(),
                o.image_id().map(str::to_string),
            ))
        });
        let Some((id, instance_type, zone, image)) = launched else {
            return Err(providers::fleet_failure(&errors).into());
        };
        let launch = request.launched(&instance_type, &zone).ok_or_else(|| {
            CreateError::cloud(format!("EC2 launched {instance_type} in {zone}, which the request did not offer"))
        })?;
        let it = instance_types.iter().find(|it| it.name == instance_type);
        let mut instance = Instance::of_launch(&launch, it, providers::provider_id(&zone, &id));
        instance.image_id = image.unwrap_or_default();
        instance.annotations = providers::instance::launched_annotations(class);
        if let Some(zone_id) = class.status.as_ref().and_then(|s| s.subnets.iter().find(|s| s.zone == zone)) {
            instance.labels.insert(labels::aws::TOPOLOGY_ZONE_ID.into(), zone_id.zone_id.clone());
        }
        let priced_by = it
            .and_then(|it| {
                it.offerings.iter().find(|o| o.zone == zone && o.capacity_type.as_str() == launch.capacity_type)
            })
            .map_or_else(|| "an offering the request did not list".to_string(), |o| o.price_source.describe());
        info!(nodeclaim = %nodeclaim.name(), instance = %id, %instance_type, %zone, capacity_type = %launch.capacity_type,
            price = launch.price, %priced_by, "aws: launched");
        Ok(instance)
    }

    async fn refresh_catalogue(&self, base: &Catalogue) -> Option<anyhow::Result<Catalogue>> {
        Some(self.live_catalogue(base).await)
    }

    /// Upstream's EC2 timings are the simulation's defaults.
    fn timings(&self) -> TimingOverrides {
        TimingOverrides::default()
    }

    async fn nodeclass_status(&self, class: &EC2NodeClass, now: &str) -> ResolvedStatus {
        let resolved = providers::Resolved {
            subnets: self.subnets(class).await,
            security_groups: self.security_groups(class).await,
            images: self.images(class).await,
            instance_profile: self.instance_profile(class).await,
        };
        let status = providers::nodeclass_status(class, &resolved, now);
        ResolvedStatus { status, lookup_failed: resolved.has_transient_failure() }
    }

    async fn delete(&self, nodeclaim: &NodeClaim) -> anyhow::Result<Deletion> {
        let provider_id = nodeclaim.status.as_ref().map(|s| s.provider_id.as_str()).unwrap_or_default();
        match providers::parse_provider_id(provider_id) {
            Some((_, id)) => self.terminate(id).await,
            None => Ok(Deletion::Gone),
        }
    }

    /// upstream `List`: the cluster's instances that are not terminated.
    async fn list(&self, _view: &Manifests) -> anyhow::Result<Vec<CloudInstance>> {
        let query = [
            Filter::new("tag-key", &[labels::NODEPOOL]),
            Filter::new("tag-key", &[labels::aws::EC2_NODE_CLASS]),
            Filter::new(&format!("tag:{}", providers::instance::EKS_CLUSTER_NAME_TAG), &[&self.cluster]),
            Filter::new("instance-state-name", &["pending", "running", "stopping", "stopped", "shutting-down"]),
        ];
        let mut out = Vec::new();
        let began = Instant::now();
        let mut pages =
            self.ec2.describe_instances().set_filters(Some(filters(&query))).max_results(1000).into_paginator().send();
        let mut seen = HashSet::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| sdk_error("ec2:DescribeInstances", e))?;
            for i in page.reservations().iter().flat_map(|r| r.instances()) {
                let (Some(id), Some(zone)) = (i.instance_id(), i.placement().and_then(|p| p.availability_zone()))
                else {
                    continue;
                };
                seen.insert(id.to_string());
                out.push(CloudInstance {
                    provider_id: providers::provider_id(zone, id),
                    created: i.launch_time().map_or(0, |t| t.secs()),
                    terminating: i.state().and_then(|s| s.name()) == Some(&ec2::InstanceStateName::ShuttingDown),
                });
            }
        }
        // upstream `List` refreshes the cache and evicts what EC2 no longer returns.
        crate::view::lock(&self.known_instances).listed(seen, began);
        Ok(out)
    }

    /// upstream `Get`: an instance EC2 does not know or that is terminated is gone (its
    /// `instance-state-name` filter leaves out only `terminated`). As upstream's, it answers from
    /// the instance cache where it can: an instance seen since the last `list` is taken to
    /// exist without a call. A providerID that is not an EC2 one names nothing this provider can
    /// answer for: it is taken to exist, so that the node is drained rather than let go.
    async fn exists(&self, provider_id: &str) -> anyhow::Result<bool> {
        let Some((_, id)) = providers::parse_provider_id(provider_id) else { return Ok(true) };
        if crate::view::lock(&self.known_instances).ids.contains(id) {
            return Ok(true);
        }
        let exists = self
            .instance(id)
            .await?
            .is_some_and(|i| i.state().and_then(|s| s.name()) != Some(&ec2::InstanceStateName::Terminated));
        crate::view::lock(&self.known_instances).found(id, exists);
        Ok(exists)
    }

    async fn delete_instance(&self, provider_id: &str) -> anyhow::Result<Deletion> {
        match providers::parse_provider_id(provider_id) {
            Some((_, id)) => self.terminate(id).await,
            None => Ok(Deletion::Gone),
        }
    }

    async fn interruption_messages(&self) -> anyhow::Result<Vec<QueuedMessage>> {
        let Some(interruption) = &self.interruption else { return Ok(Vec::new()) };
        let mut poll = interruption.poll.lock().await;
        if poll.as_ref().is_some_and(|p| !p.is_finished()) {
            return Ok(Vec::new());
        }
        let received = match poll.take() {
            Some(done) => done.await.map_err(|e| anyhow::anyhow!("the interruption queue's poll stopped: {e}"))?,
            None => Ok(Vec::new()),
        };
        let url = {
            let mut url = interruption.url.lock().await;
            match url.as_ref() {
                Some(u) => u.clone(),
                None => {
                    let answer = self
                        .sqs
                        .get_queue_url()
                        .queue_name(&interruption.queue)
                        .send()
                        .await
                        .map_err(|e| sdk_error("sqs:GetQueueUrl", e))
                        .with_context(|| format!("the interruption queue {}", interruption.queue))?;
                    let found = answer.queue_url().unwrap_or_default().to_string();
                    info!(queue = %interruption.queue, url = %found, "aws: watching the interruption queue");
                    *url = Some(found.clone());
                    found
                }
            }
        };
        *poll = Some(tokio::spawn(receive(self.sqs.clone(), url)));
        received
    }

    async fn delete_message(&self, receipt: &str) -> anyhow::Result<()> {
        let Some(interruption) = &self.interruption else { return Ok(()) };
        let Some(url) = interruption.url.lock().await.clone() else { return Ok(()) };
        self.sqs
            .delete_message()
            .queue_url(url)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(|e| sdk_error("sqs:DeleteMessage", e))?;
        Ok(())
    }

    fn mark_unavailable(&self, instance_type: &str, zone: &str, capacity_type: &str) {
        if let Ok(mut unavailable) = self.unavailable.lock() {
            unavailable.mark(instance_type, zone, capacity_type, crate::clock::now_seconds());
        }
    }

    fn unavailable_offerings(&self, catalogue: &Catalogue, region: &str) -> Vec<UnavailableOffering> {
        let now = crate::clock::now_seconds();
        crate::view::lock(&self.unavailable).listed(now, catalogue, region)
    }

    const TAGS_INSTANCES: bool = true;

    async fn tag_instance(&self, nodeclaim: &NodeClaim) -> anyhow::Result<Tagged> {
        let provider_id = nodeclaim.status.as_ref().map(|s| s.provider_id.as_str()).unwrap_or_default();
        let Some((_, id)) = providers::parse_provider_id(provider_id) else { return Ok(Tagged::Gone) };
        let Some(instance) = self.instance(id).await? else { return Ok(Tagged::Gone) };
        let has = |key: &str| instance.tags().iter().any(|t| t.key() == Some(key));
        let tags = providers::tagging::registration_tags(nodeclaim, &self.cluster, has);
        if tags.is_empty() {
            return Ok(Tagged::Already);
        }
        match self.ec2.create_tags().resources(id).set_tags(Some(tags_of(&tags))).send().await {
            Ok(_) => {
                info!(nodeclaim = %nodeclaim.name(), instance = %id, tags = ?tags, "aws: tagged the registered instance");
                Ok(Tagged::Added)
            }
            Err(e) if e.code() == Some("InvalidInstanceID.NotFound") => Ok(Tagged::Gone),
            Err(e) => Err(sdk_error("ec2:CreateTags", e)),
        }
    }

    const FINALIZES_NODECLASSES: bool = true;

    async fn finalize_nodeclass(&self, class: &EC2NodeClass) -> anyhow::Result<()> {
        let uid = class.metadata.uid.as_deref().unwrap_or_default();
        let listed = self.list_profiles(&instanceprofile::nodeclass_path(&self.region, &self.cluster, uid)).await?;
        for name in instanceprofile::nodeclass_profiles(&listed, &self.cluster, &self.region, class) {
            self.delete_profile(&name).await?;
        }
        self.delete_templates(class).await?;
        Ok(())
    }

    async fn collect_nodeclass_garbage(&self, view: &Manifests, dry_run: bool) -> anyhow::Result<Vec<String>> {
        let listed = self.list_profiles(&instanceprofile::cluster_path(&self.region, &self.cluster)).await?;
        let protected: HashMap<String, Instant> = self.protected.lock().map(|p| p.clone()).unwrap_or_default();
        let ttl = Duration::from_secs(instanceprofile::PROTECTED_SECONDS);
        let orphans = instanceprofile::orphaned_profiles(
            &listed,
            &self.cluster,
            &self.region,
            &view.nodeclasses,
            &view.nodeclaims,
            |name| protected.get(name).is_some_and(|at| at.elapsed() < ttl),
        );
        let mut deleted = Vec::new();
        for name in orphans {
            if !dry_run {
                self.delete_profile(name).await?;
            }
            deleted.push(name.to_string());
        }
        if let Ok(mut p) = self.protected.lock() {
            p.retain(|_, at| at.elapsed() < ttl);
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::IAM_ACTIONS;

    /// The committed policy allows what the provider needs, and nothing more.
    #[test]
    fn the_iam_policy_allows_exactly_the_providers_actions() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/iam/controller-policy.json");
        let policy: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut allowed = BTreeSet::new();
        for statement in policy["Statement"].as_array().unwrap() {
            assert_eq!(statement["Effect"], "Allow", "{statement}");
            match &statement["Action"] {
                serde_json::Value::String(a) => {
                    allowed.insert(a.clone());
                }
                serde_json::Value::Array(list) => allowed.extend(list.iter().map(|a| a.as_str().unwrap().to_string())),
                other => panic!("Action {other}"),
            }
        }
        let needed: BTreeSet<String> = IAM_ACTIONS.iter().map(|a| a.to_string()).collect();
        assert_eq!(allowed, needed);
        // Destructive actions only on what carries the cluster's tag.
        for statement in policy["Statement"].as_array().unwrap() {
            let text = statement["Action"].to_string();
            if text.contains("TerminateInstances") {
                let condition = statement["Condition"].to_string();
                assert!(condition.contains("aws:ResourceTag/kubernetes.io/cluster/${CLUSTER_NAME}"), "{statement}");
            }
        }
    }

    /// A test-owned EC2 endpoint on a local port (real: the SDK's client stack, its query
    /// protocol and XML parsing; injected: the server). Each DescribeInstances is answered with
    /// the running instances it asks for (all of them when it names none), and counted.
    struct FakeEc2 {
        url: String,
        running: std::sync::Arc<std::sync::Mutex<Vec<&'static str>>>,
        calls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    impl FakeEc2 {
        async fn start(running: Vec<&'static str>) -> FakeEc2 {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let fake = FakeEc2 { url, running: Default::default(), calls: Default::default() };
            *fake.running.lock().unwrap() = running;
            let (running, calls) = (fake.running.clone(), fake.calls.clone());
            tokio::spawn(async move {
                while let Ok((mut socket, _)) = listener.accept().await {
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 4096];
                    // The headers, then as much body as they announce.
                    let body = loop {
                        let n = socket.read(&mut buffer).await.unwrap_or(0);
                        if n == 0 {
                            break None;
                        }
                        request.extend_from_slice(&buffer[..n]);
                        let text = String::from_utf8_lossy(&request).to_string();
                        let Some(end) = text.find("\r\n\r\n") else { continue };
                        let length = text[..end]
                            .lines()
                            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_string))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break Some(text[end + 4..].to_string());
                        }
                    };
                    let Some(body) = body else { continue };
                    assert!(body.contains("Action=DescribeInstances"), "{body}");
                    calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let asked: Vec<&str> = body
                        .split('&')
                        .filter_map(|pair| pair.split_once('='))
                        .filter(|(k, _)| k.starts_with("InstanceId."))
                        .map(|(_, v)| v)
                        .collect();
                    let items: String = running
                        .lock()
                        .unwrap()
                        .iter()
                        .filter(|id| asked.is_empty() || asked.contains(id))
                        .map(|id| {
                            format!(
                                "<item><instanceId>{id}</instanceId><instanceState><code>16</code><name>running</name>\
                                 </instanceState><placement><availabilityZone>us-west-2a</availabilityZone></placement></item>"
                            )
                        })
                        .collect();
                    let reservations = if items.is_empty() {
                        String::new()
                    } else {
                        format!("<item><instancesSet>{items}</instancesSet></item>")
                    };
                    let xml = format!(
                        "<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r</requestId>\
                         <reservationSet>{reservations}</reservationSet></DescribeInstancesResponse>"
                    );
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{xml}",
                        xml.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                }
            });
            fake
        }

        fn calls(&self) -> usize {
            self.calls.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    /// A list that began before an instance was found gone does not bring it back; one that
    /// began after does, and forgets the mark.
    #[test]
    fn a_list_does_not_bring_back_an_instance_found_gone_while_it_paged() {
        let mut known = super::KnownInstances::default();
        let began = std::time::Instant::now();
        known.found("i-1", false);
        known.listed(["i-1".to_string(), "i-2".to_string()].into(), began);
        assert!(!known.ids.contains("i-1") && known.ids.contains("i-2"));
        std::thread::sleep(std::time::Duration::from_millis(2));
        known.listed(["i-1".to_string()].into(), std::time::Instant::now());
        assert!(known.ids.contains("i-1") && known.gone.is_empty());
    }

    /// upstream's instance cache: an instance seen is taken to exist without another call until
    /// the next list leaves it out; an instance EC2 does not have is asked about each time (it
    /// is not remembered as gone); a providerID that is not EC2's is never asked about.
    #[tokio::test]
    async fn exists_asks_ec2_once_per_instance_until_a_list_leaves_it_out() {
        use super::super::CloudProvider;
        let ec2 = FakeEc2::start(vec!["i-1"]).await;
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .http_client(super::https_client())
            .timeout_config(super::timeouts())
            .region(aws_config::Region::new("us-west-2"))
            .endpoint_url(&ec2.url)
            .credentials_provider(aws_sdk_ec2::config::Credentials::new("test", "test", None, None, "test"))
            .load()
            .await;
        let kube = crate::testing::FakeApi::default().client();
        let aws = super::Aws::with_config(&config, kube, "us-west-2", "test".into(), None, Default::default());

        assert!(aws.exists("aws:///us-west-2a/i-1").await.unwrap());
        assert!(aws.exists("aws:///us-west-2a/i-1").await.unwrap());
        assert_eq!(ec2.calls(), 1, "a known instance is not asked about again");
        assert!(!aws.exists("aws:///us-west-2a/i-2").await.unwrap());
        assert!(!aws.exists("aws:///us-west-2a/i-2").await.unwrap());
        assert_eq!(ec2.calls(), 3, "an instance EC2 does not have is asked about each time");
        assert!(aws.exists("kwok://node-1").await.unwrap());
        assert_eq!(ec2.calls(), 3, "a providerID that is not EC2's is not asked about");

        // Terminated behind the controller's back: the cache still says it exists until a list.
        ec2.running.lock().unwrap().clear();
        assert!(aws.exists("aws:///us-west-2a/i-1").await.unwrap());
        assert_eq!(ec2.calls(), 3);
        assert!(aws.list(&Default::default()).await.unwrap().is_empty());
        assert!(!aws.exists("aws:///us-west-2a/i-1").await.unwrap());
        assert_eq!(ec2.calls(), 5, "the list, then the question it left open");

        // A list fills the cache with what it saw.
        ec2.running.lock().unwrap().push("i-3");
        assert_eq!(aws.list(&Default::default()).await.unwrap().len(), 1);
        assert!(aws.exists("aws:///us-west-2a/i-3").await.unwrap());
        assert_eq!(ec2.calls(), 6);
    }
}
