package main

// The upstream entry points, each called exactly as its own main() calls it.

import (
	"fmt"
	"os"
	"runtime/debug"
	_ "time/tzdata" // CronJob time zones (kube-apiserver, kube-controller-manager)

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // kubectl: client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kwokconfig "sigs.k8s.io/kwok/pkg/config"
	kwokcmd "sigs.k8s.io/kwok/pkg/kwok/cmd"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	kwoksignals "sigs.k8s.io/kwok/pkg/utils/signals"
)

func runEtcd(args []string) int {
	etcdmain.Main(os.Args) // exits the process itself on failure
	return 0
}

func runAPIServer(args []string) int {
	return cli.Run(apiserver.NewAPIServerCommand())
}

func runScheduler(args []string) int {
	return cli.Run(scheduler.NewSchedulerCommand())
}

func runControllerManager(args []string) int {
	return cli.Run(controllermanager.NewControllerManagerCommand())
}

func runKubectl(args []string) int {
	// As cmd/kubectl: set the verbosity before the command is built (plugins, kuberc).
	_, _ = logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args))
	command := kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err) // prints and exits non-zero
	}
	return 0
}

func runKwok(args []string) int {
	// The Kubernetes packages linked into this binary register flags on the global pflag set
	// at init (e.g. component-base's --version, which is not a bool); the standalone kwok
	// binary has none of them, and cobra chokes on that --version. Start from a clean set.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)

	// As sigs.k8s.io/kwok/cmd/kwok: logging and --config are pre-parsed from os.Args.
	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsAllowlist.UnknownFlags = true
	flagset.Usage = func() {}
	ctx := kwoksignals.SetupSignalContext()
	ctx, logger := kwoklog.InitFlags(ctx, flagset)
	ctx, err := kwokconfig.InitFlags(ctx, flagset)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(flagset.FlagUsages()))
		logger.Error("Init config flags", "err", err)
		return 1
	}
	command := kwokcmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", "err", err)
		return 1
	}
	return 0
}

func runVersion(args []string) int {
	fmt.Printf("kubernetes %s\netcd %s\nkwok %s\n",
		kubernetesVersion(), moduleVersion("go.etcd.io/etcd/server/v3"), moduleVersion("sigs.k8s.io/kwok"))
	return 0
}

// kubernetesVersion is the k8s.io/kubernetes release compiled in (from go.mod).
func kubernetesVersion() string { return moduleVersion("k8s.io/kubernetes") }

func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == path {
			if dep.Replace != nil {
				return dep.Replace.Version
			}
			return dep.Version
		}
	}
	return "unknown"
}
