//! `cargo xtask catalog`: generates `core/data/ec2-catalogue.json`, the EC2 catalogue that
//! carpentry-core embeds, or checks that the committed file is what the generator produces.
//!
//! This side fetches the inputs from package registries with their ordinary clients (never
//! committed): the PyPI wheel of `moto` (`pip download --no-deps`) and the Go module
//! `github.com/aws/karpenter-provider-aws` (`go mod download -json`). The generator itself is
//! `carpentry_tests::catalog` (the `catalog` binary of tests/), which reads them with the core's
//! catalogue types; see its documentation and `core/data/PROVENANCE.md`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, ensure, Context, Result};

use crate::util;

const KARPENTER_MODULE: &str = "github.com/aws/karpenter-provider-aws";

#[derive(clap::Args, Debug)]
pub struct CatalogArgs {
    /// Output path, relative to the workspace root unless absolute.
    #[arg(long, default_value = "core/data/ec2-catalogue.json")]
    pub out: PathBuf,
    /// moto version on PyPI to read instance types and zone offerings from.
    #[arg(long, default_value = "5.2.5")]
    pub moto_version: String,
    /// Use this moto wheel instead of downloading one with pip.
    #[arg(long)]
    pub moto_wheel: Option<PathBuf>,
    /// Version of the Go module github.com/aws/karpenter-provider-aws to read prices, bandwidth and
    /// VPC limits from.
    #[arg(long, default_value = "v1.14.1")]
    pub karpenter_version: String,
    /// Use this extracted karpenter-provider-aws module directory instead of `go mod download`.
    #[arg(long)]
    pub karpenter_dir: Option<PathBuf>,
    /// Where downloaded inputs are kept between runs (relative to the workspace root).
    #[arg(long, default_value = "target/catalog-inputs")]
    pub cache_dir: PathBuf,
    /// Generation date to record (YYYY-MM-DD); defaults to today (UTC).
    #[arg(long)]
    pub date: Option<String>,
    /// Do not write: fail if the committed file differs from what the inputs produce (ignoring
    /// the generation date).
    #[arg(long)]
    pub check: bool,
}

impl CatalogArgs {
    /// The defaults with `--check`, as `cargo xtask test` runs it.
    pub fn check() -> CatalogArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct Wrapper {
            #[command(flatten)]
            args: CatalogArgs,
        }
        Wrapper::parse_from(["catalog", "--check"]).args
    }
}

/// The fetched inputs, as the generator's arguments.
pub struct Fetched {
    args: Vec<String>,
}

/// Fetches the inputs (each kept in the cache directory, so a second call is quick).
pub fn fetch(args: &CatalogArgs) -> Result<Fetched> {
    let root = crate::workspace_root();
    let cache = root.join(&args.cache_dir);
    let wheel = match &args.moto_wheel {
        Some(p) => p.clone(),
        None => fetch_moto_wheel(&args.moto_version, &cache)?,
    };
    let karpenter = match &args.karpenter_dir {
        Some(dir) => dir.clone(),
        None => fetch_karpenter_module(&args.karpenter_version, &cache)?,
    };
    let path = |p: &Path| p.to_str().map(str::to_owned).context("a path that is not UTF-8");
    let mut generator_args = vec![
        "--out".to_string(),
        path(&root.join(&args.out))?,
        "--moto-wheel".into(),
        path(&wheel)?,
        "--moto-version".into(),
        args.moto_version.clone(),
        "--karpenter-dir".into(),
        path(&karpenter)?,
        "--karpenter-version".into(),
        args.karpenter_version.clone(),
    ];
    if args.check {
        generator_args.push("--check".into());
    }
    if let Some(date) = &args.date {
        generator_args.extend(["--date".to_string(), date.clone()]);
    }
    Ok(Fetched { args: generator_args })
}

/// `cargo xtask catalog`: fetch, then build and run the generator.
pub fn run(args: CatalogArgs) -> Result<()> {
    let fetched = fetch(&args)?;
    let mut cmd = util::cargo_command();
    cmd.args(["run", "--profile", "ci", "--locked", "-q", "-p", "carpentry-tests", "--bin", "catalog", "--"])
        .args(&fetched.args);
    util::run(&mut cmd)
}

/// `cargo xtask test`'s check, with the generator its `ci` test build made (running it through
/// `cargo run -p carpentry-tests` would resolve features for that package alone and compile the
/// core once more).
pub fn check_with_built_generator(fetched: &Fetched) -> Result<()> {
    let generator = crate::target_dir().join("ci/catalog");
    ensure!(generator.is_file(), "{} is not built (the ci test build makes it)", generator.display());
    util::run(Command::new(generator).args(&fetched.args))
}

fn fetch_moto_wheel(version: &str, cache: &Path) -> Result<PathBuf> {
    let find = || -> Option<PathBuf> {
        let prefix = format!("moto-{version}-");
        let mut found: Vec<PathBuf> = fs::read_dir(cache)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".whl"))
            })
            .collect();
        found.sort();
        found.pop()
    };
    if let Some(p) = find() {
        return Ok(p);
    }
    fs::create_dir_all(cache)?;
    let spec = format!("moto=={version}");
    let attempts: [(&str, &[&str]); 3] = [("pip", &[]), ("pip3", &[]), ("python3", &["-m", "pip"])];
    let mut last_err = None;
    for (program, prefix) in attempts {
        eprintln!("fetching {spec} with {program} download");
        let status = Command::new(program)
            .args(prefix)
            .args(["download", "--no-deps", "--only-binary=:all:", "--dest"])
            .arg(cache)
            .arg(&spec)
            .status();
        match status {
            Ok(s) if s.success() => {
                return find().ok_or_else(|| anyhow!("pip download succeeded but no moto-{version} wheel appeared"))
            }
            Ok(s) => last_err = Some(anyhow!("{program} download {spec} failed: {s}")),
            Err(e) => last_err = Some(anyhow!("cannot run {program}: {e}")),
        }
    }
    Err(last_err.unwrap_or_else(|| anyhow!("no pip found")))
}

// ---------------------------------------------------------------------------------------------
// karpenter-provider-aws (Go module).

fn fetch_karpenter_module(version: &str, cache: &Path) -> Result<PathBuf> {
    Ok(crate::gomod::download(KARPENTER_MODULE, version, cache)?.dir)
}
