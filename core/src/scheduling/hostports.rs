//! Host-port usage (upstream `pkg/scheduling/hostportusage.go`): only `containers[].ports[]`
//! with a non-zero `hostPort` count (init containers are ignored), a missing `hostIP` means
//! `0.0.0.0`, and two entries conflict when protocol and port are equal and the IPs are equal or
//! either is unspecified.

use std::fmt;

use k8s_openapi::api::core::v1::{Pod, PodSpec};

/// One host port a pod binds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostPort {
    pub ip: String,
    pub port: i32,
    pub protocol: String,
}

impl HostPort {
    fn unspecified(&self) -> bool {
        self.ip == "0.0.0.0" || self.ip == "::"
    }

    /// Upstream `HostPort.Matches`.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.protocol == other.protocol
            && self.port == other.port
            && (self.ip == other.ip || self.unspecified() || other.unspecified())
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}/{}", self.ip, self.port, self.protocol)
    }
}

/// The host ports of a pod's regular containers. With `hostNetwork`, a port without `hostPort`
/// binds its `containerPort` on the host: the API server's Pod defaulting (`SetDefaults_Pod`)
/// writes `hostPort = containerPort` into such pods, so upstream sees them as host ports, and a
/// manifest not yet applied must count the same.
pub fn pod_host_ports(pod: &Pod) -> Vec<HostPort> {
    spec_host_ports(pod.spec.as_ref(), true)
}

/// The host ports of a pod spec's regular containers; `pod_defaults` applies the API server's
/// hostNetwork defaulting, which only Pods get (not pod templates).
pub fn spec_host_ports(spec: Option<&PodSpec>, pod_defaults: bool) -> Vec<HostPort> {
    let Some(spec) = spec else { return Vec::new() };
    let host_network = pod_defaults && spec.host_network == Some(true);
    spec.containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = match p.host_port.unwrap_or(0) {
                0 if host_network => p.container_port,
                port => port,
            };
            (port != 0).then(|| HostPort {
                ip: p.host_ip.clone().filter(|ip| !ip.is_empty()).unwrap_or_else(|| "0.0.0.0".into()),
                port,
                protocol: p.protocol.clone().filter(|p| !p.is_empty()).unwrap_or_else(|| "TCP".into()),
            })
        })
        .collect()
}

/// The first of `wanted` that conflicts with `used`, with the entry it conflicts with.
pub fn first_conflict<'a>(wanted: &'a [HostPort], used: &'a [HostPort]) -> Option<(&'a HostPort, &'a HostPort)> {
    wanted.iter().find_map(|w| used.iter().find(|u| w.conflicts(u)).map(|u| (w, u)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(ip: &str, port: i32) -> HostPort {
        HostPort { ip: ip.into(), port, protocol: "TCP".into() }
    }

    #[test]
    fn host_network_ports_are_host_ports() {
        let pod = |host_network: bool| -> Pod {
            serde_yaml::from_str(&format!(
                "metadata: {{name: p}}\nspec:\n  hostNetwork: {host_network}\n  containers: [{{name: c, ports: [{{containerPort: 9100}}, {{containerPort: 53, hostPort: 5353, protocol: UDP}}]}}]"
            ))
            .unwrap()
        };
        let ports = |p: &Pod| pod_host_ports(p).iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(ports(&pod(true)), ["0.0.0.0:9100/TCP", "0.0.0.0:5353/UDP"]);
        assert_eq!(ports(&pod(false)), ["0.0.0.0:5353/UDP"]);
    }

    #[test]
    fn conflicts() {
        assert!(hp("0.0.0.0", 80).conflicts(&hp("10.0.0.1", 80)));
        assert!(hp("10.0.0.1", 80).conflicts(&hp("10.0.0.1", 80)));
        assert!(!hp("10.0.0.1", 80).conflicts(&hp("10.0.0.2", 80)));
        assert!(!hp("0.0.0.0", 80).conflicts(&hp("0.0.0.0", 81)));
        let udp = HostPort { protocol: "UDP".into(), ..hp("0.0.0.0", 80) };
        assert!(!udp.conflicts(&hp("0.0.0.0", 80)));
        assert!(hp("::", 80).conflicts(&hp("10.0.0.1", 80)));
    }
}
