//! `kubectl karpenter convert -f FILE [--to v1|nodepools]`.

use std::fmt::Write as _;

use carpentry_core::catalogue::Catalogue;
use carpentry_core::clusterautoscaler::{propose_nodepools, ProposalInput};

use crate::{input, Failure};

#[derive(clap::Args)]
pub struct ConvertArgs {
    /// Manifest file (YAML or JSON, several documents allowed); `-` reads stdin.
    #[arg(short = 'f', long = "filename")]
    file: String,
    /// `v1`: legacy Karpenter objects to v1. `nodepools`: Cluster Autoscaler node groups to the
    /// NodePools and EC2NodeClass that replace them.
    #[arg(long = "to", value_enum, default_value_t = Target::V1)]
    to: Target,
    /// The EKS cluster's name (`--to nodepools`): it names the node role and the discovery tag.
    #[arg(long = "cluster-name")]
    cluster_name: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Target {
    V1,
    Nodepools,
}

/// Prints every Karpenter object of the input as v1 YAML (legacy objects converted, v1 objects as
/// loaded with their defaults), and each conversion note on stderr; or, `--to nodepools`, the
/// NodePools that replace the input's node groups.
pub fn run(args: ConvertArgs) -> Result<(), Failure> {
    if args.to == Target::Nodepools {
        return to_nodepools(&args);
    }
    let mut manifests = input::load(&args.file)?;
    let legacy_count = manifests.legacy.len();
    let notes = manifests.convert_legacy();
    let mut out = String::new();
    let mut documents = 0usize;
    let mut push = |yaml: Result<String, serde_yaml::Error>| -> Result<(), Failure> {
        let yaml = yaml.map_err(|e| Failure::Other(e.into()))?;
        if documents > 0 {
            out.push_str("---\n");
        }
        out.push_str(&yaml);
        documents += 1;
        Ok(())
    };
    for nc in &manifests.nodeclasses {
        push(serde_yaml::to_string(nc))?;
    }
    for np in &manifests.nodepools {
        push(serde_yaml::to_string(np))?;
    }
    for claim in &manifests.nodeclaims {
        push(serde_yaml::to_string(claim))?;
    }
    print!("{out}");
    let mut summary = String::new();
    for note in &notes {
        let _ = writeln!(summary, "note: {}: {}: {}", note.object, note.field, note.message);
    }
    let others = manifests.all_pods().len() + manifests.nodes.len();
    let _ = writeln!(
        summary,
        "converted {legacy_count} legacy object(s); wrote {documents} v1 object(s){}",
        if others > 0 { "; non-Karpenter objects are not printed" } else { "" }
    );
    eprint!("{summary}");
    Ok(())
}

/// The node groups of the input (NodeGroup objects) as NodePools and an EC2NodeClass, each object
/// preceded by its notes as YAML comments, so the file that is applied says why it is so.
fn to_nodepools(args: &ConvertArgs) -> Result<(), Failure> {
    let manifests = input::load(&args.file)?;
    if manifests.nodegroups.is_empty() {
        return Err(Failure::Input(format!(
            "{}: no node groups found: --to nodepools reads carpentry.dev/v1alpha1 NodeGroup objects, eksctl \
             ClusterConfigs and the output of aws autoscaling describe-auto-scaling-groups",
            args.file
        )));
    }
    // The flag wins over what the input names (an eksctl ClusterConfig, the groups' cluster tags).
    let named = args.cluster_name.as_deref().or(manifests.cluster_name.as_deref());
    let Some(cluster_name) = named.filter(|n| !n.trim().is_empty()) else {
        return Err(Failure::Input(
            "--cluster-name is required with --to nodepools when the input does not name the cluster: the EKS \
             cluster's name names the node role (KarpenterNodeRole-<name>) and the karpenter.sh/discovery tag of \
             its subnets and security groups"
                .into(),
        ));
    };
    let options =
        manifests.scenario.as_ref().and_then(|s| s.spec.cluster_autoscaler.clone()).unwrap_or_default().resolved();
    let proposal = propose_nodepools(ProposalInput {
        groups: &manifests.nodegroups,
        options: &options,
        cluster_name,
        catalogue: Catalogue::embedded(),
    });
    let mut out = String::new();
    let mut documents = Vec::new();
    for nc in &proposal.nodeclasses {
        documents.push((format!("EC2NodeClass/{}", nc.name()), serde_yaml::to_string(nc)));
    }
    for np in &proposal.nodepools {
        documents.push((format!("NodePool/{}", np.name()), serde_yaml::to_string(np)));
    }
    for (i, (object, yaml)) in documents.into_iter().enumerate() {
        let yaml = yaml.map_err(|e| Failure::Other(e.into()))?;
        if i > 0 {
            out.push_str("---\n");
        }
        for note in proposal.notes.iter().filter(|n| n.object == object) {
            let _ = writeln!(out, "# {}", note.reason);
        }
        out.push_str(&yaml);
    }
    print!("{out}");
    eprintln!(
        "proposed {} NodePool(s) and {} EC2NodeClass for {} node group(s); each choice is noted above its object",
        proposal.nodepools.len(),
        proposal.nodeclasses.len(),
        manifests.nodegroups.len()
    );
    Ok(())
}
