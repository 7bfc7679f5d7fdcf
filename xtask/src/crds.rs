//! `cargo xtask crds`: writes upstream Karpenter's CustomResourceDefinitions under
//! `controller/deploy/chart/crds/`, or checks that the committed files are what it writes.
//!
//! The controller runs against users' existing CRDs, so it ships upstream's own, unchanged: the
//! files of `pkg/apis/crds/` in the Go module `github.com/aws/karpenter-provider-aws` at the
//! version carpentry reproduces. That module's copies of the `karpenter.sh` CRDs are the ones
//! the AWS provider's Helm chart installs: `sigs.k8s.io/karpenter`'s plus the rules that reserve
//! the `karpenter.k8s.aws` label domain. Each file gets a comment header with its provenance
//! (module, version, the version's date, go.sum hash, file); the YAML below it is byte for byte
//! upstream's. See `controller/deploy/chart/crds/PROVENANCE.md`.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::gomod;

const MODULE: &str = "github.com/aws/karpenter-provider-aws";

/// The CRDs carpentry's controller serves, by file name in the module's `pkg/apis/crds/`.
/// (NodeOverlay and CapacityBuffer are behind feature gates that are off by default in v1.14.1,
/// and carpentry does not model them.)
pub const FILES: [&str; 3] =
    ["karpenter.sh_nodepools.yaml", "karpenter.sh_nodeclaims.yaml", "karpenter.k8s.aws_ec2nodeclasses.yaml"];

#[derive(clap::Args, Debug)]
pub struct CrdsArgs {
    /// Output directory, relative to the workspace root unless absolute.
    #[arg(long, default_value = "controller/deploy/chart/crds")]
    pub out: PathBuf,
    /// Version of the Go module github.com/aws/karpenter-provider-aws to take the CRDs from.
    #[arg(long, default_value = "v1.14.1")]
    pub version: String,
    /// Scratch directory for `go mod download` (relative to the workspace root).
    #[arg(long, default_value = "target/catalog-inputs")]
    pub cache_dir: PathBuf,
    /// Do not write: fail if a committed file differs from what this task writes.
    #[arg(long)]
    pub check: bool,
}

impl CrdsArgs {
    /// The defaults with `--check`, as `cargo xtask test` runs it.
    pub fn check() -> CrdsArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            args: CrdsArgs,
        }
        Wrapper::parse_from(["crds", "--check"]).args
    }
}

/// `cargo xtask crds` (and, with `--check`, `cargo xtask test`'s check).
pub fn run(args: CrdsArgs) -> Result<()> {
    let root = crate::workspace_root();
    let module = gomod::download(MODULE, &args.version, &root.join(&args.cache_dir))?;
    let out = root.join(&args.out);
    let mut stale = Vec::new();
    for file in FILES {
        let wanted = render(&module, file)?;
        let path = out.join(file);
        if args.check {
            let committed = fs::read_to_string(&path).unwrap_or_default();
            if committed != wanted {
                stale.push(path);
            }
        } else {
            fs::create_dir_all(&out)?;
            fs::write(&path, wanted).with_context(|| format!("write {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
    }
    if !stale.is_empty() {
        let list: Vec<String> = stale.iter().map(|p| p.display().to_string()).collect();
        bail!(
            "{} differ from upstream's CRDs in {MODULE}@{} (run `cargo xtask crds`): {}",
            list.len(),
            args.version,
            list.join(", ")
        );
    }
    Ok(())
}

/// One CRD file as committed: the provenance header, then upstream's bytes.
fn render(module: &gomod::Module, file: &str) -> Result<String> {
    let source = Path::new("pkg/apis/crds").join(file);
    let upstream = fs::read_to_string(module.dir.join(&source))
        .with_context(|| format!("{}@{} has no {}", module.path, module.version, source.display()))?;
    if !upstream.starts_with("---\n") || !upstream.contains("kind: CustomResourceDefinition") {
        bail!("{}@{}: {} is not a CustomResourceDefinition document", module.path, module.version, source.display());
    }
    Ok(format!(
        "# Upstream Karpenter's CustomResourceDefinition, unchanged below this header.\n\
         # Go module: {} {} (version time {}, go.sum {})\n\
         # File: {}\n\
         # Written by `cargo xtask crds`; CI checks that this file is what it writes. Do not edit.\n{}",
        module.path,
        module.version,
        module.time.as_deref().unwrap_or("not recorded"),
        module.sum,
        source.display(),
        upstream
    ))
}
