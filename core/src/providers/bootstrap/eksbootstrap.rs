//! AL2: `/etc/eks/bootstrap.sh` in a shell-script part after the user's parts (upstream
//! `bootstrap/eksbootstrap.go`). A `spec.userData` that is not a MIME archive becomes one
//! shell-script part; an archive's parts are copied with their headers.

use super::mime::{self, Part, CONTENT_TYPE_SHELL_SCRIPT};
use super::{BootstrapError, Options};
use crate::api::ec2nodeclass::InstanceStorePolicy;

/// The MIME archive: the user's parts, then the bootstrap script.
pub fn script(o: &Options<'_>, endpoint: &str) -> Result<String, BootstrapError> {
    let mut parts = match o.custom_user_data.filter(|t| !t.is_empty()) {
        Some(text) if mime::is_mime(text) => mime::parse(text)?,
        Some(text) => vec![Part::typed(CONTENT_TYPE_SHELL_SCRIPT, text)],
        None => Vec::new(),
    };
    parts.push(Part::typed(CONTENT_TYPE_SHELL_SCRIPT, &bootstrap_script(o, endpoint)));
    Ok(mime::serialize(&parts))
}

/// upstream `eksBootstrapScript` (arguments without `=`, as bootstrap.sh wants them).
fn bootstrap_script(o: &Options<'_>, endpoint: &str) -> String {
    let ca = o.cluster.ca_bundle.as_deref().map(|ca| format!("--b64-cluster-ca '{ca}'")).unwrap_or_default();
    let mut s = String::from("#!/bin/bash -xe\n");
    s.push_str("exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n");
    s.push_str(&format!("/etc/eks/bootstrap.sh '{}' --apiserver-endpoint '{endpoint}' {ca}", o.cluster.name));
    let dns = o.kubelet.cluster_dns.first();
    if dns.is_some_and(|ip| ip.parse::<std::net::Ipv4Addr>().is_err()) {
        s.push_str(" \\\n--ip-family ipv6");
    }
    if let Some(ip) = dns {
        s.push_str(&format!(" \\\n--dns-cluster-ip '{ip}'"));
    }
    if o.kubelet.max_pods.is_some() {
        s.push_str(" \\\n--use-max-pods false");
    }
    let args = o.kubelet_extra_args();
    if !args.is_empty() {
        s.push_str(&format!(" \\\n--kubelet-extra-args '{}'", args.join(" ")));
    }
    if o.instance_store_policy == Some(InstanceStorePolicy::Raid0) {
        s.push_str(" \\\n--local-disks raid0");
    }
    s
}
