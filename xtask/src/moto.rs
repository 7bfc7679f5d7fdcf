//! moto, the EC2/SSM endpoint of the `aws` provider's tests (controller/tests/aws.rs): PyPI
//! `moto[server]` at a pinned version in a virtual environment under the machine's cache
//! (`<cache>/moto-<version>/`, made once per machine, so a fresh clone reuses it), and
//! `CARPENTRY_PYTHON` pointed at its interpreter for the test run.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The moto release the tests and docs/controller.md describe (its behaviour is pinned by it).
pub const MOTO_VERSION: &str = "5.2.5";

/// The interpreter of a virtual environment holding `moto[server]==MOTO_VERSION`.
pub fn ensure_installed() -> Result<PathBuf> {
    let dir = crate::gobin::cache_dir()?.join(format!("moto-{MOTO_VERSION}"));
    let python = dir.join("bin/python3");
    let stamp = dir.join(".installed");
    if stamp.is_file() && python.is_file() {
        eprintln!("moto {MOTO_VERSION}: installed at {}", dir.display());
        return Ok(python);
    }
    let base = ["python3", "python"].into_iter().find(|p| crate::util::have(p)).context(
        "Python 3 (3.10 or newer) is needed for moto, the EC2 endpoint of the aws provider's tests, and was not found on PATH",
    )?;
    let _ = std::fs::remove_dir_all(&dir);
    crate::util::run(Command::new(base).args(["-m", "venv"]).arg(&dir))
        .with_context(|| format!("{base} -m venv {} (on Debian: apt-get install python3-venv)", dir.display()))?;
    crate::util::run(Command::new(&python).args([
        "-m",
        "pip",
        "install",
        "--quiet",
        &format!("moto[server]=={MOTO_VERSION}"),
    ]))
    .context("pip install moto[server]")?;
    let check = crate::util::output(Command::new(&python).args(["-c", "import moto; print(moto.__version__)"]))?;
    if check.trim() != MOTO_VERSION {
        bail!("moto {MOTO_VERSION} was installed but the venv imports moto {}", check.trim());
    }
    std::fs::write(&stamp, MOTO_VERSION)?;
    Ok(python)
}
