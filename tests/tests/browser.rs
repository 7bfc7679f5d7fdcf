//! The playground end to end in real headless Chromium (Debian's `chromium` and `chromium-driver`,
//! which `cargo xtask test` installs), driven over WebDriver. The page is the release bundle in
//! web/dist (`cargo xtask play --build-only` builds it), served from a loopback port.
//!
//! One walk through what a user does: open the page cold, load the `inflate` example, scale it to
//! 3, explain a pending pod, run the clock, see three nodes with instance types and prices, explain
//! one (its verdict is core's, computed natively beside the page), share
//! the state through the URL and reload to the same state. It also measures the first render and
//! the engine's recompute of the 1,000-pod example (`performance.now()` in the page), printed to
//! stderr and written to target/browser/figures.json, and saves a screenshot of the main view as
//! target/browser/main-view.png. Timings are reported, never asserted.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free loopback port")
}

/// Serves `dist` on 127.0.0.1 in a background thread; returns the base URL.
fn serve(dist: PathBuf) -> String {
    let server = tiny_http::Server::http("127.0.0.1:0").expect("bind a loopback port");
    let port = server.server_addr().to_ip().expect("an IP listener").port();
    std::thread::spawn(move || {
        for request in server.incoming_requests() {
            let path = request.url().split(['?', '#']).next().unwrap_or("/").trim_start_matches('/').to_string();
            let path = if path.is_empty() { "index.html".to_string() } else { path };
            let kind = match Path::new(&path).extension().and_then(|e| e.to_str()) {
                Some("html") => "text/html; charset=utf-8",
                Some("js") => "text/javascript",
                Some("wasm") => "application/wasm",
                _ => "application/octet-stream",
            };
            let response = match std::fs::read(dist.join(&path)) {
                Ok(body) if !path.contains("..") => tiny_http::Response::from_data(body)
                    .with_header(tiny_http::Header::from_bytes("Content-Type", kind).expect("static header")),
                _ => tiny_http::Response::from_data(Vec::new()).with_status_code(404),
            };
            let _ = request.respond(response);
        }
    });
    format!("http://127.0.0.1:{port}/")
}

/// chromedriver, killed when dropped.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_driver() -> (Driver, String) {
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start chromedriver ({e}); `cargo xtask test` installs Debian's chromium and chromium-driver")
        });
    let driver = Driver(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not listen on port {port} within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    (driver, format!("http://127.0.0.1:{port}"))
}

async fn browser(driver_url: &str) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": "/usr/bin/chromium",
            // Root in a container: no sandbox. A fresh profile per session: a cold load.
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1600,1000"],
        }),
    );
    // chromedriver speaks plain HTTP on loopback: no TLS.
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector).capabilities(caps).connect(driver_url).await.expect("a WebDriver session")
}

/// Polls `script` (a JS expression) until it is truthy; returns its value.
async fn wait_for(c: &Client, what: &str, script: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = c.execute(&format!("return ({script});"), vec![]).await.expect("script runs");
        if !(v.is_null() || v == json!(false) || v == json!("") || v == json!(0)) {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what} ({script})");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn text(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("no {css}: {e}")).text().await.expect("text")
}

async fn click(c: &Client, css: &str) {
    c.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("no {css}: {e}")).click().await.expect("click");
}

/// Rows of the node tables: (name, instance type, price).
async fn node_rows(c: &Client) -> Vec<(String, String, String)> {
    let v = c
        .execute(
            "return [...document.querySelectorAll('tr[data-node]')].map(r => [r.dataset.node, \
             r.querySelector('.instance-type').textContent, r.querySelector('.price').textContent]);",
            vec![],
        )
        .await
        .expect("rows");
    serde_json::from_value(v).expect("rows as triples")
}

/// What core says of `node` after the walk below (inflate scaled to 3 at the start, three
/// minutes run), computed natively.
fn native_node_verdict(node: &str) -> &'static str {
    use carpentry_core::manifest::scenario::{ScaleAction, Step};
    let m = carpentry_core::load(include_str!("../../web/examples/inflate.yaml")).expect("the example loads");
    let mut sim = carpentry_core::Simulation::new(&m, None, carpentry_core::Timings::default()).expect("it runs");
    let scale =
        ScaleAction { kind: "Deployment".into(), namespace: "default".into(), name: "inflate".into(), replicas: 3 };
    sim.act(&Step { at: "0s".into(), scale: Some(scale), ..Step::default() }, None).expect("scale");
    sim.run_until(carpentry_core::SimTime::from_secs(180));
    sim.explain_node(node).unwrap_or_else(|| panic!("core knows node {node}")).verdict().describe()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn playground_end_to_end_in_chromium() {
    let dist = workspace().join("web/dist");
    assert!(
        dist.join("index.html").exists() && dist.join("carpentry_web_bg.wasm").exists(),
        "web/dist has no bundle: run `cargo xtask play --build-only` (cargo xtask test does)"
    );
    let artifacts = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
        .join("browser");
    std::fs::create_dir_all(&artifacts).expect("artifact directory");
    let base = serve(dist);
    let (_driver, driver_url) = start_driver();
    let c = browser(&driver_url).await;

    // A cold load: fresh profile, nothing cached.
    c.goto(&base).await.expect("open the page");
    wait_for(&c, "the first render", "document.body.dataset.ready === 'true'").await;
    let first_render_ms: f64 =
        wait_for(&c, "the first-render figure", "Number(document.body.dataset.firstRenderMs)").await.as_f64().unwrap();

    // Load the inflate example and scale it to 3.
    click(&c, "button[data-example='inflate']").await;
    wait_for(&c, "the inflate workload", "document.querySelector(\"[data-workload='inflate'] .replicas\")").await;
    assert_eq!(text(&c, "#node-count").await, "0");
    let replicas = c.find(Locator::Css("[data-workload='inflate'] .replicas")).await.unwrap();
    replicas.clear().await.unwrap();
    replicas.send_keys("3").await.unwrap();
    click(&c, "[data-workload='inflate'] .scale-button").await;
    wait_for(&c, "3 pending pods", "document.getElementById('pending-count').textContent === '3'").await;

    // Click a pending pod: its explanation says what a round would do with it.
    click(&c, "#pending-table .pod-name").await;
    let verdict = text(&c, "#pod-verdict").await;
    assert!(verdict.contains("launches a NodeClaim of NodePool default"), "pending pod explanation: {verdict}");

    // Run the clock: three minutes, a minute at a time.
    for _ in 0..3 {
        click(&c, "#run-1m").await;
    }
    wait_for(&c, "three running pods", "document.getElementById('running-count').textContent === '3'").await;
    assert_eq!(text(&c, "#node-count").await, "3");
    let rows = node_rows(&c).await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (name, instance_type, price) in &rows {
        assert!(instance_type.contains('.') && !instance_type.contains('…'), "{name}: instance type {instance_type:?}");
        assert!(price.starts_with('$') && price != "$0.0000", "{name}: price {price:?}");
    }
    let clock = text(&c, "#clock").await;
    assert_eq!(clock, "+3m0s");

    // Click a node: the page states core's verdict on it, the one the plugin prints.
    let node = &rows[0].0;
    click(&c, &format!("tr[data-node='{node}'] .node-name")).await;
    let shown = text(&c, "#node-verdict").await;
    assert_eq!(shown, format!("It {}.", native_node_verdict(node)), "node {node}");
    let screenshot = c.screenshot().await.expect("screenshot");
    std::fs::write(artifacts.join("main-view.png"), &screenshot).expect("save the screenshot");

    // Share via the URL, forget the local copy, reload from the link: the same state.
    click(&c, "#share").await;
    let link = wait_for(&c, "the share link", "document.getElementById('share-link')?.value").await;
    let link = link.as_str().unwrap().to_string();
    assert!(link.contains("#s="), "{link}");
    c.execute("localStorage.clear(); return true;", vec![]).await.unwrap();
    c.goto("about:blank").await.unwrap();
    c.goto(&link).await.expect("open the share link");
    wait_for(&c, "the shared state", "document.body.dataset.ready === 'true' && document.getElementById('node-count')")
        .await;
    assert_eq!(text(&c, "#clock").await, clock);
    assert_eq!(node_rows(&c).await, rows, "the shared link rebuilds the same nodes, types and prices");

    // The engine's recompute of a 1,000-pod scenario: load the YAML and run the first
    // provisioning round (pods go pending at the start; the round batches them after 1 s).
    click(&c, "button[data-example='thousand-pods']").await;
    let figures = c
        .execute(
            "const yaml = document.getElementById('yaml').value;
             const runs = [], load = [], round = [], state = [];
             let last;
             for (let i = 0; i < 15; i++) {
               const t0 = performance.now();
               const p = new window.carpentry.Playground(yaml);
               const t1 = performance.now();
               p.runUntil(2000);
               const t2 = performance.now();
               last = p.state();
               const t3 = performance.now();
               runs.push(t3 - t0); load.push(t1 - t0); round.push(t2 - t1); state.push(t3 - t2);
               p.free();
             }
             return {runs, load, round, state, nodes: last.nodes.length, pending: last.pending.length};",
            vec![],
        )
        .await
        .expect("recompute in the page");
    let series = |key: &str| -> Vec<f64> {
        let mut v: Vec<f64> = serde_json::from_value(figures[key].clone()).unwrap();
        v.sort_by(f64::total_cmp);
        v
    };
    let median = |v: &[f64]| v[v.len() / 2];
    // Karpenter packs the 1,000 pods into a few large NodeClaims.
    assert!(figures["nodes"].as_u64().unwrap() >= 1, "the round planned NodeClaims: {figures}");
    let first_run = figures["runs"][0].as_f64().unwrap();
    let runs = series("runs");
    // The page's own recompute after a minute of the 1,000-pod cluster (running and drawing state).
    click(&c, "#run-1m").await;
    wait_for(&c, "the 1,000 pods running", "document.getElementById('running-count').textContent === '1000'").await;
    let ui_ms: f64 =
        wait_for(&c, "the page's recompute", "Number(document.body.dataset.computeMs)").await.as_f64().unwrap();
    let report = json!({
        "firstRenderMs": first_render_ms,
        "recompute1000PodsMs": {
            "median": median(&runs),
            "min": runs[0],
            "first": first_run,
            "runs": runs.len(),
            "medianLoad": median(&series("load")),
            "medianFirstRound": median(&series("round")),
            "medianState": median(&series("state")),
        },
        "uiRunOneMinute1000PodsMs": ui_ms,
    });
    eprintln!("browser figures: {report}");
    std::fs::write(artifacts.join("figures.json"), serde_json::to_string_pretty(&report).unwrap()).unwrap();
    eprintln!("screenshot: {}", artifacts.join("main-view.png").display());
    c.close().await.expect("end the WebDriver session");
}
