package unixsocket

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshfs/dshfs/toolapi"
)

// TestMain lets the latency benchmark run this binary as a harness would
// run: a client process of its own; and TestAcceptAfterDescriptorExhaustion
// run it as a daemon with a descriptor limit of its own.
func TestMain(m *testing.M) {
	if dir := os.Getenv("DSHFS_FD_CHILD"); dir != "" {
		if err := fdChild(dir); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if sock := os.Getenv("DSHFS_LATENCY_CLIENT"); sock != "" {
		if err := latencyClient(sock, os.Getenv("DSHFS_LATENCY_ECHO")); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const latencyCalls = 10000

var (
	latencyRead  = json.RawMessage(`{"file_path":"f.txt"}`)
	latencyEdits = [2]json.RawMessage{
		json.RawMessage(`{"file_path":"f.txt","old_string":"Axx","new_string":"Bxx"}`),
		json.RawMessage(`{"file_path":"f.txt","old_string":"Bxx","new_string":"Axx"}`),
	}
)

// latencyArgs are the arguments of the i-th call of tool: edits alternate,
// so an even number of them leaves the file as it was.
func latencyArgs(tool string, i int) json.RawMessage {
	if tool == "edit" {
		return latencyEdits[i%2]
	}
	return latencyRead
}

// BenchmarkSocketLatency measures p50 and p99 of 10,000 calls — a read of a
// 4 KiB file, and a 4 KiB edit — through the socket with the typed client
// and in-process, alternating, in the same run, and reports the socket's
// overhead. Twice: with the client in the daemon's process, and with the
// client in a process of its own, as a harness is. The second also reports
// the machine's floor: a plain exchange of the same sizes between two
// processes, answered at once or after writing and fsyncing 4 KiB, as an
// edit does (less the time of that work).
// Run: go test ./unix-socket -run '^$' -bench SocketLatency -benchtime 1x
func BenchmarkSocketLatency(b *testing.B) {
	for b.Loop() {
		d := startDaemon(b, 0)
		content := strings.Repeat(strings.Repeat("x", 63)+"\n", 64)
		content = strings.Replace(content, "x", "A", 1)
		if err := os.WriteFile(filepath.Join(d.ws, "f.txt"), []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		local := func(tool string, i int) time.Duration {
			t0 := time.Now()
			r, err := d.svc.Call(ctx, tool, toolapi.Request{Actor: "bench", Arguments: latencyArgs(tool, i)})
			since := time.Since(t0)
			if err != nil || r.IsError {
				b.Fatalf("%s: %v %s", tool, err, r.Text)
			}
			return since
		}
		report := func(name string, sock, local []time.Duration) {
			b.ReportMetric(percentile(sock, 0.5), name+"-socket-p50-µs")
			b.ReportMetric(percentile(sock, 0.99), name+"-socket-p99-µs")
			b.ReportMetric(percentile(local, 0.5), name+"-inproc-p50-µs")
			b.ReportMetric(percentile(local, 0.99), name+"-inproc-p99-µs")
			b.ReportMetric(percentile(sock, 0.5)-percentile(local, 0.5), name+"-overhead-p50-µs")
		}

		// The client in this process. Socket and in-process calls
		// alternate, so drift in the disk's latency (an edit fsyncs) falls
		// on both alike.
		sameProcess := func(tool string) (sock, loc []time.Duration) {
			for i := range latencyCalls {
				t0 := time.Now()
				r, err := d.client.Call(ctx, tool, ToolRequest{Actor: "bench", Arguments: latencyArgs(tool, 2*i)})
				sock = append(sock, time.Since(t0))
				if err != nil || r.IsError {
					b.Fatalf("%s: %v %s", tool, err, r.Text)
				}
				loc = append(loc, local(tool, 2*i+1))
			}
			return sock, loc
		}
		sameProcess("read") // observe, and warm the caches
		for _, tool := range []string{"read", "edit"} {
			sock, loc := sameProcess(tool)
			report(tool, sock, loc)
		}
		res, _ := d.svc.Call(ctx, "read", toolapi.Request{Actor: "bench", Arguments: latencyRead})
		answer, _ := json.Marshal(res)
		echo := startEcho(b)
		floor := func(name string, run func(synced bool, n int) []time.Duration) {
			var raw, synced []time.Duration
			echo.reset()
			for i := 0; i < latencyCalls; i += 10 {
				raw = append(raw, run(false, 10)...)
				synced = append(synced, run(true, 10)...)
			}
			b.ReportMetric(percentile(raw, 0.5), "raw"+name+"-p50-µs")
			b.ReportMetric(percentile(synced, 0.5)-percentile(echo.worked(), 0.5), "raw-fsync"+name+"-p50-µs")
		}
		conn, err := net.Dial("unix", echo.socket)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		ex := newExchanger(conn)
		floor("", func(synced bool, n int) (times []time.Duration) {
			for range n {
				t0 := time.Now()
				if err := ex.exchange(len(answer), synced); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(t0))
			}
			return times
		})

		// The client in a process of its own, in blocks of ten calls
		// alternating with ten in-process ones.
		child := startLatencyClient(b, d.socket, echo.socket)
		const block = 10
		for _, tool := range []string{"read", "edit"} {
			var sock, loc []time.Duration
			for i := 0; i < latencyCalls; i += block {
				sock = append(sock, child.run(b, tool, block)...)
				for j := range block {
					loc = append(loc, local(tool, j))
				}
			}
			report(tool+"-xproc", sock, loc)
		}
		floor("-xproc", func(synced bool, n int) []time.Duration {
			if synced {
				return child.run(b, "rawsync-"+strconv.Itoa(len(answer)), n)
			}
			return child.run(b, "raw-"+strconv.Itoa(len(answer)), n)
		})
	}
}

// percentile is the q-quantile of l in µs.
func percentile(l []time.Duration, q float64) float64 {
	s := slices.Clone(l)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))].Microseconds())
}

// echoServer serves the floor: each request is 200 bytes, the first eight
// of them the size of the answer, the ninth 1 to write and fsync 4 KiB
// first.
type echoServer struct {
	socket string
	mu     sync.Mutex
	work   []time.Duration // how long each write and fsync took
}

func (e *echoServer) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.work = nil
}

func (e *echoServer) worked() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.work)
}

func startEcho(tb testing.TB) *echoServer {
	e := &echoServer{socket: filepath.Join(tb.TempDir(), "echo.sock")}
	l, err := net.Listen("unix", e.socket)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := os.Create(filepath.Join(tb.TempDir(), "synced"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		l.Close()
		f.Close()
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, answer := make([]byte, 200), make([]byte, 1<<20)
				for {
					if _, err := io.ReadFull(c, req); err != nil {
						return
					}
					size := binary.LittleEndian.Uint64(req)
					if req[8] == 1 {
						t0 := time.Now()
						if _, err := f.WriteAt(answer[:4096], 0); err != nil {
							return
						}
						if err := f.Sync(); err != nil {
							return
						}
						e.mu.Lock()
						e.work = append(e.work, time.Since(t0))
						e.mu.Unlock()
					}
					if _, err := c.Write(answer[:min(size, uint64(len(answer)))]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

type latencyChild struct {
	in  io.Writer
	out *bufio.Scanner
}

// startLatencyClient runs this test binary as a client of socket (and of
// the echo server) that makes the calls it is told to and reports their
// times.
func startLatencyClient(tb testing.TB, socket, echo string) *latencyChild {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "DSHFS_LATENCY_CLIENT="+socket, "DSHFS_LATENCY_ECHO="+echo)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 1<<20)
	return &latencyChild{in: in, out: sc}
}

// run has the client make n calls of tool ("raw-SIZE" and "rawsync-SIZE"
// for exchanges with the echo server) and returns their times.
func (c *latencyChild) run(tb testing.TB, tool string, n int) []time.Duration {
	fmt.Fprintf(c.in, "%s %d\n", tool, n)
	if !c.out.Scan() {
		tb.Fatalf("latency client: %v", c.out.Err())
	}
	var times []time.Duration
	for f := range strings.FieldsSeq(c.out.Text()) {
		ns, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			tb.Fatalf("latency client: %s", c.out.Text())
		}
		times = append(times, time.Duration(ns))
	}
	if len(times) != n {
		tb.Fatalf("latency client: %s", c.out.Text())
	}
	return times
}

// exchanger makes the floor's exchanges with the echo server.
type exchanger struct {
	c               net.Conn
	request, answer []byte
}

func newExchanger(c net.Conn) *exchanger {
	return &exchanger{c: c, request: make([]byte, 200), answer: make([]byte, 1<<20)}
}

// exchange sends a request for size bytes, after a write and fsync if
// synced, and reads the answer.
func (e *exchanger) exchange(size int, synced bool) error {
	binary.LittleEndian.PutUint64(e.request, uint64(size))
	e.request[8] = 0
	if synced {
		e.request[8] = 1
	}
	if _, err := e.c.Write(e.request); err != nil {
		return err
	}
	_, err := io.ReadFull(e.c, e.answer[:size])
	return err
}

// latencyClient is the client process: it reads "TOOL N" lines, makes N
// calls, and writes their times in ns on one line.
func latencyClient(socket, echo string) error {
	client := NewClient(socket)
	defer client.CloseIdle()
	conn, err := net.Dial("unix", echo)
	if err != nil {
		return err
	}
	defer conn.Close()
	ex := newExchanger(conn)
	ctx := context.Background()
	edits := 0
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		tool, count, _ := strings.Cut(in.Text(), " ")
		n, err := strconv.Atoi(count)
		if err != nil {
			return fmt.Errorf("bad command %q", in.Text())
		}
		size, isRaw := strings.CutPrefix(tool, "raw-")
		synced := false
		if sz, ok := strings.CutPrefix(tool, "rawsync-"); ok {
			size, isRaw, synced = sz, true, true
		}
		answerSize, _ := strconv.Atoi(size)
		for range n {
			t0 := time.Now()
			switch {
			case isRaw:
				if err := ex.exchange(answerSize, synced); err != nil {
					return err
				}
			default:
				r, err := client.Call(ctx, tool, ToolRequest{Actor: "bench", Arguments: latencyArgs(tool, edits)})
				if err != nil {
					return err
				}
				if r.IsError {
					return fmt.Errorf("%s: %s", tool, r.Text)
				}
				if tool == "edit" {
					edits++
				}
			}
			fmt.Fprint(out, int64(time.Since(t0)), " ")
		}
		fmt.Fprintln(out)
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return in.Err()
}
