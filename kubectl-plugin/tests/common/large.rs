//! A large cluster snapshot for the plugin's scale test and benchmark: `nodes` Karpenter nodes
//! (m5.2xlarge, on-demand, over three zones) each running `pods_per_node` pods of one of 50
//! Deployments-worth of apps, a DaemonSet pod per node, and `pending` pods that kube-scheduler
//! rejected (some spread over zones), as `snapshot` would write it.

use std::fmt::Write as _;

pub fn snapshot(nodes: usize, pods_per_node: usize, pending: usize) -> String {
    let mut s = String::new();
    s.push_str(
        "apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nmetadata: {name: large}\nspec:\n  region: us-east-1\n  startTime: \"2026-12-01T12:00:00Z\"\n---\n\
apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec:\n  amiSelectorTerms: [{alias: al2023@latest}]\n  role: KarpenterNodeRole\n  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: large}}]\n  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: large}}]\n---\n\
apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements:\n      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand, spot]}\n      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}\n  limits: {cpu: \"10000\"}\n  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 5m}\n---\n\
apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent, namespace: kube-system}\nspec:\n  selector: {matchLabels: {app: agent}}\n  template:\n    metadata: {labels: {app: agent}}\n    spec:\n      containers: [{name: agent, image: redacted, resources: {requests: {cpu: 100m, memory: 128Mi}}}]\n---\n",
    );
    let zones = ["us-east-1a", "us-east-1b", "us-east-1c"];
    for n in 0..nodes {
        let zone = zones[n % 3];
        let node = format!("ip-10-{}-{}-{}.ec2.internal", n / 250, (n / 10) % 25, n % 10);
        let claim = format!("default-{n:05}");
        let _ = write!(
            s,
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata:\n  name: {claim}\n  creationTimestamp: \"2026-11-20T12:00:00Z\"\n  labels: {{karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.2xlarge, karpenter.sh/capacity-type: on-demand, topology.kubernetes.io/zone: {zone}, kubernetes.io/arch: amd64, karpenter.k8s.aws/instance-category: m}}\n\
spec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand, spot]}}]\n\
status:\n  providerID: aws:///{zone}/i-{n:017x}\n  nodeName: {node}\n  allocatable: {{cpu: 7910m, memory: 29317Mi, pods: \"58\"}}\n  capacity: {{cpu: \"8\", memory: 31508Mi, pods: \"58\"}}\n  lastPodEventTime: \"2026-11-30T12:00:00Z\"\n  conditions: [{{type: Initialized, status: \"True\", lastTransitionTime: \"2026-11-20T12:01:00Z\"}}]\n---\n\
apiVersion: v1\nkind: Node\nmetadata:\n  name: {node}\n  labels: {{karpenter.sh/nodepool: default, karpenter.sh/registered: \"true\", karpenter.sh/initialized: \"true\", node.kubernetes.io/instance-type: m5.2xlarge, karpenter.sh/capacity-type: on-demand, topology.kubernetes.io/zone: {zone}, topology.kubernetes.io/region: us-east-1, kubernetes.io/arch: amd64, kubernetes.io/os: linux, kubernetes.io/hostname: {node}, karpenter.k8s.aws/instance-category: m}}\n\
spec: {{providerID: \"aws:///{zone}/i-{n:017x}\"}}\nstatus:\n  allocatable: {{cpu: 7910m, memory: 29317Mi, pods: \"58\"}}\n  capacity: {{cpu: \"8\", memory: 31508Mi, pods: \"58\"}}\n---\n\
apiVersion: v1\nkind: Pod\nmetadata:\n  name: agent-{n:05}\n  namespace: kube-system\n  labels: {{app: agent}}\n  ownerReferences: [{{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: agent-uid}}]\nspec:\n  nodeName: {node}\n  containers: [{{name: agent, image: redacted, resources: {{requests: {{cpu: 100m, memory: 128Mi}}}}}}]\nstatus: {{phase: Running}}\n---\n"
        );
        for p in 0..pods_per_node {
            let app = (n * pods_per_node + p) % 50;
            let _ = write!(
                s,
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: app{app}-{n:05}-{p}, namespace: apps, labels: {{app: app{app}}}}}\nspec:\n  nodeName: {node}\n  containers: [{{name: c, image: redacted, resources: {{requests: {{cpu: 600m, memory: 2Gi}}}}}}]\nstatus: {{phase: Running}}\n---\n"
            );
        }
    }
    for p in 0..pending {
        let spread = if p % 2 == 0 {
            "  topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: batch}}}]\n"
        } else {
            ""
        };
        let _ = write!(
            s,
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: batch-{p}, namespace: apps, labels: {{app: batch}}}}\nspec:\n{spread}  containers: [{{name: c, image: redacted, resources: {{requests: {{cpu: \"3\", memory: 6Gi}}}}}}]\nstatus:\n  phase: Pending\n  conditions: [{{type: PodScheduled, status: \"False\", reason: Unschedulable}}]\n---\n"
        );
    }
    s
}
