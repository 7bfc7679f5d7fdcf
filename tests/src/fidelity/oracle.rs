//! The upstream oracle (tests/oracle, Go) as a child process: `oracle batch` reads one input per
//! line and answers one output per line, so the catalogue is parsed once per process.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{bail, Context, Result};

use super::compare::OracleOutput;
use super::export::SentSets;

/// Where `cargo xtask fidelity` / `cargo xtask test` build the oracle (tests/oracle/bin/oracle);
/// overridden by `CARPENTRY_ORACLE`.
pub fn default_path() -> PathBuf {
    if let Some(p) = std::env::var_os("CARPENTRY_ORACLE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("oracle/bin/oracle")
}

pub struct Oracle {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub sent: SentSets,
}

impl Oracle {
    pub fn start(path: &Path) -> Result<Oracle> {
        let mut child = Command::new(path)
            .arg("batch")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| {
                format!("starting the oracle {} (build it with `cargo xtask fidelity`)", path.display())
            })?;
        let stdin = child.stdin.take().context("oracle stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("oracle stdout")?);
        Ok(Oracle { child, stdin, stdout, sent: SentSets::default() })
    }

    /// Sends one input document and reads upstream's answer.
    pub fn solve(&mut self, input: &serde_json::Value) -> Result<OracleOutput> {
        let mut line = serde_json::to_vec(input)?;
        line.push(b'\n');
        self.stdin.write_all(&line).context("writing to the oracle")?;
        self.stdin.flush()?;
        let mut answer = String::new();
        if self.stdout.read_line(&mut answer)? == 0 {
            bail!("the oracle exited without answering (see its stderr above)");
        }
        serde_json::from_str(&answer).with_context(|| format!("the oracle's answer is not JSON: {}", answer.trim()))
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
