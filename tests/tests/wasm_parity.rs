//! The same core decides the same in the browser as in the CLI: the scenario runner
//! (tests/scenario-runner) is built twice with one profile, natively and for `wasm32-wasip1`, and every
//! `tests/scenarios/*.yaml` is run with both — the native binary as a child process, the wasm
//! module inside wasmtime embedded here — and their standard output must be the same bytes (and
//! their exit codes 0). The wasm/native time ratio is printed to stderr, not asserted.
//! docs/parity.md.
//!
//! `cargo xtask test` builds both runners with the `ci` profile it builds this test with; by hand,
//! with the profile you test with (`ci`, or `release`):
//! `cargo build --profile ci -p carpentry-scenario-runner` and
//! `cargo build --profile ci -p carpentry-scenario-runner --target wasm32-wasip1`.
//! The runners of this test binary's own profile are looked for first, then `release`'s.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use wasmtime::{Engine, InstancePre, Linker, Module, Store};
use wasmtime_wasi::p1::{self, WasiP1Ctx};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

const RUNNER: &str = "carpentry-scenario-runner";
/// Where the scenario directory is preopened inside the guest (read-only).
const GUEST_DIR: &str = "/scenarios";
/// Runs of the largest scenarios timed on each side for the ratio (the fastest run counts).
const TIMED_RUNS: usize = 10;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is inside the workspace").to_path_buf()
}

/// Cargo's target directories to look in: `CARGO_TARGET_DIR` when set (relative to the workspace
/// root, where xtask runs cargo), else the one this test binary was built into
/// (`<target>/debug/deps/wasm_parity-…`), else `<workspace>/target`.
fn target_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        dirs.push(workspace_root().join(dir));
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|exe| exe.ancestors().nth(3).map(Path::to_path_buf)) {
        dirs.push(dir);
    }
    dirs.push(workspace_root().join("target"));
    dirs.dedup();
    dirs
}

/// The profile whose runners the test uses: this test binary's own (`<target>/<profile>/deps/…`;
/// `debug` is cargo's directory for `dev`) when both runners exist there, else `release`.
fn runner_profile() -> String {
    let own = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(2).and_then(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned()));
    let built = |profile: &str| {
        target_dirs().iter().any(|d| {
            d.join(profile).join(RUNNER).is_file() && d.join(format!("wasm32-wasip1/{profile}/{RUNNER}.wasm")).is_file()
        })
    };
    match own {
        Some(profile) if built(&profile) => profile,
        _ => "release".to_string(),
    }
}

/// The runner built for `relative` (`<profile>/…` or `wasm32-wasip1/<profile>/…`) in the first target
/// directory that has it; panics with how to build it when none has, or when a source it was built
/// from changed after it.
fn built_runner(relative: &str, build: &str) -> PathBuf {
    let dirs = target_dirs();
    let Some(path) = dirs.iter().map(|d| d.join(relative)).find(|p| p.is_file()) else {
        let looked: Vec<String> = dirs.iter().map(|d| d.join(relative).display().to_string()).collect();
        panic!("the scenario runner is not built: none of {looked:?} exists; build it with `{build}` (cargo xtask test does)");
    };
    let built = std::fs::metadata(&path).and_then(|m| m.modified()).expect("the runner's mtime");
    if let Some(newer) =
        sources_of(&path).iter().find(|s| std::fs::metadata(s).and_then(|m| m.modified()).map_or(true, |m| m > built))
    {
        panic!("{} is older than {} (or that is gone); rebuild it with `{build}`", path.display(), newer.display());
    }
    path
}

/// The sources `artifact` was built from. Cargo writes them beside it (`<artifact stem>.d`, make's
/// syntax, spaces in paths escaped), so a file of the workspace that is not part of the build —
/// the runner's own tests, say — does not count. Without that file: every file under the
/// runner's and core's sources.
fn sources_of(artifact: &Path) -> Vec<PathBuf> {
    if let Ok(text) = std::fs::read_to_string(artifact.with_extension("d")) {
        if let Some((_, deps)) = text.split_once(": ") {
            return dep_info_paths(deps);
        }
    }
    let root = workspace_root();
    let mut files = Vec::new();
    for dir in
        ["core/src", "core/data", "core/Cargo.toml", "tests/scenario-runner/src", "tests/scenario-runner/Cargo.toml"]
    {
        files_under(&root.join(dir), &mut files);
    }
    files
}

/// The paths of a make rule's prerequisites: separated by unescaped whitespace, `\ ` is a space.
fn dep_info_paths(deps: &str) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    let mut current = String::new();
    let mut chars = deps.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(' ') => current.push(' '),
                Some('\n') | None => {}
                Some(other) => {
                    current.push('\\');
                    current.push(other);
                }
            },
            c if c.is_whitespace() => {
                if !current.is_empty() {
                    paths.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        paths.push(PathBuf::from(current));
    }
    paths
}

fn files_under(path: &Path, out: &mut Vec<PathBuf>) {
    let Ok(meta) = std::fs::metadata(path) else { return };
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            files_under(&entry.path(), out);
        }
    } else {
        out.push(path.to_path_buf());
    }
}

#[test]
fn dep_info_paths_unescape_spaces_and_split_on_whitespace() {
    let deps = "/a/src/main.rs /b\\ c/lib.rs \\\n /d/data.json\n";
    assert_eq!(
        dep_info_paths(deps),
        [PathBuf::from("/a/src/main.rs"), PathBuf::from("/b c/lib.rs"), PathBuf::from("/d/data.json")]
    );
}

/// What one run printed and how long it took.
struct Output {
    code: i32,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    took: Duration,
}

fn run_native(exe: &Path, scenario: &Path) -> Output {
    let started = Instant::now();
    let out = Command::new(exe).arg(scenario).output().expect("start the native runner");
    let took = started.elapsed();
    Output { code: out.status.code().unwrap_or(-1), stdout: out.stdout, stderr: out.stderr, took }
}

/// The wasm runner, compiled once and linked against WASI preview 1.
struct Wasm {
    engine: Engine,
    pre: InstancePre<WasiP1Ctx>,
}

impl Wasm {
    fn load(path: &Path) -> Wasm {
        let engine = Engine::default();
        let module = Module::from_file(&engine, path).expect("compile the wasm runner");
        let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
        p1::add_to_linker_sync(&mut linker, |cx| cx).expect("link WASI preview 1");
        let pre = linker.instantiate_pre(&module).expect("the runner imports only WASI preview 1");
        Wasm { engine, pre }
    }

    /// Runs the runner's `_start` on `dir/name` in a fresh store, `dir` preopened read-only.
    fn run(&self, dir: &Path, name: &str) -> Output {
        let stdout = MemoryOutputPipe::new(256 << 20);
        let stderr = MemoryOutputPipe::new(1 << 20);
        let mut wasi = WasiCtxBuilder::new();
        wasi.args(&[RUNNER.to_string(), format!("{GUEST_DIR}/{name}")])
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .preopened_dir(dir, GUEST_DIR, FsPerms::ReadOnly)
            .expect("preopen the scenario directory");
        let started = Instant::now();
        let mut store = Store::new(&self.engine, wasi.build_p1());
        let instance = self.pre.instantiate(&mut store).expect("instantiate the wasm runner");
        let start = instance.get_typed_func::<(), ()>(&mut store, "_start").expect("a WASI command exports _start");
        let code = match start.call(&mut store, ()) {
            Ok(()) => 0,
            Err(e) => match e.downcast_ref::<I32Exit>() {
                Some(exit) => exit.0,
                None => panic!("{name}: the wasm runner trapped: {e:?}"),
            },
        };
        let took = started.elapsed();
        drop(store);
        Output { code, stdout: stdout.contents().to_vec(), stderr: stderr.contents().to_vec(), took }
    }
}

/// The first line where `a` and `b` differ, with a little context.
fn first_difference(a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    let (mut la, mut lb) = (a.lines(), b.lines());
    let mut n = 1;
    loop {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => n += 1,
            (x, y) => return format!("line {n}:\n  native: {x:?}\n  wasm:   {y:?}"),
        }
    }
}

fn ratio(wasm: Duration, native: Duration) -> f64 {
    wasm.as_secs_f64() / native.as_secs_f64().max(1e-9)
}

#[test]
fn every_scenario_decides_the_same_natively_and_in_wasm() {
    let profile = runner_profile();
    // The directory is `debug` for cargo's `dev` profile, whose name `--profile` wants.
    let cargo_profile = if profile == "debug" { "dev" } else { profile.as_str() };
    let native_exe = built_runner(
        &format!("{profile}/{RUNNER}"),
        &format!("cargo build --profile {cargo_profile} -p carpentry-scenario-runner"),
    );
    let wasm_file = built_runner(
        &format!("wasm32-wasip1/{profile}/{RUNNER}.wasm"),
        &format!("cargo build --profile {cargo_profile} -p carpentry-scenario-runner --target wasm32-wasip1"),
    );
    let compiling = Instant::now();
    let wasm = Wasm::load(&wasm_file);
    eprintln!(
        "wasm runner: {} ({} bytes) compiled by wasmtime in {:.2?}",
        wasm_file.display(),
        std::fs::metadata(&wasm_file).map_or(0, |m| m.len()),
        compiling.elapsed()
    );

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut scenarios: Vec<(String, u64)> = std::fs::read_dir(&dir)
        .expect("tests/scenarios")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let len = e.metadata().ok()?.len();
            name.ends_with(".yaml").then_some((name, len))
        })
        .collect();
    scenarios.sort();
    assert!(!scenarios.is_empty(), "no scenarios in {}", dir.display());

    let mut failures = Vec::new();
    let (mut native_total, mut wasm_total) = (Duration::ZERO, Duration::ZERO);
    let mut most_output: Option<(&str, usize)> = None;
    for (name, _) in &scenarios {
        let native = run_native(&native_exe, &dir.join(name));
        let in_wasm = wasm.run(&dir, name);
        native_total += native.took;
        wasm_total += in_wasm.took;
        if most_output.is_none_or(|(_, len)| native.stdout.len() > len) {
            most_output = Some((name, native.stdout.len()));
        }
        if native.code != 0 || in_wasm.code != 0 {
            failures.push(format!(
                "{name}: exit codes native {} wasm {}\n  native: {}{}\n  wasm: {}{}",
                native.code,
                in_wasm.code,
                String::from_utf8_lossy(&native.stdout),
                String::from_utf8_lossy(&native.stderr),
                String::from_utf8_lossy(&in_wasm.stdout),
                String::from_utf8_lossy(&in_wasm.stderr)
            ));
        } else if native.stdout != in_wasm.stdout {
            failures.push(format!(
                "{name}: the outputs differ ({} bytes native, {} wasm) at {}",
                native.stdout.len(),
                in_wasm.stdout.len(),
                first_difference(&native.stdout, &in_wasm.stdout)
            ));
        }
    }
    eprintln!(
        "{} scenarios: native {native_total:.2?}, wasm {wasm_total:.2?} (×{:.2})",
        scenarios.len(),
        ratio(wasm_total, native_total)
    );

    // The wasm/native time ratio on the largest scenarios, by input (file size) and by what is
    // decided (output size), each the fastest of a few runs per side.
    let largest =
        scenarios.iter().max_by_key(|(name, len)| (*len, std::cmp::Reverse(name.clone()))).map(|(n, _)| n.as_str());
    let mut timed: Vec<(&str, &str)> = largest.map(|n| ("largest file", n)).into_iter().collect();
    if let Some((name, _)) = most_output.filter(|(n, _)| Some(*n) != largest) {
        timed.push(("largest output", name));
    }
    for (why, name) in timed {
        let best = |run: &dyn Fn() -> Output| (0..TIMED_RUNS).map(|_| run().took).min().unwrap_or_default();
        let native = best(&|| run_native(&native_exe, &dir.join(name)));
        let in_wasm = best(&|| wasm.run(&dir, name));
        eprintln!(
            "wasm/native time ratio on {name} ({why}): ×{:.2} (native {native:.2?}, wasm {in_wasm:.2?}; fastest of {TIMED_RUNS})",
            ratio(in_wasm, native)
        );
    }

    assert!(
        failures.is_empty(),
        "{} of {} scenarios differ:\n{}",
        failures.len(),
        scenarios.len(),
        failures.join("\n")
    );
}
