package fusefs

import (
	"sync"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// uringQueue is one CPU's queue: its ring, its entries and the thread that
// owns them (uring_linux.go).
type uringQueue struct {
	t          *uringTransport
	qid        uint16
	ring       *ring
	mem        []byte // the entries' buffers, outside the Go heap
	ents       []uringEnt
	efd        int    // eventfd: a reply is waiting to be committed
	efdBuf     []byte // where the ring reads it into
	live       int    // entries the kernel still holds or we still serve
	registered chan error

	mu      sync.Mutex
	done    []int          // entries whose reply waits to be committed
	serving sync.WaitGroup // serve goroutines, which write to efd last
}

// uringEnt is one ring entry: struct fuse_uring_req_header and the payload.
type uringEnt struct {
	hdr, payload []byte
	iov          *[2]unix.Iovec
	scratch      []byte // a copy of the request's payload, which the reply may overwrite
	commit       uint64
}

// run is the queue's thread: set up, wait for INIT, register, serve.
func (q *uringQueue) run(setup chan<- error) {
	defer q.t.wg.Done()
	q.registered = make(chan error, 1)
	err := lockToCPU(int(q.qid))
	if err == nil {
		err = q.setup()
	}
	defer q.release()
	setup <- err
	if err != nil {
		return
	}
	<-q.t.start
	if q.t.refuse >= 0 && q.qid == 0 {
		q.refuse(q.t.refuse)
		if q.t.refuseDup {
			unix.Close(q.t.refuse)
		}
	}
	if q.t.devFd < 0 {
		return
	}
	err = q.register()
	q.registered <- err
	if err == nil {
		q.loop()
	}
}

// setup makes the ring, the entries' buffers and the eventfd.
func (q *uringQueue) setup() error {
	r, err := newRing(2*uringQueueDepth + 2)
	if err != nil {
		return err
	}
	q.ring = r
	page := unix.Getpagesize()
	hdrs := (uringQueueDepth*(uringHeaderSize+2*int(unsafe.Sizeof(unix.Iovec{}))) + 8 + page - 1) / page * page
	q.mem, err = unix.Mmap(-1, 0, hdrs+uringQueueDepth*q.t.payload, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	iovs := unsafe.Slice((*[2]unix.Iovec)(unsafe.Pointer(&q.mem[uringQueueDepth*uringHeaderSize])), uringQueueDepth)
	q.efdBuf = q.mem[hdrs-8 : hdrs]
	q.ents = make([]uringEnt, uringQueueDepth)
	for i := range q.ents {
		e := &q.ents[i]
		e.hdr = q.mem[i*uringHeaderSize : (i+1)*uringHeaderSize]
		off := hdrs + i*q.t.payload
		e.payload = q.mem[off : off+q.t.payload]
		e.iov = &iovs[i]
		e.iov[0] = unix.Iovec{Base: &e.hdr[0]}
		e.iov[0].SetLen(uringHeaderSize)
		e.iov[1] = unix.Iovec{Base: &e.payload[0]}
		e.iov[1].SetLen(q.t.payload)
	}
	q.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC)
	return err
}

// release gives back what setup got, all or part.
func (q *uringQueue) release() {
	q.serving.Wait()
	if q.ring != nil {
		q.ring.close()
	}
	if q.efd > 0 {
		unix.Close(q.efd)
	}
	if q.mem != nil {
		unix.Munmap(q.mem)
	}
}

// refuse sends a registration the kernel rejects, after which it serves the
// connection over /dev/fuse only.
func (q *uringQueue) refuse(fd int) {
	if s, err := q.ring.sqe(); err == nil {
		prepURingCmd(s, fd, fuseURingRegister, unsafe.Pointer(q.ents[0].iov), 1, 0, 0, q.qid)
		q.ring.enter(false)
	}
}

// register registers every entry and starts the eventfd read. A refused
// registration completes at once; an accepted one only with a request.
func (q *uringQueue) register() error {
	for i := range q.ents {
		s, err := q.ring.sqe()
		if err != nil {
			return err
		}
		prepURingCmd(s, q.t.devFd, fuseURingRegister, unsafe.Pointer(q.ents[i].iov), 2, uint64(i), 0, q.qid)
	}
	q.live = len(q.ents)
	if err := q.readEfd(); err != nil {
		return err
	}
	if err := q.ring.enter(false); err != nil {
		return err
	}
	var refused error
	q.ring.reap(func(c cqe) {
		if c.userData != efdTag && c.res < 0 && refused == nil {
			refused = syscall.Errno(-c.res)
		}
		q.complete(c)
	})
	return refused
}

func (q *uringQueue) readEfd() error {
	s, err := q.ring.sqe()
	if err == nil {
		prepRead(s, q.efd, q.efdBuf, efdTag)
	}
	return err
}

// loop commits replies and serves requests until the kernel lets go of
// every entry.
func (q *uringQueue) loop() {
	for q.live > 0 {
		if err := q.ring.enter(true); err != nil {
			q.t.log.Error("io_uring queue stopped", "queue", q.qid, "err", err)
			return
		}
		q.ring.reap(q.complete)
		if err := q.commitDone(); err != nil {
			q.t.log.Error("io_uring queue stopped", "queue", q.qid, "err", err)
			return
		}
	}
}

// complete handles a completion: a request in an entry, an entry the
// kernel let go, or the eventfd.
func (q *uringQueue) complete(c cqe) {
	switch {
	case c.userData == efdTag:
		if c.res >= 0 || c.res == -int32(unix.EINTR) {
			q.readEfd()
		}
	case c.res == 0:
		q.serving.Add(1)
		go q.serve(int(c.userData))
	default:
		q.live--
		if !letGo(c.res) {
			q.t.log.Warn("io_uring entry refused", "queue", q.qid, "err", syscall.Errno(-c.res))
		}
	}
}

// commitDone queues a COMMIT_AND_FETCH for every reply that is ready.
func (q *uringQueue) commitDone() error {
	q.mu.Lock()
	done := q.done
	q.done = nil
	q.mu.Unlock()
	for _, i := range done {
		s, err := q.ring.sqe()
		if err != nil {
			return err
		}
		prepURingCmd(s, q.t.devFd, fuseURingCommitFetch, nil, 0, uint64(i), q.ents[i].commit, q.qid)
	}
	return nil
}

// serve answers entry i's request and hands the reply to the queue's thread.
func (q *uringQueue) serve(i int) {
	defer q.serving.Done()
	e := &q.ents[i]
	n, st := 0, fuse.EIO
	if in, ok := e.request(); ok {
		n, st = q.t.ps.HandleRequest(in, [][]byte{e.hdr[:outHeaderSize], e.payload})
	}
	e.reply(n, st)
	q.t.served.Add(1)
	q.mu.Lock()
	q.done = append(q.done, i)
	wake := len(q.done) == 1
	q.mu.Unlock()
	if wake {
		var one [8]byte
		ne.PutUint64(one[:], 1)
		unix.Write(q.efd, one[:])
	}
}

// request is the entry's request as the byte stream /dev/fuse would give.
func (e *uringEnt) request() ([][]byte, bool) {
	length := int(ne.Uint32(e.hdr[0:]))
	opcode := ne.Uint32(e.hdr[4:])
	e.commit = ne.Uint64(e.hdr[uringEntOff+8:])
	size := int(ne.Uint32(e.hdr[uringEntOff+16:]))
	op := length - inHeaderSize - size
	if op < 0 || op > uringEntOff-uringOpInOff || size > len(e.payload) {
		return nil, false
	}
	payload := e.payload[:size]
	if opcode != fuseOpWrite { // a WRITE's reply never reaches the payload
		e.scratch = append(e.scratch[:0], payload...)
		payload = e.scratch
	}
	in := [][]byte{e.hdr[:inHeaderSize], e.hdr[uringOpInOff : uringOpInOff+op]}
	if size > 0 {
		in = append(in, payload)
	}
	return in, true
}

// reply completes the entry's header: go-fuse wrote the out header and
// the payload; an unanswered request gets an error.
func (e *uringEnt) reply(n int, st fuse.Status) {
	if n < outHeaderSize {
		if st.Ok() {
			st = fuse.ENOSYS
		}
		ne.PutUint32(e.hdr[0:], outHeaderSize)
		ne.PutUint32(e.hdr[4:], uint32(-int32(st)))
		ne.PutUint64(e.hdr[8:], e.commit)
		n = outHeaderSize
	}
	ne.PutUint32(e.hdr[uringEntOff+16:], uint32(n-outHeaderSize))
}
