package main

import (
	"sync/atomic"
	_ "unsafe" // for go:linkname
)

// placeholderCounter is core's process-wide counter behind the hostname placeholders of new
// NodeClaims ("hostname-placeholder-%04d", pkg/controllers/provisioning/scheduling/nodeclaim.go,
// unexported var nodeID). The placeholders are topology domains during a round and appear in
// upstream's error texts (e.g. "nodeDomains = kubernetes.io/hostname In
// [hostname-placeholder-0001]"), so a scenario's answer would depend on how many NodeClaims
// earlier scenarios in the same process created. Resetting it before every run gives each scenario
// the numbering of a freshly started controller.
//
//go:linkname placeholderCounter sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling.nodeID
var placeholderCounter int64

func resetPlaceholderCounter() { atomic.StoreInt64(&placeholderCounter, 0) }
