//! `kubectl karpenter snapshot [-o FILE] [--keep-images]`: the state Karpenter looks at, redacted,
//! as a scenario file that `--from-file` and the playground load.

use crate::common::ReadArgs;
use crate::Failure;

#[derive(clap::Args)]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub read: ReadArgs,
    /// Write the snapshot here instead of stdout.
    #[arg(short = 'o', long = "output-file", value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Keep container image names (redacted by default).
    #[arg(long)]
    pub keep_images: bool,
}

pub fn run(_args: SnapshotArgs) -> Result<(), Failure> {
    Err(Failure::Input("snapshot is not built yet".into()))
}
