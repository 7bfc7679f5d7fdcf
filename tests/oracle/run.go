package main

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/awslabs/operatorpkg/status"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning"
	scheduler "sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	"sigs.k8s.io/karpenter/pkg/scheduling"
	nodeclaimutils "sigs.k8s.io/karpenter/pkg/utils/nodeclaim"
	nodepoolutils "sigs.k8s.io/karpenter/pkg/utils/nodepool"
	podutils "sigs.k8s.io/karpenter/pkg/utils/pod"
)

// Output is upstream's decision for one scenario.
type Output struct {
	Name          string         `json:"name"`
	NodeClaims    []OutNodeClaim `json:"nodeClaims"`
	ExistingNodes []OutExisting  `json:"existingNodes"`
	Unschedulable []OutPodReason `json:"unschedulable"`
	Deferred      []OutPodReason `json:"deferred"`
	Ignored       []OutPodReason `json:"ignored"`
	Notes         []string       `json:"notes"`
	SolveSeconds  float64        `json:"solveSeconds"`
}

// ErrorOutput is printed instead of Output when a scenario cannot be run at all.
type ErrorOutput struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

type OutNodeClaim struct {
	NodePool             string           `json:"nodePool"`
	Pods                 []string         `json:"pods"`
	InstanceTypeOptions  []string         `json:"instanceTypeOptions"`
	CheapestInstanceType *string          `json:"cheapestInstanceType"`
	CheapestPrice        *float64         `json:"cheapestPrice"`
	Requirements         []OutRequirement `json:"requirements"`
}

type OutRequirement struct {
	Key       string   `json:"key"`
	Operator  string   `json:"operator"`
	Values    []string `json:"values"`
	MinValues *int     `json:"minValues,omitempty"`
}

type OutExisting struct {
	Name string   `json:"name"`
	Pods []string `json:"pods"`
}

type OutPodReason struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// productionOptions are the controller's defaults as options.AddFlags sets them with no flags and
// no environment (sigs.k8s.io/karpenter pkg/operator/options/options.go), except MinValuesPolicy,
// which comes from the scenario. They are written out rather than parsed so that the environment
// of the process running the oracle cannot change them. Of note for scheduling:
//   - CPURequests 1000 → Schedule runs the scheduler with ceil(1000/1000) = 1 worker. (The test
//     defaults in pkg/test use 5000; the worker count does not change decisions, only speed.)
//   - PreferencePolicy Respect, IgnoreDRARequests true (no DRA allocator),
//   - feature gates: ReservedCapacity on; NodeOverlay, StaticCapacity, CapacityBuffer,
//     NodeRepair and SpotToSpotConsolidation off.
func productionOptions(minValues options.MinValuesPolicy) *options.Options {
	return &options.Options{
		MetricsPort:             8080,
		HealthProbePort:         8081,
		KubeClientQPS:           200,
		KubeClientBurst:         300,
		DisableControllerWarmup: true,
		LeaderElectionName:      "karpenter-leader-election",
		MemoryLimit:             -1,
		CPURequests:             1000,
		LogLevel:                "info",
		LogOutputPaths:          "stdout",
		LogErrorOutputPaths:     "stderr",
		BatchMaxDuration:        10 * time.Second,
		BatchIdleDuration:       time.Second,
		PreferencePolicy:        options.PreferencePolicyRespect,
		MinValuesPolicy:         minValues,
		IgnoreDRARequests:       true,
		FeatureGates:            options.DefaultFeatureGates(),
	}
}

// env is one scenario made ready to schedule: a fake API server holding every object, a synced
// cluster state, and a fresh provisioner. Nothing in it is shared with another env.
type env struct {
	scenario *Scenario
	ctx      context.Context
	client   client.Client
	cp       *oracleCloudProvider
	cluster  *state.Cluster
	prov     *provisioning.Provisioner
	pending  []*corev1.Pod // pods without spec.nodeName, as stored
	notes    []string
}

func (e *env) notef(format string, args ...any) {
	e.notes = append(e.notes, fmt.Sprintf(format, args...))
}

// prepare builds an env. The scenario is not modified: every object handed to upstream is a copy.
func prepare(s *Scenario, logger logr.Logger) (e *env, err error) {
	defer func() {
		// The fake client's builder panics on objects it refuses; report that rather than crash a batch.
		if r := recover(); r != nil {
			e, err = nil, fmt.Errorf("preparing the scenario: %v", r)
		}
	}()
	registerNodeClass()
	setReservationIDLabel(s.ReservationIDLabel)
	// Schedule truncates with this package variable, and NodeClaimTemplate.ToNodeClaim slices with it.
	scheduler.MaxInstanceTypes = s.MaxInstanceTypes
	resetPlaceholderCounter()

	e = &env{scenario: s}
	if s.NowDefaulted {
		e.notef("input has no \"now\": the clock is the wall clock at parse time, %s", s.Now.Format(time.RFC3339))
	}
	clk := clocktesting.NewFakeClock(s.Now)
	ctx := log.IntoContext(context.Background(), logger)
	ctx = options.ToContext(ctx, productionOptions(s.MinValuesPolicy))
	ctx = injection.WithControllerName(ctx, "provisioner")
	e.ctx = ctx

	var objs []client.Object
	add := func(o client.Object) {
		// The fake API server refuses an object being deleted that has no finalizer (a real one
		// would have removed it already). Deleting Nodes and NodeClaims carry karpenter's
		// termination finalizer in a cluster, so give them that.
		if o.GetDeletionTimestamp() != nil && len(o.GetFinalizers()) == 0 {
			o.SetFinalizers([]string{karpv1.TerminationFinalizer})
		}
		objs = append(objs, o)
	}

	for _, np := range s.NodePools {
		np = np.DeepCopy()
		e.setNodePoolStatus(np, clk)
		add(np)
	}
	pods := make([]*corev1.Pod, 0, len(s.Pods))
	for _, p := range s.Pods {
		p = p.DeepCopy()
		applyPodDefaults(p)
		if p.Spec.NodeName == "" {
			assumeRejectedByKubeScheduler(p)
			// The API server creates every pod in phase Pending.
			if p.Status.Phase == "" {
				p.Status.Phase = corev1.PodPending
			}
			e.pending = append(e.pending, p.DeepCopy())
		}
		pods = append(pods, p)
		add(p)
	}
	for _, o := range s.Nodes {
		add(o.DeepCopy())
	}
	for _, o := range s.NodeClaims {
		add(o.DeepCopy())
	}
	for _, o := range s.DaemonSets {
		add(o.DeepCopy())
	}
	for _, o := range s.PDBs {
		add(o.DeepCopy())
	}
	classes := make([]*storagev1.StorageClass, 0, len(s.StorageClasses))
	for _, o := range s.StorageClasses {
		classes = append(classes, o)
	}
	for _, o := range s.PVCs {
		o = o.DeepCopy()
		applyClaimDefaults(o, classes)
		add(o)
	}
	for _, o := range s.PVs {
		add(o.DeepCopy())
	}
	for _, o := range s.StorageClasses {
		o = o.DeepCopy()
		applyStorageClassDefaults(o)
		add(o)
	}
	for _, o := range s.CSINodes {
		add(o.DeepCopy())
	}

	e.client = newFakeClient(objs)
	e.cp = &oracleCloudProvider{instanceTypes: buildInstanceTypes(s)}
	e.cluster = state.NewCluster(clk, e.client, e.cp)

	// Feed cluster state the way its informer controllers do (pkg/controllers/state/informer):
	// managed NodeClaims, then every Node, then every Pod, then DaemonSets. Each gets its own copy,
	// as an informer's Get would return.
	for _, nc := range s.NodeClaims {
		nc = nc.DeepCopy()
		if !nodeclaimutils.IsManaged(nc, e.cp) {
			e.notef("NodeClaim %s is not managed by this provider (nodeClassRef %s), so cluster state ignores it", nc.Name, nc.Spec.NodeClassRef.GroupKind())
			continue
		}
		if nc.Status.ProviderID == "" {
			e.notef("NodeClaim %s has no status.providerID (not launched): upstream's provisioner waits until cluster state is synced, so it would not schedule this round; the oracle schedules anyway, without that NodeClaim", nc.Name)
		}
		e.cluster.UpdateNodeClaim(nc)
	}
	for _, n := range s.Nodes {
		if err := e.cluster.UpdateNode(ctx, n.DeepCopy()); err != nil {
			e.notef("cluster state could not take Node %s: %v", n.Name, err)
		}
	}
	for _, p := range pods {
		if err := e.cluster.UpdatePod(ctx, p.DeepCopy()); err != nil {
			if apierrors.IsNotFound(err) {
				e.notef("Pod %s/%s is bound to %s, which cluster state does not know", p.Namespace, p.Name, p.Spec.NodeName)
				continue
			}
			e.notef("cluster state could not take Pod %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
	for _, ds := range s.DaemonSets {
		if err := e.cluster.UpdateDaemonSet(ctx, ds.DeepCopy()); err != nil {
			e.notef("cluster state could not take DaemonSet %s/%s: %v", ds.Namespace, ds.Name, err)
		}
	}
	if !e.cluster.Synced(ctx) {
		e.notef("cluster state is not synced (a NodeClaim is not launched or an object was refused): upstream's provisioner would not schedule this round")
	}
	e.noteNodePools()

	recorder := events.NewRecorder(&record.FakeRecorder{})
	// The device-allocation controller is only read when DRA requests are not ignored, and the
	// virtual-pod cache only with the CapacityBuffer gate; both are off (productionOptions).
	e.prov = provisioning.NewProvisioner(e.client, recorder, e.cp, e.cluster, clk, nil, nil)
	return e, nil
}

// setNodePoolStatus gives a NodePool the conditions upstream's controllers would: the validation
// controller (pkg/controllers/nodepool/validation) sets ValidationSucceeded from RuntimeValidate,
// and the readiness controller sets NodeClassReady from the EC2NodeClass, which is not modelled:
// it is True unless the input NodePool already carries a NodeClassReady condition. Ready is the
// root condition over those two (pkg/apis/v1/nodepool_status.go); the provisioner skips NodePools
// that are not Ready.
func (e *env) setNodePoolStatus(np *karpv1.NodePool, clk *clocktesting.FakeClock) {
	var nodeClassReady *status.Condition
	for i := range np.Status.Conditions {
		if np.Status.Conditions[i].Type == karpv1.ConditionTypeNodeClassReady {
			c := np.Status.Conditions[i]
			nodeClassReady = &c
		}
	}
	cs := np.StatusConditions(status.WithClock(clk))
	if err := np.RuntimeValidate(e.ctx); err != nil {
		cs.SetFalse(karpv1.ConditionTypeValidationSucceeded, "NodePoolValidationFailed", err.Error())
	} else {
		cs.SetTrue(karpv1.ConditionTypeValidationSucceeded)
	}
	if nodeClassReady != nil {
		cs.Set(*nodeClassReady)
	} else {
		cs.SetTrue(karpv1.ConditionTypeNodeClassReady)
	}
}

// noteNodePools explains, in notes, each NodePool the provisioner will not use; it applies the
// same tests as Provisioner.NewScheduler and reports the reason upstream only logs.
func (e *env) noteNodePools() {
	for _, np := range e.scenario.NodePools {
		stored := &karpv1.NodePool{}
		if err := e.client.Get(e.ctx, client.ObjectKeyFromObject(np), stored); err != nil {
			e.notef("NodePool %s: %v", np.Name, err)
			continue
		}
		switch {
		case !nodepoolutils.IsManaged(stored, e.cp):
			e.notef("NodePool %s is not managed by this provider: its nodeClassRef is %s, not %s", np.Name, stored.Spec.Template.Spec.NodeClassRef.GroupKind(), ec2NodeClassGVK.GroupKind())
		case nodepoolutils.IsStatic(stored):
			e.notef("NodePool %s is static (spec.replicas): dynamic provisioning skips it", np.Name)
		case !stored.StatusConditions().IsTrue(status.ConditionReady):
			msg := ""
			if c := stored.StatusConditions().Get(status.ConditionReady); c != nil {
				msg = c.Message
			}
			e.notef("NodePool %s is not Ready, so the provisioner skips it: %s", np.Name, msg)
		case !stored.DeletionTimestamp.IsZero():
			e.notef("NodePool %s is being deleted, so the provisioner skips it", np.Name)
		case len(e.cp.instanceTypes[np.Name]) == 0:
			e.notef("NodePool %s has no instance types (nodePoolInstanceTypes names no non-empty set), so the provisioner skips it", np.Name)
		}
	}
}

// usableNodePools reports whether Provisioner.NewScheduler would find any NodePool, i.e. whether
// Schedule returns early with ErrNodePoolsNotFound ("no dynamic nodepools found").
func (e *env) usableNodePools() bool {
	nps, err := nodepoolutils.ListManaged(e.ctx, e.client, e.cp)
	if err != nil {
		return true
	}
	for _, np := range nps {
		if !nodepoolutils.IsStatic(np) && np.StatusConditions().IsTrue(status.ConditionReady) && np.DeletionTimestamp.IsZero() {
			return true
		}
	}
	return false
}

// newFakeClient is a controller-runtime fake client over client-go's scheme (where karpenter
// registers its API types) with the field indexes karpenter's operator registers
// (pkg/operator/operator.go setupIndexers): the fake client only answers field selectors that
// have an index, and provisioning lists pending pods with spec.nodeName="".
func newFakeClient(objs []client.Object) client.Client {
	return fake.NewClientBuilder().
		WithObjects(objs...).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Spec.NodeName}
		}).
		WithIndex(&corev1.Node{}, "spec.providerID", func(o client.Object) []string {
			return []string{o.(*corev1.Node).Spec.ProviderID}
		}).
		WithIndex(&storagev1.VolumeAttachment{}, "spec.nodeName", func(o client.Object) []string {
			return []string{o.(*storagev1.VolumeAttachment).Spec.NodeName}
		}).
		WithIndex(&karpv1.NodeClaim{}, "status.providerID", func(o client.Object) []string {
			return []string{o.(*karpv1.NodeClaim).Status.ProviderID}
		}).
		WithIndex(&karpv1.NodeClaim{}, "spec.nodeClassRef.group", func(o client.Object) []string {
			return []string{o.(*karpv1.NodeClaim).Spec.NodeClassRef.Group}
		}).
		WithIndex(&karpv1.NodeClaim{}, "spec.nodeClassRef.kind", func(o client.Object) []string {
			return []string{o.(*karpv1.NodeClaim).Spec.NodeClassRef.Kind}
		}).
		WithIndex(&karpv1.NodeClaim{}, "spec.nodeClassRef.name", func(o client.Object) []string {
			return []string{o.(*karpv1.NodeClaim).Spec.NodeClassRef.Name}
		}).
		WithIndex(&karpv1.NodePool{}, "spec.template.spec.nodeClassRef.group", func(o client.Object) []string {
			return []string{o.(*karpv1.NodePool).Spec.Template.Spec.NodeClassRef.Group}
		}).
		WithIndex(&karpv1.NodePool{}, "spec.template.spec.nodeClassRef.kind", func(o client.Object) []string {
			return []string{o.(*karpv1.NodePool).Spec.Template.Spec.NodeClassRef.Kind}
		}).
		WithIndex(&karpv1.NodePool{}, "spec.template.spec.nodeClassRef.name", func(o client.Object) []string {
			return []string{o.(*karpv1.NodePool).Spec.Template.Spec.NodeClassRef.Name}
		}).
		WithInterceptorFuncs(interceptor.Funcs{Get: getIgnoringNamespaceOfClusterScoped}).
		Build()
}

// clusterScoped lists the cluster-scoped kinds provisioning reads.
var clusterScoped = map[reflect.Type]bool{
	reflect.TypeFor[*corev1.Node]():                true,
	reflect.TypeFor[*corev1.PersistentVolume]():    true,
	reflect.TypeFor[*corev1.Namespace]():           true,
	reflect.TypeFor[*storagev1.StorageClass]():     true,
	reflect.TypeFor[*storagev1.CSINode]():          true,
	reflect.TypeFor[*storagev1.CSIDriver]():        true,
	reflect.TypeFor[*storagev1.VolumeAttachment](): true,
	reflect.TypeFor[*karpv1.NodePool]():            true,
	reflect.TypeFor[*karpv1.NodeClaim]():           true,
	reflect.TypeFor[*nodeClass]():                  true,
}

// getIgnoringNamespaceOfClusterScoped makes the fake client answer a Get of a cluster-scoped kind
// the way the controller's cached client does: it drops the key's namespace for such kinds
// (controller-runtime pkg/cache/internal/cache_reader.go, RESTScopeNameRoot). Upstream relies on
// that: VolumeTopology.getPersistentVolumeRequirements gets the PersistentVolume with the pod's
// namespace. The fake client has no scope information and would answer "not found".
func getIgnoringNamespaceOfClusterScoped(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if clusterScoped[reflect.TypeOf(obj)] {
		key.Namespace = ""
	}
	return c.Get(ctx, key, obj, opts...)
}

// schedule runs upstream's provisioning round: Provisioner.Schedule lists and validates pending
// pods, adds pods of deleting nodes, builds the scheduler (NodePools, instance types, volume
// topology, DaemonSet pods), solves with DisableReservedCapacityFallback, and truncates the
// instance types with scheduling.MaxInstanceTypes. Only this call is timed.
func (e *env) schedule() (results scheduler.Results, elapsed time.Duration, err error) {
	start := time.Now()
	results, err = e.prov.Schedule(e.ctx)
	return results, time.Since(start), err
}

// solveSecondsSoFar reads upstream's own scheduling_duration_seconds histogram (the sum over all
// observations). Scheduler.Solve observes it around exactly the simulation, and
// Provisioner.Schedule around itself, so across one Schedule call the sum grows by both; bench
// subtracts Schedule's time to get Solve's alone, without the pending-pod listing, volume lookups
// and scheduler construction that surround it (and without the fake API client's costs there).
func solveSecondsSoFar() float64 {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "karpenter_scheduler_scheduling_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			total += m.GetHistogram().GetSampleSum()
		}
	}
	return total
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, podKey(p))
	}
	sort.Strings(out)
	return out
}

// output turns upstream's Results into the oracle's JSON shape.
func (e *env) output(results scheduler.Results, elapsed time.Duration) *Output {
	out := &Output{
		Name:          e.scenario.Name,
		NodeClaims:    []OutNodeClaim{},
		ExistingNodes: []OutExisting{},
		Unschedulable: []OutPodReason{},
		Deferred:      []OutPodReason{},
		Ignored:       []OutPodReason{},
		Notes:         e.notes,
		SolveSeconds:  elapsed.Seconds(),
	}
	if out.Notes == nil {
		out.Notes = []string{}
	}
	decided := map[string]bool{}

	for _, nc := range results.NewNodeClaims {
		o := OutNodeClaim{NodePool: nc.NodePoolName, Pods: podNames(nc.Pods)}
		for _, p := range nc.Pods {
			decided[podKey(p)] = true
		}
		for _, it := range nc.InstanceTypeOptions {
			o.InstanceTypeOptions = append(o.InstanceTypeOptions, it.Name)
		}
		if o.InstanceTypeOptions == nil {
			o.InstanceTypeOptions = []string{}
		}
		// The object the provisioner would create (Provisioner.Create calls ToNodeClaim); its
		// requirements are what the cloud provider is asked to satisfy.
		created := nc.ToNodeClaim()
		reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(created.Spec.Requirements...)
		// The cheapest available offering any option has under those requirements; ties keep the
		// first option in upstream's order.
		for _, it := range nc.InstanceTypeOptions {
			cheapest := it.Offerings.Available().Compatible(reqs).Cheapest()
			if cheapest == nil {
				continue
			}
			if o.CheapestPrice == nil || cheapest.Price < *o.CheapestPrice {
				name, price := it.Name, cheapest.Price
				o.CheapestInstanceType, o.CheapestPrice = &name, &price
			}
		}
		for _, r := range created.Spec.Requirements {
			values := append([]string{}, r.Values...)
			sort.Strings(values)
			o.Requirements = append(o.Requirements, OutRequirement{Key: r.Key, Operator: string(r.Operator), Values: values, MinValues: r.MinValues})
		}
		sort.SliceStable(o.Requirements, func(i, j int) bool {
			if o.Requirements[i].Key != o.Requirements[j].Key {
				return o.Requirements[i].Key < o.Requirements[j].Key
			}
			return o.Requirements[i].Operator < o.Requirements[j].Operator
		})
		if o.Requirements == nil {
			o.Requirements = []OutRequirement{}
		}
		out.NodeClaims = append(out.NodeClaims, o)
	}

	for _, n := range results.ExistingNodes {
		if len(n.Pods) == 0 {
			continue
		}
		for _, p := range n.Pods {
			decided[podKey(p)] = true
		}
		out.ExistingNodes = append(out.ExistingNodes, OutExisting{Name: n.Name(), Pods: podNames(n.Pods)})
	}

	for p, err := range results.PodErrors {
		decided[podKey(p)] = true
		r := OutPodReason{Pod: podKey(p), Reason: err.Error()}
		out.Unschedulable = append(out.Unschedulable, r)
		// A reserved-offering error defers the decision to a later round; upstream does not count
		// it as unschedulable (Provisioner.Schedule, UnschedulablePodsCount). Such pods stay in
		// unschedulable (they are pod errors in Results) and are listed again here.
		if scheduler.IsReservedOfferingError(err) {
			out.Deferred = append(out.Deferred, r)
		}
	}

	// Pending pods with no decision: say why upstream did not consider them, in the order the
	// pipeline filters (GetPendingPods, then NewScheduler).
	noNodePools := !e.usableNodePools()
	for _, p := range e.pending {
		if decided[podKey(p)] {
			continue
		}
		switch {
		case !podutils.IsProvisionable(p):
			out.Ignored = append(out.Ignored, OutPodReason{Pod: podKey(p), Reason: notProvisionableReason(p)})
		case e.prov.Validate(e.ctx, p) != nil:
			out.Ignored = append(out.Ignored, OutPodReason{Pod: podKey(p), Reason: fmt.Sprintf("ignoring pod, %v", e.prov.Validate(e.ctx, p))})
		case noNodePools:
			// Provisioner.Schedule records this error for every pod when NewScheduler finds no NodePool.
			out.Unschedulable = append(out.Unschedulable, OutPodReason{Pod: podKey(p), Reason: "no dynamic nodepools found"})
		default:
			// A pod whose volume topology cannot be read is not dropped here: upstream only leaves
			// it out of the topology counts and still passes it to Solve without volume
			// requirements. What remains is Solve stopping early (its one-minute timeout).
			out.Ignored = append(out.Ignored, OutPodReason{Pod: podKey(p), Reason: "no decision in upstream's Results (Solve stopped before reaching the pod, e.g. at its one-minute timeout)"})
		}
	}

	byPod := func(l []OutPodReason) {
		sort.Slice(l, func(i, j int) bool { return l[i].Pod < l[j].Pod })
	}
	byPod(out.Unschedulable)
	byPod(out.Deferred)
	byPod(out.Ignored)
	return out
}

// notProvisionableReason names the test of pkg/utils/pod.IsProvisionable that fails.
func notProvisionableReason(p *corev1.Pod) string {
	switch {
	case !podutils.FailedToSchedule(p):
		return "not provisionable: its PodScheduled condition is not False/Unschedulable (kube-scheduler has not rejected it)"
	case podutils.IsPreempting(p):
		return fmt.Sprintf("not provisionable: status.nominatedNodeName is %s (preempting)", p.Status.NominatedNodeName)
	case podutils.IsOwnedByDaemonSet(p):
		return "not provisionable: owned by a DaemonSet"
	case podutils.IsOwnedByNode(p):
		return "not provisionable: a mirror pod (owned by a Node)"
	default:
		return "not provisionable"
	}
}

// RunScenario runs one scenario end to end. A failure to run it at all is returned as an error;
// a panic inside upstream is turned into one, so a batch can go on.
func RunScenario(s *Scenario, logger logr.Logger) (out *Output, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("panic: %v\n%s", r, firstLines(string(debug.Stack()), 30))
		}
	}()
	e, err := prepare(s, logger)
	if err != nil {
		return nil, err
	}
	results, elapsed, err := e.schedule()
	if err != nil {
		return nil, fmt.Errorf("upstream Provisioner.Schedule: %w", err)
	}
	return e.output(results, elapsed), nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
