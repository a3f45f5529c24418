// Package toolapi owns the model-facing tools — read, read_image, write and
// edit — as the reference implementation (docs/reference.md: the TypeScript
// stack whose model-facing behaviour dshfs matches) defines them: their names,
// descriptions and schemas, argument validation and its messages, path
// resolution against a cwd, the read window, the result texts, the structured
// values and the remedies appended to write and edit errors, what makes a file
// text for read (text.go: the NUL sniff, UTF-8, the BOM), and the literal edit
// itself (matching, line endings, the BOM: literal.go), which it runs inside
// the store's Update. Model-facing text matches the reference implementation
// byte for byte, except where docs/reference.md says it differs; the texts of
// failures are in messages.go, where the store's and the policy's typed errors
// are worded: no package below toolapi writes one. testdata/transcripts pins
// them all. Over the same path resolution it also serves people: show, diff and
// restore of a file's versions.
//
// It composes versionstore (versions, locks, publish) and policy (what each
// actor saw). It never touches files itself and knows nothing of FUSE or the
// socket that carries its calls.
package toolapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/versionstore"
)

// Config sets the read window limits; zero fields take the reference
// implementation's defaults.
type Config struct {
	// MountPoint is where the agent sees the workspace; display paths are
	// under it. Default: the backing directory itself.
	MountPoint string
	// OtherMountPoints, if set, lists the other places the mount is shown
	// (bind mounts of it): a path under one of them means the same file
	// as under MountPoint. It is asked only for a path under neither the
	// mount point nor the backing directory.
	OtherMountPoints func() []string
	// ReadLimit is the default and maximum number of lines a read returns (2000).
	ReadLimit int
	// ReadMaxLineLength truncates longer lines, in UTF-16 code units (2000).
	ReadMaxLineLength int
	// ReadMaxBytes caps the bytes of returned line text (51200).
	ReadMaxBytes int

	// MaxImageBytes caps the size of a file read_image returns (3.5 MiB).
	MaxImageBytes int64
	// MaxImageDimension caps either side of an image, in pixels (2000).
	MaxImageDimension int
	// MaxImagePixels caps width × height (40,000,000).
	MaxImagePixels int
	// ImageMediaTypes are the image types this deployment accepts
	// (default: all four, image/png, image/jpeg, image/webp, image/gif).
	ImageMediaTypes []string
}

// The reference implementation's defaults.
const (
	DefaultReadLimit         = 2000
	DefaultReadMaxLineLength = 2000
	DefaultReadMaxBytes      = 50 * 1024
)

// Request is one tool call.
type Request struct {
	// Actor names whose observations the call uses and updates. Empty is the
	// reference implementation's "no owner": edits are refused and writes only
	// create.
	Actor string `json:"actor,omitempty"`
	// Cwd is the absolute directory relative paths resolve against.
	Cwd       string          `json:"cwd,omitempty"`
	Arguments json.RawMessage `json:"arguments"`
}

// Result is what a tool call produced. Text is exactly what the model sees.
type Result struct {
	Text    string     `json:"text"`
	IsError bool       `json:"is_error"`
	Error   *ErrorInfo `json:"error,omitempty"`
	Value   any        `json:"value,omitempty"`
}

// ErrorInfo describes a failed call. Code is empty for argument errors,
// which the reference implementation raises without a code.
type ErrorInfo struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// ErrUnknownTool is returned by Call for a name that is not a tool.
var ErrUnknownTool = errors.New("unknown tool")

// Service serves the tools over one store.
type Service struct {
	store  *versionstore.Store
	policy *policy.Policy // nil: the bare provider, no read-before-write
	mount  string
	cfg    Config
	defs   []ToolDef

	diffSlots diffSlots
	diffing   func() // tests: called as each diff starts, holding its slot
}

// New returns the tools over store, guarded by pol (nil for the bare mode).
func New(store *versionstore.Store, pol *policy.Policy, cfg Config) (*Service, error) {
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"readLimit", &cfg.ReadLimit, DefaultReadLimit},
		{"readMaxLineLength", &cfg.ReadMaxLineLength, DefaultReadMaxLineLength},
		{"readMaxBytes", &cfg.ReadMaxBytes, DefaultReadMaxBytes},
		{"maxImageDimension", &cfg.MaxImageDimension, DefaultMaxImageDimension},
		{"maxImagePixels", &cfg.MaxImagePixels, DefaultMaxImagePixels},
	} {
		switch {
		case *f.v == 0:
			*f.v = f.def
		case *f.v < 0:
			return nil, fmt.Errorf("tool-fs: %s must be a positive integer", f.name)
		}
	}
	switch {
	case cfg.MaxImageBytes == 0:
		cfg.MaxImageBytes = DefaultMaxImageBytes
	case cfg.MaxImageBytes < 0:
		return nil, fmt.Errorf("tool-fs: maxImageBytes must be a positive integer")
	}
	types, err := parseMediaTypes(cfg.ImageMediaTypes)
	if err != nil {
		return nil, err
	}
	cfg.ImageMediaTypes = types
	mount := cfg.MountPoint
	if mount == "" {
		mount = store.Root()
	}
	if !filepath.IsAbs(mount) {
		return nil, fmt.Errorf("toolapi: mount point %q must be absolute", mount)
	}
	return &Service{store: store, policy: pol, mount: filepath.Clean(mount), cfg: cfg,
		defs:      toolDefs(cfg.ReadLimit, pol != nil, filepath.Clean(mount)),
		diffSlots: make(diffSlots, MaxConcurrentDiffs)}, nil
}

// Tools lists the model-facing tool definitions, for calls whose relative
// paths resolve against the mount point.
func (s *Service) Tools() []ToolDef { return s.defs }

// ToolsIn lists the tool definitions for a session whose relative paths
// resolve against cwd (the mount point if "" or not in the workspace).
func (s *Service) ToolsIn(cwd string) []ToolDef {
	base, err := s.cwdDisplay(cwd)
	if err != nil || base == s.mount {
		return s.defs
	}
	return toolDefs(s.cfg.ReadLimit, s.policy != nil, base)
}

// Call runs the tool name. Failures of the call itself are in the Result;
// the error is only ErrUnknownTool.
func (s *Service) Call(ctx context.Context, name string, req Request) (Result, error) {
	var run func(context.Context, Request) Result
	switch name {
	case ToolRead:
		run = s.read
	case ToolReadImage:
		run = s.readImage
	case ToolWrite:
		run = s.write
	case ToolEdit:
		run = s.edit
	default:
		return Result{}, fmt.Errorf("%w %q", ErrUnknownTool, name)
	}
	if err := checkRequest(req); err != nil {
		return failure(name, err), nil
	}
	return run(ctx, req), nil
}

// failure is the result of a failed call of verb: `Error: <message>`.
func failure(verb string, err error) Result {
	err = describe(verb, err)
	info := &ErrorInfo{Message: err.Error()}
	var te *toolError
	if errors.As(err, &te) {
		info.Code = string(te.code)
	} else if _, ok := err.(argError); !ok {
		// Not a coded failure and not an argument error: an internal fault.
		info.Code, info.Message = string(versionstore.CodeIOError), internalError(err)
	}
	return Result{Text: "Error: " + info.Message, IsError: true, Error: info}
}

// observe records what actor saw. A failure to record makes the call an error
// even though any mutation already committed, as in the reference
// implementation.
func (s *Service) observe(actor string, t versionstore.Target, verb string, o policy.Observation) error {
	if s.policy == nil {
		return nil
	}
	return policyFailure(verb, t, s.policy.Observe(actor, t.Key, o))
}

// observing is the observation of a tool mutation by actor of t, committed
// with the version it writes (the store's AlsoCommit): a mutation then
// costs one durable index commit, not two. observe still runs after it.
func (s *Service) observing(actor string, t versionstore.Target) []versionstore.AlsoCommit {
	if s.policy == nil {
		return nil
	}
	if f := s.policy.Observing(actor, t.Key); f != nil {
		return []versionstore.AlsoCommit{f}
	}
	return nil
}

func itoa(i int) string { return strconv.Itoa(i) }
