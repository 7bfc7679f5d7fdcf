//! The shared target directory's lock as a user meets it, through the xtask binary itself.
//!
//! Real: the xtask binary, its tasks' command-line handling, the lock file and flock(2), the
//! playground's HTTP server. Injected: a cache directory of the test's own (`CARPENTRY_CACHE_DIR`),
//! so the lock is not the one the surrounding `cargo xtask test` holds; the fake holder is this
//! test process; `play --prebuilt` serves a one-file bundle instead of building the wasm, which
//! takes and releases the lock on the same path as a building `play`.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-lock-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("target")).unwrap();
    dir
}

/// The xtask binary with the lock under `cache` (the outer test run's `CARGO_TARGET_DIR` would
/// make it skip the lock, as it does for a user's own target directory).
fn xtask(cache: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.env("CARPENTRY_CACHE_DIR", cache).env_remove("CARGO_TARGET_DIR").env_remove("CARPENTRY_LOCK_TIMEOUT");
    cmd
}

fn lock_file(cache: &Path) -> PathBuf {
    cache.join("target/xtask-freshness.lock")
}

/// Kills the child when the test ends, passed or not.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_task_waiting_for_the_lock_names_its_holder_and_gives_up_after_the_bound() {
    let cache = scratch("holder");
    let mut holder =
        File::options().read(true).write(true).create(true).truncate(true).open(lock_file(&cache)).unwrap();
    holder.lock().unwrap();
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() - 125;
    write!(holder, "{}\t{since}\tfake-holder --of the test", std::process::id()).unwrap();

    let started = Instant::now();
    let out = xtask(&cache).arg("test").env("CARPENTRY_LOCK_TIMEOUT", "2s").output().unwrap();
    let waited = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the task must fail, not proceed: {stderr}");
    assert!(waited >= Duration::from_secs(2) && waited < Duration::from_secs(60), "waited {waited:?}: {stderr}");
    let holder_named = format!("pid {} (`fake-holder --of the test`), holding it for 2m0", std::process::id());
    assert!(stderr.contains(&format!("another task builds in {}", cache.join("target").display())), "{stderr}");
    assert!(stderr.contains(&holder_named), "the waiting line names the holder: {stderr}");
    assert!(stderr.contains("gave up after 2s"), "{stderr}");
    assert_eq!(stderr.matches(&holder_named).count(), 2, "one waiting line and the error: {stderr}");

    // The holder gone (as when its process ends), a task takes the lock at once and goes on.
    drop(holder);
    assert_takes_the_lock_and_goes_on(&cache);
    std::fs::remove_dir_all(&cache).unwrap();
}

/// Runs `play --prebuilt` on a folder with no bundle: a task that takes the lock, then fails at
/// its first step. Past the lock it must get, within a bound far below the 30 s it is given.
fn assert_takes_the_lock_and_goes_on(cache: &Path) {
    let started = Instant::now();
    let out = xtask(cache)
        .args(["play", "--prebuilt"])
        .arg(cache.join("no-bundle"))
        .env("CARPENTRY_LOCK_TIMEOUT", "30s")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no index.html there"), "the task got past the lock: {stderr}");
    assert!(!stderr.contains("another task builds"), "it did not wait: {stderr}");
    assert!(started.elapsed() < Duration::from_secs(20), "{stderr}");
}

#[test]
fn a_serving_playground_does_not_hold_the_lock() {
    let cache = scratch("play");
    let dist = cache.join("dist");
    std::fs::create_dir_all(&dist).unwrap();
    std::fs::write(dist.join("index.html"), "<p>carpentry</p>").unwrap();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let play = xtask(&cache)
        .args(["play", "--port", &port.to_string(), "--prebuilt"])
        .arg(&dist)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let play = Killed(play);

    let deadline = Instant::now() + Duration::from_secs(60);
    let page = loop {
        if let Some(page) = get(port) {
            break page;
        }
        assert!(Instant::now() < deadline, "the playground never answered on port {port}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(page.contains("<p>carpentry</p>"), "{page}");

    // play took the lock on its way (it wrote itself in as the holder) and let it go before serving.
    let line = std::fs::read_to_string(lock_file(&cache)).unwrap();
    assert!(line.starts_with(&format!("{}\t", play.0.id())), "play wrote itself in: {line:?}");
    assert!(line.contains(" play --port "), "{line:?}");
    assert_takes_the_lock_and_goes_on(&cache);
    // And the server is still there.
    assert!(get(port).is_some_and(|page| page.contains("<p>carpentry</p>")));
    drop(play);
    std::fs::remove_dir_all(&cache).unwrap();
}

/// The body of `GET /`, or None while nothing answers.
fn get(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.starts_with("HTTP/1.").then_some(response)
}
