//! Helm, built from its Go module for the chart's checks (controller/tests/chart.rs runs
//! `helm lint`, `helm template` and `helm install` into the test control plane).
//!
//! tests/helm is a Go module whose go.mod has a `tool` line for `helm.sh/helm/v4/cmd/helm`
//! (pinned there with go.sum), so the binary is upstream's own `helm` command, unchanged. It is
//! built and cached like tests/testenv (`gobin`): a cold build takes about two minutes on two
//! cores, a warm one links the cached binary. The result is `tests/helm/bin/helm` (git-ignored).

use std::path::PathBuf;

use anyhow::Result;

use crate::gobin::{self, GoBinary};

/// Bump to force a rebuild when the build command itself changes.
const BUILD_RECIPE: &str = "helm-build-v1";

/// The Go module helm is built from.
const HELM_MODULE: &str = "helm.sh/helm/v4";

/// The helm binary, built first (or linked from the machine's cache) if go.mod, go.sum or the Go
/// version changed.
pub fn ensure_built() -> Result<PathBuf> {
    let module = crate::workspace_root().join("tests/helm");
    let version = gobin::required_version(&module, HELM_MODULE)?;
    GoBinary {
        name: "helm",
        what: format!("build helm {version} (tests/helm; cold: about two minutes, warm: seconds)"),
        // What helm's own release build stamps in, so `helm version` names the release.
        ldflags: format!("-s -w -X={HELM_MODULE}/internal/version.version={version}"),
        package: "helm.sh/helm/v4/cmd/helm",
        module,
        recipe: BUILD_RECIPE,
    }
    .ensure(false)
}
