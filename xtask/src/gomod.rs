//! Go modules as data: `go mod download` of one module version into the Go module cache, for the
//! tasks that read files from upstream's published modules (the EC2 catalogue's price and limit
//! tables, upstream's CRDs). Nothing is built; the module's files are only read.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, ensure, Context, Result};
use serde_json::Value;

/// One downloaded module version.
#[derive(Debug, Clone)]
pub struct Module {
    /// The module path, e.g. `github.com/aws/karpenter-provider-aws`.
    pub path: String,
    /// The version, e.g. `v1.14.1`.
    pub version: String,
    /// Its extracted files (read-only, in the Go module cache).
    pub dir: PathBuf,
    /// The version's time as the module proxy records it (RFC 3339), when it says.
    pub time: Option<String>,
    /// The go.sum hash of the module's files (`h1:…`).
    pub sum: String,
}

/// Downloads `path@version` (a no-op when the Go module cache already holds it). `scratch` is a
/// directory for the throwaway main module `go mod download` needs.
pub fn download(path: &str, version: &str, scratch: &Path) -> Result<Module> {
    let scratch = scratch.join("gomod");
    fs::create_dir_all(&scratch)?;
    fs::write(scratch.join("go.mod"), "module carpentry.invalid/data\n\ngo 1.21\n")?;
    let module = format!("{path}@{version}");
    eprintln!("fetching {module} with go mod download");
    let output = Command::new("go")
        .args(["mod", "download", "-json", &module])
        .current_dir(&scratch)
        .env("GOFLAGS", "-mod=mod")
        .output()
        .with_context(|| format!("cannot run `go` (needed to read {module})"))?;
    let info: Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("go mod download printed no JSON: {}", String::from_utf8_lossy(&output.stderr)))?;
    if let Some(err) = info["Error"].as_str() {
        bail!("go mod download {module}: {err}");
    }
    ensure!(output.status.success(), "go mod download {module} failed: {}", String::from_utf8_lossy(&output.stderr));
    let field =
        |name: &str| info[name].as_str().map(str::to_owned).ok_or_else(|| anyhow!("go mod download gave no {name}"));
    let time = match info["Info"].as_str() {
        Some(file) => fs::read(file)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .and_then(|v| v["Time"].as_str().map(str::to_owned)),
        None => None,
    };
    Ok(Module {
        path: path.to_string(),
        version: field("Version")?,
        dir: PathBuf::from(field("Dir")?),
        time,
        sum: field("Sum")?,
    })
}
