//! The controller at scale (#45 section 4): a benchmark, not a timed test. `cargo xtask scale`
//! runs it (`--pods N --per-node K`); as a test it is ignored, and it asserts only what must hold
//! at any speed.
//!
//! On a testenv of its own with the kwok provider: N bare pods (default 1,000) that fit K to a
//! 16-vCPU node are made before the controller starts, so that one provisioning round sees them
//! all. Measured, and printed as `scale:` lines:
//!
//! * the decision alone: a `--dry-run` controller's provisioning pass over the same cluster, and
//!   core's own time for its `/snapshot` (load, the round's input, `schedule`), best of 3;
//! * the real controller: its round logged → the last NodeClaim created (the controller's own
//!   log clock), start → every NodeClaim created → every pod Running, API writes, peak memory;
//!   every request its rate-limited client sent (`carpentry_api_requests_total`, reads and
//!   writes) and the highest rate between two scrapes 5 s apart, held to the client's limit
//!   (the defaults, upstream's: 200 a second after a burst of 300);
//! * settling: once every pod runs, how long the controller goes on writing to objects (the
//!   conditions and marks the scale-up still calls for), until 15 s pass without a write;
//! * at rest for a minute once settled: API writes (the target is none), CPU time,
//!   memory, the disruption passes' mean, beside core's own time for one disruption pass over the
//!   at-rest `/snapshot`.
//!
//! It fails when the controller does not create the NodeClaims the dry run planned, the pods do
//! not all run, it does not settle within 5 minutes, or it writes to an object at rest (events
//! are counted, not yet held to none).
//!
//! Real: the control plane, kube-scheduler binding the pods, KWOK running them, the controller
//! binary. Injected: the pods (made directly, many at once, as a Job burst or a Deployment's
//! scale-up would).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, ensure, Context, Result};
use carpentry_tests::testenv::{wait_for, TestEnv};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

#[path = "support/harness.rs"]
mod harness;

use harness::{get, install_crds, metric_sum, resource, start_alone};

/// The controller has settled once this long passes without a write to an object.
const SETTLED_AFTER: Duration = Duration::from_secs(15);
/// A controller still writing this long after every pod runs does not settle.
const SETTLE_BOUND: Duration = Duration::from_secs(300);

/// A NodePool of 16-vCPU on-demand types; its name and its nodes' `node-type` label.
async fn create_pool(client: &Client) -> Result<(String, String)> {
    let requirements = json!([
        { "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"] },
        { "key": "karpenter.k8s.aws/instance-cpu", "operator": "In", "values": ["16"] },
    ]);
    // At rest every pass weighs every node for consolidation: the work a real cluster's
    // controller does all day.
    let disruption = json!({ "consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s" });
    harness::create_pool(client, "scale", requirements, disruption).await
}

/// A pause pod of `millicpu` for the pool's nodes.
fn pod(name: &str, node_type: &str, millicpu: u64) -> Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "app": "scale" } },
        "spec": {
            "nodeSelector": { "node-type": node_type },
            "terminationGracePeriodSeconds": 0,
            "containers": [{ "name": "pause", "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                "resources": { "requests": { "cpu": format!("{millicpu}m"), "memory": "64Mi" } } }],
        },
    }))?)
}

/// The pods of `pods` kube-scheduler gave up on (`PodScheduled=False`) and those Running.
async fn pod_states(pods: &Api<Pod>) -> Result<(usize, usize)> {
    let list = pods.list(&ListParams::default()).await?.items;
    let unschedulable = list
        .iter()
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "PodScheduled" && c.status == "False"))
        })
        .count();
    let running = list.iter().filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")).count();
    Ok((unschedulable, running))
}

/// Seconds since midnight of a JSON log line's `timestamp` (UTC, RFC 3339), on the log's clock.
fn log_seconds(line: &str) -> Option<f64> {
    let at = line.split("\"timestamp\":\"").nth(1)?.get(11..)?;
    let time = at.split('Z').next()?;
    let mut parts = time.split(':');
    let (h, m, s): (f64, f64, f64) =
        (parts.next()?.parse().ok()?, parts.next()?.parse().ok()?, parts.next()?.parse().ok()?);
    Some(h * 3600.0 + m * 60.0 + s)
}

/// The first `provisioning round` that planned NodeClaims: (log seconds, how many).
fn first_round(log: &str) -> Option<(f64, usize)> {
    log.lines().filter(|l| l.contains("\"provisioning round\"")).find_map(|l| {
        let n: usize = l.split("\"nodeclaims\":").nth(1)?.split([',', '}']).next()?.parse().ok()?;
        (n > 0).then(|| Some((log_seconds(l)?, n))).flatten()
    })
}

/// `/proc/<pid>/status`'s `key` in MiB (VmRSS, VmHWM).
fn memory_mib(pid: u32, key: &str) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':')?.trim().strip_suffix("kB")?.trim().parse().ok())
        .with_context(|| format!("no {key} in /proc/{pid}/status"))?;
    Ok(kib / 1024.0)
}

/// User + system CPU seconds of `pid` (`/proc/<pid>/stat`, in clock ticks of 1/100 s).
fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').context("/proc/pid/stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    Ok((ticks(11) + ticks(12)) / 100.0)
}

/// The controller's client limit (`--kube-client-qps`, `--kube-client-burst`: their defaults,
/// upstream's).
const CLIENT_QPS: f64 = 200.0;
const CLIENT_BURST: f64 = 300.0;

/// A scrape of the requests the controller's rate-limited client sent: when it was asked, when
/// it was answered, the total.
type RequestSample = (Instant, Instant, f64);

/// Samples `carpentry_api_requests_total{client="requests"}` every 5 s until `stop` (each
/// scrape builds every pod's `karpenter_pods_state` series, so not more often).
fn sample_requests(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<RequestSample>> {
    std::thread::spawn(move || {
        let mut samples = Vec::new();
        while !stop.load(Ordering::Acquire) {
            let asked = Instant::now();
            if let Ok(body) = scrape(port) {
                let total = metric_sum(&body, "carpentry_api_requests_total", &[("client", "requests")]);
                samples.push((asked, Instant::now(), total));
            }
            std::thread::sleep(Duration::from_secs(5));
        }
        samples
    })
}

/// The requests between the first and last sample, the highest rate between two consecutive
/// samples, and a pair of samples (any two) between which more was sent than the token bucket
/// allows in the longest time that can have passed between them (`burst + qps × t`), if any.
fn request_rates(samples: &[RequestSample]) -> (f64, f64, Option<String>) {
    let total = match (samples.first(), samples.last()) {
        (Some(first), Some(last)) => last.2 - first.2,
        _ => 0.0,
    };
    let mut highest: f64 = 0.0;
    let mut over = None;
    for pair in samples.windows(2) {
        let ((asked_a, answered_a, a), (asked_b, answered_b, b)) = (pair[0], pair[1]);
        let between = (asked_b + (answered_b - asked_b) / 2) - (asked_a + (answered_a - asked_a) / 2);
        highest = highest.max((b - a) / between.as_secs_f64());
    }
    for (i, &(asked_a, _, a)) in samples.iter().enumerate() {
        for &(_, answered_b, b) in &samples[i + 1..] {
            let longest = (answered_b - asked_a).as_secs_f64();
            if b - a > CLIENT_BURST + CLIENT_QPS * longest {
                over = Some(format!("{} requests in at most {longest:.1} s", b - a));
            }
        }
    }
    (total, highest, over)
}

/// A metrics scrape.
fn scrape(port: u16) -> Result<String> {
    let (status, body) = get(port, "/metrics")?;
    ensure!(status == 200, "/metrics answered {status}");
    Ok(body)
}

/// The events the controller (reporting as `karpenter`) wrote since `since` (new ones, and repeats counted into a series), by reason and
/// by whether they were new: `Unconsolidatable 30 new, DisruptionBlocked 2 repeated`.
async fn events_since(client: &Client, since: k8s_openapi::jiff::Timestamp) -> Result<String> {
    let events: Api<Event> = Api::all(client.clone());
    let mut by_reason: BTreeMap<(String, &str), usize> = BTreeMap::new();
    let ours = |e: &Event| e.reporting_controller.as_deref() == Some("karpenter");
    for e in events.list(&ListParams::default()).await?.items.into_iter().filter(ours) {
        let reason = e.reason.clone().unwrap_or_default();
        if e.event_time.as_ref().is_some_and(|t| t.0 >= since) {
            *by_reason.entry((reason, "new")).or_default() += 1;
        } else if e.series.as_ref().is_some_and(|s| s.last_observed_time.0 >= since) {
            *by_reason.entry((reason, "repeated")).or_default() += 1;
        }
    }
    let mut counts: Vec<_> = by_reason.into_iter().collect();
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    let text: Vec<String> = counts.iter().map(|((reason, how), n)| format!("{reason} {n} {how}")).collect();
    Ok(if text.is_empty() { "none".into() } else { text.join(", ") })
}

/// `carpentry_api_writes_total` by verb and resource.
fn writes_of(body: &str) -> BTreeMap<String, f64> {
    body.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("carpentry_api_writes_total{")?;
            let (labels, value) = rest.split_once("} ")?;
            let label = |k: &str| labels.split(',').find_map(|p| p.strip_prefix(&format!("{k}=\""))?.strip_suffix('"'));
            Some((format!("{} {}", label("verb")?, label("resource")?), value.parse().ok()?))
        })
        .collect()
}

/// The writes of `after` not in `before`, by verb and resource, most first: `create Event 1000, …`.
fn writes_by_kind(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> String {
    let mut kinds: Vec<(f64, &String)> = after
        .iter()
        .map(|(kind, n)| (n - before.get(kind).copied().unwrap_or(0.0), kind))
        .filter(|(n, _)| *n > 0.0)
        .collect();
    kinds.sort_by(|a, b| b.0.total_cmp(&a.0));
    kinds.iter().map(|(n, k)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
}

/// A concern's passes: (seconds, count).
fn pass_seconds(body: &str, concern: &str) -> (f64, f64) {
    (
        metric_sum(body, "carpentry_reconcile_pass_duration_seconds_sum", &[("concern", concern)]),
        metric_sum(body, "carpentry_reconcile_pass_duration_seconds_count", &[("concern", concern)]),
    )
}

/// The best of three runs of `f`, in milliseconds.
fn best_of_3(mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let began = Instant::now();
        f()?;
        best = best.min(began.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(best)
}

/// Core's own provisioning round over a `/snapshot`: (ms, NodeClaims planned).
fn core_round(snapshot: &str) -> Result<(f64, usize)> {
    let catalogue = carpentry_core::Catalogue::embedded();
    let region = carpentry_core::manifest::scenario::DEFAULT_REGION;
    let mut planned = 0;
    let ms = best_of_3(|| {
        let m = carpentry_core::load(snapshot).map_err(|e| anyhow!("the snapshot does not load: {e}"))?;
        let prepared = carpentry_core::input_from_manifests(&m, catalogue, Some(region))?;
        planned = carpentry_core::schedule(&prepared.input).nodeclaims.len();
        Ok(())
    })?;
    Ok((ms, planned))
}

/// Core's own disruption pass over a `/snapshot`, in ms.
fn core_disruption(snapshot: &str) -> Result<f64> {
    use carpentry_core::disruption::{decide, facts, View};
    let catalogue = carpentry_core::Catalogue::embedded();
    let region = carpentry_core::manifest::scenario::DEFAULT_REGION;
    let m = carpentry_core::load(snapshot).map_err(|e| anyhow!("the snapshot does not load: {e}"))?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs() as i64;
    best_of_3(|| {
        let nodes = facts::of_objects(&m, catalogue, region, &BTreeMap::new(), &BTreeSet::new());
        let pass = decide(&View::new(&m, catalogue, region, now, nodes, Vec::new()));
        std::hint::black_box(pass);
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "a benchmark of minutes: cargo xtask scale"]
async fn scale() -> Result<()> {
    let Some(env) = TestEnv::shared() else { return Ok(()) };
    let var = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let (n, per_node) = (var("CARPENTRY_SCALE_PODS", 1000) as usize, var("CARPENTRY_SCALE_PER_NODE", 15).max(1));
    // 15.5 of a 16-vCPU node's 15.89 allocatable CPUs, in `per_node` pods.
    let millicpu = 15_500 / per_node;
    eprintln!("scale: {n} pods of {millicpu}m CPU, {per_node} to a 16-vCPU node");
    let client = env.client().await?;
    install_crds(&client).await?;
    let ns = env.namespace(&client, "scale").await?;
    let (nodepool, node_type) = create_pool(&client).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

    let began = Instant::now();
    let made: Vec<Result<Pod, kube::Error>> = futures::stream::iter(0..n)
        .map(|i| {
            let pods = pods.clone();
            let pod = pod(&format!("scale-{i}"), &node_type, millicpu);
            async move { pods.create(&PostParams::default(), &pod.expect("a valid pod")).await }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    made.into_iter().collect::<Result<Vec<_>, _>>()?;
    wait_for("kube-scheduler to give up on every pod", Duration::from_secs(600), || async {
        Ok((pod_states(&pods).await?.0 == n).then_some(()))
    })
    .await?;
    eprintln!("scale: {n} pods made and unschedulable in {:.1} s", began.elapsed().as_secs_f64());

    // The decision alone: a dry run's round, and core's over its snapshot.
    let (mut dry, dry_health, dry_metrics) = start_alone(env, &ns, &["--dry-run"])?;
    let planned = wait_for("the dry run's provisioning round", Duration::from_secs(600), || async {
        Ok(first_round(&dry.log()).map(|(_, n)| n))
    })
    .await
    .with_context(|| dry.log())?;
    let (dry_sum, dry_count) = pass_seconds(&scrape(dry_metrics)?, "scheduling");
    let dry_peak = memory_mib(dry.child.id(), "VmHWM")?;
    let (status, snapshot) = get(dry_health, "/snapshot")?;
    ensure!(status == 200, "/snapshot answered {status}");
    dry.terminate(Duration::from_secs(30))?;
    let (core_ms, core_planned) = core_round(&snapshot)?;
    eprintln!(
        "scale: decision: dry-run scheduling passes (provisioning, disruption) {:.0} ms in {dry_count}, {planned} NodeClaims planned, peak {dry_peak:.0} MiB; core alone on its /snapshot ({} KiB) {core_ms:.0} ms, {core_planned} NodeClaims",
        dry_sum * 1000.0,
        snapshot.len() / 1024
    );
    ensure!(core_planned == planned, "core plans {core_planned} NodeClaims on the snapshot, the dry run {planned}");

    // The real controller.
    let (controller, health, metrics) = start_alone(env, &ns, &[])?;
    let started = Instant::now();
    let stop_sampling = Arc::new(AtomicBool::new(false));
    let sampling = sample_requests(metrics, stop_sampling.clone());
    let started_at = k8s_openapi::jiff::Timestamp::now();
    let nodeclaims =
        Api::<DynamicObject>::all_with(client.clone(), &resource("karpenter.sh", "NodeClaim", "nodeclaims"));
    let ours = format!("karpenter.sh/nodepool={nodepool}");
    wait_for("every planned NodeClaim", Duration::from_secs(600), || async {
        Ok((nodeclaims.list(&ListParams::default().labels(&ours)).await?.items.len() >= planned).then_some(()))
    })
    .await
    .with_context(|| controller.log())?;
    let all_created = started.elapsed();
    let log = controller.log();
    let (round_at, round_planned) = first_round(&log).context("no provisioning round in the log")?;
    let last_created =
        log.lines().filter(|l| l.contains("NodeClaimCreated")).filter_map(log_seconds).fold(f64::NAN, f64::max);
    wait_for("every pod Running", Duration::from_secs(900), || async {
        Ok((pod_states(&pods).await?.1 == n).then_some(()))
    })
    .await
    .with_context(|| controller.log())?;
    let all_running = started.elapsed();
    stop_sampling.store(true, Ordering::Release);
    let samples = sampling.join().map_err(|_| anyhow!("the request sampler panicked"))?;
    let (requests, highest, over) = request_rates(&samples);
    let rising_events = events_since(&client, started_at).await?;
    let log_began = log.lines().find_map(log_seconds).unwrap_or(f64::NAN);
    let body = scrape(metrics)?;
    let writes = metric_sum(&body, "carpentry_api_writes_total", &[]);
    let (prov_sum, prov_count) = pass_seconds(&body, "scheduling");
    let pid = controller.child.id();
    eprintln!(
        "scale: controller: round of {round_planned} NodeClaims logged → last created {:.2} s; start → all created {:.1} s → all {n} pods Running {:.1} s; scheduling passes {:.0} ms in {prov_count}; {writes} API writes ({}); peak {:.0} MiB",
        last_created - round_at,
        all_created.as_secs_f64(),
        all_running.as_secs_f64(),
        prov_sum * 1000.0,
        writes_by_kind(&BTreeMap::new(), &writes_of(&body)),
        memory_mib(pid, "VmHWM")?
    );
    eprintln!(
        "scale: controller: first log line → round logged {:.1} s; events written while scaling up: {rising_events}",
        round_at - log_began
    );
    let scrapes: Vec<f64> = samples.iter().map(|(asked, answered, _)| (*answered - *asked).as_secs_f64()).collect();
    eprintln!(
        "scale: controller: {requests} API requests while scaling up ({} samples 5 s apart), at most {highest:.1} a second between two (limit {CLIENT_QPS} after a burst of {CLIENT_BURST}); a /metrics scrape took {:.0} ms mean, {:.0} ms at most",
        samples.len(),
        scrapes.iter().sum::<f64>() * 1000.0 / scrapes.len().max(1) as f64,
        scrapes.iter().copied().fold(0.0, f64::max) * 1000.0
    );
    if let Some(over) = over {
        anyhow::bail!("the client sent more than its rate limit allows: {over}");
    }
    let count = nodeclaims.list(&ListParams::default().labels(&ours)).await?.items.len();
    ensure!(count == planned, "{count} NodeClaims for the {planned} the dry run planned");

    // Settling: the writes the scale-up still calls for once every pod runs (Consolidatable,
    // lastPodEventTime, the consistency check's first scan, behind the client's QPS limit and a
    // busy machine) end, then the minute at rest begins. A controller that never stops writing
    // never settles.
    let object_writes = |body: &str| -> f64 {
        writes_of(body).iter().filter(|(kind, _)| !kind.ends_with(" Event")).map(|(_, n)| n).sum()
    };
    let settling = Instant::now();
    let at_running = scrape(metrics)?;
    let (mut last, mut last_change) = (object_writes(&at_running), Instant::now());
    while last_change.elapsed() < SETTLED_AFTER {
        ensure!(
            settling.elapsed() < SETTLE_BOUND,
            "still writing to objects {} s after every pod runs: {}",
            SETTLE_BOUND.as_secs(),
            writes_by_kind(&writes_of(&at_running), &writes_of(&scrape(metrics)?))
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = object_writes(&scrape(metrics)?);
        if now != last {
            (last, last_change) = (now, Instant::now());
        }
    }
    let settled = scrape(metrics)?;
    eprintln!(
        "scale: settled: the last write to an object {:.0} s after every pod ran; since then: {}",
        (last_change - settling).as_secs_f64(),
        writes_by_kind(&writes_of(&at_running), &writes_of(&settled))
    );

    // At rest.
    let (before, cpu_before, at) = (scrape(metrics)?, cpu_seconds(pid)?, Instant::now());
    let since = k8s_openapi::jiff::Timestamp::now();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let (after, cpu_after, window) = (scrape(metrics)?, cpu_seconds(pid)?, at.elapsed().as_secs_f64());
    let rest_events = events_since(&client, since).await?;
    let rest_writes =
        metric_sum(&after, "carpentry_api_writes_total", &[]) - metric_sum(&before, "carpentry_api_writes_total", &[]);
    let (d0, c0) = pass_seconds(&before, "scheduling");
    let (d1, c1) = pass_seconds(&after, "scheduling");
    let (v0, vc0) = pass_seconds(&before, "view");
    let (v1, vc1) = pass_seconds(&after, "view");
    let (status, rest_snapshot) = get(health, "/snapshot")?;
    ensure!(status == 200, "/snapshot answered {status}");
    let core_disruption_ms = core_disruption(&rest_snapshot)?;
    let per_pass = |sum: f64, count: f64| if count > 0.0 { sum / count * 1000.0 } else { f64::NAN };
    eprintln!(
        "scale: at rest ({count} nodes, {n} pods, {window:.0} s): {rest_writes} API writes; CPU {:.1}% of a core; RSS {:.0} MiB (peak {:.0}); scheduling pass (disruption at rest) {:.0} ms mean of {}; view load {:.0} ms mean of {}; core's disruption pass on its /snapshot {core_disruption_ms:.0} ms",
        (cpu_after - cpu_before) / window * 100.0,
        memory_mib(pid, "VmRSS")?,
        memory_mib(pid, "VmHWM")?,
        per_pass(d1 - d0, c1 - c0),
        c1 - c0,
        per_pass(v1 - v0, vc1 - vc0),
        vc1 - vc0,
    );
    // Events are the exception: nodes' disruption verdicts (`Unconsolidatable`, once per node, as
    // upstream publishes them) are still being published for the first time a minute after the
    // pods run (11-40 measured, every one new); the events line says which were written.
    let (before, after) = (writes_of(&before), writes_of(&after));
    let objects: f64 = after
        .iter()
        .filter(|(kind, _)| !kind.ends_with(" Event"))
        .map(|(kind, n)| n - before.get(kind).copied().unwrap_or(0.0))
        .sum();
    eprintln!("scale: writes at rest: {}; events written: {rest_events}", writes_by_kind(&before, &after));
    ensure!(
        objects == 0.0,
        "{objects} writes to objects in a minute at rest (none expected): {}",
        writes_by_kind(&before, &after)
    );
    Ok(())
}
