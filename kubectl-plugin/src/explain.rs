//! `kubectl karpenter explain pod|node|nodepool NAME`.

use crate::common::CommonArgs;
use crate::Failure;

#[derive(clap::Args)]
pub struct ExplainArgs {
    #[command(subcommand)]
    pub what: What,
    #[command(flatten)]
    pub common: CommonArgs,
}

#[derive(clap::Subcommand)]
pub enum What {
    /// Where the pod runs or would go; if it cannot be scheduled, why, NodePool by NodePool.
    #[command(visible_alias = "po", alias = "pods")]
    Pod { name: String },
    /// The disruption checklist and what removing the node would do.
    #[command(visible_alias = "no", alias = "nodes")]
    Node { name: String },
    /// Usage against limits, instance types, disruptions allowed now and over the next 7 days,
    /// drifted and expiring nodes.
    #[command(visible_alias = "np", alias = "nodepools")]
    Nodepool { name: String },
}

pub fn run(_args: ExplainArgs) -> Result<(), Failure> {
    Err(Failure::Input("explain is not built yet".into()))
}
