//! Windows: `Start-EKSBootstrap.ps1` in a `<powershell>` block after the user's script (upstream
//! `bootstrap/windows.go`).

use super::Options;

pub fn script(o: &Options<'_>, endpoint: &str) -> String {
    let mut s = String::from("<powershell>\n");
    if let Some(custom) = o.custom_user_data.filter(|t| !t.is_empty()) {
        s.push_str(custom);
        s.push('\n');
    }
    s.push_str("[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n");
    s.push_str(&format!(
        "& $EKSBootstrapScriptFile -EKSClusterName '{}' -APIServerEndpoint '{endpoint}'",
        o.cluster.name
    ));
    if let Some(ca) = &o.cluster.ca_bundle {
        s.push_str(&format!(" -Base64ClusterCA '{ca}'"));
    }
    let args = o.kubelet_extra_args();
    if !args.is_empty() {
        s.push_str(&format!(" -KubeletExtraArgs '{}'", args.join(" ")));
    }
    if let Some(ip) = o.kubelet.cluster_dns.first() {
        s.push_str(&format!(" -DNSClusterIP '{ip}'"));
    }
    s.push_str("\n</powershell>");
    s
}
