//! Go binaries the tests need (tests/testenv, tests/oracle, tests/helm), built once per machine.
//!
//! A binary is identified by a stamp: its build recipe, an FNV-1a hash of the module's go.mod,
//! go.sum and Go sources, and the Go version. The build goes to a machine-wide cache
//! (`$CARPENTRY_CACHE_DIR`, else `$XDG_CACHE_HOME/carpentry`, else `~/.cache/carpentry`) under
//! `go-bin/<name>-<stamp hash>/`, so a fresh clone on a machine that built the same inputs before
//! links the binary in seconds instead of compiling Kubernetes again. Inside the clone the binary
//! sits where the tests look for it (`<module>/bin/<name>`, git-ignored), a hard link to the cached
//! file (a copy across file systems), beside a `.stamp` file.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::util;

/// One Go binary: what it is called, its module, and the build's particulars.
pub struct GoBinary<'a> {
    /// The binary's file name, also the cache entry's prefix.
    pub name: &'a str,
    /// The Go module directory (holds go.mod).
    pub module: PathBuf,
    /// The package to build: `.` (the module's own main package) or a main package of one of its
    /// dependencies (a `tool` line in go.mod, e.g. `helm.sh/helm/v4/cmd/helm`).
    pub package: &'a str,
    /// Bump to force a rebuild when the build command itself changes.
    pub recipe: &'a str,
    /// `-ldflags` for `go build`.
    pub ldflags: String,
    /// What the step table calls a real build.
    pub what: String,
}

/// Cache entries of one binary kept besides the current one (older stamps are removed).
const KEEP_OLD_ENTRIES: usize = 2;

impl GoBinary<'_> {
    /// The binary inside the clone, built or linked from the machine's cache first if its stamp
    /// is not current.
    pub fn ensure(&self, force: bool) -> Result<PathBuf> {
        let bin_dir = self.module.join("bin");
        let bin = bin_dir.join(self.name);
        let stamp_path = bin_dir.join(".stamp");
        let go = find_go()?;
        let go_version = util::output(Command::new(&go).arg("version"))?;
        let stamp = format!("{} {:016x} {}", self.recipe, hash_inputs(&self.module)?, go_version.trim());
        if !force && bin.is_file() && std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp) {
            return Ok(bin);
        }
        let entry = cache_dir()?.join("go-bin").join(format!("{}-{:016x}", self.name, fnv1a(stamp.as_bytes())));
        let cached = entry.join(self.name);
        if force || !cached.is_file() {
            util::step(&self.what, || self.build(&go, &entry, &cached))?;
            prune_old_entries(&entry, self.name);
        } else {
            eprintln!("{}: linked from the machine's cache ({})", self.name, cached.display());
        }
        std::fs::create_dir_all(&bin_dir).with_context(|| format!("create {}", bin_dir.display()))?;
        place(&cached, &bin)?;
        std::fs::write(&stamp_path, &stamp).with_context(|| format!("write {}", stamp_path.display()))?;
        Ok(bin)
    }

    /// `go build` into the cache entry, at low priority (developers' machines are shared with Rust
    /// builds, and `cargo xtask test` runs it beside the Rust compiles). CARPENTRY_GO_BUILD_JOBS
    /// sets `go build -p` (default: the number of CPUs).
    fn build(&self, go: &Path, entry: &Path, cached: &Path) -> Result<()> {
        std::fs::create_dir_all(entry).with_context(|| format!("create {}", entry.display()))?;
        let tmp = entry.join(format!("{}.tmp-{}", self.name, std::process::id()));
        let jobs = std::env::var("CARPENTRY_GO_BUILD_JOBS")
            .ok()
            .filter(|j| !j.is_empty())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()).to_string());
        let mut cmd = util::low_priority(go);
        // No DWARF from the compiler (`-gcflags=all=-dwarf=false`) and none kept by the linker
        // (`-s -w`): the binaries are for tests, whose failures are read from logs, and the debug
        // information is a measurable share of a cold build.
        cmd.current_dir(&self.module)
            .args(["build", "-p", &jobs, "-trimpath", "-gcflags=all=-dwarf=false", "-ldflags", &self.ldflags, "-o"])
            .arg(&tmp)
            .arg(self.package)
            .env("CGO_ENABLED", "0")
            .env("GOTOOLCHAIN", "local")
            // go.mod and go.sum are committed and complete: never rewrite them during a build.
            .env("GOFLAGS", "-mod=readonly -buildvcs=false");
        util::run(&mut cmd)?;
        std::fs::rename(&tmp, cached).with_context(|| format!("move the build to {}", cached.display()))?;
        let size = std::fs::metadata(cached)?.len();
        eprintln!("{}: {} ({} MiB)", self.name, cached.display(), size >> 20);
        Ok(())
    }
}

/// The version of `dependency` that the Go module in `module` requires (its `go.mod`'s
/// `require` line, in a block or alone).
pub fn required_version(module: &Path, dependency: &str) -> Result<String> {
    let path = module.join("go.mod");
    let gomod = std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    gomod
        .lines()
        .map(|line| line.trim().trim_start_matches("require").trim())
        .find_map(|line| line.strip_prefix(dependency)?.strip_prefix(' ')?.split_whitespace().next().map(str::to_owned))
        .with_context(|| format!("{} does not require {dependency}", path.display()))
}

/// The machine-wide cache directory of this project's tasks.
pub fn cache_dir() -> Result<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = env("CARPENTRY_CACHE_DIR") {
        return Ok(dir);
    }
    if let Some(dir) = env("XDG_CACHE_HOME") {
        return Ok(dir.join("carpentry"));
    }
    match env("HOME") {
        Some(home) => Ok(home.join(".cache/carpentry")),
        None => bail!("neither CARPENTRY_CACHE_DIR, XDG_CACHE_HOME nor HOME is set: no place for the build cache"),
    }
}

/// Makes `to` the same file as `from`: a hard link, else a copy (another file system), replacing
/// what was there in one rename.
fn place(from: &Path, to: &Path) -> Result<()> {
    let tmp = to.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    if std::fs::hard_link(from, &tmp).is_err() {
        std::fs::copy(from, &tmp).with_context(|| format!("copy {} to {}", from.display(), tmp.display()))?;
    }
    std::fs::rename(&tmp, to).with_context(|| format!("move {} to {}", tmp.display(), to.display()))
}

/// Removes all but the newest [`KEEP_OLD_ENTRIES`] other cache entries of the same binary.
fn prune_old_entries(current: &Path, name: &str) {
    let Some(parent) = current.parent() else { return };
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    let prefix = format!("{name}-");
    let mut old: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p != current && p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&prefix)))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    old.sort_by_key(|entry| std::cmp::Reverse(entry.0));
    for (_, path) in old.into_iter().skip(KEEP_OLD_ENTRIES) {
        let _ = std::fs::remove_dir_all(path);
    }
}

/// Go from PATH, else the usual install location.
pub fn find_go() -> Result<PathBuf> {
    if util::have("go") {
        return Ok(PathBuf::from("go"));
    }
    let usual = PathBuf::from("/usr/local/go/bin/go");
    if usual.is_file() {
        return Ok(usual);
    }
    bail!("Go (1.26 or newer) is needed to build the test control plane (tests/testenv) and the upstream oracle (tests/oracle) and was found neither on PATH nor at /usr/local/go/bin/go")
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// FNV-1a over go.mod, go.sum and every .go file (path and contents), outside bin/.
fn hash_inputs(module: &Path) -> Result<u64> {
    let mut files = Vec::new();
    collect_inputs(module, module, &mut files)?;
    files.sort();
    let mut all = Vec::new();
    for rel in files {
        all.extend_from_slice(rel.as_bytes());
        all.push(0);
        let data = std::fs::read(module.join(&rel)).with_context(|| format!("read {rel}"))?;
        all.extend_from_slice(&(data.len() as u64).to_le_bytes());
        all.extend_from_slice(&data);
    }
    Ok(fnv1a(&all))
}

fn collect_inputs(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_dir() {
            if name != "bin" && !name.starts_with('.') {
                collect_inputs(root, &path, out)?;
            }
        } else if name == "go.mod" || name == "go.sum" || name.ends_with(".go") {
            out.push(path.strip_prefix(root)?.to_string_lossy().into_owned());
        }
    }
    Ok(())
}
