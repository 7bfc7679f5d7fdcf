package main

// What the AWS provider changes in core's package-level state before anything schedules.
//
// Karpenter core keeps its label semantics in globals (sigs.k8s.io/karpenter pkg/apis/v1/labels.go:
// WellKnownLabels, RestrictedLabelDomains, WellKnownValuesForRequirements, NormalizedLabels,
// WellKnownResources; pkg/cloudprovider/types.go: ReservationIDLabel, ReservedCapacityLabels) and
// every provider extends them from package init(). Those sets decide, among other things, whether a
// pod may require a label that a NodePool does not define (well-known keys may stay undefined on a
// new NodeClaim) and how instance types are compared with requirements. The oracle must therefore
// see the same globals as the AWS controller, without importing the AWS module (which would pull
// the AWS SDK into this module) and without importing core's fake provider (whose init() adds
// test-only labels such as "size" and "special").
//
// The values below are written out from the AWS provider at the release matching core v1.14.1:
// github.com/aws/karpenter-provider-aws@v1.14.1
//   - pkg/apis/v1/labels.go   init(): well-known labels, restricted domain, tenancy values, resources
//   - pkg/apis/v1/doc.go      init(): ReservationIDLabel, ReservedCapacityLabels
//   - pkg/operator/operator.go init(): NormalizedLabels for the EBS CSI zone key
// If the provider is upgraded, re-read those three files.

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
)

const (
	awsGroup = "karpenter.k8s.aws"

	// AWSReservationIDLabel is LabelCapacityReservationID in the AWS provider; it is also the
	// default for the input's reservationIdLabel.
	AWSReservationIDLabel   = awsGroup + "/capacity-reservation-id"
	awsReservationTypeLabel = awsGroup + "/capacity-reservation-type"
	awsTenancyLabel         = awsGroup + "/instance-tenancy"
)

// awsWellKnownLabels is the list the AWS provider inserts into karpv1.WellKnownLabels, in the
// provider's order. node.kubernetes.io/windows-build is already well known in core; the provider
// inserts it again, which is harmless for a set.
var awsWellKnownLabels = []string{
	AWSReservationIDLabel,
	awsReservationTypeLabel,
	awsGroup + "/capacity-reservation-interruptible",
	awsGroup + "/instance-hypervisor",
	awsGroup + "/instance-encryption-in-transit-supported",
	awsGroup + "/instance-category",
	awsGroup + "/instance-capability-flex",
	awsGroup + "/instance-family",
	awsGroup + "/instance-generation",
	awsGroup + "/instance-size",
	awsGroup + "/instance-local-nvme",
	awsGroup + "/instance-cpu",
	awsGroup + "/instance-cpu-manufacturer",
	awsGroup + "/instance-cpu-sustained-clock-speed-mhz",
	awsGroup + "/instance-memory",
	awsGroup + "/instance-ebs-bandwidth",
	awsGroup + "/instance-network-bandwidth",
	awsGroup + "/instance-gpu-name",
	awsGroup + "/instance-gpu-manufacturer",
	awsGroup + "/instance-gpu-count",
	awsGroup + "/instance-gpu-memory",
	awsGroup + "/instance-accelerator-name",
	awsGroup + "/instance-accelerator-manufacturer",
	awsGroup + "/instance-accelerator-count",
	"topology.k8s.aws/zone-id",
	awsTenancyLabel,
	corev1.LabelWindowsBuild,
	awsGroup + "/placement-group-id",
	awsGroup + "/placement-group-partition",
}

// awsWellKnownResources is what the provider inserts into karpv1.WellKnownResources (pod ENI,
// Neuron, Neuron cores, Habana Gaudi, EFA). Core only reads this set when validating NodeOverlays,
// which the oracle does not model; it is set anyway so the globals match the controller's.
var awsWellKnownResources = []corev1.ResourceName{
	"vpc.amazonaws.com/pod-eni",
	"aws.amazon.com/neuron",
	"aws.amazon.com/neuroncore",
	"habana.ai/gaudi",
	"vpc.amazonaws.com/efa",
}

var (
	providerGlobalsOnce sync.Once
	// Snapshots taken right after the AWS additions, so that a scenario that names another
	// reservation-ID label can extend them without leaking into the next scenario.
	baseWellKnownLabels        sets.Set[string]
	baseReservedCapacityLabels sets.Set[string]
)

// installProviderGlobals applies the AWS provider's init-time changes once per process.
func installProviderGlobals() {
	providerGlobalsOnce.Do(func() {
		karpv1.RestrictedLabelDomains = karpv1.RestrictedLabelDomains.Insert(awsGroup)
		karpv1.WellKnownLabels = karpv1.WellKnownLabels.Insert(awsWellKnownLabels...)
		karpv1.WellKnownValuesForRequirements[awsTenancyLabel] = sets.New("dedicated", "default")
		karpv1.WellKnownResources.Insert(awsWellKnownResources...)
		// The EBS CSI driver writes its zone under its own key in PV node affinity; the AWS operator
		// maps it to the standard zone key so volume topology constrains the NodeClaim's zone.
		karpv1.NormalizedLabels["topology.ebs.csi.aws.com/zone"] = corev1.LabelTopologyZone
		cloudprovider.ReservedCapacityLabels.Insert(AWSReservationIDLabel, awsReservationTypeLabel)

		baseWellKnownLabels = karpv1.WellKnownLabels.Clone()
		baseReservedCapacityLabels = cloudprovider.ReservedCapacityLabels.Clone()
	})
}

// setReservationIDLabel points core at the scenario's reservation-ID label. The AWS provider sets
// cloudprovider.ReservationIDLabel and also makes that label well known and a reserved-capacity
// label; a scenario naming a different label gets the same treatment for that label, and the sets
// are rebuilt from the snapshots every time so nothing carries over between scenarios.
func setReservationIDLabel(label string) {
	installProviderGlobals()
	if label == "" {
		label = AWSReservationIDLabel
	}
	cloudprovider.ReservationIDLabel = label
	karpv1.WellKnownLabels = baseWellKnownLabels.Clone().Insert(label)
	cloudprovider.ReservedCapacityLabels = baseReservedCapacityLabels.Clone().Insert(label)
}
