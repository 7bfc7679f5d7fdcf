//! Reading `-f FILE` (or `-f -` for stdin) into located manifests.

use std::io::Read;

use carpentry_core::manifest::{self, Manifests};

use crate::Failure;

/// Reads and loads a manifest file; problems become an input failure (exit 2) listing each one
/// with its file, document, object, field, line and column. Warnings go to stderr.
pub fn load(path: &str) -> Result<Manifests, Failure> {
    let (name, text) = if path == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| Failure::Input(format!("cannot read stdin: {e}")))?;
        ("<stdin>".to_string(), text)
    } else {
        let text = std::fs::read(path).map_err(|e| Failure::Input(format!("cannot read {path}: {e}")))?;
        let text = String::from_utf8(text).map_err(|e| Failure::Input(format!("{path}: not UTF-8 text: {e}")))?;
        (path.to_string(), text)
    };
    match manifest::load(&text) {
        Ok(m) => {
            for w in &m.warnings {
                eprintln!("warning: {name}: {w}");
            }
            Ok(m)
        }
        Err(e) => {
            let mut message = String::new();
            for w in &e.warnings {
                message.push_str(&format!("warning: {name}: {w}\n"));
            }
            for p in &e.problems {
                message.push_str(&format!("error: {name}: {p}\n"));
            }
            Err(Failure::Input(message))
        }
    }
}
