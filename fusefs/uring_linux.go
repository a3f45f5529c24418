package fusefs

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FUSE over io_uring (Linux 6.14 and later, CONFIG_FUSE_IO_URING, the fuse
// module's enable_uring switched on, a root daemon; Options.IOUring). After
// the usual INIT on /dev/fuse the daemon registers ring entries on one queue
// per possible CPU: the kernel hands a request made on CPU n to queue n, and
// one IORING_OP_URING_CMD both commits a reply and fetches the next request.
// Each queue is one thread, pinned to its CPU, that owns its ring; requests
// run in goroutines through go-fuse's ProtocolServer, and their replies go
// back to the queue's thread, woken by an eventfd, which commits them.
// FORGET, INTERRUPT and notifications stay on /dev/fuse, served by go-fuse
// as before; an interrupt does not cancel a request served from a ring.
//
// The kernel holds every request once io_uring is negotiated until each
// queue has an entry, and goes back to /dev/fuse for good if a
// registration fails: so io_uring is negotiated only once every queue's
// ring is set up, and a daemon that cannot register after all makes the
// kernel give up with a registration it refuses.

const (
	enableURingParam     = "/sys/module/fuse/parameters/enable_uring"
	fuseURingRegister    = 1   // FUSE_IO_URING_CMD_REGISTER
	fuseURingCommitFetch = 2   // FUSE_IO_URING_CMD_COMMIT_AND_FETCH
	uringHeaderSize      = 288 // struct fuse_uring_req_header
	uringOpInOff         = 128 // its op_in
	uringEntOff          = 256 // its ring_ent_in_out: flags, commit_id, payload_sz
	uringQueueDepth      = 16  // ring entries a queue
	inHeaderSize         = 40  // struct fuse_in_header
	outHeaderSize        = 16  // struct fuse_out_header
	fuseOpInit           = 26
	fuseOpWrite          = 16
	efdTag               = ^uint64(0) // the completion of the queue's eventfd read
)

// uringTransport serves a mount's requests from io_uring queues.
type uringTransport struct {
	queues  []*uringQueue
	payload int // bytes of each entry's payload buffer
	log     *slog.Logger
	start   chan struct{} // closed (go) once devFd and ps are set, or devFd is -1
	started sync.Once
	devFd   int // our duplicate of the connection's /dev/fuse descriptor
	ps      *fuse.ProtocolServer
	refuse  int // if >= 0, register nothing but make the kernel give up on this fd
	// refuseDup says refuse is our duplicate, closed once refused.
	refuseDup bool
	refused   bool // for tests: fail after INIT (Options.uringRefused)

	outcome chan struct{} // closed once why is final
	why     string        // why requests go over /dev/fuse; "" when io_uring serves them
	wg      sync.WaitGroup
	served  atomic.Uint64 // requests answered from the rings
	drain   time.Duration // how long wait waits for the queues to end
}

// newURing sets up a ring for every possible CPU, switching on the fuse
// module's io_uring first if it is off. It returns why not when it cannot.
func newURing(maxWrite int, log *slog.Logger) (*uringTransport, string) {
	if why := uringEnabled(log); why != "" {
		return nil, why
	}
	if _, err := reflectDevFile(nil); err != nil {
		return nil, err.Error()
	}
	cpus, err := possibleCPUs()
	if err != nil {
		return nil, err.Error()
	}
	page := os.Getpagesize()
	t := &uringTransport{payload: max(8192, (maxWrite+page-1)/page*page), log: log, start: make(chan struct{}),
		outcome: make(chan struct{}), devFd: -1, refuse: -1, drain: 5 * time.Second}
	setup := make(chan error, cpus)
	for qid := range cpus {
		q := &uringQueue{t: t, qid: uint16(qid)}
		t.queues = append(t.queues, q)
		t.wg.Add(1)
		go q.run(setup)
	}
	var errs []error
	for range cpus {
		errs = append(errs, <-setup)
	}
	if err := errors.Join(errs...); err != nil {
		t.goServe() // devFd -1: the queues end
		t.wg.Wait()
		return nil, err.Error()
	}
	return t, ""
}

// uringEnabled reports why the kernel will not serve FUSE over io_uring,
// switching it on (root only) if it is off.
func uringEnabled(log *slog.Logger) string {
	return switchOnURing(enableURingParam, log)
}

// switchOnURing is uringEnabled over the module parameter at param. The
// parameter is the machine's: switched on, it lets every FUSE server use
// io_uring, and it stays on after the daemon ends, so the log says so as a
// warning and says how to switch it back.
func switchOnURing(param string, log *slog.Logger) string {
	if os.Geteuid() != 0 {
		return "io_uring needs a root daemon"
	}
	b, err := os.ReadFile(param)
	if err != nil {
		return "the kernel has no FUSE over io_uring (Linux 6.14+, CONFIG_FUSE_IO_URING)"
	}
	if strings.TrimSpace(string(b)) == "Y" {
		return ""
	}
	if err := os.WriteFile(param, []byte("1"), 0); err != nil {
		return fmt.Sprintf("cannot switch on %s: %v", param, err)
	}
	log.Warn("switched on FUSE over io_uring for the whole machine: every FUSE server may now use it, and it stays on after this daemon ends",
		"param", param, "switch_back", "echo 0 > "+param+" once no mount is served over io_uring")
	return ""
}

// possibleCPUs is the kernel's queue count: its possible CPUs.
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, fmt.Errorf("count CPUs: %w", err)
	}
	return cpuCount(string(b))
}

// cpuCount is one more than the highest CPU of a list like "0-3,8".
func cpuCount(list string) (int, error) {
	n := 0
	for _, r := range strings.Split(strings.TrimSpace(list), ",") {
		var lo, hi int
		if k, _ := fmt.Sscanf(r, "%d-%d", &lo, &hi); k == 1 {
			hi = lo
		} else if k != 2 {
			return 0, fmt.Errorf("count CPUs: %q", list)
		}
		n = max(n, hi+1)
	}
	return n, nil
}

// reflectDevFile finds the /dev/fuse file of go-fuse's server, which go-fuse
// does not export; with a nil server it checks that it can. Pinned to
// go-fuse v2.12's layout (Server.fuseFD.file), which a test holds.
func reflectDevFile(s *fuse.Server) (*os.File, error) {
	st := reflect.TypeOf(fuse.Server{})
	f, ok := st.FieldByName("fuseFD")
	if !ok || f.Type.Kind() != reflect.Pointer {
		return nil, errors.New("io_uring: this go-fuse keeps its /dev/fuse descriptor elsewhere")
	}
	ff, ok := f.Type.Elem().FieldByName("file")
	if !ok || ff.Type != reflect.TypeOf((*os.File)(nil)) {
		return nil, errors.New("io_uring: this go-fuse keeps its /dev/fuse file elsewhere")
	}
	if s == nil {
		return nil, nil
	}
	fd := reflect.ValueOf(s).Elem().FieldByIndex(f.Index)
	if fd.IsNil() {
		return nil, errors.New("io_uring: go-fuse has no /dev/fuse file")
	}
	file := fd.Elem().FieldByIndex(ff.Index)
	return (*os.File)(file.UnsafePointer()), nil
}

// uringInit starts the queues once go-fuse has answered INIT on /dev/fuse.
type uringInit struct {
	fuse.RawFileSystem
	t    *uringTransport
	opts *fuse.MountOptions
}

func (u uringInit) Init(s *fuse.Server) {
	u.RawFileSystem.Init(s)
	u.t.begin(s, u.RawFileSystem, u.opts)
}

// goServe lets the queues register and serve (once the filesystem is ready
// for requests), or end if begin did not give them a connection.
func (t *uringTransport) goServe() { t.started.Do(func() { close(t.start) }) }

// begin gives the queues the connection's descriptor and a protocol server
// that has seen the INIT go-fuse answered, so it decodes requests the same.
func (t *uringTransport) begin(s *fuse.Server, raw fuse.RawFileSystem, opts *fuse.MountOptions) {
	in := s.KernelSettings()
	if in.Flags64()&fuse.CAP_OVER_IO_URING == 0 {
		t.settle("the kernel did not offer io_uring on this mount")
		return
	}
	file, err := reflectDevFile(s)
	if err == nil {
		t.devFd, err = dupFd(file)
	}
	if err == nil {
		t.ps = fuse.NewProtocolServer(raw, opts)
		err = feedInit(t.ps, in)
	}
	if err == nil && t.refused {
		err = errors.New("io_uring: refused for the test")
	}
	if err != nil {
		t.refuseOn(file, t.devFd)
		t.settle(err.Error())
		return
	}
	go t.collect()
}

// refuseOn has queue 0 make the kernel give up on io_uring for the fd, on
// our duplicate if there is one (then closed), else on go-fuse's.
func (t *uringTransport) refuseOn(file *os.File, dup int) {
	t.refuse, t.refuseDup = dup, dup >= 0
	if dup < 0 && file != nil {
		if rc, err := file.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { t.refuse = int(fd) })
		}
	}
	t.devFd = -1
}

func dupFd(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	dup, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { dup, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, fmt.Errorf("io_uring: duplicate /dev/fuse: %w", derr)
	}
	return dup, nil
}

// feedInit replays the kernel's INIT to ps, which then parses requests for
// the negotiated protocol.
func feedInit(ps *fuse.ProtocolServer, in *fuse.InitIn) error {
	msg := *in
	msg.Length = uint32(unsafe.Sizeof(msg))
	msg.Opcode = fuseOpInit
	out := make([]byte, 4096)
	n, st := ps.HandleRequest([][]byte{unsafe.Slice((*byte)(unsafe.Pointer(&msg)), unsafe.Sizeof(msg))}, [][]byte{out})
	if !st.Ok() || n < outHeaderSize || ne.Uint32(out[4:]) != 0 {
		return fmt.Errorf("io_uring: replaying INIT failed (%v)", st)
	}
	return nil
}

// settle records the transport's outcome once.
func (t *uringTransport) settle(why string) {
	select {
	case <-t.outcome:
		return
	default:
	}
	t.why = why
	close(t.outcome)
}

// collect settles the outcome once every queue has registered or failed to.
func (t *uringTransport) collect() {
	var errs []error
	for _, q := range t.queues {
		if err := <-q.registered; err != nil {
			errs = append(errs, fmt.Errorf("queue %d: %w", q.qid, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.settle("io_uring registration failed: " + err.Error())
		return
	}
	t.settle("")
}

// Why waits for the outcome: "" if io_uring serves the mount, otherwise why
// /dev/fuse does.
func (t *uringTransport) Why() string {
	select {
	case <-t.outcome:
		return t.why
	case <-time.After(10 * time.Second):
		return "io_uring registration still under way after 10 s"
	}
}

// wait waits up to t.drain (5 s) for the queues to end, as they do once
// the connection is gone and their requests are answered, and reports
// whether they did; a queue whose request never returns keeps its thread,
// buffers and descriptor.
func (t *uringTransport) wait() bool {
	t.goServe()
	ended := make(chan struct{})
	go func() {
		t.wg.Wait()
		if t.devFd >= 0 {
			unix.Close(t.devFd)
		}
		close(ended)
	}()
	select {
	case <-ended:
		return true
	case <-time.After(t.drain):
		return false
	}
}

// letGo reports the errno of an entry the kernel let go: the connection ended.
func letGo(res int32) bool {
	e := syscall.Errno(-res)
	return e == unix.ENOTCONN || e == unix.ECONNABORTED || e == unix.ECANCELED || e == unix.ENODEV
}

// lockToCPU locks the goroutine to its thread, pinned to cpu. The thread is
// never unlocked: it ends with the goroutine.
func lockToCPU(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	return nil // an offline CPU (EINVAL) runs unpinned
}
