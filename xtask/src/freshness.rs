//! Freshness by content for the machine's shared target directory.
//!
//! Cargo takes a workspace crate as fresh when none of its source files is newer than its last
//! build. A clone gives every file the time of the clone, so each CI run (a fresh clone in a new
//! folder) rebuilt every workspace crate although the target directory, and the artifacts in it,
//! are shared (cargo names a workspace crate's artifacts independently of the folder). Before a
//! build, [`restore`] gives each tracked file whose content is what it was when last seen here
//! the modification time it had then; a file whose content changed keeps its new time, so cargo
//! rebuilds the crates that changed and only those (what cargo's unstable `-Zchecksum-freshness`
//! does).
//!
//! Files that name `CARGO_MANIFEST_DIR` are never given an old time: cargo does not track that
//! variable, so a test built in another folder would keep the old folder's path. When the last
//! build in the target directory was another checkout's (the record names its folder), they are
//! touched, so the crates that embed it (test harnesses, xtask) rebuild for this folder: a
//! long-lived checkout's files are older than another clone's build, and cargo would take that
//! build as fresh.
//!
//! The record (`xtask-freshness.tsv` in the target directory: content hash, time, path) is
//! written before the build. A file whose content is not the recorded one is touched: its time
//! becomes now, later than any artifact in the target directory, whatever content that artifact
//! was built from (a clone's or an editor's time could be older than an artifact built meanwhile
//! from another checkout). The task holds `xtask-freshness.lock` while it builds and runs what
//! it built, so that no other task's build (another clone's CI, a developer's `cargo xtask test`)
//! runs between one task's record and its build; `play` lets it go before it serves. A task that
//! finds the lock taken says who holds it and gives up after a bound ([`lock`]). The invariant only holds while every build in the shared target
//! directory goes through the tasks: a plain `cargo build` there with `CARGO_TARGET_DIR` set to
//! it could leave an artifact newer than a recorded time, of other content.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

const RECORD: &str = "xtask-freshness.tsv";
/// Files whose content embeds the checkout's folder.
const FOLDER_DEPENDENT: &str = "CARGO_MANIFEST_DIR";
/// The record's first line: `root<TAB>the checkout's folder` of the last restore.
const ROOT_FIELD: &str = "root";

/// What [`restore`] did.
pub struct Restored {
    pub unchanged: usize,
    pub changed: usize,
    pub folder_dependent: usize,
}

/// The lock a task holds while it builds in the shared target directory (released on drop, and by
/// the system when the process ends: an advisory lock never outlives its holder).
pub struct Lock {
    /// The target directory it guards.
    pub target: std::path::PathBuf,
    /// Held while open.
    _file: std::fs::File,
}

const LOCK_FILE: &str = "xtask-freshness.lock";
/// How long a task waits for another's lock before it gives up, unless [`LOCK_TIMEOUT_VAR`] says.
const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Overrides [`DEFAULT_LOCK_TIMEOUT`]: seconds, or a number with `s`, `m` or `h`.
pub const LOCK_TIMEOUT_VAR: &str = "CARPENTRY_LOCK_TIMEOUT";
/// How often a waiting task says again who holds the lock.
const REPORT_EVERY: Duration = Duration::from_secs(60);
const POLL_EVERY: Duration = Duration::from_millis(250);

/// Takes the shared target directory's lock. When another task holds it, says who (the holder
/// writes its pid, start time and command line into the lock file), again every minute, and
/// gives up after [`LOCK_TIMEOUT_VAR`] (30 minutes by default) with an error naming the holder.
pub fn lock(target: &Path) -> Result<Lock> {
    let timeout = match std::env::var(LOCK_TIMEOUT_VAR) {
        Ok(value) if !value.trim().is_empty() => parse_duration(&value)
            .with_context(|| format!("{LOCK_TIMEOUT_VAR}={value:?}: expected seconds, or a number with s, m or h"))?,
        _ => DEFAULT_LOCK_TIMEOUT,
    };
    lock_within(target, timeout)
}

fn lock_within(target: &Path, timeout: Duration) -> Result<Lock> {
    use std::io::{Read, Seek, Write};
    std::fs::create_dir_all(target)?;
    let path = target.join(LOCK_FILE);
    // Not truncated on open: the holder's line is what a waiting task reports.
    let mut file = std::fs::File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("open the freshness lock {}", path.display()))?;
    let started = std::time::Instant::now();
    let mut reported: Option<std::time::Instant> = None;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("take the freshness lock {}", path.display()))
            }
        }
        let mut holder = String::new();
        file.seek(std::io::SeekFrom::Start(0)).and_then(|_| file.read_to_string(&mut holder)).ok();
        let holder = Holder::parse(&holder)
            .map_or_else(|| "a task that has not yet said who it is".to_string(), |h| h.describe(SystemTime::now()));
        let waited = started.elapsed();
        if waited >= timeout {
            anyhow::bail!(
                "gave up after {}s waiting for the lock on {} held by {holder}; wait for it to end or stop it \
                 (a lock whose holder is gone is free at once), or set {LOCK_TIMEOUT_VAR} to wait longer",
                timeout.as_secs(),
                target.display()
            );
        }
        if reported.is_none_or(|at| at.elapsed() >= REPORT_EVERY) {
            eprintln!(
                "freshness: another task builds in {}: {holder}; waiting for it ({}s so far, giving up after {}s; \
                 {LOCK_TIMEOUT_VAR} sets the bound)",
                target.display(),
                waited.as_secs(),
                timeout.as_secs()
            );
            reported = Some(std::time::Instant::now());
        }
        std::thread::sleep(POLL_EVERY.min(timeout - waited));
    }
    let holder = Holder {
        pid: std::process::id(),
        since: SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    file.set_len(0)
        .and_then(|_| file.seek(std::io::SeekFrom::Start(0)))
        .and_then(|_| file.write_all(holder.line().as_bytes()))
        .with_context(|| format!("write the holder into {}", path.display()))?;
    Ok(Lock { target: target.to_path_buf(), _file: file })
}

/// Who holds the lock, as its holder wrote it: `pid<TAB>unix seconds<TAB>command line`.
#[derive(Debug, PartialEq)]
struct Holder {
    pid: u32,
    since: u64,
    command: String,
}

impl Holder {
    fn line(&self) -> String {
        format!("{}\t{}\t{}\n", self.pid, self.since, self.command.replace(['\n', '\t'], " "))
    }

    fn parse(text: &str) -> Option<Holder> {
        let mut fields = text.trim_end_matches('\n').splitn(3, '\t');
        Some(Holder {
            pid: fields.next()?.parse().ok()?,
            since: fields.next()?.parse().ok()?,
            command: fields.next()?.to_string(),
        })
    }

    fn describe(&self, now: SystemTime) -> String {
        let held = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs().saturating_sub(self.since);
        format!("pid {} (`{}`), holding it for {}m{:02}s", self.pid, self.command, held / 60, held % 60)
    }
}

/// `90`, `90s`, `30m`, `2h`.
fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number.parse().ok()?;
    let secs = match unit {
        "s" => n,
        "m" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

/// Gives the unchanged tracked files of the checkout at `root` their recorded times, touches the
/// changed ones, and records every file's content and time for the next build in `target`. The
/// caller holds [`lock`].
pub fn restore(root: &Path, target: &Path) -> Result<Restored> {
    let listed = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .context("git ls-files")?;
    anyhow::ensure!(listed.status.success(), "git ls-files: {}", String::from_utf8_lossy(&listed.stderr));
    let record_path = target.join(RECORD);
    let record_text = std::fs::read_to_string(&record_path).unwrap_or_default();
    let root_line = format!("{ROOT_FIELD}\t{}", root.display());
    let same_folder = record_text.lines().next() == Some(root_line.as_str());
    let recorded: HashMap<String, (u64, Duration)> = record_text
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(4, '\t');
            let hash = u64::from_str_radix(fields.next()?, 16).ok()?;
            let secs = fields.next()?.parse().ok()?;
            let nanos = fields.next()?.parse().ok()?;
            Some((fields.next()?.to_string(), (hash, Duration::new(secs, nanos))))
        })
        .collect();
    let mut restored = Restored { unchanged: 0, changed: 0, folder_dependent: 0 };
    let now = SystemTime::now();
    let mut record = format!("{root_line}\n");
    for path in listed.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let path = String::from_utf8_lossy(path).into_owned();
        let file = root.join(&path);
        let Ok(content) = std::fs::read(&file) else { continue }; // a deleted or unreadable file
        if contains(&content, FOLDER_DEPENDENT.as_bytes()) {
            restored.folder_dependent += 1;
            if !same_folder {
                set_modified(&file, now).with_context(|| format!("touch {path}"))?;
            }
            continue;
        }
        let hash = fnv1a(&content);
        let time = match recorded.get(&path) {
            Some(&(h, time)) if h == hash => {
                set_modified(&file, UNIX_EPOCH + time).with_context(|| format!("set the time of {path}"))?;
                restored.unchanged += 1;
                time
            }
            _ => {
                set_modified(&file, now).with_context(|| format!("touch {path}"))?;
                restored.changed += 1;
                now.duration_since(UNIX_EPOCH).unwrap_or_default()
            }
        };
        record.push_str(&format!("{hash:016x}\t{}\t{}\t{path}\n", time.as_secs(), time.subsec_nanos()));
    }
    std::fs::create_dir_all(target)?;
    std::fs::write(&record_path, record).with_context(|| format!("write {}", record_path.display()))?;
    Ok(restored)
}

fn set_modified(file: &Path, time: SystemTime) -> std::io::Result<()> {
    std::fs::File::options().append(true).open(file)?.set_modified(time)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// 64-bit FNV-1a: enough to tell one file's versions apart (two versions colliding, about 2^-64,
/// would skip one rebuild).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchanged_files_get_their_recorded_time_and_changed_ones_are_touched() {
        let dir = std::env::temp_dir().join(format!("xtask-freshness-{}", std::process::id()));
        let (root, target) = (dir.join("repo"), dir.join("target"));
        std::fs::create_dir_all(&root).unwrap();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git").args(args).current_dir(&root).output().unwrap().status;
            assert!(ok.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(root.join("a.rs"), "fn a() {}").unwrap();
        std::fs::write(root.join("b.rs"), "fn b() {}").unwrap();
        std::fs::write(root.join("c.rs"), "const D: &str = env!(\"CARGO_MANIFEST_DIR\");").unwrap();
        git(&["add", "."]);
        let old = UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        for f in ["a.rs", "b.rs", "c.rs"] {
            set_modified(&root.join(f), old).unwrap();
        }
        let first = restore(&root, &target).unwrap();
        assert_eq!((first.unchanged, first.changed, first.folder_dependent), (0, 2, 1));
        let mtime = |f: &str| std::fs::metadata(root.join(f)).unwrap().modified().unwrap();
        // Nothing recorded yet: each file is touched, and recorded at that time.
        let recorded = mtime("a.rs");
        assert!(recorded > old);
        // No record of this folder: the folder-dependent file is touched, to be rebuilt here.
        assert!(mtime("c.rs") > old);
        // As a new clone: every file new; b.rs's content changed.
        std::fs::write(root.join("b.rs"), "fn b() { 1; }").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let now = SystemTime::now();
        for f in ["a.rs", "b.rs", "c.rs"] {
            set_modified(&root.join(f), now).unwrap();
        }
        let second = restore(&root, &target).unwrap();
        assert_eq!((second.unchanged, second.changed, second.folder_dependent), (1, 1, 1));
        assert_eq!(mtime("a.rs"), recorded);
        // The changed file is touched (never older than an artifact of its old content).
        let touched = mtime("b.rs");
        assert!(touched >= now);
        assert_eq!(mtime("c.rs"), now);
        // b.rs is recorded with its new content and that time.
        set_modified(&root.join("b.rs"), SystemTime::now() + Duration::from_secs(5)).unwrap();
        let third = restore(&root, &target).unwrap();
        assert_eq!((third.unchanged, third.changed), (2, 0));
        assert_eq!(mtime("b.rs"), touched);
        // An edit back to the first content is a change too (the record holds the last one).
        std::fs::write(root.join("b.rs"), "fn b() {}").unwrap();
        set_modified(&root.join("b.rs"), old).unwrap();
        let fourth = restore(&root, &target).unwrap();
        assert_eq!(fourth.changed, 1);
        assert!(mtime("b.rs") > touched);
        // The same folder again: the folder-dependent file keeps its time.
        set_modified(&root.join("c.rs"), old).unwrap();
        restore(&root, &target).unwrap();
        assert_eq!(mtime("c.rs"), old);
        // Another checkout built in the target meanwhile: back here, the file is touched (its
        // time is older than the other checkout's build of it).
        let other = dir.join("other");
        std::fs::create_dir_all(&other).unwrap();
        assert!(std::process::Command::new("git").args(["init", "-q"]).current_dir(&other).status().unwrap().success());
        restore(&other, &target).unwrap();
        restore(&root, &target).unwrap();
        assert!(mtime("c.rs") > old);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_waiting_task_names_the_holder_and_gives_up_after_its_bound() {
        let target = std::env::temp_dir().join(format!("xtask-lock-{}", std::process::id()));
        let held = lock_within(&target, Duration::ZERO).unwrap();
        // flock(2) locks belong to an open file, so a second open in this process is another task.
        let started = std::time::Instant::now();
        let err = format!("{:#}", lock_within(&target, Duration::from_millis(600)).err().expect("the lock is held"));
        assert!(started.elapsed() >= Duration::from_millis(600), "{err}");
        assert!(err.contains(&format!("pid {}", std::process::id())), "{err}");
        let command = std::env::args().next().unwrap();
        assert!(err.contains(&command), "the holder's command line is named: {err}");
        assert!(err.contains(LOCK_TIMEOUT_VAR), "{err}");
        // A holder that is gone (a process that ended drops its lock the same way) frees it at once.
        drop(held);
        let started = std::time::Instant::now();
        let again = lock_within(&target, Duration::from_secs(60)).unwrap();
        assert!(started.elapsed() < Duration::from_secs(30));
        drop(again);
        std::fs::remove_dir_all(&target).unwrap();
    }

    #[test]
    fn the_holder_line_round_trips_and_bounds_parse() {
        let holder = Holder { pid: 42, since: 1_000, command: "xtask\tplay\n--port 1".into() };
        let parsed = Holder::parse(&holder.line()).unwrap();
        assert_eq!(parsed, Holder { pid: 42, since: 1_000, command: "xtask play --port 1".into() });
        assert_eq!(
            parsed.describe(UNIX_EPOCH + Duration::from_secs(1_125)),
            "pid 42 (`xtask play --port 1`), holding it for 2m05s"
        );
        assert_eq!(Holder::parse(""), None);
        assert_eq!(parse_duration("90"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Some(Duration::from_secs(1800)));
        assert_eq!(parse_duration(" 2h "), Some(Duration::from_secs(7200)));
        assert_eq!(parse_duration("5 min"), None);
        assert_eq!(parse_duration("-1"), None);
    }
}
