package main

// The KWOK configuration: its options plus the Stage documents that make a managed Node
// Ready, give pods bound to it the Running phase (and a pod IP), complete finished pods and
// finish deletions (there is no kubelet to do it). The stages are the ones the kwok module
// ships as Go strings, so they match the compiled-in controller.

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	kwokv1alpha1 "sigs.k8s.io/kwok/pkg/apis/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// kwokNodeAnnotation selects the Nodes KWOK manages: kwok.x-k8s.io/node=fake.
const kwokNodeAnnotation = "kwok.x-k8s.io/node=fake"

// kwokConfig returns the multi-document kwok.yaml. With leases (the full profile, where the
// node-lifecycle controller watches node health) KWOK renews a Lease per node and refreshes
// the node conditions; without, Nodes are made Ready once.
// The node IP is 127.0.0.1 and the node port is KWOK's own server, so anything that follows
// a Node's address (kubectl logs through the API server) stays on the loopback interface.
func kwokConfig(leaseSeconds, port int) (string, error) {
	conf := &kwokv1alpha1.KwokConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: kwokv1alpha1.GroupVersion.String(), Kind: kwokv1alpha1.KwokConfigurationKind},
		Options: kwokv1alpha1.KwokConfigurationOptions{
			ManageNodesWithAnnotationSelector: kwokNodeAnnotation,
			CIDR:                              "10.244.0.0/16",
			NodeIP:                            "127.0.0.1",
			NodePort:                          port,
			ServerAddress:                     fmt.Sprintf("127.0.0.1:%d", port),
			NodeLeaseDurationSeconds:          uint(leaseSeconds),
		},
	}
	// A KwokConfiguration read from a file is not defaulted; do it here, as kwok does when
	// there is none.
	kwokv1alpha1.SetObjectDefaults_KwokConfiguration(conf)
	options, err := yaml.Marshal(conf)
	if err != nil {
		return "", err
	}
	docs := []string{string(options), nodefast.DefaultNodeInit}
	if leaseSeconds > 0 {
		docs = append(docs, nodeheartbeat.DefaultNodeHeartbeatWithLease)
	}
	docs = append(docs, podfast.DefaultPodReady, podfast.DefaultPodComplete, podfast.DefaultPodDelete)
	for i, doc := range docs {
		docs[i] = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(doc), "---"))
	}
	return strings.Join(docs, "\n---\n") + "\n", nil
}
