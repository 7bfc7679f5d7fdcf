package main

import (
	"context"
	"errors"
	"sync"

	"github.com/awslabs/operatorpkg/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
)

// ec2NodeClassGVK is the node class the AWS provider supports. Core decides whether a NodePool or
// NodeClaim belongs to the running provider by comparing its nodeClassRef group/kind with the GVK
// of the objects GetSupportedNodeClasses returns (pkg/utils/nodepool.IsManaged,
// pkg/utils/nodeclaim.IsManaged); that GVK is looked up in client-go's scheme
// (operatorpkg object.GVK), so the type has to be registered there under the AWS group.
var ec2NodeClassGVK = schema.GroupVersionKind{Group: awsGroup, Version: "v1", Kind: "EC2NodeClass"}

// nodeClass stands in for the AWS EC2NodeClass. Provisioning never reads a node class (AMIs,
// subnets and the like only matter at launch), it only needs something whose GVK says
// "EC2NodeClass", so the type carries metadata and conditions and nothing else.
type nodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            nodeClassStatus `json:"status,omitempty"`
}

type nodeClassStatus struct {
	Conditions []status.Condition `json:"conditions,omitempty"`
}

func (in *nodeClass) DeepCopyObject() runtime.Object {
	out := &nodeClass{TypeMeta: in.TypeMeta}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = append([]status.Condition(nil), in.Status.Conditions...)
	return out
}

func (in *nodeClass) GetConditions() []status.Condition  { return in.Status.Conditions }
func (in *nodeClass) SetConditions(c []status.Condition) { in.Status.Conditions = c }
func (in *nodeClass) StatusConditions(opts ...status.ForOption) status.ConditionSet {
	return status.NewReadyConditions().For(in, opts...)
}

var registerNodeClassOnce sync.Once

func registerNodeClass() {
	registerNodeClassOnce.Do(func() {
		scheme.Scheme.AddKnownTypeWithName(ec2NodeClassGVK, &nodeClass{})
	})
}

// oracleCloudProvider is the smallest cloudprovider.CloudProvider that provisioning can run
// against: it answers GetInstanceTypes from the scenario and claims EC2NodeClass NodePools.
// Everything that launches, lists or deletes instances is outside a scheduling round and fails
// loudly if something calls it.
type oracleCloudProvider struct {
	// instanceTypes is keyed by NodePool name. NodePools that share an instance-type set share
	// the same *InstanceType values, as NodePools sharing an EC2NodeClass do in the AWS provider.
	instanceTypes map[string][]*cloudprovider.InstanceType
}

var errNotModelled = errors.New("not modelled by the oracle: only scheduling is run")

func (c *oracleCloudProvider) Create(context.Context, *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return nil, errNotModelled
}
func (c *oracleCloudProvider) Delete(context.Context, *karpv1.NodeClaim) error { return errNotModelled }
func (c *oracleCloudProvider) Get(context.Context, string) (*karpv1.NodeClaim, error) {
	return nil, errNotModelled
}
func (c *oracleCloudProvider) List(context.Context) ([]*karpv1.NodeClaim, error) {
	return nil, errNotModelled
}

// GetInstanceTypes returns the NodePool's set; a NodePool with no set gets none, which the
// provisioner logs and skips ("skipping, no resolved instance types found").
func (c *oracleCloudProvider) GetInstanceTypes(_ context.Context, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return c.instanceTypes[np.Name], nil
}

func (c *oracleCloudProvider) IsDrifted(context.Context, *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", nil
}
func (c *oracleCloudProvider) RepairPolicies() []cloudprovider.RepairPolicy { return nil }
func (c *oracleCloudProvider) Name() string                                 { return "oracle" }
func (c *oracleCloudProvider) GetSupportedNodeClasses() []status.Object {
	nc := &nodeClass{}
	nc.SetGroupVersionKind(ec2NodeClassGVK)
	return []status.Object{nc}
}
