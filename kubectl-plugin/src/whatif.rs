//! `kubectl karpenter whatif -f FILE`.

use crate::common::CommonArgs;
use crate::Failure;

#[derive(clap::Args)]
pub struct WhatifArgs {
    /// The objects to apply on top of the cluster's state (NodePools, EC2NodeClasses, pods,
    /// workloads…); `-` reads stdin.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<String>,
    #[command(flatten)]
    pub common: CommonArgs,
}

pub fn run(_args: WhatifArgs) -> Result<(), Failure> {
    Err(Failure::Input("whatif is not built yet".into()))
}
