//! Running the plugin binary from integration tests.

use std::process::{Command, Output};

/// Runs `kubectl-karpenter ARGS` in the crate directory.
pub fn plugin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kubectl-karpenter"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run kubectl-karpenter")
}

/// Output bytes as text, for assertions and messages.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
