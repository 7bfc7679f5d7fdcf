package main

// The supervisor: `testenv up` creates the PKI, starts the components of a profile as child
// processes of this binary on 127.0.0.1, waits until each is ready and writes D/kubeconfig,
// D/env and D/ready.json; it then watches them until it is told to stop (SIGTERM, SIGINT,
// `testenv down`), its parent goes away, or a component dies, and tears everything down.
// `testenv restart` (SIGUSR1 and D/restart.json) stops one component and starts it again in
// place: the same port, arguments and data, as a control-plane upgrade or crash does.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Profiles, smallest first. Each includes the components of the previous one.
var profiles = map[string][]string{
	"api":   {"etcd", "kube-apiserver"},
	"sched": {"etcd", "kube-apiserver", "kube-scheduler", "kwok"},
	"full":  {"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok"},
}

// auditPolicyYAML has the API server record, once each when answered, every pod deleted or
// evicted and every Node deleted, with who asked (user and user agent) and the answer's code: a test
// asserts from it that pods left only through the ways it allows (the Eviction API, which enforces
// PodDisruptionBudgets, or their own controller), whatever the controller under test says of itself.
const auditPolicyYAML = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  verbs: ["create"]
  resources: [{group: "", resources: ["pods/eviction"]}]
- level: Metadata
  verbs: ["delete", "deletecollection"]
  resources: [{group: "", resources: ["pods", "nodes"]}]
- level: None
`

// controllersForFull is the kube-controller-manager subset the full profile runs: workloads,
// garbage collection, namespaces, node health and taint eviction, PDB status.
var controllersForFull = []string{
	"deployment-controller", "replicaset-controller", "daemonset-controller", "statefulset-controller",
	"job-controller", "cronjob-controller", "ttl-after-finished-controller",
	"garbage-collector-controller", "namespace-controller", "pod-garbage-collector-controller",
	"node-lifecycle-controller", "taint-eviction-controller", "disruption-controller",
	"serviceaccount-controller", "endpointslice-controller", "clusterrole-aggregation-controller",
	"root-ca-certificate-publisher-controller",
}

// Files under --dir.
const (
	readyFileName   = "ready.json"
	pidFileName     = "testenv.pid"
	pidsFileName    = "pids.json"    // component pids as they start, for `down` after a crash
	restartFileName = "restart.json" // what `testenv restart` asks of the supervisor
)

// readyInfo is D/ready.json, written (atomically) once every component is ready.
type readyInfo struct {
	Server             string                   `json:"server"`
	Kubeconfig         string                   `json:"kubeconfig"`
	CA                 string                   `json:"ca"`
	Etcd               string                   `json:"etcd"`
	Profile            string                   `json:"profile"`
	K8sVersion         string                   `json:"k8sVersion"`
	Dir                string                   `json:"dir"`
	SupervisorPID      int                      `json:"supervisorPid"`
	StartupSeconds     float64                  `json:"startupSeconds"`
	KwokNodeAnnotation string                   `json:"kwokNodeAnnotation,omitempty"`
	Components         map[string]componentInfo `json:"components"`
	// Restarts counts the restarts in place of each component (`testenv restart`).
	Restarts map[string]int `json:"restarts,omitempty"`
}

// restartRequest is D/restart.json, written by `testenv restart` before it signals.
type restartRequest struct {
	Component string `json:"component"`
	// DownForMs is how long the component stays stopped before it starts again.
	DownForMs int64 `json:"downForMs"`
	// Kill stops it with SIGKILL, as a crash does, rather than an orderly SIGTERM.
	Kill bool `json:"kill,omitempty"`
}

type componentInfo struct {
	PID  int    `json:"pid"`
	Port int    `json:"port"`
	URL  string `json:"url,omitempty"`
	Log  string `json:"log"`
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type upOptions struct {
	dir, profile string
	detach       bool
	daemon       bool // internal: this process is the detached supervisor
	parentPID    int
	timeout      time.Duration
	extra        map[string]*stringList
}

func runUp(args []string) int {
	o := upOptions{extra: map[string]*stringList{}}
	fs := flag.NewFlagSet("testenv up", flag.ContinueOnError)
	fs.StringVar(&o.dir, "dir", "", "state directory: kubeconfig, env, ready.json, pki/, logs/ (required)")
	fs.StringVar(&o.profile, "profile", "full", "api (etcd + kube-apiserver), sched (+ kube-scheduler + kwok) or full (+ kube-controller-manager)")
	fs.BoolVar(&o.detach, "detach", false, "run the supervisor in the background and return once the environment is ready")
	fs.BoolVar(&o.daemon, "daemon", false, "internal: set on the detached supervisor")
	fs.IntVar(&o.parentPID, "parent-pid", 0, "tear down when this process exits (default: when the supervisor's parent exits, unless detached)")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Minute, "how long to wait for the components to become ready")
	for _, c := range []string{"etcd", "apiserver", "scheduler", "controller-manager", "kwok"} {
		list := &stringList{}
		o.extra[c] = list
		fs.Var(list, c+"-arg", "extra flag for "+c+" (repeatable), e.g. --"+c+"-arg=--v=4")
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.dir == "" || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "testenv up: --dir is required and there are no positional arguments")
		fs.Usage()
		return 2
	}
	if _, ok := profiles[o.profile]; !ok {
		fmt.Fprintf(os.Stderr, "testenv up: unknown profile %q (api, sched, full)\n", o.profile)
		return 2
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv up:", err)
		return 1
	}
	o.dir = dir
	if o.detach {
		return detach(o, args)
	}
	s := &supervisor{opts: o, components: map[string]*component{}, restarts: map[string]int{}}
	if err := s.up(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv up:", err)
		return 1
	}
	return 0
}

// detach starts `testenv up` (without --detach) in its own session, with its output in
// D/logs/supervisor.log, and waits until it wrote ready.json or died.
func detach(o upOptions, args []string) int {
	var rest []string
	for _, a := range args {
		if a != "--detach" && a != "-detach" && a != "--detach=true" && a != "-detach=true" {
			rest = append(rest, a)
		}
	}
	if err := prepareDir(o.dir); err != nil {
		fmt.Fprintln(os.Stderr, "testenv up:", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv up:", err)
		return 1
	}
	logPath := filepath.Join(o.dir, "logs", "supervisor.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv up:", err)
		return 1
	}
	defer logFile.Close()
	cmd := exec.Command(self, append([]string{"up", "--daemon"}, rest...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv up:", err)
		return 1
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	readyPath := filepath.Join(o.dir, readyFileName)
	for {
		select {
		case err := <-exited:
			fmt.Fprintf(os.Stderr, "testenv up: the supervisor exited before the environment was ready (%v); %s:\n%s",
				err, logPath, tail(logPath, 40))
			return 1
		case <-time.After(100 * time.Millisecond):
		}
		if info, err := readReady(readyPath); err == nil && info.SupervisorPID == cmd.Process.Pid {
			fmt.Printf("testenv: profile %s ready in %.1fs (supervisor pid %d); . %s\n",
				info.Profile, info.StartupSeconds, info.SupervisorPID, filepath.Join(o.dir, "env"))
			_ = cmd.Process.Release()
			return 0
		}
	}
}

// prepareDir makes D and D/logs, refusing a directory with a live supervisor in it, and
// clears what a previous run left (but not the logs of this run's launcher).
func prepareDir(dir string) error {
	if pid := readPID(filepath.Join(dir, pidFileName)); pid > 0 && alive(pid) {
		return fmt.Errorf("an environment is already running in %s (supervisor pid %d); run `testenv down --dir %s` first", dir, pid, dir)
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	// The API server's audit log records a cluster's objects: a new cluster starts a new one
	// (the API server only appends to it).
	if err := os.Remove(filepath.Join(dir, "logs", "audit.log")); err != nil && !os.IsNotExist(err) {
		return err
	}
	return removeState(dir)
}

// removeState deletes everything in D that a run creates, except logs/.
func removeState(dir string) error {
	for _, name := range []string{readyFileName, "kubeconfig", "env", "kwok.yaml", pidsFileName, pidFileName, "pki", "etcd"} {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

type component struct {
	name string
	port int
	url  string
	log  string
	cmd  *exec.Cmd
	args []string
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, valid after done
	// ready tells when it serves; kept to wait for it again after a restart in place.
	ready func(ctx context.Context, c *component) error
	// retired: stopped on purpose by a restart, so its exit is not a failure (under mu).
	retired bool
}

type supervisor struct {
	opts       upOptions
	started    time.Time
	pki        *pki
	self       string
	mu         sync.Mutex
	components map[string]*component
	order      []string // start order
	stopping   bool
	exits      chan *component
	restarts   map[string]int // under mu
	startup    time.Duration  // to ready, set when ready.json is first written
}

func (s *supervisor) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "testenv[%5.1fs]: %s\n", time.Since(s.started).Seconds(), fmt.Sprintf(format, args...))
}

func (s *supervisor) up() error {
	s.started = time.Now()
	s.exits = make(chan *component, 8)
	dir := s.opts.dir
	if !s.opts.daemon {
		if err := prepareDir(dir); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, pidFileName), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	var err error
	if s.self, err = os.Executable(); err != nil {
		return err
	}

	// Stop on a signal or when whoever started us is gone, also while still starting.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	restartSignals := make(chan os.Signal, 1)
	signal.Notify(restartSignals, syscall.SIGUSR1)
	stopReason := make(chan string, 4)
	go func() {
		sig := <-signals
		stopReason <- "received " + sig.String()
		cancel()
	}()
	go s.watchParent(ctx, cancel, stopReason)

	err = s.start(ctx)
	if err == nil {
		s.logf("ready: profile %s, KUBECONFIG=%s", s.opts.profile, filepath.Join(dir, "kubeconfig"))
	wait:
		for {
			select {
			case reason := <-stopReason:
				s.logf("stopping: %s", reason)
				break wait
			case <-restartSignals:
				if rerr := s.restart(ctx); rerr != nil {
					err = rerr
					break wait
				}
			case c := <-s.exits:
				s.mu.Lock()
				current := s.components[c.name] == c
				s.mu.Unlock()
				if current { // not one that died while starting and was replaced
					err = fmt.Errorf("%s exited unexpectedly (%v); last lines of %s:\n%s", c.name, c.err, c.log, tail(c.log, 30))
					break wait
				}
			}
		}
	} else if ctx.Err() != nil {
		select {
		case reason := <-stopReason:
			err = fmt.Errorf("stopped while starting: %s", reason)
		default:
		}
	}
	s.teardown()
	return err
}

// watchParent cancels ctx when --parent-pid exits, or (when not detached) when this process
// is re-parented, i.e. the process that ran `testenv up` died.
func (s *supervisor) watchParent(ctx context.Context, cancel context.CancelFunc, reason chan<- string) {
	ppid := os.Getppid()
	ticker := time.NewTicker(250 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if s.opts.parentPID > 0 && !alive(s.opts.parentPID) {
			reason <- fmt.Sprintf("parent process %d exited", s.opts.parentPID)
			cancel()
			return
		}
		if !s.opts.daemon && os.Getppid() != ppid {
			reason <- fmt.Sprintf("parent process %d exited", ppid)
			cancel()
			return
		}
	}
}

func (s *supervisor) start(ctx context.Context) error {
	dir := s.opts.dir
	ctx, cancel := context.WithTimeout(ctx, s.opts.timeout)
	defer cancel()
	var err error
	if s.pki, err = newPKI(filepath.Join(dir, "pki")); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	profile := profiles[s.opts.profile]
	has := func(name string) bool {
		for _, c := range profile {
			if c == name {
				return true
			}
		}
		return false
	}

	// etcd
	etcd, err := s.startWithRetry(ctx, "etcd", 2, func(ports []int) []string {
		client, peer := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		return append([]string{
			"--name=testenv",
			"--data-dir=" + filepath.Join(dir, "etcd"),
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=testenv=" + peer,
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		}, *s.opts.extra["etcd"]...)
	}, func(ctx context.Context, c *component) error {
		c.url = fmt.Sprintf("http://127.0.0.1:%d", c.port)
		return httpOK(ctx, http.DefaultClient, c.url+"/health", `"health":"true"`)
	})
	if err != nil {
		return err
	}

	// kube-apiserver
	admission := "ServiceAccount,TaintNodesByCondition"
	if has("kube-controller-manager") {
		// The node-lifecycle controller removes the not-ready taint, as in a real cluster.
		admission = "ServiceAccount"
	}
	p := s.pki
	auditPolicy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(auditPolicy, []byte(auditPolicyYAML), 0o644); err != nil {
		return fmt.Errorf("audit policy: %w", err)
	}
	apiClient := &http.Client{Transport: &http.Transport{TLSClientConfig: s.adminTLS()}, Timeout: 5 * time.Second}
	_, err = s.startWithRetry(ctx, "kube-apiserver", 1, func(ports []int) []string {
		if err := s.writeKubeconfig(ports[0]); err != nil {
			s.logf("kubeconfig: %v", err)
		}
		return append([]string{
			"--etcd-servers=" + etcd.url,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--cert-dir=" + filepath.Join(dir, "pki", "kube-apiserver"),
			"--tls-cert-file=" + p.path("apiserver.crt"),
			"--tls-private-key-file=" + p.path("apiserver.key"),
			"--client-ca-file=" + p.path("ca.crt"),
			"--requestheader-client-ca-file=" + p.path("front-proxy-ca.crt"),
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + p.path("front-proxy-client.crt"),
			"--proxy-client-key-file=" + p.path("front-proxy-client.key"),
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + p.path("sa.pub"),
			"--service-account-signing-key-file=" + p.path("sa.key"),
			"--service-cluster-ip-range=10.0.0.0/24",
			"--allow-privileged=true",
			"--authorization-mode=RBAC",
			"--disable-admission-plugins=" + admission,
			// One API server, on loopback: no "kubernetes" Endpoints (loopback IPs are invalid there).
			"--endpoint-reconciler-type=none",
			"--enable-priority-and-fairness=false",
			"--profiling=false",
			// Appended to across restarts: one record per pod deletion or eviction, so tests can
			// tell who took each pod away (see auditPolicyYAML).
			"--audit-policy-file=" + auditPolicy,
			"--audit-log-path=" + filepath.Join(dir, "logs", "audit.log"),
			"--audit-log-format=json",
		}, *s.opts.extra["apiserver"]...)
	}, func(ctx context.Context, c *component) error {
		c.url = fmt.Sprintf("https://127.0.0.1:%d", c.port)
		if err := httpOK(ctx, apiClient, c.url+"/readyz", "ok"); err != nil {
			return err
		}
		return httpOK(ctx, apiClient, c.url+"/api/v1/namespaces/default", `"name":"default"`)
	})
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")

	// The rest only needs the API server; start them together.
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	type job struct {
		name   string
		nports int
		args   func(ports []int) []string
		ready  func(ctx context.Context, c *component) error
	}
	delegated := func(ports []int) []string {
		return []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
		}
	}
	secureHealthy := func(path string) func(ctx context.Context, c *component) error {
		return func(ctx context.Context, c *component) error {
			c.url = fmt.Sprintf("https://127.0.0.1:%d", c.port)
			return httpOK(ctx, insecure, c.url+path, "ok")
		}
	}
	var jobs []job
	if has("kube-scheduler") {
		jobs = append(jobs, job{"kube-scheduler", 1, func(ports []int) []string {
			return append(delegated(ports), *s.opts.extra["scheduler"]...)
		}, secureHealthy("/readyz")})
	}
	if has("kube-controller-manager") {
		jobs = append(jobs, job{"kube-controller-manager", 1, func(ports []int) []string {
			return append(append(delegated(ports),
				"--controllers="+strings.Join(controllersForFull, ","),
				"--service-account-private-key-file="+p.path("sa.key"),
				"--root-ca-file="+p.path("ca.crt"),
				"--use-service-account-credentials=false",
				"--allocate-node-cidrs=false",
			), *s.opts.extra["controller-manager"]...)
		}, secureHealthy("/healthz")})
	}
	if has("kwok") {
		lease := 0
		if has("kube-controller-manager") {
			lease = 40
		}
		jobs = append(jobs, job{"kwok", 1, func(ports []int) []string {
			config := filepath.Join(dir, "kwok.yaml")
			data, err := kwokConfig(lease, ports[0])
			if err == nil {
				err = os.WriteFile(config, []byte(data), 0o644)
			}
			if err != nil {
				s.logf("kwok.yaml: %v", err)
			}
			return append([]string{
				"--kubeconfig=" + kubeconfig,
				"--config=" + config,
				"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation,
				"--server-address=127.0.0.1:" + strconv.Itoa(ports[0]),
				"--node-port=" + strconv.Itoa(ports[0]),
				"--node-ip=127.0.0.1",
			}, *s.opts.extra["kwok"]...)
		}, func(ctx context.Context, c *component) error {
			c.url = fmt.Sprintf("http://127.0.0.1:%d", c.port)
			return httpOK(ctx, http.DefaultClient, c.url+"/healthz", "ok")
		}})
	}
	errs := make(chan error, len(jobs))
	for _, j := range jobs {
		go func() {
			_, err := s.startWithRetry(ctx, j.name, j.nports, j.args, j.ready)
			errs <- err
		}()
	}
	var firstErr error
	for range jobs {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return firstErr
	}
	return s.writeReady()
}

// startWithRetry starts a component on fresh free ports and waits until ready reports it
// healthy. A component that dies while starting because a port was taken in the meantime is
// restarted on other ports; any other early death is an error with the end of its log.
func (s *supervisor) startWithRetry(ctx context.Context, name string, nports int,
	args func(ports []int) []string, ready func(ctx context.Context, c *component) error) (*component, error) {
	logPath := filepath.Join(s.opts.dir, "logs", name+".log")
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(nports)
		if err != nil {
			return nil, err
		}
		if attempt == 1 {
			_ = os.Remove(logPath) // a fresh log per run
		}
		c, err := s.spawn(name, ports[0], args(ports), logPath)
		if err != nil {
			return nil, err
		}
		readyCtx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-c.done:
			case <-readyCtx.Done():
			}
			cancel()
		}()
		err = ready(readyCtx, c)
		cancel()
		select {
		case <-c.done:
			log := tail(logPath, 30)
			if attempt < 4 && strings.Contains(log, "address already in use") {
				s.logf("%s: port taken, retrying on other ports", name)
				continue
			}
			return nil, fmt.Errorf("%s exited while starting (%v); last lines of %s:\n%s", name, c.err, logPath, log)
		default:
		}
		if err != nil {
			if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, err
			}
			return nil, fmt.Errorf("%s not ready after %s (%v); last lines of %s:\n%s", name, time.Since(s.started).Round(time.Second), err, logPath, tail(logPath, 30))
		}
		s.logf("%s ready (pid %d, %s)", name, c.cmd.Process.Pid, c.url)
		c.ready = ready
		return c, nil
	}
}

// spawner runs exec.Cmd.Start on one OS thread that never exits: Pdeathsig fires when the
// *thread* that forked the child exits, and this way that is only when the process dies.
var spawner = func() chan func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread()
		for f := range ch {
			f()
		}
	}()
	return ch
}()

func (s *supervisor) spawn(name string, port int, args []string, logPath string) (*component, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "==> %s %s %s\n", time.Now().Format(time.RFC3339), name, strings.Join(args, " "))
	cmd := exec.Command(s.self, append([]string{name}, args...)...)
	cmd.Dir = s.opts.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group (a terminal's ^C goes to the supervisor, which stops them in order),
	// and SIGKILL if the supervisor dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	c := &component{name: name, port: port, log: logPath, cmd: cmd, args: args, done: make(chan struct{})}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		logFile.Close()
		return nil, errors.New("stopping")
	}
	started := make(chan error)
	spawner <- func() { started <- cmd.Start() }
	err = <-started
	logFile.Close()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if _, seen := s.components[name]; !seen {
		s.order = append(s.order, name)
	}
	s.components[name] = c
	s.writePIDs()
	go func() {
		c.err = cmd.Wait()
		close(c.done)
		s.mu.Lock()
		expected := s.stopping || s.components[name] != c || c.retired
		s.mu.Unlock()
		if !expected {
			select {
			case s.exits <- c:
			default:
			}
		}
	}()
	return c, nil
}

// restart carries out D/restart.json: it stops the component (SIGTERM, SIGKILL after 10 s),
// waits the requested time and starts it again with the same port and arguments (etcd keeps its
// data directory, the API server its port, so clients reconnect to the same address), waits
// until it serves, and rewrites ready.json with its new pid. A component that does not come back
// is an error, and the environment stops as when a component dies.
func (s *supervisor) restart(ctx context.Context) error {
	path := filepath.Join(s.opts.dir, restartFileName)
	req := restartRequest{Component: "kube-apiserver"}
	if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &req); err != nil {
			s.logf("restart: ignoring %s: %v", path, err)
			return nil
		}
	}
	_ = os.Remove(path)
	s.mu.Lock()
	old := s.components[req.Component]
	known := old != nil && old.ready != nil
	if known {
		old.retired = true
	}
	s.mu.Unlock()
	if !known {
		s.logf("restart: no running component %q; nothing done", req.Component)
		return nil
	}
	began := time.Now()
	s.logf("restart: stopping %s (pid %d, kill %t)", old.name, old.cmd.Process.Pid, req.Kill)
	s.stop(old, req.Kill)
	select {
	case <-time.After(time.Duration(req.DownForMs) * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	var c *component
	var err error
	// The port is ours: its listener closed a moment ago, and Go servers bind with SO_REUSEADDR.
	for attempt := 1; attempt <= 3; attempt++ {
		if c, err = s.spawn(old.name, old.port, old.args, old.log); err != nil {
			return fmt.Errorf("restart %s: %w", old.name, err)
		}
		readyCtx, cancel := context.WithTimeout(ctx, s.opts.timeout)
		go func() {
			select {
			case <-c.done:
			case <-readyCtx.Done():
			}
			cancel()
		}()
		err = old.ready(readyCtx, c)
		cancel()
		select {
		case <-c.done:
			err = fmt.Errorf("exited while starting (%v)", c.err)
			if strings.Contains(tail(c.log, 30), "address already in use") {
				time.Sleep(time.Second)
				continue
			}
		default:
		}
		break
	}
	if err != nil {
		return fmt.Errorf("restart %s on port %d: %v; last lines of %s:\n%s", old.name, old.port, err, old.log, tail(old.log, 30))
	}
	c.ready = old.ready
	s.mu.Lock()
	s.restarts[old.name]++
	s.mu.Unlock()
	s.logf("restart: %s ready again (pid %d) %s after it was asked to stop", old.name, c.cmd.Process.Pid, time.Since(began).Round(time.Millisecond))
	return s.writeReady()
}

// stop ends c and waits until it has exited: SIGKILL when kill, else SIGTERM and SIGKILL after
// a grace period of 10 s.
func (s *supervisor) stop(c *component, kill bool) {
	if kill {
		_ = c.cmd.Process.Kill()
	} else {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		s.logf("%s did not stop in 10s; killing it", c.name)
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// teardown removes ready.json first (so nobody picks up a dying environment), then stops the
// components in reverse start order: SIGTERM, and SIGKILL after a grace period.
func (s *supervisor) teardown() {
	dir := s.opts.dir
	_ = os.Remove(filepath.Join(dir, readyFileName))
	s.mu.Lock()
	s.stopping = true
	order := append([]string(nil), s.order...)
	s.mu.Unlock()
	stop := func(names ...string) {
		var wg sync.WaitGroup
		for _, name := range names {
			c := s.components[name]
			if c == nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.stop(c, false)
			}()
		}
		wg.Wait()
	}
	// Clients of the API server first, then the API server, then etcd.
	var clients []string
	for _, name := range order {
		if name != "etcd" && name != "kube-apiserver" {
			clients = append(clients, name)
		}
	}
	stop(clients...)
	stop("kube-apiserver")
	stop("etcd")
	_ = os.RemoveAll(filepath.Join(dir, "etcd"))
	_ = os.Remove(filepath.Join(dir, pidsFileName))
	if readPID(filepath.Join(dir, pidFileName)) == os.Getpid() {
		_ = os.Remove(filepath.Join(dir, pidFileName))
	}
	s.logf("stopped")
}

func (s *supervisor) writePIDs() {
	pids := map[string]int{}
	for name, c := range s.components {
		pids[name] = c.cmd.Process.Pid
	}
	data, _ := json.Marshal(pids)
	_ = writeAtomic(filepath.Join(s.opts.dir, pidsFileName), data)
}

func (s *supervisor) adminTLS() *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.pki.caCert)
	cert, err := tls.X509KeyPair(s.pki.adminCert, s.pki.adminKey)
	if err != nil {
		panic(err) // we just made it
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}
}

func (s *supervisor) writeKubeconfig(port int) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testenv"] = &clientcmdapi.Cluster{
		Server:                   fmt.Sprintf("https://127.0.0.1:%d", port),
		CertificateAuthorityData: s.pki.caCert,
	}
	cfg.AuthInfos["testenv-admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: s.pki.adminCert,
		ClientKeyData:         s.pki.adminKey,
	}
	cfg.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "testenv-admin", Namespace: "default"}
	cfg.CurrentContext = "testenv"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(s.opts.dir, "kubeconfig"), data)
}

func (s *supervisor) writeReady() error {
	dir := s.opts.dir
	if s.startup == 0 {
		s.startup = time.Since(s.started)
	}
	info := readyInfo{
		Kubeconfig:     filepath.Join(dir, "kubeconfig"),
		CA:             s.pki.path("ca.crt"),
		Profile:        s.opts.profile,
		K8sVersion:     kubernetesVersion(),
		Dir:            dir,
		SupervisorPID:  os.Getpid(),
		StartupSeconds: float64(s.startup.Milliseconds()) / 1000,
		Components:     map[string]componentInfo{},
		Restarts:       map[string]int{},
	}
	s.mu.Lock()
	for name, n := range s.restarts {
		info.Restarts[name] = n
	}
	for name, c := range s.components {
		info.Components[name] = componentInfo{PID: c.cmd.Process.Pid, Port: c.port, URL: c.url, Log: c.log}
	}
	s.mu.Unlock()
	info.Server = info.Components["kube-apiserver"].URL
	info.Etcd = info.Components["etcd"].URL
	if _, ok := info.Components["kwok"]; ok {
		info.KwokNodeAnnotation = kwokNodeAnnotation
	}
	env := fmt.Sprintf("export KUBECONFIG=%s\nexport TESTENV_DIR=%s\nexport CARPENTRY_TESTENV_DIR=%s\nexport TESTENV_SERVER=%s\n",
		shellQuote(info.Kubeconfig), shellQuote(dir), shellQuote(dir), shellQuote(info.Server))
	if err := writeAtomic(filepath.Join(dir, "env"), []byte(env)); err != nil {
		return err
	}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, readyFileName), append(data, '\n'))
}

// runDown stops the supervisor of D (SIGTERM, then SIGKILL), kills any component it left
// behind, and removes the state; D/logs/ stays for post-mortems.
func runDown(args []string) int {
	fs := flag.NewFlagSet("testenv down", flag.ContinueOnError)
	dirFlag := fs.String("dir", "", "state directory given to `testenv up` (required)")
	wait := fs.Duration("timeout", 30*time.Second, "how long to wait for an orderly stop before killing")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dirFlag == "" {
		fmt.Fprintln(os.Stderr, "testenv down: --dir is required")
		return 2
	}
	dir, _ := filepath.Abs(*dirFlag)
	if pid := readPID(filepath.Join(dir, pidFileName)); pid > 0 && alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(*wait)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(pid) {
			fmt.Fprintf(os.Stderr, "testenv down: supervisor %d did not stop in %s; killing it\n", pid, *wait)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// Components of a supervisor that was killed (Pdeathsig normally takes care of them).
	if data, err := os.ReadFile(filepath.Join(dir, pidsFileName)); err == nil {
		var pids map[string]int
		if json.Unmarshal(data, &pids) == nil {
			for name, pid := range pids {
				if alive(pid) && strings.Contains(cmdline(pid), name) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
	if err := removeState(dir); err != nil {
		fmt.Fprintln(os.Stderr, "testenv down:", err)
		return 1
	}
	fmt.Printf("testenv: stopped; logs kept in %s\n", filepath.Join(dir, "logs"))
	return 0
}

// runRestart asks the supervisor of D to restart one component in place (D/restart.json, then
// SIGUSR1) and waits until ready.json shows it serving again under a new pid.
func runRestart(args []string) int {
	fs := flag.NewFlagSet("testenv restart", flag.ContinueOnError)
	dirFlag := fs.String("dir", "", "state directory given to `testenv up` (required)")
	name := fs.String("component", "kube-apiserver", "the component to restart: etcd, kube-apiserver, kube-scheduler, kube-controller-manager or kwok")
	downFor := fs.Duration("down-for", 0, "how long it stays stopped before it starts again")
	kill := fs.Bool("kill", false, "stop it with SIGKILL, as a crash does (default: SIGTERM, an orderly stop of up to 10 s)")
	wait := fs.Duration("timeout", 3*time.Minute, "how long to wait for it to serve again")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dirFlag == "" || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "testenv restart: --dir is required and there are no positional arguments")
		return 2
	}
	dir, _ := filepath.Abs(*dirFlag)
	readyPath := filepath.Join(dir, readyFileName)
	info, err := readReady(readyPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv restart: not ready (%v)\n", err)
		return 1
	}
	before, found := info.Components[*name]
	if !found {
		fmt.Fprintf(os.Stderr, "testenv restart: profile %s runs no %s\n", info.Profile, *name)
		return 2
	}
	data, _ := json.Marshal(restartRequest{Component: *name, DownForMs: downFor.Milliseconds(), Kill: *kill})
	if err := writeAtomic(filepath.Join(dir, restartFileName), data); err != nil {
		fmt.Fprintln(os.Stderr, "testenv restart:", err)
		return 1
	}
	if err := syscall.Kill(info.SupervisorPID, syscall.SIGUSR1); err != nil {
		fmt.Fprintf(os.Stderr, "testenv restart: signal supervisor %d: %v\n", info.SupervisorPID, err)
		return 1
	}
	began := time.Now()
	for time.Since(began) < *wait {
		time.Sleep(100 * time.Millisecond)
		if !alive(info.SupervisorPID) {
			fmt.Fprintf(os.Stderr, "testenv restart: the supervisor exited; %s:\n%s", before.Log, tail(before.Log, 30))
			return 1
		}
		now, err := readReady(readyPath)
		if err == nil && now.Components[*name].PID != before.PID {
			fmt.Printf("testenv: %s restarted (pid %d, was %d) in %.1fs\n", *name, now.Components[*name].PID, before.PID, time.Since(began).Seconds())
			return 0
		}
	}
	fmt.Fprintf(os.Stderr, "testenv restart: %s not serving again after %s; %s:\n%s", *name, *wait, before.Log, tail(before.Log, 30))
	return 1
}

// runStatus prints ready.json's components with their resident memory; exit 1 if not ready.
func runStatus(args []string) int {
	fs := flag.NewFlagSet("testenv status", flag.ContinueOnError)
	dirFlag := fs.String("dir", "", "state directory given to `testenv up` (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dirFlag == "" {
		fmt.Fprintln(os.Stderr, "testenv status: --dir is required")
		return 2
	}
	info, err := readReady(filepath.Join(*dirFlag, readyFileName))
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv status: not ready (%v)\n", err)
		return 1
	}
	fmt.Printf("profile %s, k8s %s, server %s, started in %.1fs, supervisor pid %d (%s)\n",
		info.Profile, info.K8sVersion, info.Server, info.StartupSeconds, info.SupervisorPID, rssString(info.SupervisorPID))
	ok := alive(info.SupervisorPID)
	total, totalPSS := rssKiB(info.SupervisorPID), pssKiB(info.SupervisorPID)
	for _, name := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok"} {
		c, found := info.Components[name]
		if !found {
			continue
		}
		state := "running"
		if !alive(c.PID) {
			state, ok = "DEAD", false
		}
		total += rssKiB(c.PID)
		totalPSS += pssKiB(c.PID)
		fmt.Printf("  %-24s pid %-7d port %-5d %-7s rss %s\n", name, c.PID, c.Port, state, rssString(c.PID))
	}
	fmt.Printf("  total rss %d MiB, pss %d MiB\n", total/1024, totalPSS/1024)
	if !ok {
		return 1
	}
	return 0
}

// --- small helpers ---

func freePorts(n int) ([]int, error) {
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// httpOK polls url until it answers 200 with a body containing want, or ctx ends.
func httpOK(ctx context.Context, client *http.Client, url, want string) error {
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), want) {
				return nil
			}
			last = fmt.Errorf("GET %s: %s %s", url, resp.Status, strings.TrimSpace(string(body)))
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return last
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func writeAtomic(path string, data []byte) error {
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readReady(path string) (*readyInfo, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var info readyInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

func readPID(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state is the first field after "(comm)".
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

func cmdline(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(string(data), "\x00", " ")
}

func rssKiB(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			fields := strings.Fields(line)
			if len(fields) >= 2 {
				n, _ := strconv.Atoi(fields[1])
				return n
			}
		}
	}
	return 0
}

// pssKiB is the proportional set size: shared pages (the binary's text, mapped by every
// component) counted once across processes, unlike RSS.
func pssKiB(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if fields := strings.Fields(line); len(fields) >= 2 && fields[0] == "Pss:" {
			n, _ := strconv.Atoi(fields[1])
			return n
		}
	}
	return 0
}

func rssString(pid int) string {
	return fmt.Sprintf("%d MiB (pss %d MiB)", rssKiB(pid)/1024, pssKiB(pid)/1024)
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)\n", err)
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n") + "\n"
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
