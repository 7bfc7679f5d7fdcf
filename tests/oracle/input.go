package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	kjson "sigs.k8s.io/json"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// rawInput is the top level of one scenario. Objects stay raw here so that each one is decoded
// on its own and a decoding problem can name the list and index it came from.
type rawInput struct {
	Name                  string                       `json:"name"`
	Now                   string                       `json:"now"`
	NodePools             []json.RawMessage            `json:"nodePools"`
	InstanceTypeSets      map[string][]json.RawMessage `json:"instanceTypeSets"`
	NodePoolInstanceTypes map[string]string            `json:"nodePoolInstanceTypes"`
	Pods                  []json.RawMessage            `json:"pods"`
	Nodes                 []json.RawMessage            `json:"nodes"`
	NodeClaims            []json.RawMessage            `json:"nodeClaims"`
	DaemonSets            []json.RawMessage            `json:"daemonSets"`
	PDBs                  []json.RawMessage            `json:"pdbs"`
	PVCs                  []json.RawMessage            `json:"pvcs"`
	PVs                   []json.RawMessage            `json:"pvs"`
	StorageClasses        []json.RawMessage            `json:"storageClasses"`
	CSINodes              []json.RawMessage            `json:"csiNodes"`
	ReservationIDLabel    string                       `json:"reservationIdLabel"`
	MinValuesPolicy       string                       `json:"minValuesPolicy"`
	MaxInstanceTypes      *int                         `json:"maxInstanceTypes"`
}

type instanceTypeJSON struct {
	Name         string                                        `json:"name"`
	Requirements []karpv1.NodeSelectorRequirementWithMinValues `json:"requirements"`
	Capacity     corev1.ResourceList                           `json:"capacity"`
	Overhead     *overheadJSON                                 `json:"overhead"`
	Offerings    []offeringJSON                                `json:"offerings"`
}

type overheadJSON struct {
	KubeReserved      corev1.ResourceList `json:"kubeReserved"`
	SystemReserved    corev1.ResourceList `json:"systemReserved"`
	EvictionThreshold corev1.ResourceList `json:"evictionThreshold"`
}

type offeringJSON struct {
	Requirements        []karpv1.NodeSelectorRequirementWithMinValues `json:"requirements"`
	Price               float64                                       `json:"price"`
	Available           bool                                          `json:"available"`
	ReservationCapacity int                                           `json:"reservationCapacity"`
}

// Scenario is a decoded input. Instance types are kept as decoded JSON and turned into
// cloudprovider.InstanceType values per run (see buildInstanceTypes), because core caches
// allocatable values inside each InstanceType and a run must not see another run's caches.
type Scenario struct {
	Name                  string
	Now                   time.Time
	NowDefaulted          bool
	NodePools             []*karpv1.NodePool
	InstanceTypeSets      InstanceTypeSets
	NodePoolInstanceTypes map[string]string
	// DefinedSets are the ids this input itself defines (batch mode remembers them).
	DefinedSets        []string
	Pods               []*corev1.Pod
	Nodes              []*corev1.Node
	NodeClaims         []*karpv1.NodeClaim
	DaemonSets         []*appsv1.DaemonSet
	PDBs               []*policyv1.PodDisruptionBudget
	PVCs               []*corev1.PersistentVolumeClaim
	PVs                []*corev1.PersistentVolume
	StorageClasses     []*storagev1.StorageClass
	CSINodes           []*storagev1.CSINode
	ReservationIDLabel string
	MinValuesPolicy    options.MinValuesPolicy
	MaxInstanceTypes   int
}

// InputError is a malformed input; the CLI exits with status 2 for it.
type InputError struct{ msg string }

func (e *InputError) Error() string { return e.msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{msg: fmt.Sprintf(format, args...)}
}

// strictDecode decodes with the API server's JSON rules (case-sensitive field names) and rejects
// unknown and duplicate fields, naming the field path.
func strictDecode(data []byte, v any, where string) error {
	strictErrs, err := kjson.UnmarshalStrict(data, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return inputErrorf("%s: %v", where, err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, 0, len(strictErrs))
		for _, e := range strictErrs {
			msgs = append(msgs, e.Error())
		}
		return inputErrorf("%s: %s", where, strings.Join(msgs, "; "))
	}
	return nil
}

// describe names an object for error messages: its index, and its name when it has one.
func describe(list string, i int, raw json.RawMessage) string {
	var meta struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &meta)
	switch {
	case meta.Metadata.Namespace != "" && meta.Metadata.Name != "":
		return fmt.Sprintf("%s[%d] (%s/%s)", list, i, meta.Metadata.Namespace, meta.Metadata.Name)
	case meta.Metadata.Name != "":
		return fmt.Sprintf("%s[%d] (%s)", list, i, meta.Metadata.Name)
	default:
		return fmt.Sprintf("%s[%d]", list, i)
	}
}

type kubeObject interface {
	GetName() string
	GetNamespace() string
	SetNamespace(string)
}

// decodeList decodes every element of a list of Kubernetes objects of one kind.
func decodeList[T any, PT interface {
	*T
	kubeObject
}](list string, raws []json.RawMessage, apiVersion, kind string, namespaced bool) ([]*T, error) {
	out := make([]*T, 0, len(raws))
	for i, raw := range raws {
		where := describe(list, i, raw)
		var typeMeta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		_ = json.Unmarshal(raw, &typeMeta)
		if typeMeta.Kind != "" && typeMeta.Kind != kind {
			return nil, inputErrorf("%s: kind is %q, expected %q", where, typeMeta.Kind, kind)
		}
		if typeMeta.APIVersion != "" && typeMeta.APIVersion != apiVersion {
			return nil, inputErrorf("%s: apiVersion is %q, expected %q", where, typeMeta.APIVersion, apiVersion)
		}
		obj := PT(new(T))
		if err := strictDecode(raw, obj, where); err != nil {
			return nil, err
		}
		if obj.GetName() == "" {
			return nil, inputErrorf("%s: metadata.name is empty", where)
		}
		if namespaced && obj.GetNamespace() == "" {
			// The API server fills the namespace from the request; objects in a scenario are
			// treated as created in "default", as kubectl would without -n.
			obj.SetNamespace(corev1.NamespaceDefault)
		}
		if !namespaced && obj.GetNamespace() != "" {
			return nil, inputErrorf("%s: %s is cluster-scoped but has metadata.namespace %q", where, kind, obj.GetNamespace())
		}
		out = append(out, (*T)(obj))
	}
	return out, nil
}

// InstanceTypeSets are decoded instance-type sets by id. `oracle batch` keeps the sets of every
// line it has read, so a later line may name a set in nodePoolInstanceTypes without sending it
// again (a catalogue of ~1,400 types is most of a scenario's bytes). The decoded sets are plain
// data: every run builds its own cloudprovider.InstanceType values from them.
type InstanceTypeSets map[string][]instanceTypeJSON

// ParseScenario decodes and checks one input object. known holds sets from earlier batch lines
// (nil outside batch mode); a set the input defines itself takes precedence.
func ParseScenario(data []byte, known InstanceTypeSets) (*Scenario, error) {
	var raw rawInput
	if err := strictDecode(data, &raw, "input"); err != nil {
		return nil, err
	}
	s := &Scenario{
		Name:                  raw.Name,
		NodePoolInstanceTypes: raw.NodePoolInstanceTypes,
		InstanceTypeSets:      InstanceTypeSets{},
		ReservationIDLabel:    raw.ReservationIDLabel,
		MaxInstanceTypes:      600,
	}
	if raw.Now == "" {
		s.Now = time.Now().UTC()
		s.NowDefaulted = true
	} else {
		t, err := time.Parse(time.RFC3339Nano, raw.Now)
		if err != nil {
			return nil, inputErrorf("now: %v", err)
		}
		s.Now = t
	}
	switch raw.MinValuesPolicy {
	case "", string(options.MinValuesPolicyStrict):
		s.MinValuesPolicy = options.MinValuesPolicyStrict
	case string(options.MinValuesPolicyBestEffort):
		s.MinValuesPolicy = options.MinValuesPolicyBestEffort
	default:
		return nil, inputErrorf("minValuesPolicy: %q is neither Strict nor BestEffort", raw.MinValuesPolicy)
	}
	if raw.MaxInstanceTypes != nil {
		if *raw.MaxInstanceTypes <= 0 {
			return nil, inputErrorf("maxInstanceTypes: must be positive, got %d", *raw.MaxInstanceTypes)
		}
		s.MaxInstanceTypes = *raw.MaxInstanceTypes
	}

	var err error
	if s.NodePools, err = decodeList[karpv1.NodePool]("nodePools", raw.NodePools, "karpenter.sh/v1", "NodePool", false); err != nil {
		return nil, err
	}
	if s.Pods, err = decodeList[corev1.Pod]("pods", raw.Pods, "v1", "Pod", true); err != nil {
		return nil, err
	}
	if s.Nodes, err = decodeList[corev1.Node]("nodes", raw.Nodes, "v1", "Node", false); err != nil {
		return nil, err
	}
	if s.NodeClaims, err = decodeList[karpv1.NodeClaim]("nodeClaims", raw.NodeClaims, "karpenter.sh/v1", "NodeClaim", false); err != nil {
		return nil, err
	}
	if s.DaemonSets, err = decodeList[appsv1.DaemonSet]("daemonSets", raw.DaemonSets, "apps/v1", "DaemonSet", true); err != nil {
		return nil, err
	}
	if s.PDBs, err = decodeList[policyv1.PodDisruptionBudget]("pdbs", raw.PDBs, "policy/v1", "PodDisruptionBudget", true); err != nil {
		return nil, err
	}
	if s.PVCs, err = decodeList[corev1.PersistentVolumeClaim]("pvcs", raw.PVCs, "v1", "PersistentVolumeClaim", true); err != nil {
		return nil, err
	}
	if s.PVs, err = decodeList[corev1.PersistentVolume]("pvs", raw.PVs, "v1", "PersistentVolume", false); err != nil {
		return nil, err
	}
	if s.StorageClasses, err = decodeList[storagev1.StorageClass]("storageClasses", raw.StorageClasses, "storage.k8s.io/v1", "StorageClass", false); err != nil {
		return nil, err
	}
	if s.CSINodes, err = decodeList[storagev1.CSINode]("csiNodes", raw.CSINodes, "storage.k8s.io/v1", "CSINode", false); err != nil {
		return nil, err
	}

	if err := checkUnique(s); err != nil {
		return nil, err
	}

	setIDs := make([]string, 0, len(raw.InstanceTypeSets))
	for id := range raw.InstanceTypeSets {
		setIDs = append(setIDs, id)
	}
	sort.Strings(setIDs)
	for _, id := range setIDs {
		its := make([]instanceTypeJSON, 0, len(raw.InstanceTypeSets[id]))
		names := map[string]bool{}
		for i, rawIT := range raw.InstanceTypeSets[id] {
			where := fmt.Sprintf("instanceTypeSets[%q][%d]", id, i)
			var it instanceTypeJSON
			if err := strictDecode(rawIT, &it, where); err != nil {
				return nil, err
			}
			if it.Name == "" {
				return nil, inputErrorf("%s: name is empty", where)
			}
			where = fmt.Sprintf("instanceTypeSets[%q][%d] (%s)", id, i, it.Name)
			if names[it.Name] {
				return nil, inputErrorf("%s: duplicate instance type name in the set", where)
			}
			names[it.Name] = true
			if err := checkRequirements(it.Requirements, where+".requirements"); err != nil {
				return nil, err
			}
			for j, o := range it.Offerings {
				if err := checkRequirements(o.Requirements, fmt.Sprintf("%s.offerings[%d].requirements", where, j)); err != nil {
					return nil, err
				}
				// Upstream's Offering contract (pkg/cloudprovider/types.go): "Requirements are
				// required to contain the keys v1.CapacityTypeLabelKey and corev1.LabelTopologyZone".
				for _, key := range []string{karpv1.CapacityTypeLabelKey, corev1.LabelTopologyZone} {
					if !hasKey(o.Requirements, key) {
						return nil, inputErrorf("%s.offerings[%d].requirements: no requirement on %s (every offering needs one)", where, j, key)
					}
				}
				if o.ReservationCapacity < 0 {
					return nil, inputErrorf("%s.offerings[%d].reservationCapacity: negative", where, j)
				}
			}
			its = append(its, it)
		}
		s.InstanceTypeSets[id] = its
		s.DefinedSets = append(s.DefinedSets, id)
	}
	npNames := map[string]bool{}
	for _, np := range s.NodePools {
		npNames[np.Name] = true
	}
	for np, id := range s.NodePoolInstanceTypes {
		if _, ok := s.InstanceTypeSets[id]; !ok {
			its, ok := known[id]
			if !ok {
				return nil, inputErrorf("nodePoolInstanceTypes[%q]: instance-type set %q is not in instanceTypeSets (nor sent on an earlier batch line)", np, id)
			}
			s.InstanceTypeSets[id] = its
		}
		if !npNames[np] {
			return nil, inputErrorf("nodePoolInstanceTypes[%q]: no NodePool of that name in nodePools", np)
		}
	}
	return s, nil
}

// checkUnique rejects duplicate objects (the fake API server would refuse them) and pods without
// a unique UID (the scheduler keys its per-pod data by UID).
func checkUnique(s *Scenario) error {
	seen := map[string]bool{}
	check := func(kind, ns, name string) error {
		key := kind + "/" + ns + "/" + name
		if seen[key] {
			if ns != "" {
				return inputErrorf("%s %s/%s appears twice", kind, ns, name)
			}
			return inputErrorf("%s %s appears twice", kind, name)
		}
		seen[key] = true
		return nil
	}
	uids := map[string]string{}
	for i, p := range s.Pods {
		if err := check("Pod", p.Namespace, p.Name); err != nil {
			return err
		}
		if p.UID == "" {
			return inputErrorf("pods[%d] (%s/%s): metadata.uid is empty; every pod needs a unique uid", i, p.Namespace, p.Name)
		}
		if other, ok := uids[string(p.UID)]; ok {
			return inputErrorf("pods[%d] (%s/%s): metadata.uid %q is also the uid of %s", i, p.Namespace, p.Name, p.UID, other)
		}
		uids[string(p.UID)] = p.Namespace + "/" + p.Name
	}
	for _, o := range s.NodePools {
		if err := check("NodePool", "", o.Name); err != nil {
			return err
		}
	}
	for _, o := range s.Nodes {
		if err := check("Node", "", o.Name); err != nil {
			return err
		}
	}
	for _, o := range s.NodeClaims {
		if err := check("NodeClaim", "", o.Name); err != nil {
			return err
		}
	}
	for _, o := range s.DaemonSets {
		if err := check("DaemonSet", o.Namespace, o.Name); err != nil {
			return err
		}
	}
	for _, o := range s.PDBs {
		if err := check("PodDisruptionBudget", o.Namespace, o.Name); err != nil {
			return err
		}
	}
	for _, o := range s.PVCs {
		if err := check("PersistentVolumeClaim", o.Namespace, o.Name); err != nil {
			return err
		}
	}
	for _, o := range s.PVs {
		if err := check("PersistentVolume", "", o.Name); err != nil {
			return err
		}
	}
	for _, o := range s.StorageClasses {
		if err := check("StorageClass", "", o.Name); err != nil {
			return err
		}
	}
	for _, o := range s.CSINodes {
		if err := check("CSINode", "", o.Name); err != nil {
			return err
		}
	}
	return nil
}

// checkRequirements rejects what core would silently misread: core parses the single value of
// Gt/Lt/Gte/Lte with strconv.Atoi and ignores the error (pkg/scheduling/requirement.go, "prevalidated"),
// so a bad value would become 0 instead of failing.
func checkRequirements(reqs []karpv1.NodeSelectorRequirementWithMinValues, where string) error {
	for i, r := range reqs {
		w := fmt.Sprintf("%s[%d] (%s)", where, i, r.Key)
		if r.Key == "" {
			return inputErrorf("%s: key is empty", w)
		}
		switch r.Operator {
		case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
			if len(r.Values) != 0 {
				return inputErrorf("%s: operator %s takes no values", w, r.Operator)
			}
		case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
			if len(r.Values) != 1 {
				return inputErrorf("%s: operator %s takes exactly one value", w, r.Operator)
			}
			if _, err := strconv.Atoi(r.Values[0]); err != nil {
				return inputErrorf("%s: operator %s needs an integer value, got %q", w, r.Operator, r.Values[0])
			}
		default:
			return inputErrorf("%s: unknown operator %q", w, r.Operator)
		}
		if r.MinValues != nil && *r.MinValues < 1 {
			return inputErrorf("%s: minValues must be at least 1", w)
		}
	}
	return nil
}

// buildInstanceTypes turns the scenario's sets into fresh cloudprovider.InstanceType values, one
// slice per NodePool. NodePools naming the same set share the values, as NodePools sharing an
// EC2NodeClass share the provider's cached instance types.
func buildInstanceTypes(s *Scenario) map[string][]*cloudprovider.InstanceType {
	bySet := map[string][]*cloudprovider.InstanceType{}
	out := map[string][]*cloudprovider.InstanceType{}
	for np, id := range s.NodePoolInstanceTypes {
		its, ok := bySet[id]
		if !ok {
			for _, it := range s.InstanceTypeSets[id] {
				its = append(its, toInstanceType(it))
			}
			bySet[id] = its
		}
		out[np] = its
	}
	return out
}

func toInstanceType(in instanceTypeJSON) *cloudprovider.InstanceType {
	overhead := &cloudprovider.InstanceTypeOverhead{
		KubeReserved:      corev1.ResourceList{},
		SystemReserved:    corev1.ResourceList{},
		EvictionThreshold: corev1.ResourceList{},
	}
	if in.Overhead != nil {
		overhead.KubeReserved = nonNil(in.Overhead.KubeReserved)
		overhead.SystemReserved = nonNil(in.Overhead.SystemReserved)
		overhead.EvictionThreshold = nonNil(in.Overhead.EvictionThreshold)
	}
	offerings := make(cloudprovider.Offerings, 0, len(in.Offerings))
	for _, o := range in.Offerings {
		offerings = append(offerings, &cloudprovider.Offering{
			Requirements:        scheduling.NewNodeSelectorRequirementsWithMinValues(copyRequirements(o.Requirements)...),
			Price:               o.Price,
			Available:           o.Available,
			ReservationCapacity: o.ReservationCapacity,
		})
	}
	return &cloudprovider.InstanceType{
		Name:         in.Name,
		Requirements: scheduling.NewNodeSelectorRequirementsWithMinValues(copyRequirements(in.Requirements)...),
		Offerings:    offerings,
		Capacity:     nonNil(in.Capacity).DeepCopy(),
		Overhead:     overhead,
	}
}

// copyRequirements copies the value slices: core normalises values in place when a key has value
// aliases (karpv1.NormalizedLabelValues), and the decoded scenario is reused across bench rounds.
func copyRequirements(in []karpv1.NodeSelectorRequirementWithMinValues) []karpv1.NodeSelectorRequirementWithMinValues {
	out := make([]karpv1.NodeSelectorRequirementWithMinValues, len(in))
	for i, r := range in {
		out[i] = *r.DeepCopy()
	}
	return out
}

func nonNil(l corev1.ResourceList) corev1.ResourceList {
	if l == nil {
		return corev1.ResourceList{}
	}
	return l.DeepCopy()
}

// applyPodDefaults applies the parts of the API server's Pod defaulting that change what the
// scheduler sees, so that a scenario written as manifests (as users write them) and one exported
// from a live cluster (already defaulted) give the same answer; on an already-defaulted pod it
// changes nothing. Mirrors k8s.io/kubernetes pkg/apis/core/v1/defaults.go SetDefaults_Pod (v1.36):
//   - container and init-container requests default to limits for resources with a limit only;
//   - pod-level requests (PodLevelResources, on by default since 1.34) default, when pod-level
//     limits are set, to the aggregated container requests for cpu/memory if any container asks
//     for that resource, else to the pod-level limit (hugepage limit defaulting is not mirrored);
//   - with hostNetwork, a container port without hostPort gets hostPort = containerPort, which
//     is what makes host-network pods conflict on ports.
//
// DaemonSet pod templates are deliberately left alone: the API server only defaults Pods, and
// upstream builds a DaemonSet's pod from its template when no live pod of it exists.
func applyPodDefaults(p *corev1.Pod) {
	requestsFromLimits := func(cs []corev1.Container) {
		for i := range cs {
			r := &cs[i].Resources
			if r.Limits == nil {
				continue
			}
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			for k, v := range r.Limits {
				if _, ok := r.Requests[k]; !ok {
					r.Requests[k] = v.DeepCopy()
				}
			}
		}
	}
	requestsFromLimits(p.Spec.Containers)
	requestsFromLimits(p.Spec.InitContainers)

	if pr := p.Spec.Resources; pr != nil && len(pr.Limits) > 0 {
		reqs := pr.Requests
		if reqs == nil {
			reqs = corev1.ResourceList{}
		}
		aggregated := resourcehelper.AggregateContainerRequests(p, resourcehelper.PodResourcesOptions{})
		for _, k := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := reqs[k]; ok {
				continue
			}
			if v, ok := aggregated[k]; ok {
				reqs[k] = v.DeepCopy()
			}
		}
		for k, v := range pr.Limits {
			if _, ok := reqs[k]; !ok && resourcehelper.IsSupportedPodLevelResource(k) {
				reqs[k] = v.DeepCopy()
			}
		}
		if len(reqs) > 0 {
			pr.Requests = reqs
		}
	}

	if p.Spec.HostNetwork {
		hostPorts := func(cs []corev1.Container) {
			for i := range cs {
				for j := range cs[i].Ports {
					if cs[i].Ports[j].HostPort == 0 {
						cs[i].Ports[j].HostPort = cs[i].Ports[j].ContainerPort
					}
				}
			}
		}
		hostPorts(p.Spec.Containers)
		hostPorts(p.Spec.InitContainers)
	}
}

// applyStorageClassDefaults applies the API server's StorageClass defaulting
// (k8s.io/kubernetes pkg/apis/storage/v1/defaults.go): no volumeBindingMode means Immediate and no
// reclaimPolicy means Delete. Upstream compares volumeBindingMode with Immediate to ignore pods
// whose unbound claim binds immediately, so a class written without the field must read as one.
func applyStorageClassDefaults(c *storagev1.StorageClass) {
	if c.VolumeBindingMode == nil {
		mode := storagev1.VolumeBindingImmediate
		c.VolumeBindingMode = &mode
	}
	if c.ReclaimPolicy == nil {
		policy := corev1.PersistentVolumeReclaimDelete
		c.ReclaimPolicy = &policy
	}
}

// applyClaimDefaults is the DefaultStorageClass admission plugin (and the PV controller's
// retroactive assignment): a claim with no storageClassName (nil, not "") gets the default
// StorageClass, the newest one marked default (GA or beta annotation), ties by name. An empty
// string opts out and is kept. carpentry resolves the same class when it reads the claim
// (core/src/scheduling/volumes.rs).
func applyClaimDefaults(pvc *corev1.PersistentVolumeClaim, classes []*storagev1.StorageClass) {
	if pvc.Spec.StorageClassName != nil {
		return
	}
	var chosen *storagev1.StorageClass
	for _, c := range classes {
		if c.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" &&
			c.Annotations["storageclass.beta.kubernetes.io/is-default-class"] != "true" {
			continue
		}
		if chosen == nil || c.CreationTimestamp.After(chosen.CreationTimestamp.Time) ||
			(c.CreationTimestamp.Equal(&chosen.CreationTimestamp) && c.Name < chosen.Name) {
			chosen = c
		}
	}
	if chosen != nil {
		name := chosen.Name
		pvc.Spec.StorageClassName = &name
	}
}

// assumeRejectedByKubeScheduler gives a pending pod with no PodScheduled condition the condition
// kube-scheduler writes when it cannot place a pod (False/Unschedulable). Upstream provisions only
// pods carrying it (pkg/utils/pod.FailedToSchedule); a scenario describes the pods Karpenter is
// asked about, which in a cluster are exactly those kube-scheduler rejected. carpentry makes the
// same assumption for offline input (core/src/scheduling/pod.rs, docs/divergences.md). A pod that
// has a PodScheduled condition keeps it, so "not rejected" can still be expressed.
func assumeRejectedByKubeScheduler(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return false
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type:   corev1.PodScheduled,
		Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable,
	})
	return true
}

func hasKey(reqs []karpv1.NodeSelectorRequirementWithMinValues, key string) bool {
	for _, r := range reqs {
		if r.Key == key {
			return true
		}
	}
	return false
}
