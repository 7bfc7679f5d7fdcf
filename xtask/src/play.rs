//! `cargo xtask play`: build carpentry-wasm for the browser and serve the playground.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::util;

#[derive(clap::Args)]
pub struct PlayArgs {
    /// Port to serve on (127.0.0.1).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Build the bundle into web/dist and exit without serving.
    #[arg(long, conflicts_with = "prebuilt")]
    build_only: bool,
    /// Serve a bundle built before (by `--build-only` or `cargo xtask test`, in web/dist) from
    /// this folder, without building.
    #[arg(long, value_name = "DIR")]
    pub prebuilt: Option<PathBuf>,
}

/// Builds the bundle under `build_lock` (the shared target directory's, when the task took it),
/// lets the lock go, then serves until stopped: another task (`cargo xtask test` in another
/// terminal) builds while the playground stays open.
pub fn run(args: PlayArgs, build_lock: Option<crate::freshness::Lock>) -> Result<()> {
    let dist = match args.prebuilt {
        Some(dir) => {
            anyhow::ensure!(
                dir.join("index.html").is_file(),
                "--prebuilt {}: no index.html there (build one with `cargo xtask play --build-only`)",
                dir.display()
            );
            dir
        }
        None => build_bundle()?,
    };
    drop(build_lock);
    if args.build_only {
        eprintln!("playground bundle written to {}", dist.display());
        return Ok(());
    }
    serve(&dist, args.port)
}

/// Builds the wasm crate, runs wasm-bindgen and lays out web/dist. Returns the dist directory.
/// The wasm build shares `cargo xtask test`'s target directory for it, so after a test run the
/// playground only relinks.
pub fn build_bundle() -> Result<PathBuf> {
    util::ensure_rust_toolchain()?;
    let target = playground_target_dir();
    build_wasm(&target)?;
    ensure_wasm_bindgen_cli(&locked_version("wasm-bindgen")?)?;
    package(&target)
}

/// The playground's wasm32 release build in `target`. Core and the wasm adapter are named too (the
/// web crate depends on both), so that this one build is also the check that they build for
/// wasm32-unknown-unknown. (`cargo xtask test` gives it a target directory of its own, so that it
/// runs beside the native builds without waiting for their lock.)
pub fn build_wasm(target: &Path) -> Result<()> {
    util::step("build carpentry-web (release, wasm32)", || {
        util::cargo_in(
            target,
            &[
                "build",
                "--locked",
                "--release",
                "-p",
                "carpentry-web",
                "-p",
                "carpentry-wasm",
                "-p",
                "carpentry-core",
                "--target",
                "wasm32-unknown-unknown",
            ],
        )
    })
}

/// The target directory of the playground's wasm32 build: a folder of the tasks' own, so that
/// `cargo xtask test` builds it beside the native builds without waiting for their cargo lock.
pub fn playground_target_dir() -> PathBuf {
    crate::target_dir().join("playground")
}

/// web/dist from the wasm [`build_wasm`] left in `target`: wasm-bindgen's glue, the optimised
/// module and the page (wasm-bindgen-cli must be installed).
pub fn package(target: &Path) -> Result<PathBuf> {
    let dist = PathBuf::from("web/dist");
    // Start clean: files of an older layout must not linger on a static host.
    let _ = std::fs::remove_dir_all(&dist);
    std::fs::create_dir_all(&dist)?;
    let wasm = target.join("wasm32-unknown-unknown/release/carpentry_web.wasm");
    util::step("wasm-bindgen", || {
        util::run(
            Command::new(wasm_bindgen_program())
                .args(["--target", "web", "--no-typescript", "--out-dir"])
                .arg(&dist)
                .arg(&wasm),
        )
    })?;
    optimize(&dist.join("carpentry_web_bg.wasm"))?;
    std::fs::copy("web/static/index.html", dist.join("index.html")).context("copy index.html")?;
    let size = std::fs::metadata(dist.join("carpentry_web_bg.wasm")).map(|m| m.len()).unwrap_or(0);
    eprintln!("playground wasm: {:.2} MB", size as f64 / 1e6);
    Ok(dist)
}

/// The post-MVP features rustc's wasm32-unknown-unknown target enables by default (and that every
/// current browser supports).
const WASM_FEATURES: &[&str] = &[
    "--enable-bulk-memory",
    "--enable-sign-ext",
    "--enable-mutable-globals",
    "--enable-nontrapping-float-to-int",
    "--enable-reference-types",
    "--enable-multivalue",
];

/// Shrinks the wasm with binaryen's wasm-opt when it is installed (Debian's `binaryen`); the
/// bundle works without it, only larger.
fn optimize(wasm: &Path) -> Result<()> {
    if util::output(Command::new("wasm-opt").arg("--version")).is_err() {
        eprintln!("wasm-opt not found (apt-get install binaryen): the wasm is left unoptimized");
        return Ok(());
    }
    let optimized = wasm.with_extension("opt.wasm");
    // Rust's wasm32 target emits post-MVP features that wasm-opt must be told it may keep. An
    // older binaryen that cannot read them (Debian 12's 108 stops at `table.fill`) is not an
    // error: the unoptimized module is what rustc and wasm-bindgen made, and it works.
    let ran = util::run(Command::new("wasm-opt").args(["-Oz"]).args(WASM_FEATURES).arg(wasm).arg("-o").arg(&optimized));
    match ran {
        Ok(()) => std::fs::rename(&optimized, wasm).context("replace the wasm with its optimized build")?,
        Err(e) => {
            let _ = std::fs::remove_file(&optimized);
            eprintln!("wasm-opt could not optimize the module; it is left as built ({e:#})");
        }
    }
    Ok(())
}

/// The version of a package pinned in Cargo.lock (wasm-bindgen-cli must match the library exactly).
fn locked_version(package: &str) -> Result<String> {
    let lock = std::fs::read_to_string("Cargo.lock").context("read Cargo.lock")?;
    let needle = format!("name = \"{package}\"\nversion = \"");
    let start = lock.find(&needle).with_context(|| format!("{package} is not in Cargo.lock"))? + needle.len();
    let end = lock[start..].find('"').context("malformed Cargo.lock")?;
    Ok(lock[start..start + end].to_string())
}

/// wasm-bindgen as `cargo install` put it: in `$CARGO_HOME/bin` (which need not be on PATH), else
/// from PATH.
fn wasm_bindgen_program() -> PathBuf {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    cargo_home.map(|h| h.join("bin/wasm-bindgen")).filter(|p| p.is_file()).unwrap_or_else(|| "wasm-bindgen".into())
}

fn ensure_wasm_bindgen_cli(version: &str) -> Result<()> {
    let installed = util::output(Command::new(wasm_bindgen_program()).arg("--version")).unwrap_or_default();
    if installed.split_whitespace().nth(1) == Some(version) {
        return Ok(());
    }
    util::step(&format!("install wasm-bindgen-cli {version}"), || {
        // Its own target directory (kept, so a reinstall is quick): the install can then run
        // beside the workspace's builds without waiting for their lock on target/.
        let target = crate::target_dir().join("xtask/wasm-bindgen-cli");
        let target = target.to_str().context("the target directory is not UTF-8")?;
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let install = |locked: bool| {
            let mut cmd = util::low_priority(&cargo);
            // Without its default `rustls-tls` feature (TLS for its test runner's downloads, which
            // we do not use; it compiles rustls and ring) and at opt-level 1: the install is on a
            // fresh machine's critical path, and the bindgen step it serves takes seconds either way.
            cmd.args(["install", "--quiet", "wasm-bindgen-cli", "--version", version, "--no-default-features"]);
            cmd.args(["--target-dir", target]);
            cmd.env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "1");
            if locked {
                cmd.arg("--locked");
            }
            util::run(&mut cmd)
        };
        // The CLI's own lockfile can pin crates the registry no longer serves (yanked versions);
        // fall back to a fresh resolution within its semver ranges.
        install(true).or_else(|_| install(false))
    })
}

/// Installs wasm-bindgen-cli (at the version Cargo.lock pins) on a thread of its own, at low
/// priority, when it is missing; `cargo xtask test` starts it first and waits for it before the
/// bundle.
pub fn ensure_wasm_bindgen_cli_in_background() -> Result<util::Background> {
    let version = locked_version("wasm-bindgen")?;
    util::background(&format!("wasm-bindgen-cli {version}"), "wasm-bindgen-cli", move || {
        ensure_wasm_bindgen_cli(&version)
    })
}

fn serve(dist: &Path, port: u16) -> Result<()> {
    let server = tiny_http::Server::http(("127.0.0.1", port))
        .map_err(|e| anyhow::anyhow!("cannot listen on 127.0.0.1:{port}: {e}"))?;
    eprintln!(
        "carpentry playground: http://127.0.0.1:{port}/ (Ctrl-C to stop; the build lock is released, \
         so `cargo xtask test` can run meanwhile)"
    );
    for request in server.incoming_requests() {
        let path = request.url().split('?').next().unwrap_or("/").trim_start_matches('/').to_string();
        let path = if path.is_empty() { "index.html".to_string() } else { path };
        // Only plain file names under dist are served: no traversal out of it.
        if path.contains("..") || path.contains('\\') {
            let _ = request.respond(tiny_http::Response::empty(400));
            continue;
        }
        match std::fs::read(dist.join(&path)) {
            Ok(body) => {
                let content_type = match Path::new(&path).extension().and_then(|e| e.to_str()) {
                    Some("html") => "text/html; charset=utf-8",
                    Some("js") => "text/javascript",
                    Some("wasm") => "application/wasm",
                    Some("css") => "text/css",
                    Some("json") => "application/json",
                    _ => "application/octet-stream",
                };
                let header = tiny_http::Header::from_bytes("Content-Type", content_type).expect("static header");
                let _ = request.respond(tiny_http::Response::from_data(body).with_header(header));
            }
            Err(_) => {
                let _ = request.respond(tiny_http::Response::empty(404));
            }
        }
    }
    bail!("server stopped")
}
