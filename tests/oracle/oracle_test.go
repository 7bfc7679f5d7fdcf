package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// requirement builds one NodeSelectorRequirementWithMinValues in the input's JSON shape.
func requirement(key, op string, values ...string) map[string]any {
	return map[string]any{"key": key, "operator": op, "values": values}
}

func instanceType(name, cpu, memory string, price float64) map[string]any {
	return map[string]any{
		"name": name,
		"requirements": []any{
			requirement("node.kubernetes.io/instance-type", "In", name),
			requirement("kubernetes.io/arch", "In", "amd64"),
			requirement("kubernetes.io/os", "In", "linux"),
			requirement("topology.kubernetes.io/zone", "In", "test-zone-a"),
			requirement("karpenter.sh/capacity-type", "In", "on-demand"),
			requirement("karpenter.k8s.aws/capacity-reservation-id", "DoesNotExist"),
		},
		"capacity": map[string]string{"cpu": cpu, "memory": memory, "pods": "110"},
		"overhead": map[string]any{"kubeReserved": map[string]string{"cpu": "100m", "memory": "100Mi"}},
		"offerings": []any{map[string]any{
			"requirements": []any{
				requirement("topology.kubernetes.io/zone", "In", "test-zone-a"),
				requirement("karpenter.sh/capacity-type", "In", "on-demand"),
				requirement("karpenter.k8s.aws/capacity-reservation-id", "DoesNotExist"),
			},
			"price":     price,
			"available": true,
		}},
	}
}

// pod is a pending pod in manifest form: no PodScheduled condition and no phase, which the
// oracle fills in as the API server and kube-scheduler would.
func pod(name, cpu, memory string) map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"name": name, "namespace": "default", "uid": "uid-" + name},
		"spec": map[string]any{"containers": []any{map[string]any{
			"name":      "app",
			"image":     "app",
			"resources": map[string]any{"requests": map[string]string{"cpu": cpu, "memory": memory}},
		}}},
	}
}

func tinyInput() map[string]any {
	return map[string]any{
		"name": "tiny",
		"now":  "2026-01-01T00:00:00Z",
		"nodePools": []any{map[string]any{
			"apiVersion": "karpenter.sh/v1",
			"kind":       "NodePool",
			"metadata":   map[string]any{"name": "default"},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
				"requirements": []any{},
			}}},
		}},
		"instanceTypeSets": map[string]any{"default": []any{
			// Listed most expensive first so that "cheapest" cannot come from input order.
			instanceType("large", "8", "32Gi", 0.4),
			instanceType("small", "2", "8Gi", 0.1),
		}},
		"nodePoolInstanceTypes": map[string]any{"default": "default"},
		"pods": []any{
			pod("a", "500m", "1Gi"),
			pod("b", "500m", "1Gi"),
			pod("huge", "16", "1Gi"),
		},
		"reservationIdLabel": "karpenter.k8s.aws/capacity-reservation-id",
		"minValuesPolicy":    "Strict",
		"maxInstanceTypes":   600,
	}
}

func solve(t *testing.T, input map[string]any) *Output {
	t.Helper()
	data, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseScenario(data, nil)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	out, err := RunScenario(s, logr.Discard())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return out
}

func TestTinyScenario(t *testing.T) {
	out := solve(t, tinyInput())
	if b, err := json.MarshalIndent(out, "", "  "); err == nil {
		t.Logf("output:\n%s", b)
	}

	if len(out.NodeClaims) != 1 {
		t.Fatalf("want 1 NodeClaim, got %d", len(out.NodeClaims))
	}
	nc := out.NodeClaims[0]
	if nc.NodePool != "default" {
		t.Errorf("NodeClaim NodePool = %q, want default", nc.NodePool)
	}
	if strings.Join(nc.Pods, ",") != "default/a,default/b" {
		t.Errorf("NodeClaim pods = %v, want [default/a default/b]", nc.Pods)
	}
	// Both types fit the two small pods; upstream orders the options by price.
	if strings.Join(nc.InstanceTypeOptions, ",") != "small,large" {
		t.Errorf("instance-type options = %v, want [small large]", nc.InstanceTypeOptions)
	}
	if nc.CheapestInstanceType == nil || *nc.CheapestInstanceType != "small" {
		t.Errorf("cheapest instance type = %s, want small", show(nc.CheapestInstanceType))
	}
	if nc.CheapestPrice == nil || *nc.CheapestPrice != 0.1 {
		t.Errorf("cheapest price = %s, want 0.1", show(nc.CheapestPrice))
	}
	if !hasRequirement(nc.Requirements, "karpenter.sh/nodepool", "In", "default") {
		t.Errorf("requirements lack karpenter.sh/nodepool In [default]: %+v", nc.Requirements)
	}

	if len(out.Unschedulable) != 1 || out.Unschedulable[0].Pod != "default/huge" {
		t.Fatalf("want exactly default/huge unschedulable, got %+v", out.Unschedulable)
	}
	if out.Unschedulable[0].Reason == "" {
		t.Errorf("unschedulable pod has no reason")
	}
	if len(out.ExistingNodes) != 0 || len(out.Ignored) != 0 || len(out.Deferred) != 0 {
		t.Errorf("unexpected existing=%v ignored=%v deferred=%v", out.ExistingNodes, out.Ignored, out.Deferred)
	}
}

// A second run in the same process must give the same answer: nothing may leak between scenarios.
func TestNoLeakBetweenScenarios(t *testing.T) {
	first := solve(t, tinyInput())
	second := solve(t, tinyInput())
	a, _ := json.Marshal(first.NodeClaims)
	b, _ := json.Marshal(second.NodeClaims)
	if string(a) != string(b) {
		t.Errorf("second run differs:\n%s\n%s", a, b)
	}
}

func TestUnknownFieldIsAnError(t *testing.T) {
	input := tinyInput()
	input["pods"].([]any)[0].(map[string]any)["spec"].(map[string]any)["nodeSelecter"] = map[string]string{"a": "b"}
	data, _ := json.Marshal(input)
	_, err := ParseScenario(data, nil)
	if err == nil || !strings.Contains(err.Error(), "nodeSelecter") || !strings.Contains(err.Error(), "pods[0]") {
		t.Fatalf("want an error naming pods[0] and the unknown field, got %v", err)
	}
}

func hasRequirement(reqs []OutRequirement, key, op, value string) bool {
	for _, r := range reqs {
		if r.Key == key && r.Operator == op && len(r.Values) == 1 && r.Values[0] == value {
			return true
		}
	}
	return false
}

func show[T any](p *T) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// In batch mode a later line may name a set an earlier line sent; on its own it is an error.
func TestSetsFromEarlierBatchLines(t *testing.T) {
	first, _ := json.Marshal(tinyInput())
	s1, err := ParseScenario(first, nil)
	if err != nil {
		t.Fatal(err)
	}
	known := InstanceTypeSets{}
	for _, id := range s1.DefinedSets {
		known[id] = s1.InstanceTypeSets[id]
	}
	input := tinyInput()
	delete(input, "instanceTypeSets")
	second, _ := json.Marshal(input)
	if _, err := ParseScenario(second, nil); err == nil {
		t.Fatal("a set that was never sent must be an error")
	}
	s2, err := ParseScenario(second, known)
	if err != nil {
		t.Fatal(err)
	}
	out, err := RunScenario(s2, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if len(out.NodeClaims) != 1 || show(out.NodeClaims[0].CheapestInstanceType) != "small" {
		t.Fatalf("second line: want one NodeClaim of small, got %+v", out.NodeClaims)
	}
}
