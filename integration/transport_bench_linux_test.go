package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// The systems of BenchmarkTransport: dshfs over /dev/fuse and over
// io_uring, with kernel passthrough and without.
const (
	sysDshfsURing    = "dshfs-uring"
	sysDshfsURingNoP = "dshfs-uring-nopt"
)

// BenchmarkTransport extracts the tar of BenchmarkMount (12,000 files of
// 2 KiB) through dshfs over /dev/fuse and over io_uring (mount --io-uring),
// with passthrough and without, and through libfuse's C servers over each
// (passthrough_ll, passthrough_hp -o io_uring), in rotated order for
// DSHFS_BENCH_ROUNDS rounds, and prints each one's median time, daemon CPU
// a file and, from a separate pass with request logging on, requests a
// file, with the ratios of io_uring to /dev/fuse in the same rounds. It
// needs root, /dev/fuse and a kernel with FUSE over io_uring; it restores
// the fuse module's enable_uring as it found it.
func BenchmarkTransport(b *testing.B) {
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		b.Skip("needs /dev/fuse and root")
	}
	if _, err := os.Stat(enableURing); err != nil {
		b.Skip("the kernel has no FUSE over io_uring")
	}
	keepURingParam(b)
	raiseFileLimit(b)
	systems := []benchSystem{
		{name: sysDshfs, command: dshfsCommand(false)},
		{name: sysDshfsURing, command: dshfsURingCommand(false)},
		{name: sysDshfsNoP, command: dshfsCommand(true)},
		{name: sysDshfsURingNoP, command: dshfsURingCommand(true)},
	}
	systems = append(systems, cServers(b)...)
	fx := &fixtures{tree: filepath.Join(b.TempDir(), "tree.tar"), env: os.Environ()}
	must(b, makeTree(fx.tree, extractFiles, extractFiles/50, func(*rand.Rand) int { return 2048 }))
	for b.Loop() {
		res := results{}
		for r := range benchRounds(b) {
			for i := range systems {
				sys := systems[(i+r)%len(systems)]
				res.add(sys.name, measureExtract(b, fx, sys, nil))
			}
		}
		counts := requests{}
		for _, sys := range systems {
			c := &opCounter{n: map[string]int{}}
			measureExtract(b, fx, sys, c)
			counts[sys.name] = map[string]map[string]int{wExtract: c.settled()}
		}
		fmt.Print(transportReport(res, counts, systems))
		b.ReportMetric(res.ratio(sysDshfsURing, sysDshfs, wExtract), "uring-vs-dev-x")
		b.ReportMetric(res.cpuPerFile(sysDshfsURing), "uring-cpu-µs/file")
	}
}

// dshfsURingCommand is dshfsCommand with --io-uring.
func dshfsURingCommand(noPassthrough bool) func(backing, mnt string, debug bool) *exec.Cmd {
	return func(backing, mnt string, debug bool) *exec.Cmd {
		cmd := dshfsCommand(noPassthrough)(backing, mnt, debug)
		cmd.Args = append(cmd.Args, "--io-uring")
		return cmd
	}
}

// measureExtract times the extraction on a fresh mount of sys, checking
// that an io_uring system is served over io_uring.
func measureExtract(b *testing.B, fx *fixtures, sys benchSystem, debug *opCounter) map[string]sample {
	var s *served
	if debug != nil {
		s = s.restart(b, sys, debug)
	} else {
		s = s.restart(b, sys, nil)
	}
	defer s.stop()
	// (c-uring's transport is checked once, by checkURingServer)
	if strings.HasPrefix(sys.name, sysDshfs) {
		if got := transportOf(b, b.TempDir(), s.dir); strings.Contains(sys.name, "uring") != strings.HasPrefix(got, "io_uring") {
			b.Fatalf("%s is served over %s", sys.name, got)
		}
	}
	w := workloads[0]
	w.prep(b, fx, s.dir)
	cpu, start := s.cpu(b), time.Now()
	w.timed(b, fx, s.dir)
	wall := time.Since(start)
	return map[string]sample{w.name: {wall: wall, cpu: s.settledCPU(b) - cpu}}
}

func transportReport(res results, counts requests, systems []benchSystem) string {
	var sb strings.Builder
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&sb, "\nBenchmarkTransport: extract %d files of 2 KiB, medians of %d rounds; load average %s\n", extractFiles,
		len(res[sysDshfs][wExtract]), strings.Join(strings.Fields(string(load))[:3], " "))
	tw := tabwriter.NewWriter(&sb, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tseconds\tdaemon CPU µs/file\trequests/file\t")
	for _, sys := range systems {
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f\t%.2f\t\n", sys.name, median(res.seconds(sys.name, wExtract, wallOf)),
			res.cpuPerFile(sys.name), counts.perFile(sys.name))
	}
	tw.Flush()
	fmt.Fprintf(&sb, "io_uring / /dev/fuse, same rounds: passthrough %.2f×, no passthrough %.2f×\n",
		res.ratio(sysDshfsURing, sysDshfs, wExtract), res.ratio(sysDshfsURingNoP, sysDshfsNoP, wExtract))
	if res[sysCURing] != nil {
		fmt.Fprintf(&sb, "C servers, io_uring (passthrough_hp) / /dev/fuse (passthrough_ll): %.2f×; dshfs ÷ C over io_uring: %.2f×, over /dev/fuse: %.2f×\n",
			res.ratio(sysCURing, sysC, wExtract), res.ratio(sysDshfsURing, sysCURing, wExtract), res.ratio(sysDshfs, sysC, wExtract))
	}
	return sb.String()
}

// cServers are libfuse's C loopbacks: passthrough_ll over /dev/fuse and,
// where it can be built and served, passthrough_hp over io_uring.
func cServers(b *testing.B) []benchSystem {
	cLoop := buildCLoopback(b, b.TempDir())
	systems := []benchSystem{{name: sysC, command: cLoopbackCommand(cLoop)}}
	cURing, why := cURingSystem(b)
	if why != "" {
		b.Logf("%s left out: %s", sysCURing, why)
		return systems
	}
	return append(systems, cURing)
}
