// Command testenv is a multi-call binary holding a real Kubernetes control plane for tests:
// etcd, kube-apiserver, kube-scheduler, kube-controller-manager, the KWOK controller and
// kubectl, each the unchanged upstream entry point, plus a supervisor that starts them on
// 127.0.0.1 and writes a kubeconfig.
//
// The component is chosen by the name the binary is called by (a symlink named
// kube-apiserver, etcd, ...) or by the first argument:
//
//	testenv up --dir D --profile api|sched|full [--detach]
//	testenv down --dir D
//	testenv status --dir D
//	testenv restart --dir D [--component kube-apiserver] [--down-for 5s] [--kill]
//	testenv kube-apiserver --help        (same as a symlink named kube-apiserver)
//
// Every component runs in its own process (the supervisor re-executes this binary), because
// the Kubernetes components keep process-global state (feature gates, metrics registries,
// flag sets) that must not be shared.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// commands maps a sub-command (or argv[0] basename) to its entry point. Each entry point gets
// the arguments after the command name and returns the process exit code.
var commands = map[string]func(args []string) int{
	"etcd":                    runEtcd,
	"kube-apiserver":          runAPIServer,
	"kube-scheduler":          runScheduler,
	"kube-controller-manager": runControllerManager,
	"kwok":                    runKwok,
	"kubectl":                 runKubectl,
	"up":                      runUp,
	"down":                    runDown,
	"status":                  runStatus,
	"restart":                 runRestart,
	"version":                 runVersion,
}

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if _, ok := commands[name]; !ok {
		if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			usage()
			if len(args) == 0 {
				os.Exit(2)
			}
			os.Exit(0)
		}
		name, args = args[0], args[1:]
	}
	entry, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "testenv: unknown command %q\n\n", name)
		usage()
		os.Exit(2)
	}
	// Upstream mains read os.Args themselves (cobra, kwok's flag pre-parsing, kubectl's
	// plugin lookup), so present them with the argv they would see as standalone binaries.
	os.Args = append([]string{name}, args...)
	os.Exit(entry(args))
}

func usage() {
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, `testenv: a real Kubernetes control plane for tests (k8s %s).

Usage:
  testenv up --dir DIR [--profile api|sched|full] [--detach] [--parent-pid PID]
  testenv down --dir DIR
  testenv status --dir DIR
  testenv restart --dir DIR [--component NAME] [--down-for DURATION] [--kill]
  testenv COMPONENT [ARGS...]   (or call the binary through a symlink named COMPONENT)

Commands: %s
Run "testenv up --help" for the supervisor's flags.
`, kubernetesVersion(), strings.Join(names, ", "))
}
