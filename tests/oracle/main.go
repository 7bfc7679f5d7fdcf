// Command oracle runs upstream Karpenter's provisioning scheduler (sigs.k8s.io/karpenter v1.14.1)
// in-process on a scenario exported by carpentry and prints upstream's decisions as JSON. See
// README.md for the input and output contract and for every choice that can change a result.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"sort"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

const usage = `usage:
  oracle solve FILE|-            one input object -> one output object (pretty JSON)
  oracle batch                   JSON lines on stdin -> one output line per input line
  oracle bench --rounds R [--cpuprofile F] FILE
                                 time R fresh scheduling rounds on one input

Set ORACLE_LOG=1 to see upstream's logs on stderr.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	logger := setupLogging()
	var err error
	switch os.Args[1] {
	case "solve":
		err = cmdSolve(os.Args[2:], logger)
	case "batch":
		err = cmdBatch(os.Args[2:], logger)
	case "bench":
		err = cmdBench(os.Args[2:], logger)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		err = &usageError{fmt.Sprintf("unknown command %q", os.Args[1])}
	}
	if err == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "oracle: %v\n", err)
	var ue *usageError
	var ie *InputError
	switch {
	case errors.As(err, &ue):
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	case errors.As(err, &ie):
		os.Exit(2)
	default:
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// setupLogging silences controller-runtime and klog unless ORACLE_LOG is set: stdout carries only
// JSON, and upstream logs every unschedulable pod at error level.
func setupLogging() logr.Logger {
	logger := logr.Discard()
	if os.Getenv("ORACLE_LOG") != "" {
		logger = crzap.New(crzap.UseDevMode(true), crzap.WriteTo(os.Stderr))
	}
	log.SetLogger(logger)
	klog.SetLogger(logger)
	return logger
}

func readInput(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

func cmdSolve(args []string, logger logr.Logger) error {
	if len(args) != 1 {
		return &usageError{"solve takes one argument, FILE or -"}
	}
	data, err := readInput(args[0])
	if err != nil {
		return err
	}
	s, err := ParseScenario(data, nil)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	out, err := RunScenario(s, logger)
	if err != nil {
		// Same shape as batch mode, so a caller can parse stdout either way; the exit status
		// still says the scenario failed.
		if encErr := enc.Encode(ErrorOutput{Name: s.Name, Error: err.Error()}); encErr != nil {
			return encErr
		}
		return fmt.Errorf("scenario %q: %w", s.Name, err)
	}
	return enc.Encode(out)
}

// cmdBatch answers one line per input line, in order, flushing after each, so a caller can
// stream scenarios through one process. A scenario that cannot be run yields {name, error}.
// Instance-type sets defined by a line that parsed stay available to later lines by id.
func cmdBatch(args []string, logger logr.Logger) error {
	if len(args) != 0 {
		return &usageError{"batch takes no arguments; it reads JSON lines on stdin"}
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	w := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	known := InstanceTypeSets{}
	for lineNo := 1; ; lineNo++ {
		line, readErr := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var result any
			s, err := ParseScenario(line, known)
			if err == nil {
				for _, id := range s.DefinedSets {
					known[id] = s.InstanceTypeSets[id]
				}
				var out *Output
				out, err = RunScenario(s, logger)
				if err == nil {
					result = out
				}
			}
			if err != nil {
				result = ErrorOutput{Name: scenarioName(line, s), Error: fmt.Sprintf("line %d: %v", lineNo, err)}
			}
			if err := enc.Encode(result); err != nil {
				return err
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
		if readErr == io.EOF {
			return nil
		}
		if readErr != nil {
			return readErr
		}
	}
}

// scenarioName recovers the name of a scenario that failed to parse, if the line has one.
func scenarioName(line []byte, s *Scenario) string {
	if s != nil {
		return s.Name
	}
	var n struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(line, &n)
	return n.Name
}

type benchOutput struct {
	Name          string  `json:"name"`
	Pods          int     `json:"pods"`
	NodeClaims    int     `json:"nodeClaims"`
	MedianSeconds float64 `json:"medianSeconds"`
	MinSeconds    float64 `json:"minSeconds"`
	PodsPerSecond float64 `json:"podsPerSecond"`
	// Scheduler.Solve alone (upstream's scheduling_duration_seconds), the part upstream's own
	// benchmark times; the figures above time the whole Provisioner.Schedule.
	SolveMedianSeconds float64 `json:"solveMedianSeconds"`
	SolvePodsPerSecond float64 `json:"solvePodsPerSecond"`
}

// cmdBench times R scheduling rounds. Each round decodes the input again and builds a new fake
// API server, cluster state and provisioner (none of which is timed), so no round sees another
// round's pods, caches or NodeClaims; only Provisioner.Schedule is timed.
func cmdBench(args []string, logger logr.Logger) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	rounds := fs.Int("rounds", 10, "number of scheduling rounds")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the timed calls to this file")
	if err := fs.Parse(args); err != nil {
		return &usageError{err.Error()}
	}
	if fs.NArg() != 1 || *rounds < 1 {
		return &usageError{"bench takes --rounds R (R >= 1) and one FILE"}
	}
	data, err := readInput(fs.Arg(0))
	if err != nil {
		return err
	}
	var times []time.Duration
	var solveTimes []float64
	out := benchOutput{}
	var profile *os.File
	if *cpuProfile != "" {
		if profile, err = os.Create(*cpuProfile); err != nil {
			return err
		}
		defer profile.Close()
	}
	for r := 0; r < *rounds; r++ {
		s, err := ParseScenario(data, nil)
		if err != nil {
			return err
		}
		e, err := prepare(s, logger)
		if err != nil {
			return err
		}
		if profile != nil {
			if err := pprof.StartCPUProfile(profile); err != nil {
				return err
			}
		}
		solveBefore := solveSecondsSoFar()
		results, elapsed, err := e.schedule()
		// Provisioner.Schedule observes the same histogram around itself, so the sum grew by
		// Schedule's time plus Solve's: Solve is what is left after Schedule's own (timed here
		// around the call, a few nanoseconds more than its observation).
		solveTimes = append(solveTimes, solveSecondsSoFar()-solveBefore-elapsed.Seconds())
		if profile != nil {
			pprof.StopCPUProfile()
			// A CPU profile is one file per Start; profile the first round only.
			profile.Close()
			profile = nil
		}
		if err != nil {
			return fmt.Errorf("round %d: upstream Provisioner.Schedule: %w", r+1, err)
		}
		if r == 0 {
			out.Name, out.Pods, out.NodeClaims = s.Name, len(e.pending), len(results.NewNodeClaims)
		}
		times = append(times, elapsed)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	median := times[len(times)/2]
	if len(times)%2 == 0 {
		median = (times[len(times)/2-1] + times[len(times)/2]) / 2
	}
	out.MedianSeconds = median.Seconds()
	out.MinSeconds = times[0].Seconds()
	if median > 0 {
		out.PodsPerSecond = float64(out.Pods) / median.Seconds()
	}
	sort.Float64s(solveTimes)
	out.SolveMedianSeconds = solveTimes[len(solveTimes)/2]
	if len(solveTimes)%2 == 0 {
		out.SolveMedianSeconds = (solveTimes[len(solveTimes)/2-1] + solveTimes[len(solveTimes)/2]) / 2
	}
	if out.SolveMedianSeconds > 0 {
		out.SolvePodsPerSecond = float64(out.Pods) / out.SolveMedianSeconds
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}
