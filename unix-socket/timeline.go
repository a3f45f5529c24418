package unixsocket

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
)

// The version routes: show, diff and restore a file's versions;
// checkpoints, rewind and collection of the whole workspace. Rewind and gc
// can take long, so they answer with a stream of JSON lines (NDJSON): any
// number of {"progress":{"done","total"}}, then one {"result":…} or
// {"error":…}.

// Wire types of the version routes.
type (
	Checkpoint    = versionstore.Checkpoint
	RewindResult  = versionstore.RewindResult
	RewindAction  = versionstore.RewindAction
	GCResult      = versionstore.GCResult
	RestoreResult = versionstore.RestoreResult
	Change        = versionstore.Change
)

// RestoreRequest is the body of POST /v1/restore.
type RestoreRequest struct {
	Path    string `json:"path"`
	Cwd     string `json:"cwd,omitempty"`
	Version string `json:"version"`
	Actor   string `json:"actor,omitempty"`
}

// Restored is the answer of POST /v1/restore.
type Restored struct {
	Path string               `json:"path"`
	From versionstore.Version `json:"from"` // zero: there was no file
	To   versionstore.Version `json:"to"`
}

// CheckpointRequest is the body of POST /v1/checkpoints.
type CheckpointRequest struct {
	Name string `json:"name,omitempty"`
}

// RewindRequest is the body of POST /v1/rewind.
type RewindRequest struct {
	Checkpoint string `json:"checkpoint"`
	DryRun     bool   `json:"dry_run,omitempty"`
	Actor      string `json:"actor,omitempty"`
	// Paths limits the rewind to these paths and below (as a tool takes
	// them, relative to Cwd); none: the whole workspace.
	Paths []string `json:"paths,omitempty"`
	Cwd   string   `json:"cwd,omitempty"`
	// Exclude leaves out what the patterns match: a pattern without a
	// slash matches any path element (".git"), one with a slash a path
	// from the root.
	Exclude []string `json:"exclude,omitempty"`
	// OnlyActor limits the rewind to the changes attributed to that actor
	// (its tool calls, its process tree's writes through the mount); a
	// file another writer changed after it is a conflict, and a conflict
	// changes nothing unless Partial.
	OnlyActor string `json:"only_actor,omitempty"`
	Partial   bool   `json:"partial,omitempty"`
}

// Progress is how far a long operation has got.
type Progress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// streamLine is one line of a streamed answer.
type streamLine struct {
	Progress *Progress `json:"progress,omitempty"`
	Result   any       `json:"result,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// errorStatus maps an error of a version operation to an HTTP status.
func errorStatus(err error) int {
	switch {
	case errors.Is(err, versionstore.ErrNoCheckpoint), errors.Is(err, versionstore.ErrNotKept), errors.Is(err, toolapi.ErrBadSince),
		errors.Is(err, toolapi.ErrBadVersion), errors.Is(err, toolapi.ErrTooFewVersions),
		versionstore.CodeOf(err) == versionstore.CodeNotFound:
		return http.StatusNotFound
	case versionstore.CodeOf(err) == versionstore.CodeStaleVersion:
		return http.StatusConflict
	case errors.Is(err, versionstore.ErrCorrupt):
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

func (s *Server) show(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("path") == "" || q.Get("version") == "" {
		writeError(w, http.StatusBadRequest, "show needs ?path= and &version=")
		return
	}
	data, fv, err := s.cfg.Tools.Show(q.Get("cwd"), q.Get("path"), q.Get("version"))
	if err != nil {
		writeError(w, errorStatus(err), err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Header().Set("Dshfs-Version", fv.Version.String())
	w.Write(data)
}

// diff answers GET /v1/diff. The diff is written as it is computed, file
// by file, and stops being computed at ?max_bytes=; an error found before
// its first byte is answered as an error.
func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	maxBytes, _ := strconv.Atoi(q.Get("max_bytes"))
	out := &diffWriter{w: w}
	var err error
	switch {
	case q.Has("since"):
		// One diff of every change since a checkpoint or a time.
		err = s.cfg.Tools.SessionDiff(r.Context(), out, sessionQuery(q), max(maxBytes, 0))
	case q.Get("path") == "":
		writeError(w, http.StatusBadRequest, "diff needs ?path= (a file's versions) or ?since= (the workspace's changes)")
		return
	default:
		err = s.cfg.Tools.Diff(r.Context(), out, q.Get("cwd"), q.Get("path"), q.Get("from"), q.Get("to"), max(maxBytes, 0))
	}
	switch {
	case err != nil && !out.started:
		writeError(w, errorStatus(err), err.Error())
	case !out.started:
		out.start() // an empty diff: the versions are the same
	}
}

// diffWriter answers 200 with the first byte of a diff written to it.
type diffWriter struct {
	w       http.ResponseWriter
	started bool
}

func (d *diffWriter) start() {
	d.started = true
	d.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	d.w.WriteHeader(http.StatusOK)
}

func (d *diffWriter) Write(p []byte) (int, error) {
	if !d.started {
		d.start()
	}
	return d.w.Write(p)
}

// sessionQuery reads ?since=, ?path= (repeated), ?cwd=, ?limit=, ?exclude=
// (repeated) and ?git=1.
func sessionQuery(q url.Values) toolapi.SessionQuery {
	limit, _ := strconv.Atoi(q.Get("limit"))
	return toolapi.SessionQuery{Since: q.Get("since"), Paths: q["path"], Cwd: q.Get("cwd"), Limit: max(limit, 0),
		Exclude: q["exclude"], Git: q.Get("git") == "1"}
}

// log answers GET /v1/log: the workspace's changes, newest first.
func (s *Server) log(w http.ResponseWriter, r *http.Request) {
	changes, err := s.cfg.Tools.Log(r.Context(), sessionQuery(r.URL.Query()))
	if err != nil {
		writeError(w, errorStatus(err), err.Error())
		return
	}
	if changes == nil {
		changes = []Change{}
	}
	writeJSON(w, http.StatusOK, changes)
}

func (s *Server) restore(w http.ResponseWriter, r *http.Request) {
	var req RestoreRequest
	if !s.decode(w, r, &req) {
		return
	}
	if req.Path == "" || req.Version == "" {
		writeError(w, http.StatusBadRequest, "restore needs path and version")
		return
	}
	res, fv, err := s.cfg.Tools.Restore(r.Context(), req.Cwd, req.Path, req.Version, req.Actor)
	if err != nil {
		writeError(w, errorStatus(err), err.Error())
		return
	}
	s.count("restore")
	writeJSON(w, http.StatusOK, Restored{Path: fv.Path, From: res.From, To: fv.Version})
}

func (s *Server) checkpoints(w http.ResponseWriter, r *http.Request) {
	cps, err := s.cfg.Store.Checkpoints()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if cps == nil {
		cps = []Checkpoint{}
	}
	writeJSON(w, http.StatusOK, cps)
}

func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request) {
	var req CheckpointRequest
	if !s.decode(w, r, &req) {
		return
	}
	if r.Header.Get("Accept") == "application/x-ndjson" {
		// The first checkpoint reads the whole workspace: a client that
		// asks for a stream is told how far it has got.
		s.stream(w, "checkpoint", func(progress func(done, total int)) (any, error) {
			return s.cfg.Store.Checkpoint(r.Context(), req.Name, progress)
		})
		return
	}
	cp, err := s.cfg.Store.Checkpoint(r.Context(), req.Name, nil)
	if err != nil {
		writeError(w, http.StatusBadRequest, toolapi.Describe("checkpoint", err).Error())
		return
	}
	s.count("checkpoint")
	writeJSON(w, http.StatusOK, cp)
}

// removeCheckpoint answers DELETE /v1/checkpoints/{name}.
func (s *Server) removeCheckpoint(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	switch err := s.cfg.Store.RemoveCheckpoint(name); {
	case errors.Is(err, versionstore.ErrNoCheckpoint):
		writeError(w, http.StatusNotFound, err.Error())
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.count("remove_checkpoint")
	writeJSON(w, http.StatusOK, CheckpointRequest{Name: name})
}

func (s *Server) rewind(w http.ResponseWriter, r *http.Request) {
	var req RewindRequest
	if !s.decode(w, r, &req) {
		return
	}
	if req.Checkpoint == "" {
		writeError(w, http.StatusBadRequest, "rewind needs a checkpoint")
		return
	}
	for _, a := range []string{req.Actor, req.OnlyActor} {
		if err := toolapi.CheckActor(a); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	if cps, err := s.cfg.Store.Checkpoints(); err != nil || !hasCheckpoint(cps, req.Checkpoint) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("checkpoint %q: %v", req.Checkpoint, versionstore.ErrNoCheckpoint))
		return
	}
	keys, err := s.cfg.Tools.Keys(req.Cwd, req.Paths)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.stream(w, "rewind", func(progress func(done, total int)) (any, error) {
		// A rewind that has started runs to its end: a client that goes
		// away must not leave the workspace half rewound.
		res, err := s.cfg.Store.Rewind(context.WithoutCancel(r.Context()), req.Checkpoint, versionstore.RewindOptions{
			DryRun: req.DryRun, Paths: keys, Exclude: req.Exclude, Progress: progress,
			Actor: req.OnlyActor, Partial: req.Partial,
			Writer: versionstore.Writer{Kind: versionstore.WriterRestore, Actor: req.Actor},
		})
		toolapi.WordRewind(&res)
		return res, err
	})
}

func (s *Server) gc(w http.ResponseWriter, r *http.Request) {
	s.stream(w, "gc", func(progress func(done, total int)) (any, error) {
		return s.cfg.Store.GC(progress)
	})
}

func hasCheckpoint(cps []Checkpoint, name string) bool {
	for _, cp := range cps {
		if cp.Name == name {
			return true
		}
	}
	return false
}

// stream runs op, answering with its progress (at most ten lines a second)
// and then its result or error, one JSON value per line.
func (s *Server) stream(w http.ResponseWriter, op string, run func(progress func(done, total int)) (any, error)) {
	// A long operation answers for as long as it runs: no write deadline.
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	var mu sync.Mutex
	var last time.Time
	progress := func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		if done < total && time.Since(last) < 100*time.Millisecond {
			return
		}
		last = time.Now()
		enc.Encode(streamLine{Progress: &Progress{done, total}})
		if flusher != nil {
			flusher.Flush()
		}
	}
	res, err := run(progress)
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		enc.Encode(streamLine{Error: toolapi.Describe(op, err).Error()})
		return
	}
	s.count(op)
	enc.Encode(streamLine{Result: res})
}

// decode reads a JSON body into v, answering 400 or 413 itself.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)).Decode(v)
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", s.cfg.MaxBody))
	default:
		writeError(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
	}
	return false
}
