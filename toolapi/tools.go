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

// WriteValue is the structured outcome of write. Like every value it
// carries facts the backend resolved, never the file's contents (the
// reference keeps before and after inside the execution): a harness that
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
		return failure(err)
	}
	p, offset, limit, err := s.readArgs(a)
	if err != nil {
		return failure(err)
	}
	offsetText := itoa(offset)
	if f, ok := a.number("offset"); ok {
		offsetText = jsNumber(f) // as given, even past the clamp
	}
	t, err := s.resolve(req.Cwd, p, "read")
	if err != nil {
		return failure(err)
	}
	w := newWindow(offset, limit, s.cfg.ReadMaxLineLength, s.cfg.ReadMaxBytes)
	v, err := s.store.ReadText(ctx, t, w.Write)
	if versionstore.CodeOf(err) == versionstore.CodeNotFound {
		if oerr := s.observe(req.Actor, t, "read", policy.Absent); oerr != nil {
			return failure(oerr)
		}
	}
	if err != nil {
		return failure(err)
	}
	lines, total, capped := w.Finish()
	if !capped && offset > total && !(total == 0 && offset == 1) {
		return failure(&versionstore.Error{Code: versionstore.CodeNotFound,
			Message: "offset " + offsetText + ` is out of range for "` + t.Display + `" (` + itoa(total) + " lines)"})
	}
	if err := s.observe(req.Actor, t, "read", policy.Present(v)); err != nil {
		return failure(err)
	}
	if lines == nil {
		lines = []Line{}
	}
	return Result{
		Text:  renderRead(t.Display, offset, limit, lines, total),
		Value: ReadValue{Path: t.Display, Offset: offset, Lines: lines, TotalLines: total, Version: v},
	}
}

// readArgs applies the reference's read argument checks, in order.
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
		return failure(err)
	}
	p, err := a.filePath()
	if err != nil {
		return failure(err)
	}
	t, err := s.resolve(req.Cwd, p, "write")
	if err != nil {
		return failure(err)
	}
	intent := versionstore.Intent{}
	if s.policy != nil {
		if intent, err = s.policy.WriteIntent(req.Actor, t.Key); err != nil {
			return failure(indexFailure("write", t, err))
		}
	}
	res, err := s.store.WriteText(ctx, t, a.str("content"), intent, versionstore.ToolWriter(req.Actor))
	if err != nil {
		return failure(remedy(err))
	}
	if err := s.observe(req.Actor, t, "write", policy.Present(res.Version)); err != nil {
		return failure(err)
	}
	value := WriteValue{Path: t.Display, Operation: "update", Version: res.Version, Previous: &res.Previous}
	msg := "Updated file"
	if res.Created {
		value.Operation, value.Previous, msg = "create", nil, "Created file"
	}
	return Result{
		Text:  "<path>" + t.Display + "</path>\n<type>file</type>\n<content>\n" + msg + "\n</content>",
		Value: value,
	}
}

func (s *Service) edit(ctx context.Context, req Request) Result {
	a, err := decodeArgs(req.Arguments, editProps)
	if err != nil {
		return failure(err)
	}
	p, err := a.filePath()
	if err != nil {
		return failure(err)
	}
	e := versionstore.Edit{Old: a.str("old_string"), New: a.str("new_string"), ReplaceAll: a.boolean("replace_all")}
	if e.Old == "" {
		return failure(argError("old_string must be a non-empty string"))
	}
	if e.Old == e.New {
		return failure(argError("old_string and new_string must differ"))
	}
	t, err := s.resolve(req.Cwd, p, "edit")
	if err != nil {
		return failure(err)
	}
	res, err := s.editGuarded(ctx, req.Actor, t, e)
	if err != nil {
		return failure(remedy(err))
	}
	if err := s.observe(req.Actor, t, "edit", policy.Present(res.Version)); err != nil {
		return failure(err)
	}
	text := "The file " + t.Display + " has been updated successfully."
	if e.ReplaceAll {
		text = "The file " + t.Display + " has been updated. All occurrences were successfully replaced."
	}
	return Result{
		Text:  text,
		Value: EditValue{Path: t.Display, Operation: "update", Replacements: res.Replacements, Version: res.Version, Previous: res.Previous},
	}
}

// editGuarded asks the policy for the version the actor may edit at, then
// edits under the store's compare-and-swap.
func (s *Service) editGuarded(ctx context.Context, actor string, t versionstore.Target, e versionstore.Edit) (versionstore.EditResult, error) {
	var expected *versionstore.Version
	if s.policy != nil {
		v, err := s.policy.EditIntent(actor, t.Key, t.Display)
		if err != nil {
			return versionstore.EditResult{}, indexFailure("edit", t, err)
		}
		expected = &v
	}
	return s.store.EditText(ctx, t, e, expected, versionstore.ToolWriter(actor))
}
