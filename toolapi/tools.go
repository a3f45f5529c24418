package toolapi

import (
	"context"

	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/versionstore"
)

// ReadValue is the structured outcome of read.
type ReadValue struct {
	Path       string               `json:"path"`
	Offset     int                  `json:"offset"`
	Lines      []Line               `json:"lines"`
	TotalLines int                  `json:"totalLines"`
	Version    versionstore.Version `json:"version"`
}

// WriteValue is the structured outcome of write. Like every value it carries
// facts the backend resolved, never the file's contents (the reference
// implementation keeps before and after inside the execution): a harness that
// wants the change asks for the diff of previous_version and version.
type WriteValue struct {
	Path      string               `json:"path"`
	Operation string               `json:"operation"` // "create" or "update"
	Version   versionstore.Version `json:"version"`
	// Previous is the version replaced; absent for a created file.
	Previous *versionstore.Version `json:"previous_version,omitempty"`
}

// EditValue is the structured outcome of edit.
type EditValue struct {
	Path         string               `json:"path"`
	Operation    string               `json:"operation"` // always "update"
	Replacements int                  `json:"replacements"`
	Version      versionstore.Version `json:"version"`
	Previous     versionstore.Version `json:"previous_version"`
}

func (s *Service) read(ctx context.Context, req Request) Result {
	a, err := decodeArgs(req.Arguments, readProps(s.cfg.ReadLimit))
	if err != nil {
		return failure("read", err)
	}
	p, offset, limit, err := s.readArgs(a)
	if err != nil {
		return failure("read", err)
	}
	offsetText := itoa(offset)
	if f, ok := a.number("offset"); ok {
		offsetText = jsNumber(f) // as given, even past the clamp
	}
	t, err := s.resolve(req.Cwd, p, "read")
	if err != nil {
		return failure("read", err)
	}
	w := newWindow(offset, limit, s.cfg.ReadMaxLineLength, s.cfg.ReadMaxBytes)
	text := &textDecoder{display: t.Display, sink: w.Write}
	v, err := s.store.Read(ctx, t, text.feed)
	if versionstore.CodeOf(err) == versionstore.CodeNotFound {
		if oerr := s.observe(req.Actor, t, "read", policy.Absent); oerr != nil {
			return failure("read", oerr)
		}
	}
	if err != nil {
		return failure("read", err)
	}
	lines, total, capped := w.Finish()
	if !capped && offset > total && !(total == 0 && offset == 1) {
		return failure("read", errOffsetRange(offsetText, t.Display, total))
	}
	if err := s.observe(req.Actor, t, "read", policy.Present(v)); err != nil {
		return failure("read", err)
	}
	if lines == nil {
		lines = []Line{}
	}
	return Result{
		Text:  renderRead(t.Display, offset, limit, lines, total),
		Value: ReadValue{Path: t.Display, Offset: offset, Lines: lines, TotalLines: total, Version: v},
	}
}

// readArgs applies the reference implementation's read argument checks, in
// order.
func (s *Service) readArgs(a args) (p string, offset, limit int, err error) {
	if p, err = a.filePath(); err != nil {
		return
	}
	offset, limit = 1, s.cfg.ReadLimit
	if f, ok := a.number("offset"); ok {
		if offset, err = positiveInt(f, "offset"); err != nil {
			return
		}
	}
	if f, ok := a.number("limit"); ok {
		if limit, err = positiveInt(f, "limit"); err != nil {
			return
		}
		if f > float64(s.cfg.ReadLimit) {
			err = argError("limit must be less than or equal to " + itoa(s.cfg.ReadLimit))
		}
	}
	return
}

func (s *Service) write(ctx context.Context, req Request) Result {
	a, err := decodeArgs(req.Arguments, writeProps)
	if err != nil {
		return failure("write", err)
	}
	p, err := a.filePath()
	if err != nil {
		return failure("write", err)
	}
	t, err := s.resolve(req.Cwd, p, "write")
	if err != nil {
		return failure("write", err)
	}
	intent := versionstore.Intent{}
	if s.policy != nil {
		if intent, err = s.policy.WriteIntent(req.Actor, t.Key); err != nil {
			return failure("write", policyFailure("write", t, err))
		}
	}
	res, err := s.store.WriteText(ctx, t, a.str("content"), intent, versionstore.ToolWriter(req.Actor), s.observing(req.Actor, t)...)
	if err != nil {
		return failure("write", err)
	}
	if err := s.observe(req.Actor, t, "write", policy.Present(res.Version)); err != nil {
		return failure("write", err)
	}
	value := WriteValue{Path: t.Display, Operation: "update", Version: res.Version, Previous: &res.Previous}
	if res.Created {
		value.Operation, value.Previous = "create", nil
	}
	return Result{Text: writeText(t.Display, res.Created), Value: value}
}

func (s *Service) edit(ctx context.Context, req Request) Result {
	a, err := decodeArgs(req.Arguments, editProps)
	if err != nil {
		return failure("edit", err)
	}
	p, err := a.filePath()
	if err != nil {
		return failure("edit", err)
	}
	e := Edit{Old: a.str("old_string"), New: a.str("new_string"), ReplaceAll: a.boolean("replace_all")}
	if e.Old == "" {
		return failure("edit", errEmptyOld())
	}
	if e.Old == e.New {
		return failure("edit", errSameOldNew())
	}
	t, err := s.resolve(req.Cwd, p, "edit")
	if err != nil {
		return failure("edit", err)
	}
	res, err := s.editGuarded(ctx, req.Actor, t, e)
	if err != nil {
		return failure("edit", err)
	}
	if err := s.observe(req.Actor, t, "edit", policy.Present(res.Version)); err != nil {
		return failure("edit", err)
	}
	return Result{
		Text:  editText(t.Display, e.ReplaceAll),
		Value: EditValue{Path: t.Display, Operation: "update", Replacements: res.Replacements, Version: res.Version, Previous: res.Previous},
	}
}

// editResult is the outcome of an edit: the versions, and how many
// replacements it made.
type editResult struct {
	versionstore.UpdateResult
	Replacements int
}

// editGuarded asks the policy for the version the actor may edit at, then
// edits under the store's compare-and-swap: the literal edit runs inside
// Update, on the bytes the lock holds still.
func (s *Service) editGuarded(ctx context.Context, actor string, t versionstore.Target, e Edit) (editResult, error) {
	var expect *versionstore.Version
	if s.policy != nil {
		v, err := s.policy.EditIntent(actor, t.Key)
		if err != nil {
			return editResult{}, policyFailure("edit", t, err)
		}
		expect = &v
	}
	var n int
	res, err := s.store.Update(ctx, t, expect, func(cur []byte) (out []byte, err error) {
		out, n, err = editBytes(cur, e, t.Display)
		return out, err
	}, versionstore.ToolWriter(actor), s.observing(actor, t)...)
	return editResult{res, n}, err
}
