//! `catalog`: generates (or checks) the EC2 catalogue from inputs already fetched. Use
//! `cargo xtask catalog`, which fetches the pinned moto wheel and karpenter-provider-aws module
//! first and then runs this (carpentry_tests::catalog).

use std::path::PathBuf;

use anyhow::Result;
use carpentry_tests::catalog::{self, Inputs, Mode};
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "catalog",
    about = "Generate core/data/ec2-catalogue.json from a moto wheel and a karpenter-provider-aws module"
)]
struct Args {
    /// Output path.
    #[arg(long)]
    out: PathBuf,
    /// The moto wheel to read instance types and zone offerings from.
    #[arg(long)]
    moto_wheel: PathBuf,
    /// Its version, recorded in the provenance.
    #[arg(long)]
    moto_version: String,
    /// The extracted github.com/aws/karpenter-provider-aws module directory.
    #[arg(long)]
    karpenter_dir: PathBuf,
    /// Its version, recorded in the provenance.
    #[arg(long)]
    karpenter_version: String,
    /// Generation date to record (YYYY-MM-DD); defaults to today (UTC).
    #[arg(long, conflicts_with = "check")]
    date: Option<String>,
    /// Do not write: fail if the file differs from what the inputs produce (ignoring the
    /// generation date).
    #[arg(long)]
    check: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let inputs = Inputs {
        moto_wheel: args.moto_wheel,
        moto_version: args.moto_version,
        karpenter_dir: args.karpenter_dir,
        karpenter_version: args.karpenter_version,
    };
    let mode = if args.check { Mode::Check } else { Mode::Write { date: args.date } };
    catalog::run(&inputs, &args.out, mode)
}
