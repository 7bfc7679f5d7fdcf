//! The playground page: editor, gallery, cluster view, time controls, actions, explanations, cost
//! chart and sharing. State lives in one component; the session is rebuilt from the recording
//! when time goes backwards.

use std::collections::BTreeMap;

use carpentry_core::api::time::format_time;
use carpentry_core::disruption::explain::{NodeExplanation, NodePoolExplanation};
use carpentry_core::manifest::scenario::{CapacityShortage, DeleteAction, ScaleAction, Step};
use carpentry_core::scheduling::explain::failure_text;
use carpentry_core::simulation::{Event as SimEvent, NodeState, NodeView, PodStanding};
use carpentry_wasm::session::{LoadFailure, NodeClassSummary, State, Workload};
use carpentry_wasm::Session;
use gloo::storage::Storage as _;
use wasm_bindgen::JsCast as _;
use web_sys::{HtmlInputElement, HtmlSelectElement, HtmlTextAreaElement};
use yew::prelude::*;

use crate::examples::{self, EXAMPLES};
use crate::replay::{ActionKind, Recording};
use crate::share;
use crate::view;

/// Where the page keeps the recording between visits.
const STORAGE_KEY: &str = "carpentry.playground.v1";
/// The `at` of a step taken on the spot (the recording keeps its time).
const NOW: &str = "0s";
/// Tick of the running clock (wall milliseconds).
const TICK_MS: u32 = 250;
/// Rows shown per table before "refine the search".
const ROW_CAP: usize = 200;
const SPEEDS: &[(u64, &str)] = &[(1, "1×"), (10, "10×"), (60, "1 min/s"), (600, "10 min/s"), (3600, "1 h/s")];

/// What the explain pane shows.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    Pod(String),
    Node(String),
    NodePool(String),
}

/// What the page reacts to, by pane; each pane has its handler (`App::on_scenario` and so on).
pub enum Msg {
    Scenario(ScenarioMsg),
    Clock(ClockMsg),
    Explain(ExplainMsg),
    Action(ActionMsg),
    Filter(FilterMsg),
}

/// The scenario pane: the editor, examples and templates, and the file and link menu.
pub enum ScenarioMsg {
    EditorInput(String),
    EditorScroll,
    Load,
    ApplyEditor,
    Example(&'static str),
    Template(String),
    GotoLine(usize),
    Share,
    Export,
    Import(web_sys::File),
    Imported(String),
    Reset,
}

/// The clock: play, pause, speed, step and scrub.
pub enum ClockMsg {
    TogglePlay,
    Tick,
    Speed(u64),
    Step,
    Scrub(u64),
}

/// The explain pane: what is selected, and the budget editor of a selected NodePool.
pub enum ExplainMsg {
    Select(Selection),
    CloseExplain,
    BudgetText(String),
    ApplyBudgets(String),
}

/// The actions pane: scale, delete, interrupt, capacity shortages, AMI pins.
pub enum ActionMsg {
    ScaleInput(String, String),
    Scale(Workload),
    DeleteNode(String),
    InterruptNode(String),
    OfferingField(usize, String),
    MarkUnavailable,
    AmiClass(String),
    AmiAlias(String),
    PinAmi,
}

/// The filters of the node, pod and event tables.
pub enum FilterMsg {
    Search(String),
    StateFilter(String),
    EventFilter(String),
}

pub struct App {
    editor: String,
    recording: Recording,
    session: Option<Session>,
    state: Option<State>,
    events: Vec<SimEvent>,
    workloads: Vec<Workload>,
    nodeclasses: Vec<NodeClassSummary>,
    nodepools: Vec<String>,
    reasons: BTreeMap<String, String>,
    load_error: Option<LoadFailure>,
    action_error: Option<String>,
    playing: bool,
    speed: u64,
    ticker: Option<gloo::timers::callback::Interval>,
    horizon_ms: u64,
    selection: Option<Selection>,
    search: String,
    state_filter: String,
    event_filter: String,
    scale_inputs: BTreeMap<String, String>,
    offering: [String; 4],
    ami_class: String,
    ami_alias: String,
    budget_text: Option<(String, String)>,
    share_link: Option<String>,
    reader: Option<gloo::file::callbacks::FileReader>,
    textarea: NodeRef,
    gutter: NodeRef,
    /// Milliseconds the last recompute took (load/replay/run and state), shown in the footer and
    /// read by the browser tests.
    last_compute_ms: f64,
}

fn now_ms() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map_or(0.0, |p| p.now())
}

fn workload_key(w: &Workload) -> String {
    format!("{}/{}/{}", w.kind, w.namespace, w.name)
}

impl App {
    /// Loads a recording and replays it to its time; errors keep the editor text for fixing.
    fn open(&mut self, recording: Recording) {
        let started = now_ms();
        self.editor = recording.yaml.clone();
        self.selection = None;
        self.action_error = None;
        self.share_link = None;
        self.events.clear();
        match recording.replay(recording.now_ms) {
            Ok(session) => {
                self.load_error = None;
                self.horizon_ms = recording.now_ms.max(recording.actions.last().map_or(0, |a| a.at_ms));
                self.session = Some(session);
            }
            Err(e) => {
                self.load_error = Some(e);
                self.session = None;
                self.state = None;
            }
        }
        self.recording = recording;
        self.refresh();
        self.last_compute_ms = now_ms() - started;
    }

    /// Re-reads everything the page draws from the session.
    fn refresh(&mut self) {
        let Some(session) = &self.session else { return };
        let state = session.state();
        self.recording.now_ms = state.now_ms;
        self.horizon_ms = self.horizon_ms.max(state.now_ms);
        self.events.extend(session.events_since(self.events.len()).iter().cloned());
        self.workloads = session.workloads();
        self.nodeclasses = session.nodeclasses();
        self.nodepools = session.nodepools();
        self.reasons = session.pending_reasons(&state.snapshot.pending);
        if self.ami_class.is_empty() {
            self.ami_class = self.nodeclasses.first().map(|n| n.name.clone()).unwrap_or_default();
        }
        if let Some(Selection::NodePool(np)) = &self.selection {
            if self.budget_text.as_ref().is_none_or(|(name, _)| name != np) {
                self.budget_text = session.budgets(np).ok().map(|b| (np.clone(), b));
            }
        }
        self.state = Some(state);
        self.save();
    }

    fn save(&self) {
        if let Ok(json) = serde_json::to_string(&self.recording) {
            let _ = gloo::storage::LocalStorage::set(STORAGE_KEY, json);
        }
    }

    /// Goes to `ms`: forwards by running, backwards by replaying the recording.
    fn go_to(&mut self, ms: u64) {
        let started = now_ms();
        let now = self.session.as_ref().map_or(0, Session::now_ms);
        if ms >= now {
            if let Some(s) = &mut self.session {
                s.run_until(ms);
            }
        } else {
            match self.recording.replay(ms) {
                Ok(s) => {
                    self.session = Some(s);
                    self.events.clear();
                }
                Err(e) => self.action_error = Some(e.message),
            }
        }
        self.refresh();
        self.last_compute_ms = now_ms() - started;
    }

    /// Takes an action now and records it.
    fn act(&mut self, what: ActionKind) {
        let Some(session) = &mut self.session else { return };
        let at = session.now_ms();
        match what.perform(session) {
            Ok(()) => {
                self.action_error = None;
                self.recording.record(at, what);
                self.horizon_ms = at;
            }
            Err(e) => self.action_error = Some(e),
        }
        self.refresh();
    }

    fn set_playing(&mut self, ctx: &Context<Self>, playing: bool) {
        self.playing = playing;
        self.ticker = if playing {
            let link = ctx.link().clone();
            Some(gloo::timers::callback::Interval::new(TICK_MS, move || link.send_message(Msg::Clock(ClockMsg::Tick))))
        } else {
            None
        };
    }

    fn initial() -> (Recording, Option<String>) {
        let fragment = web_sys::window().and_then(|w| w.location().hash().ok()).unwrap_or_default();
        match share::from_fragment(&fragment) {
            Some(Ok(r)) => {
                // The link has been read: from now on local storage follows what the user does,
                // and a reload restores that rather than the link's moment.
                if let Some(h) = web_sys::window().and_then(|w| w.history().ok()) {
                    let _ = h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some("#"));
                }
                return (r, None);
            }
            Some(Err(e)) => return (Self::example("inflate"), Some(e)),
            None => {}
        }
        if let Ok(json) = gloo::storage::LocalStorage::get::<String>(STORAGE_KEY) {
            if let Ok(r) = serde_json::from_str::<Recording>(&json) {
                return (r, None);
            }
        }
        (Self::example("inflate"), None)
    }

    fn example(id: &str) -> Recording {
        let e = examples::by_id(id).unwrap_or(&EXAMPLES[0]);
        Recording::new(e.yaml.to_string(), Some(e.id.to_string()))
    }
}

impl Component for App {
    type Message = Msg;
    type Properties = ();

    fn create(_ctx: &Context<Self>) -> Self {
        let mut app = App {
            editor: String::new(),
            recording: Recording::default(),
            session: None,
            state: None,
            events: Vec::new(),
            workloads: Vec::new(),
            nodeclasses: Vec::new(),
            nodepools: Vec::new(),
            reasons: BTreeMap::new(),
            load_error: None,
            action_error: None,
            playing: false,
            speed: 10,
            ticker: None,
            horizon_ms: 0,
            selection: None,
            search: String::new(),
            state_filter: String::new(),
            event_filter: String::new(),
            scale_inputs: BTreeMap::new(),
            offering: [String::new(), String::new(), "on-demand".into(), String::new()],
            ami_class: String::new(),
            ami_alias: "al2023@v20261201".into(),
            budget_text: None,
            share_link: None,
            reader: None,
            textarea: NodeRef::default(),
            gutter: NodeRef::default(),
            last_compute_ms: 0.0,
        };
        let (recording, problem) = App::initial();
        app.open(recording);
        if problem.is_some() {
            app.action_error = problem;
        }
        app
    }

    fn rendered(&mut self, _ctx: &Context<Self>, first_render: bool) {
        if let Some(body) = gloo::utils::document().body() {
            if first_render {
                // Milliseconds from navigation start to the first render (performance.now()).
                let _ = body.set_attribute("data-first-render-ms", &format!("{:.1}", now_ms()));
                let _ = body.set_attribute("data-ready", "true");
            }
            let _ = body.set_attribute("data-now-ms", &self.recording.now_ms.to_string());
            let _ = body.set_attribute("data-compute-ms", &format!("{:.2}", self.last_compute_ms));
        }
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Msg) -> bool {
        match msg {
            Msg::Scenario(m) => self.on_scenario(ctx, m),
            Msg::Clock(m) => self.on_clock(ctx, m),
            Msg::Explain(m) => self.on_explain(m),
            Msg::Action(m) => self.on_action(m),
            Msg::Filter(m) => self.on_filter(m),
        }
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        html! {
            <div class="page">
                { self.view_header(ctx) }
                { self.view_summary() }
                { self.view_time(ctx) }
                <div class="columns">
                    <section class="editor-column" aria-label="Scenario">
                        { self.view_editor(ctx) }
                    </section>
                    <section class="cluster-column" aria-label="Cluster">
                        { self.view_errors() }
                        { self.view_cost_chart(ctx) }
                        { self.view_nodes(ctx) }
                        { self.view_pending(ctx) }
                        { self.view_actions(ctx) }
                        { self.view_events(ctx) }
                    </section>
                    { self.view_explain(ctx) }
                </div>
                <footer>
                    { "Decisions by carpentry-core, Karpenter v1.14.1 semantics. Prices: on-demand are published list prices; " }
                    { "prices marked * are synthetic spot prices (no registry ships real ones). " }
                    { format!("Last recompute {:.1} ms.", self.last_compute_ms) }
                </footer>
            </div>
        }
    }
}

/// Each pane's messages.
impl App {
    fn on_scenario(&mut self, ctx: &Context<Self>, msg: ScenarioMsg) -> bool {
        match msg {
            ScenarioMsg::EditorInput(text) => self.editor = text,
            ScenarioMsg::EditorScroll => {
                if let (Some(t), Some(g)) =
                    (self.textarea.cast::<HtmlTextAreaElement>(), self.gutter.cast::<web_sys::Element>())
                {
                    g.set_scroll_top(t.scroll_top());
                }
                return false;
            }
            ScenarioMsg::Load => {
                self.set_playing(ctx, false);
                let example = self
                    .recording
                    .example
                    .clone()
                    .filter(|id| examples::by_id(id).is_some_and(|e| e.yaml == self.editor));
                self.open(Recording::new(self.editor.clone(), example));
            }
            ScenarioMsg::ApplyEditor => {
                let text = self.editor.clone();
                self.act(ActionKind::Apply(text));
            }
            ScenarioMsg::Example(id) => {
                self.set_playing(ctx, false);
                self.open(App::example(id));
            }
            ScenarioMsg::Template(kind) => {
                if let Some(t) = TEMPLATES.iter().find(|t| t.0 == kind) {
                    let sep = if self.editor.trim().is_empty() { "" } else { "\n---\n" };
                    self.editor = format!("{}{sep}{}", self.editor.trim_end(), t.1);
                }
            }
            ScenarioMsg::GotoLine(line) => {
                if let Some(t) = self.textarea.cast::<HtmlTextAreaElement>() {
                    let start: usize = self.editor.split_inclusive('\n').take(line - 1).map(str::len).sum();
                    let end = start + self.editor[start..].find('\n').unwrap_or(self.editor.len() - start);
                    let utf16 = |byte: usize| self.editor[..byte].encode_utf16().count() as u32;
                    let _ = t.focus();
                    let _ = t.set_selection_range(utf16(start), utf16(end));
                    // About 1.4em per line: bring the line into view.
                    t.set_scroll_top(((line.saturating_sub(5)) as f64 * 17.5) as i32);
                }
                return false;
            }
            ScenarioMsg::Share => {
                let payload = share::encode(&self.recording);
                if let Some(w) = web_sys::window() {
                    let hash = format!("#{}{payload}", share::FRAGMENT_KEY);
                    let _ = w
                        .history()
                        .and_then(|h| h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some(&hash)));
                    let href = w.location().href().unwrap_or_default();
                    self.share_link = Some(href);
                }
            }
            ScenarioMsg::Export => {
                let yaml = self.recording.export_yaml();
                download("scenario.yaml", &yaml);
                return false;
            }
            ScenarioMsg::Import(file) => {
                let link = ctx.link().clone();
                let file = gloo::file::File::from(file);
                self.reader = Some(gloo::file::callbacks::read_as_text(&file, move |r| {
                    link.send_message(Msg::Scenario(ScenarioMsg::Imported(
                        r.unwrap_or_else(|e| format!("# could not read the file: {e}\n")),
                    )));
                }));
                return false;
            }
            ScenarioMsg::Imported(text) => {
                self.reader = None;
                self.set_playing(ctx, false);
                self.open(Recording::new(text, None));
            }
            ScenarioMsg::Reset => {
                self.set_playing(ctx, false);
                let id = self.recording.example.clone();
                let recording = match id.as_deref().and_then(examples::by_id) {
                    Some(e) => Recording::new(e.yaml.to_string(), Some(e.id.to_string())),
                    None => Recording::new(self.recording.yaml.clone(), None),
                };
                if let Some(w) = web_sys::window() {
                    let _ =
                        w.history().and_then(|h| h.replace_state_with_url(&wasm_bindgen::JsValue::NULL, "", Some("#")));
                }
                self.open(recording);
            }
        }
        true
    }

    fn on_clock(&mut self, ctx: &Context<Self>, msg: ClockMsg) -> bool {
        match msg {
            ClockMsg::TogglePlay => {
                let playing = !self.playing;
                self.set_playing(ctx, playing);
            }
            ClockMsg::Tick => {
                let now = self.session.as_ref().map_or(0, Session::now_ms);
                self.go_to(now + self.speed * TICK_MS as u64);
            }
            ClockMsg::Speed(s) => self.speed = s,
            ClockMsg::Step => {
                let started = now_ms();
                if let Some(s) = &mut self.session {
                    s.step();
                }
                self.refresh();
                self.last_compute_ms = now_ms() - started;
            }
            ClockMsg::Scrub(ms) => {
                self.set_playing(ctx, false);
                self.go_to(ms);
            }
        }
        true
    }

    fn on_explain(&mut self, msg: ExplainMsg) -> bool {
        match msg {
            ExplainMsg::Select(sel) => {
                if let Selection::NodePool(np) = &sel {
                    self.budget_text = self.session.as_ref().and_then(|s| s.budgets(np).ok()).map(|b| (np.clone(), b));
                }
                self.selection = Some(sel);
            }
            ExplainMsg::CloseExplain => self.selection = None,
            ExplainMsg::BudgetText(v) => {
                if let Some((_, text)) = &mut self.budget_text {
                    *text = v;
                }
            }
            ExplainMsg::ApplyBudgets(np) => {
                let text = self.budget_text.as_ref().map(|(_, t)| t.clone()).unwrap_or_default();
                let edited = self.session.as_ref().map(|s| s.with_budgets(&np, &text));
                match edited {
                    Some(Ok(json)) => self.act(ActionKind::Apply(json)),
                    Some(Err(e)) => self.action_error = Some(e),
                    None => {}
                }
            }
        }
        true
    }

    fn on_action(&mut self, msg: ActionMsg) -> bool {
        match msg {
            ActionMsg::ScaleInput(key, v) => {
                self.scale_inputs.insert(key, v);
            }
            ActionMsg::Scale(w) => {
                let key = workload_key(&w);
                let replicas = self.scale_inputs.get(&key).and_then(|v| v.trim().parse::<i32>().ok());
                match replicas {
                    Some(replicas) if replicas >= 0 => {
                        let action =
                            ScaleAction { kind: w.kind.to_string(), namespace: w.namespace, name: w.name, replicas };
                        self.act(ActionKind::Act(Step::scale(NOW, action)))
                    }
                    _ => self.action_error = Some(format!("scale {key}: replicas must be a whole number ≥ 0")),
                }
            }
            ActionMsg::DeleteNode(node) => self.act(ActionKind::Act(Step::delete(
                NOW,
                DeleteAction { kind: "Node".into(), namespace: None, name: node },
            ))),
            ActionMsg::InterruptNode(node) => self.act(ActionKind::Act(Step::interrupt(NOW, node))),
            ActionMsg::OfferingField(i, v) => self.offering[i] = v,
            ActionMsg::MarkUnavailable => {
                let [it, zone, ct, duration] = self.offering.clone();
                let shortage = CapacityShortage {
                    instance_type: it.trim().to_string(),
                    zone: zone.trim().to_string(),
                    capacity_type: ct,
                    duration: Some(duration.trim().to_string()).filter(|d| !d.is_empty()),
                };
                self.act(ActionKind::Act(Step::unavailable_offering(NOW, shortage)));
            }
            ActionMsg::AmiClass(v) => self.ami_class = v,
            ActionMsg::AmiAlias(v) => self.ami_alias = v,
            ActionMsg::PinAmi => {
                let edited = self.session.as_ref().map(|s| s.pin_ami(&self.ami_class, &self.ami_alias));
                match edited {
                    Some(Ok(json)) => self.act(ActionKind::Apply(json)),
                    Some(Err(e)) => self.action_error = Some(e),
                    None => {}
                }
            }
        }
        true
    }

    fn on_filter(&mut self, msg: FilterMsg) -> bool {
        match msg {
            FilterMsg::Search(v) => self.search = v,
            FilterMsg::StateFilter(v) => self.state_filter = v,
            FilterMsg::EventFilter(v) => self.event_filter = v,
        }
        true
    }
}

/// Templates the editor inserts, one per kind.
const TEMPLATES: &[(&str, &str)] = &[
    (
        "NodePool",
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: my-pool}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements:\n      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n  limits: {cpu: \"100\"}\n  disruption:\n    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 1m\n    budgets:\n    - {nodes: \"10%\"}\n",
    ),
    (
        "EC2NodeClass",
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: my-class}\nspec:\n  role: KarpenterNodeRole\n  amiSelectorTerms: [{alias: al2023@latest}]\n  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]\n",
    ),
    (
        "Deployment",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: my-app, namespace: default}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: my-app}}\n  template:\n    metadata: {labels: {app: my-app}}\n    spec:\n      containers: [{name: app, image: app, resources: {requests: {cpu: 500m, memory: 1Gi}}}]\n",
    ),
    (
        "Pod",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: my-pod, namespace: default}\nspec:\n  containers: [{name: app, image: app, resources: {requests: {cpu: 250m, memory: 256Mi}}}]\n",
    ),
    (
        "PodDisruptionBudget",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: my-pdb, namespace: default}\nspec:\n  maxUnavailable: 1\n  selector: {matchLabels: {app: my-app}}\n",
    ),
    (
        "DaemonSet",
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: my-agent, namespace: kube-system}\nspec:\n  selector: {matchLabels: {app: my-agent}}\n  template:\n    metadata: {labels: {app: my-agent}}\n    spec:\n      containers: [{name: agent, image: agent, resources: {requests: {cpu: 100m, memory: 128Mi}}}]\n",
    ),
    (
        "Scenario",
        "apiVersion: carpentry.dev/v1alpha1\nkind: Scenario\nspec:\n  region: us-east-1\n  steps:\n  - {at: 5m, scale: {kind: Deployment, name: my-app, replicas: 5}}\n",
    ),
];

fn download(name: &str, text: &str) {
    let Some(doc) = web_sys::window().and_then(|w| w.document()) else { return };
    let parts = js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type("application/yaml");
    let Ok(blob) = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options) else { return };
    let Ok(url) = web_sys::Url::create_object_url_with_blob(&blob) else { return };
    if let Ok(a) = doc.create_element("a") {
        if let Ok(a) = a.dyn_into::<web_sys::HtmlAnchorElement>() {
            a.set_href(&url);
            a.set_download(name);
            a.click();
        }
    }
    let _ = web_sys::Url::revoke_object_url(&url);
}

fn state_class(s: NodeState) -> &'static str {
    match s {
        NodeState::Launching => "st-launching",
        NodeState::Launched => "st-launched",
        NodeState::Registered => "st-registered",
        NodeState::Ready => "st-ready",
        NodeState::Terminating => "st-terminating",
    }
}

fn bar(part: f64, whole: f64, label: String) -> Html {
    let pct = view::percent(part, whole);
    html! {
        <span class="bar" title={label.clone()} role="meter" aria-valuemin="0" aria-valuemax="100" aria-valuenow={format!("{pct:.0}")} aria-label={label.clone()}>
            <span class="fill" style={format!("width:{pct:.1}%")}></span>
            <span class="bar-text">{ format!("{pct:.0}%") }</span>
        </span>
    }
}

fn input_value(e: &InputEvent) -> String {
    e.target_unchecked_into::<HtmlInputElement>().value()
}

fn select_value(e: &Event) -> String {
    e.target_unchecked_into::<HtmlSelectElement>().value()
}

impl App {
    fn view_header(&self, ctx: &Context<Self>) -> Html {
        let link = ctx.link();
        let current = self.recording.example.clone().unwrap_or_default();
        html! {
            <header>
                <h1>{ "carpentry playground" }</h1>
                <nav class="gallery" aria-label="Examples">
                    { for EXAMPLES.iter().map(|e| {
                        let id = e.id;
                        html! {
                            <button class={classes!("example", (current == id).then_some("current"))} title={e.summary}
                                data-example={id} onclick={link.callback(move |_| Msg::Scenario(ScenarioMsg::Example(id)))}>{ e.title }</button>
                        }
                    }) }
                </nav>
                <div class="tools">
                    <button id="share" onclick={link.callback(|_| Msg::Scenario(ScenarioMsg::Share))} title="Put the scenario, actions and time in the URL">{ "Share" }</button>
                    <button id="export" onclick={link.callback(|_| Msg::Scenario(ScenarioMsg::Export))} title="Download the scenario as YAML, actions as Scenario steps">{ "Export YAML" }</button>
                    <label class="file-button">{ "Import YAML" }
                        <input type="file" accept=".yaml,.yml,.json,text/yaml" onchange={link.batch_callback(|e: Event| {
                            let input: HtmlInputElement = e.target_unchecked_into();
                            input.files().and_then(|f| f.get(0)).map(|f| Msg::Scenario(ScenarioMsg::Import(f)))
                        })} />
                    </label>
                    <button id="reset" onclick={link.callback(|_| Msg::Scenario(ScenarioMsg::Reset))} title="Back to the example's start">{ "Reset" }</button>
                </div>
                if let Some(href) = &self.share_link {
                    <div class="share-link">
                        <label>{ "Link to this state: " }<input id="share-link" readonly=true value={href.clone()} /></label>
                    </div>
                }
            </header>
        }
    }

    fn view_summary(&self) -> Html {
        let Some(s) = &self.state else { return html! {} };
        let nodes = &s.snapshot.nodes;
        let live = || nodes.iter().filter(|n| n.state != NodeState::Terminating);
        let (cpu_req, cpu_alloc) = live().fold((0.0, 0.0), |(r, a), n| (r + n.requested.cpu, a + n.allocatable.cpu));
        let (mem_req, mem_alloc) =
            live().fold((0.0, 0.0), |(r, a), n| (r + n.requested.memory, a + n.allocatable.memory));
        let synthetic = nodes.iter().any(|n| n.price_synthetic);
        html! {
            <div class="summary" id="summary" role="status">
                <span><b id="node-count">{ nodes.len() }</b>{ " nodes" }</span>
                <span>{ "CPU " }<b>{ format!("{} / {}", view::cpu(cpu_req), view::cpu(cpu_alloc)) }</b>{ " " }{ bar(cpu_req, cpu_alloc, "CPU requested of allocatable".into()) }</span>
                <span>{ "Memory " }<b>{ format!("{} / {}", view::bytes(mem_req), view::bytes(mem_alloc)) }</b>{ " " }{ bar(mem_req, mem_alloc, "memory requested of allocatable".into()) }</span>
                <span><b id="price-hour">{ view::price(s.cost.per_hour, synthetic) }</b>{ "/hour" }</span>
                <span><b>{ view::price(s.cost.per_month, synthetic) }</b>{ "/month" }</span>
                <span>{ "spent " }<b>{ view::price(s.cost.spent, synthetic) }</b></span>
                <span>{ "pods " }<b id="running-count">{ s.snapshot.running }</b>{ " running, " }<b id="pending-count">{ s.snapshot.pending.len() }</b>{ " pending" }</span>
            </div>
        }
    }

    fn view_time(&self, ctx: &Context<Self>) -> Html {
        let link = ctx.link();
        let now = self.state.as_ref().map_or(0, |s| s.now_ms);
        let start = self.state.as_ref().map(|s| s.start.clone()).unwrap_or_default();
        let max = self.horizon_ms.max(now).max(60_000);
        let next = self.session.as_ref().and_then(Session::next_event_ms);
        html! {
            <div class="time" role="group" aria-label="Simulated time">
                <button id="play" onclick={link.callback(|_| Msg::Clock(ClockMsg::TogglePlay))} aria-pressed={self.playing.to_string()}>
                    { if self.playing { "⏸ Pause" } else { "▶ Play" } }
                </button>
                <label>{ "Speed " }
                    <select onchange={link.callback(|e: Event| Msg::Clock(ClockMsg::Speed(select_value(&e).parse().unwrap_or(10))))}>
                        { for SPEEDS.iter().map(|(v, label)| html! { <option value={v.to_string()} selected={*v == self.speed}>{ *label }</option> }) }
                    </select>
                </label>
                <button id="step" onclick={link.callback(|_| Msg::Clock(ClockMsg::Step))} disabled={next.is_none()}
                    title="Run the next moment at which something happens">{ "Step ›" }</button>
                <button id="run-1m" onclick={link.callback(move |_| Msg::Clock(ClockMsg::Scrub(now + 60_000)))}>{ "+1 min" }</button>
                <button id="run-10m" onclick={link.callback(move |_| Msg::Clock(ClockMsg::Scrub(now + 600_000)))}>{ "+10 min" }</button>
                <input id="scrub" type="range" min="0" max={max.to_string()} step="1000" value={now.to_string()}
                    aria-label="Scrub simulated time"
                    onchange={link.callback(|e: Event| Msg::Clock(ClockMsg::Scrub(e.target_unchecked_into::<HtmlInputElement>().value().parse().unwrap_or(0))))} />
                <span class="clock"><b id="clock">{ format!("+{}", view::duration(now)) }</b>
                    { format!(" since {start}") }
                    { next.map(|n| format!(" · next event at +{}", view::duration(n))).unwrap_or_else(|| " · nothing scheduled".into()) }
                </span>
            </div>
        }
    }

    fn view_editor(&self, ctx: &Context<Self>) -> Html {
        let link = ctx.link();
        let error_line = self.load_error.as_ref().and_then(|e| e.line);
        let lines = self.editor.lines().count().max(1);
        let notes = self.state.as_ref().map(|s| s.notes.clone()).unwrap_or_default();
        html! {
            <>
                <h2>{ "Scenario YAML" }</h2>
                <div class="editor-tools">
                    <button id="load" onclick={link.callback(|_| Msg::Scenario(ScenarioMsg::Load))} title="Start over from this text at time 0">{ "Load (restart)" }</button>
                    <button id="apply" onclick={link.callback(|_| Msg::Scenario(ScenarioMsg::ApplyEditor))} title="Apply the objects in the text to the running cluster now">{ "Apply now" }</button>
                    <label>{ "Insert template " }
                        <select onchange={link.callback(|e: Event| Msg::Scenario(ScenarioMsg::Template(select_value(&e))))}>
                            <option value="" selected=true>{ "…" }</option>
                            { for TEMPLATES.iter().map(|(k, _)| html! { <option value={*k}>{ *k }</option> }) }
                        </select>
                    </label>
                </div>
                <div class="editor">
                    <div class="gutter" ref={self.gutter.clone()} aria-hidden="true">
                        { for (1..=lines).map(|l| html! {
                            <div class={classes!((Some(l) == error_line).then_some("error-line"))}>{ l }</div>
                        }) }
                    </div>
                    <textarea id="yaml" ref={self.textarea.clone()} spellcheck="false" aria-label="Scenario YAML"
                        value={self.editor.clone()}
                        oninput={link.callback(|e: InputEvent| Msg::Scenario(ScenarioMsg::EditorInput(e.target_unchecked_into::<HtmlTextAreaElement>().value())))}
                        onscroll={link.callback(|_| Msg::Scenario(ScenarioMsg::EditorScroll))} />
                </div>
                if let Some(e) = &self.load_error {
                    <div class="error" id="load-error" role="alert">
                        <b>{ "Cannot load: " }</b>{ e.message.clone() }
                        if let Some(l) = error_line {
                            { " " }<button onclick={link.callback(move |_| Msg::Scenario(ScenarioMsg::GotoLine(l)))}>{ format!("go to line {l}") }</button>
                        }
                    </div>
                }
                if !notes.is_empty() {
                    <div class="notes" id="notes">
                        <h3>{ "Notes on the input" }</h3>
                        <ul>{ for notes.iter().map(|n| html! { <li>{ n.clone() }</li> }) }</ul>
                    </div>
                }
            </>
        }
    }

    fn view_errors(&self) -> Html {
        match &self.action_error {
            Some(e) => html! { <div class="error" id="action-error" role="alert">{ e.clone() }</div> },
            None => html! {},
        }
    }

    fn view_cost_chart(&self, ctx: &Context<Self>) -> Html {
        let Some(s) = &self.state else { return html! {} };
        let (w, h) = (600.0, 90.0);
        let end = s.now_ms.max(60_000) as f64;
        let points: Vec<(f64, f64)> = s.cost.timeline.iter().map(|p| (p.at.millis() as f64, p.per_hour)).collect();
        let peak = points.iter().map(|p| p.1).fold(0.0, f64::max);
        let top = view::nice_ceiling(peak);
        let path = view::step_path(&points, end, w, h, top);
        let marks: Vec<(f64, String)> = self
            .events
            .iter()
            .filter(|e| matches!(e.reason.name(), "Disrupting" | "Drifted" | "Interrupted" | "LivenessTimeout"))
            .map(|e| {
                (
                    e.at.millis() as f64 / end * w,
                    format!("+{} {}: {}", view::duration(e.at.millis()), e.reason.name(), e.message),
                )
            })
            .collect();
        let link = ctx.link();
        let span = end as u64;
        html! {
            <figure class="chart" aria-label="Cost over simulated time">
                <svg viewBox={format!("-40 -8 {} {}", w + 50.0, h + 28.0)} role="img" id="cost-chart"
                    onclick={link.callback(move |e: MouseEvent| {
                        let el: web_sys::Element = e.target_unchecked_into();
                        let svg = el.closest("svg").ok().flatten().unwrap_or(el);
                        let rect = svg.get_bounding_client_rect();
                        let scale = (w + 50.0) / rect.width().max(1.0);
                        let x = (e.client_x() as f64 - rect.left()) * scale - 40.0;
                        Msg::Clock(ClockMsg::Scrub(((x / w).clamp(0.0, 1.0) * span as f64) as u64))
                    })}>
                    <title>{ "$/hour over time; click to go to a moment" }</title>
                    <line x1="0" y1={h.to_string()} x2={w.to_string()} y2={h.to_string()} class="axis" />
                    <line x1="0" y1="0" x2="0" y2={h.to_string()} class="axis" />
                    <text x="-4" y="4" class="tick" text-anchor="end">{ format!("${top}") }</text>
                    <text x="-4" y={h.to_string()} class="tick" text-anchor="end">{ "$0" }</text>
                    <text x="0" y={(h + 14.0).to_string()} class="tick">{ "+0s" }</text>
                    <text x={w.to_string()} y={(h + 14.0).to_string()} class="tick" text-anchor="end">{ format!("+{}", view::duration(s.now_ms)) }</text>
                    { for marks.iter().map(|(x, label)| html! {
                        <line x1={format!("{x:.1}")} x2={format!("{x:.1}")} y1="0" y2={h.to_string()} class="mark"><title>{ label.clone() }</title></line>
                    }) }
                    <path d={path} class="cost-line" />
                </svg>
                <figcaption>{ format!("$/hour over simulated time (now {}/hour; ticks: disruptions, drift, interruptions).", view::price(s.cost.per_hour, false)) }</figcaption>
            </figure>
        }
    }

    fn view_nodes(&self, ctx: &Context<Self>) -> Html {
        let Some(s) = &self.state else { return html! {} };
        let link = ctx.link();
        let search = self.search.clone();
        let filter = self.state_filter.clone();
        let keep = |n: &&NodeView| {
            (filter.is_empty() || format!("{:?}", n.state) == filter)
                && (view::matches(
                    &search,
                    &[
                        &n.name,
                        n.instance_type.as_deref().unwrap_or(""),
                        n.zone.as_deref().unwrap_or(""),
                        n.capacity_type.as_deref().unwrap_or(""),
                        n.nodepool.as_deref().unwrap_or(""),
                    ],
                ) || n.pods.iter().any(|p| view::matches(&search, &[p])))
        };
        let mut groups: BTreeMap<String, Vec<&NodeView>> = BTreeMap::new();
        for np in &self.nodepools {
            groups.entry(np.clone()).or_default();
        }
        for n in s.snapshot.nodes.iter().filter(keep) {
            groups.entry(n.nodepool.clone().unwrap_or_else(|| "(not Karpenter's)".into())).or_default().push(n);
        }
        html! {
            <div class="nodes">
                <div class="filters">
                    <label>{ "Search " }<input id="search" type="search" placeholder="node, type, zone, pod…" value={self.search.clone()}
                        oninput={link.callback(|e: InputEvent| Msg::Filter(FilterMsg::Search(input_value(&e))))} /></label>
                    <label>{ "State " }
                        <select id="state-filter" onchange={link.callback(|e: Event| Msg::Filter(FilterMsg::StateFilter(select_value(&e))))}>
                            <option value="" selected={filter.is_empty()}>{ "any" }</option>
                            { for ["Launching", "Launched", "Registered", "Ready", "Terminating"].iter().map(|st| html! {
                                <option value={*st} selected={filter == *st}>{ *st }</option>
                            }) }
                        </select>
                    </label>
                </div>
                { for groups.iter().map(|(np, nodes)| {
                    let name = np.clone();
                    let price: f64 = nodes.iter().map(|n| n.price).sum();
                    let karpenter = self.nodepools.contains(np);
                    html! {
                        <section class="nodepool" data-nodepool={np.clone()}>
                            <h3>
                                if karpenter {
                                    <button class="link" onclick={link.callback(move |_| Msg::Explain(ExplainMsg::Select(Selection::NodePool(name.clone()))))}>{ format!("NodePool {np}") }</button>
                                } else { { np.clone() } }
                                { format!(" — {} node(s), {}/hour", nodes.len(), view::price(price, nodes.iter().any(|n| n.price_synthetic))) }
                            </h3>
                            if !nodes.is_empty() {
                                <table class="node-table">
                                    <thead><tr><th>{ "node" }</th><th>{ "instance type" }</th><th>{ "capacity" }</th><th>{ "zone" }</th><th>{ "$/hour" }</th><th>{ "CPU" }</th><th>{ "memory" }</th><th>{ "state" }</th><th>{ "pods" }</th><th>{ "actions" }</th></tr></thead>
                                    <tbody>
                                        { for nodes.iter().take(ROW_CAP).map(|n| self.view_node_row(ctx, n)) }
                                    </tbody>
                                </table>
                                if nodes.len() > ROW_CAP {
                                    <p class="more">{ format!("{} more nodes: refine the search.", nodes.len() - ROW_CAP) }</p>
                                }
                            }
                        </section>
                    }
                }) }
            </div>
        }
    }

    fn view_node_row(&self, ctx: &Context<Self>, n: &NodeView) -> Html {
        let link = ctx.link();
        let name = n.name.clone();
        let (del, int) = (name.clone(), name.clone());
        let selected = self.selection == Some(Selection::Node(n.name.clone()));
        let spot = n.capacity_type.as_deref() == Some("spot");
        let deletable =
            n.state != NodeState::Terminating && (n.nodeclaim.is_none() || n.state >= NodeState::Registered);
        html! {
            <tr class={classes!(selected.then_some("selected"))} data-node={n.name.clone()}>
                <td><button class="link node-name" onclick={link.callback(move |_| Msg::Explain(ExplainMsg::Select(Selection::Node(name.clone()))))}>{ n.name.clone() }</button></td>
                <td class="instance-type">{ n.instance_type.clone().unwrap_or_else(|| "…".into()) }</td>
                <td>{ n.capacity_type.clone().unwrap_or_default() }</td>
                <td>{ n.zone.clone().unwrap_or_default() }</td>
                <td class="price">{ if n.price > 0.0 { view::price(n.price, n.price_synthetic) } else { "–".into() } }</td>
                <td>{ bar(n.requested.cpu, n.allocatable.cpu, format!("CPU {} of {}", view::cpu(n.requested.cpu), view::cpu(n.allocatable.cpu))) }</td>
                <td>{ bar(n.requested.memory, n.allocatable.memory, format!("memory {} of {}", view::bytes(n.requested.memory), view::bytes(n.allocatable.memory))) }</td>
                <td><span class={classes!("state", state_class(n.state))} title={n.terminating.clone().unwrap_or_default()}>{ format!("{:?}", n.state) }</span></td>
                <td>{ n.pods.len() }</td>
                <td class="row-actions">
                    if deletable {
                        <button title="kubectl delete node" onclick={link.callback(move |_| Msg::Action(ActionMsg::DeleteNode(del.clone())))}>{ "delete" }</button>
                    }
                    if spot && n.state != NodeState::Terminating {
                        <button title="Send a spot interruption notice" onclick={link.callback(move |_| Msg::Action(ActionMsg::InterruptNode(int.clone())))}>{ "interrupt" }</button>
                    }
                </td>
            </tr>
        }
    }

    fn view_pending(&self, ctx: &Context<Self>) -> Html {
        let Some(s) = &self.state else { return html! {} };
        let link = ctx.link();
        let shown: Vec<&String> = s
            .snapshot
            .pending
            .iter()
            .filter(|p| view::matches(&self.search, &[p, self.reasons.get(*p).map_or("", String::as_str)]))
            .collect();
        html! {
            <section class="pending">
                <h3>{ format!("Pending pods ({})", s.snapshot.pending.len()) }</h3>
                if shown.is_empty() {
                    <p class="quiet">{ if s.snapshot.pending.is_empty() { "None." } else { "None match the search." } }</p>
                } else {
                    <table id="pending-table">
                        <thead><tr><th>{ "pod" }</th><th>{ "latest scheduling event" }</th></tr></thead>
                        <tbody>
                            { for shown.iter().take(ROW_CAP).map(|p| {
                                let key = (*p).clone();
                                html! {
                                    <tr data-pod={key.clone()}>
                                        <td><button class="link pod-name" onclick={link.callback(move |_| Msg::Explain(ExplainMsg::Select(Selection::Pod(key.clone()))))}>{ (*p).clone() }</button></td>
                                        <td>{ self.reasons.get(*p).cloned().unwrap_or_else(|| "waiting for the next provisioning round".into()) }</td>
                                    </tr>
                                }
                            }) }
                        </tbody>
                    </table>
                    if shown.len() > ROW_CAP { <p class="more">{ format!("{} more: refine the search.", shown.len() - ROW_CAP) }</p> }
                }
            </section>
        }
    }

    fn view_actions(&self, ctx: &Context<Self>) -> Html {
        let link = ctx.link();
        html! {
            <section class="actions" aria-label="Actions">
                <h3>{ "Actions" }</h3>
                <div class="action-group">
                    <h4>{ "Scale a workload" }</h4>
                    if self.workloads.is_empty() { <p class="quiet">{ "No Deployment, ReplicaSet or StatefulSet in the scenario." }</p> }
                    { for self.workloads.iter().map(|w| {
                        let key = workload_key(w);
                        let k2 = key.clone();
                        let wl = w.clone();
                        let value = self.scale_inputs.get(&key).cloned().unwrap_or_else(|| w.replicas.to_string());
                        html! {
                            <div class="scale" data-workload={w.name.clone()}>
                                <label>{ format!("{} {}/{} replicas ", w.kind, w.namespace, w.name) }
                                    <input type="number" min="0" class="replicas" value={value}
                                        oninput={link.callback(move |e: InputEvent| Msg::Action(ActionMsg::ScaleInput(k2.clone(), input_value(&e))))} />
                                </label>
                                <button class="scale-button" onclick={link.callback(move |_| Msg::Action(ActionMsg::Scale(wl.clone())))}>{ "Scale" }</button>
                            </div>
                        }
                    }) }
                </div>
                <div class="action-group">
                    <h4>{ "Mark an offering unavailable (InsufficientInstanceCapacity)" }</h4>
                    <label>{ "type " }<input size="12" placeholder="m5.large" value={self.offering[0].clone()} oninput={link.callback(|e: InputEvent| Msg::Action(ActionMsg::OfferingField(0, input_value(&e))))} /></label>
                    <label>{ " zone " }<input size="11" placeholder="us-east-1a" value={self.offering[1].clone()} oninput={link.callback(|e: InputEvent| Msg::Action(ActionMsg::OfferingField(1, input_value(&e))))} /></label>
                    <label>{ " capacity " }
                        <select onchange={link.callback(|e: Event| Msg::Action(ActionMsg::OfferingField(2, select_value(&e))))}>
                            { for ["on-demand", "spot", "reserved"].iter().map(|c| html! { <option value={*c} selected={self.offering[2] == *c}>{ *c }</option> }) }
                        </select>
                    </label>
                    <label>{ " for " }<input size="5" placeholder="(ever)" value={self.offering[3].clone()} oninput={link.callback(|e: InputEvent| Msg::Action(ActionMsg::OfferingField(3, input_value(&e))))} /></label>
                    { " " }<button onclick={link.callback(|_| Msg::Action(ActionMsg::MarkUnavailable))}>{ "Mark unavailable" }</button>
                </div>
                <div class="action-group">
                    <h4>{ "Change the AMI (drift)" }</h4>
                    if self.nodeclasses.is_empty() {
                        <p class="quiet">{ "No EC2NodeClass in the scenario (the default one is assumed)." }</p>
                    } else {
                        <label>{ "EC2NodeClass " }
                            <select onchange={link.callback(|e: Event| Msg::Action(ActionMsg::AmiClass(select_value(&e))))}>
                                { for self.nodeclasses.iter().map(|nc| html! { <option value={nc.name.clone()} selected={nc.name == self.ami_class}>{ format!("{} ({})", nc.name, nc.ami) }</option> }) }
                            </select>
                        </label>
                        <label>{ " alias " }<input id="ami-alias" value={self.ami_alias.clone()} oninput={link.callback(|e: InputEvent| Msg::Action(ActionMsg::AmiAlias(input_value(&e))))} /></label>
                        { " " }<button id="pin-ami" onclick={link.callback(|_| Msg::Action(ActionMsg::PinAmi))}>{ "Pin AMI" }</button>
                    }
                </div>
                <p class="quiet">{ "Delete or interrupt nodes from their rows; edit budgets from a NodePool's explanation; edit anything in the YAML and press Apply now." }</p>
            </section>
        }
    }

    fn view_events(&self, ctx: &Context<Self>) -> Html {
        let link = ctx.link();
        let filter = self.event_filter.clone();
        let shown: Vec<&SimEvent> = self
            .events
            .iter()
            .rev()
            .filter(|e| view::matches(&filter, &[e.reason.name(), &e.object.to_string(), &e.message]))
            .take(ROW_CAP)
            .collect();
        html! {
            <section class="events">
                <h3>{ format!("Events ({})", self.events.len()) }</h3>
                <label>{ "Filter " }<input id="event-filter" type="search" placeholder="reason, object, text…" value={self.event_filter.clone()}
                    oninput={link.callback(|e: InputEvent| Msg::Filter(FilterMsg::EventFilter(input_value(&e))))} /></label>
                <table id="events-table">
                    <thead><tr><th>{ "at" }</th><th>{ "type" }</th><th>{ "reason" }</th><th>{ "object" }</th><th>{ "message" }</th></tr></thead>
                    <tbody>
                        { for shown.iter().map(|e| {
                            let at = e.at.millis();
                            html! {
                                <tr class={classes!((format!("{:?}", e.event_type) == "Warning").then_some("warning"))}>
                                    <td><button class="link" title="Go to this moment" onclick={link.callback(move |_| Msg::Clock(ClockMsg::Scrub(at)))}>{ format!("+{}", view::duration(at)) }</button></td>
                                    <td>{ format!("{:?}", e.event_type) }</td>
                                    <td>{ e.reason.name() }</td>
                                    <td>{ e.object.to_string() }</td>
                                    <td>{ e.message.clone() }</td>
                                </tr>
                            }
                        }) }
                    </tbody>
                </table>
            </section>
        }
    }

    fn view_explain(&self, ctx: &Context<Self>) -> Html {
        let Some(sel) = &self.selection else {
            return html! {
                <aside class="explain" aria-label="Explanation">
                    <p class="quiet">{ "Click a pod, a node or a NodePool to see why Karpenter does what it does." }</p>
                </aside>
            };
        };
        let Some(session) = &self.session else { return html! {} };
        let link = ctx.link();
        let body = match sel {
            Selection::Pod(key) => {
                let (ns, name) = key.split_once('/').unwrap_or(("default", key));
                match session.explain_pod(ns, name) {
                    Ok(standing) => explain_pod(key, &standing),
                    Err(e) => html! { <p class="error">{ e }</p> },
                }
            }
            Selection::Node(node) => {
                let pods = self
                    .state
                    .as_ref()
                    .and_then(|s| s.snapshot.nodes.iter().find(|n| &n.name == node))
                    .map(|n| n.pods.clone())
                    .unwrap_or_default();
                match session.explain_node(node) {
                    Ok(e) => explain_node(ctx, &e, &pods),
                    Err(e) => html! {
                        <>
                            <h3>{ format!("Node {node}") }</h3>
                            <p>{ e }{ ": Karpenter does not manage it, so it never disrupts it." }</p>
                            { pod_list(ctx, &pods) }
                        </>
                    },
                }
            }
            Selection::NodePool(np) => match session.explain_nodepool(np) {
                Ok(e) => self.explain_nodepool(ctx, &e),
                Err(e) => html! { <p class="error">{ e }</p> },
            },
        };
        html! {
            <aside class="explain" id="explain" aria-label="Explanation" aria-live="polite">
                <button class="close" aria-label="Close the explanation" onclick={link.callback(|_| Msg::Explain(ExplainMsg::CloseExplain))}>{ "×" }</button>
                { body }
            </aside>
        }
    }

    fn explain_nodepool(&self, ctx: &Context<Self>, e: &NodePoolExplanation) -> Html {
        let link = ctx.link();
        let np = e.nodepool.clone();
        let t = &e.instance_types;
        let opt = |v: Option<i64>| v.map_or("–".to_string(), |v| v.to_string());
        html! {
            <>
                <h3>{ format!("NodePool {}", e.nodepool) }</h3>
                <p>{ format!("{} node(s) counted by its budgets, {} being disrupted.", e.nodes, e.disrupting) }</p>
                <h4>{ "Usage and limits" }</h4>
                <table>
                    <thead><tr><th>{ "resource" }</th><th>{ "used" }</th><th>{ "limit" }</th></tr></thead>
                    <tbody>{ for e.usage.iter().map(|u| html! {
                        <tr class={classes!(u.at_limit.then_some("warning"))}><td>{ u.resource.clone() }</td><td>{ u.used.clone() }</td>
                        <td>{ u.limit.clone().unwrap_or_else(|| "none".into()) }{ if u.at_limit { " (at its limit)" } else { "" } }</td></tr>
                    }) }</tbody>
                </table>
                <h4>{ "Disruptions allowed now" }</h4>
                <ul>{ for e.allowed.iter().map(|a| html! {
                    <li>{ format!("{}: {}", a.reason.as_str(), match a.binding {
                        Some(i) => format!("{} (budget #{i} binds)", a.allowed),
                        None => "no budget limits it".into(),
                    }) }</li>
                }) }</ul>
                <h4 id="allowed-types">{ format!("Instance types allowed: {} ({} left out)", t.count, t.rejected) }</h4>
                if let Some(s) = &t.min_values_shortfall { <p class="error">{ format!("minValues cannot be met: {s}") }</p> }
                <table class="types">
                    <thead><tr><th>{ "type" }</th><th>{ "vCPU" }</th><th>{ "memory" }</th><th>{ "cheapest" }</th><th>{ "zones" }</th></tr></thead>
                    <tbody>{ for t.cheapest.iter().map(|it| html! {
                        <tr><td>{ it.name.clone() }</td><td>{ it.cpu.clone() }</td><td>{ it.memory.clone() }</td>
                        <td>{ format!("{}/h {} {}", view::price(it.price, it.price_synthetic), it.capacity_type, it.zone) }</td><td>{ it.zones }</td></tr>
                    }) }</tbody>
                </table>
                <h4>{ "Budgets over the next 7 days (UTC)" }</h4>
                <table class="budget-timeline">
                    <thead><tr><th>{ "from" }</th><th>{ "to" }</th><th>{ "Empty" }</th><th>{ "Drifted" }</th><th>{ "Underutilized" }</th></tr></thead>
                    <tbody>{ for e.timeline.iter().map(|s| html! {
                        <tr><td>{ format_time(s.from) }</td><td>{ format_time(s.to) }</td><td>{ opt(s.empty) }</td><td>{ opt(s.drifted) }</td><td>{ opt(s.underutilized) }</td></tr>
                    }) }</tbody>
                </table>
                if let Some((name, text)) = &self.budget_text {
                    if *name == e.nodepool {
                        <h4>{ "Edit the budgets" }</h4>
                        <textarea class="budgets" aria-label="Budgets as JSON" rows="4" value={text.clone()}
                            oninput={link.callback(|e: InputEvent| Msg::Explain(ExplainMsg::BudgetText(e.target_unchecked_into::<HtmlTextAreaElement>().value())))} />
                        <button onclick={link.callback(move |_| Msg::Explain(ExplainMsg::ApplyBudgets(np.clone())))}>{ "Apply budgets now" }</button>
                    }
                }
            </>
        }
    }
}

fn pod_list(ctx: &Context<App>, pods: &[String]) -> Html {
    let link = ctx.link();
    html! {
        <>
            <h4>{ format!("Pods ({})", pods.len()) }</h4>
            <ul class="pods">{ for pods.iter().take(ROW_CAP).map(|p| {
                let key = p.clone();
                html! { <li><button class="link" onclick={link.callback(move |_| Msg::Explain(ExplainMsg::Select(Selection::Pod(key.clone()))))}>{ p.clone() }</button></li> }
            }) }</ul>
        </>
    }
}

fn explain_pod(key: &str, standing: &PodStanding) -> Html {
    let detail = match standing {
        PodStanding::Unschedulable { explanation, .. } => {
            let e = &explanation.explanation;
            html! {
                <>
                    if !e.nodepools.is_empty() {
                        <h4>{ "NodePools" }</h4>
                        <table class="grid">
                            <thead><tr><th>{ "NodePool" }</th><th>{ "first failing constraint" }</th><th>{ "fix" }</th></tr></thead>
                            <tbody>{ for e.nodepools.iter().map(|v| html! {
                                <tr><td>{ v.nodepool.clone() }</td><td>{ failure_text(&v.failure) }</td><td>{ v.fix.as_ref().map(ToString::to_string).unwrap_or_default() }</td></tr>
                            }) }</tbody>
                        </table>
                    }
                    if !e.existing_nodes.is_empty() {
                        <h4>{ "Existing nodes" }</h4>
                        <ul>{ for e.existing_nodes.iter().map(|g| html! { <li>{ format!("{} node(s): {} (e.g. {})", g.count, g.rejection, g.examples.join(", ")) }</li> }) }</ul>
                    }
                    <details open=true><summary>{ "Full explanation" }</summary><pre>{ standing.to_string() }</pre></details>
                </>
            }
        }
        _ => html! {},
    };
    html! {
        <>
            <h3>{ format!("Pod {key}") }</h3>
            <p class="verdict" id="pod-verdict">{ match standing {
                PodStanding::Unschedulable { headline, .. } => format!("cannot be scheduled: {headline}"),
                other => other.to_string(),
            } }</p>
            { detail }
        </>
    }
}

fn explain_node(ctx: &Context<App>, e: &NodeExplanation, pods: &[String]) -> Html {
    html! {
        <>
            <h3>{ format!("Node {}", e.node) }</h3>
            <p>{ format!("NodeClaim {}, NodePool {}, {}/hour.", e.nodeclaim, e.nodepool, view::price(e.price, false)) }</p>
            <p class="verdict" id="node-verdict">{ format!("It {}.", e.verdict().describe()) }</p>
            <table class="checks">
                <thead><tr><th>{ "check" }</th><th>{ "result" }</th><th>{ "detail" }</th></tr></thead>
                <tbody>{ for e.checks.iter().map(|c| html! {
                    <tr class={classes!((!c.passed).then_some("warning"))}><td>{ c.condition.clone() }</td><td>{ if c.passed { "✓ pass" } else { "✗ fail" } }</td><td>{ c.detail.clone() }</td></tr>
                }) }</tbody>
            </table>
            if let Some(r) = &e.removal {
                <h4>{ "If it were removed now" }</h4>
                <ul>
                    { for r.moves.iter().map(|(p, to)| html! { <li>{ format!("{p} → {to}") }</li> }) }
                    { for r.new_nodeclaims.iter().map(|n| html! { <li>{ format!("new NodeClaim of {}: {} {} for {}", n.nodepool, n.instance_type.clone().unwrap_or_default(), n.price.map(|p| format!("{}/h", view::price(p, false))).unwrap_or_default(), n.pods.join(", ")) }</li> }) }
                    { for r.unschedulable.iter().map(|(p, why)| html! { <li class="warning">{ format!("{p} could not be placed: {why}") }</li> }) }
                </ul>
                <p>{ format!("Savings: {}/hour.", view::price(r.savings_per_hour, false)) }</p>
            }
            { pod_list(ctx, pods) }
        </>
    }
}
