//! Cloud providers: where a NodeClaim's instance comes from (upstream `cloudprovider.CloudProvider`).
//! Which instance to launch is core's decision ([`carpentry_core::scheduling::launch_for`]); a
//! provider carries it out and reports what runs. `kwok` makes KWOK Node objects; `aws` launches
//! EC2 instances.

pub mod aws;
pub mod kwok;

use std::future::Future;

use carpentry_core::api::ec2nodeclass::EC2NodeClassStatus;
use carpentry_core::api::{EC2NodeClass, NodeClaim};
use carpentry_core::catalogue::{InstanceType, UnavailableOffering};
use carpentry_core::manifest::scenario::TimingOverrides;
use carpentry_core::manifest::Manifests;
use carpentry_core::nodeclaim::garbagecollection::CloudInstance;
use carpentry_core::nodeclaim::lifecycle::Instance;
use carpentry_core::scheduling::NoLaunch;
use carpentry_core::Catalogue;

/// Why `create` launched nothing.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// Core found no offering to launch (upstream `InsufficientCapacityError`): the NodeClaim is
    /// deleted and its pods are provisioned again.
    #[error(transparent)]
    NoLaunch(#[from] NoLaunch),
    /// The cloud launched nothing, for the reason core read from its answer
    /// ([`carpentry_core::providers::fleet_failure`]): insufficient capacity deletes the NodeClaim
    /// (its offerings are now unavailable and its pods are provisioned again); any other error
    /// leaves `Launched` Unknown with upstream's reason and is tried again after a backoff.
    #[error(transparent)]
    Launch(#[from] carpentry_core::providers::LaunchFailure),
    /// The NodeClaim's EC2NodeClass is not Ready: nothing is launched until it is.
    #[error("EC2NodeClass {nodeclass} is not ready: {why}")]
    NodeClassNotReady { nodeclass: String, why: String },
    /// The launch templates' user data cannot be written (the cluster's endpoint or service CIDR
    /// not known yet, a `spec.userData` that does not merge): tried again later.
    #[error("EC2NodeClass {nodeclass}: its nodes' user data cannot be written")]
    UserData {
        nodeclass: String,
        #[source]
        source: carpentry_core::providers::BootstrapError,
    },
    /// A cloud call failed; the launch is tried again later.
    #[error(transparent)]
    Cloud(anyhow::Error),
}

impl CreateError {
    pub fn cloud(message: impl Into<String>) -> CreateError {
        CreateError::Cloud(anyhow::anyhow!(message.into()))
    }

    /// upstream `launch.go`: insufficient capacity deletes the NodeClaim (a new round provisions
    /// its pods); every other failure keeps it.
    pub fn deletes_nodeclaim(&self) -> bool {
        match self {
            CreateError::NoLaunch(_) => true,
            CreateError::Launch(failure) => failure.deletes_nodeclaim(),
            CreateError::NodeClassNotReady { .. } | CreateError::UserData { .. } | CreateError::Cloud(_) => false,
        }
    }

    /// upstream's error type, as its cloud-provider metrics label a failed `Create`.
    pub fn upstream_type(&self) -> &'static str {
        match self {
            _ if self.deletes_nodeclaim() => "InsufficientCapacityError",
            CreateError::NodeClassNotReady { .. } => "NodeClassNotReadyError",
            _ => "",
        }
    }

    /// The `Launched` condition's reason and message for a failure that keeps the NodeClaim:
    /// upstream's `CreateError` reason where core read one, else `LaunchFailed` with the error
    /// (`why`, as rendered for the log).
    pub fn launched_condition(&self, why: &str) -> (&'static str, String) {
        match self {
            CreateError::Launch(carpentry_core::providers::LaunchFailure::Create { reason, message, .. }) => {
                (reason, message.clone())
            }
            _ => ("LaunchFailed", why.to_string()),
        }
    }
}

/// A message of the interruption queue: its receipt handle (to delete it) and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedMessage {
    pub receipt: String,
    pub body: String,
}

/// Where an instance is after `delete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// No instance is left (upstream `NodeClaimNotFoundError`).
    Gone,
    /// Terminating; ask again.
    Terminating,
}

/// An EC2NodeClass's status as the provider resolved it.
#[derive(Debug, Clone)]
pub struct ResolvedStatus {
    pub status: EC2NodeClassStatus,
    /// A lookup had no answer (throttled, a 5xx, a timeout): what it would have changed is left
    /// as it was, and the reconcile fails, to be tried again after the controller's backoff.
    pub lookup_failed: bool,
}

/// What tagging an instance took ([`CloudProvider::tag_instance`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tagged {
    /// The tags were added (a CreateTags call).
    Added,
    /// The instance had them already: no call made.
    Already,
    /// The instance is gone.
    Gone,
}

pub trait CloudProvider: Send + Sync + 'static {
    /// `kwok` or `aws`.
    fn name(&self) -> &'static str;

    /// Launches the instance for `nodeclaim` among `instance_types` (its NodePool's), with its
    /// EC2NodeClass `class`.
    fn create(
        &self,
        nodeclaim: &NodeClaim,
        class: &EC2NodeClass,
        instance_types: &[InstanceType],
    ) -> impl Future<Output = Result<Instance, CreateError>> + Send;

    /// The status an EC2NodeClass should have now (its resolved subnets, conditions), with `now`
    /// (RFC 3339) as the time of a condition that changes. Asked on each of the EC2NodeClass's
    /// reconciles: when it changes, and at core's cadence.
    fn nodeclass_status(&self, class: &EC2NodeClass, now: &str) -> impl Future<Output = ResolvedStatus> + Send;

    /// How long launch, registration, initialization and instance termination take with this
    /// provider, written into `/snapshot`'s Scenario so that `simulate --until` on it predicts this
    /// controller rather than EC2.
    fn timings(&self) -> TimingOverrides;

    /// Terminates the NodeClaim's instance (idempotent).
    fn delete(&self, nodeclaim: &NodeClaim) -> impl Future<Output = anyhow::Result<Deletion>> + Send;

    /// The instances this provider runs for the cluster (upstream `List`); `view` is the cluster
    /// view, for a provider whose instances are API objects.
    fn list(&self, view: &Manifests) -> impl Future<Output = anyhow::Result<Vec<CloudInstance>>> + Send;

    /// Whether the instance of `provider_id` still exists (upstream `Get`, whose
    /// `NodeClaimNotFoundError` is `false` here): asked by node termination for a Node that is not
    /// Ready, whose finalizer comes off without a drain once its instance is gone.
    fn exists(&self, provider_id: &str) -> impl Future<Output = anyhow::Result<bool>> + Send;

    /// Terminates an instance no NodeClaim has (garbage collection), by providerID.
    fn delete_instance(&self, provider_id: &str) -> impl Future<Output = anyhow::Result<Deletion>> + Send;

    /// The region's catalogue as the cloud describes it now, over `base` (upstream AWS
    /// `providers.instancetype` and `providers.pricing`); `None` when the provider has nothing to
    /// ask (kwok: the embedded catalogue is its cloud).
    fn refresh_catalogue(&self, base: &Catalogue) -> impl Future<Output = Option<anyhow::Result<Catalogue>>> + Send;

    /// Whether the provider tags an instance once its Node registered (upstream AWS
    /// `nodeclaim.tagging`).
    const TAGS_INSTANCES: bool;

    /// Adds the registration tags [`carpentry_core::providers::tagging`] names to the instance of
    /// `nodeclaim`, and says what that took.
    fn tag_instance(&self, nodeclaim: &NodeClaim) -> impl Future<Output = anyhow::Result<Tagged>> + Send;

    /// The interruption messages received since the last call, without waiting (upstream AWS
    /// `interruption`: an SQS long poll is kept in flight while the leader asks).
    fn interruption_messages(&self) -> impl Future<Output = anyhow::Result<Vec<QueuedMessage>>> + Send;

    /// Deletes a handled interruption message from its queue.
    fn delete_message(&self, receipt: &str) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Marks an offering unavailable (a spot interruption's), as an insufficient-capacity answer does.
    fn mark_unavailable(&self, instance_type: &str, zone: &str, capacity_type: &str);

    /// The offerings the provider knows it cannot launch now (upstream AWS's unavailable-offerings
    /// cache, which its instance type provider applies to the offerings provisioning and
    /// disruption plan with), listed over `catalogue`'s offerings in `region`. A provider that
    /// never runs out of capacity has none.
    fn unavailable_offerings(&self, _catalogue: &Catalogue, _region: &str) -> Vec<UnavailableOffering> {
        Vec::new()
    }

    /// Whether the provider makes cloud resources for an EC2NodeClass (instance profiles, launch
    /// templates), so that each carries the `karpenter.k8s.aws/termination` finalizer and a deleted
    /// one waits for its NodeClaims and [`finalize_nodeclass`](Self::finalize_nodeclass).
    const FINALIZES_NODECLASSES: bool;

    /// Deletes what the provider made for `class`, deleted and used by no NodeClaim (upstream
    /// `nodeclass` `finalize`: its instance profiles, its launch templates).
    fn finalize_nodeclass(&self, class: &EC2NodeClass) -> impl Future<Output = anyhow::Result<()>> + Send;

    /// Machines launched before this process started whose boot the provider itself simulates
    /// (kwok: this process makes a launched NodeClaim's Node after the registration delay, so a
    /// restart in between would lose a machine that on a real cloud outlives the controller);
    /// called on the lifecycle's first reconcile, with the view's NodeClaims and Nodes (nothing
    /// else of it). A real cloud boots its instances itself.
    fn resume(&self, _view: &Manifests) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }

    /// Deletes (or with `dry_run` only names) the per-NodeClass resources that nothing in `view`
    /// uses any more (upstream `instanceprofile.garbagecollection`); what it deleted.
    fn collect_nodeclass_garbage(
        &self,
        view: &Manifests,
        dry_run: bool,
    ) -> impl Future<Output = anyhow::Result<Vec<String>>> + Send;
}
