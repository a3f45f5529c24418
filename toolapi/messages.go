package toolapi

// Every text the model reads, and the words of the errors people get from the
// timeline operations, in one place, to diff against the reference
// implementation (docs/reference.md). Nothing below toolapi writes a sentence:
// versionstore and policy fail with data (*versionstore.Error,
// *policy.RefusalError), turned into these texts here.

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unicode"

	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/versionstore"
)

// toolError is a failure as the model sees it: an error code of the reference
// implementation and the exact message. Err, the cause, is never shown.
type toolError struct {
	code versionstore.Code
	msg  string
	err  error
}

func (e *toolError) Error() string { return e.msg }
func (e *toolError) Unwrap() error { return e.err }

// quote renders a path the way the reference implementation does: inside plain
// double quotes, without Go escaping, so messages match byte for byte.
func quote(s string) string { return `"` + s + `"` }

// describe turns a failure of an operation (verb: "read", "write", "edit",
// "restore") into the text the reference implementation shows. An error already
// described, an argument error, or one that is not the store's or the policy's
// is returned as it is.
func describe(verb string, err error) error {
	var te *toolError
	var fe *versionstore.Error
	if errors.As(err, &te) || !errors.As(err, &fe) {
		return err
	}
	op := fe.Op
	if op == "" {
		op = verb
	}
	hint := remedy(verb, fe.Code)
	if fe.Reason == versionstore.ReasonMountWriting && hint != "" {
		// Nothing changed: a re-read would not help, the writer closing will.
		hint = " — retry after it closes"
	}
	return &toolError{code: fe.Code, msg: storeMessage(op, fe) + hint, err: err}
}

// Describe words a failure of an operation the socket runs on the store
// itself (verb: "checkpoint", "rewind", "gc") for the person who asked, as
// the tools' failures are worded: "rewind aborted", not the store's data.
func Describe(verb string, err error) error { return describe(verb, err) }

// WordRewind words each conflict of a rewind (RewindAction.Err) into its
// Error, for the person reading the report.
func WordRewind(res *versionstore.RewindResult) {
	for i, a := range res.Actions {
		if a.Err != nil {
			res.Actions[i].Error = describe("restore", a.Err).Error()
		}
	}
}

// storeMessage is the reference implementation's message for a store failure of
// op.
func storeMessage(op string, e *versionstore.Error) string {
	cannot := "cannot " + op + " " + quote(e.Path) + ": "
	switch e.Reason {
	case versionstore.ReasonAborted:
		return op + " aborted"
	case versionstore.ReasonExists:
		return "cannot overwrite existing " + quote(e.Path) + " without reading it first"
	case versionstore.ReasonIO:
		return cannot + osReason(e.Err)
	case versionstore.ReasonTooLarge:
		what := "content exceeds"
		if e.Size >= 0 {
			what = strconv.FormatInt(e.Size, 10) + " bytes exceeds"
		}
		return cannot + what + " the " + strconv.FormatInt(e.Limit, 10) + "-byte limit"
	case versionstore.ReasonUnhashed:
		// Versioned by its stat, not its bytes (versionstore/unhashed.go).
		return cannot + strconv.FormatInt(e.Size, 10) + " bytes exceeds the " + strconv.FormatInt(e.Limit, 10) + "-byte limit for write and edit"
	case versionstore.ReasonMountWriting:
		return cannot + "file is being written " + writerText(e.By)
	case versionstore.ReasonWouldLose:
		return cannot + versionstore.ErrWouldLose.Error()
	case versionstore.ReasonIndex:
		what := op + " failed: "
		if e.Path != "" {
			what = cannot
		}
		return what + "the index could not record the change (" + osReason(e.Err) + "); make room where dshfs keeps its state, then retry"
	case versionstore.ReasonIndexRead:
		what := op + " failed: "
		if e.Path != "" {
			what = cannot
		}
		return what + "the index could not be read (" + osReason(e.Err) + "); check the disk where dshfs keeps its state, then retry"
	}
	return cannot + storeReasons[e.Reason]
}

// storeReasons are the fixed endings of "cannot <op> "<path>": ...".
// ErrStopping answers a tool call that arrives as the daemon stops: the
// model may call again once the harness has reconnected.
var ErrStopping = errors.New("the dshfs daemon is stopping; the call was not run")

var storeReasons = map[versionstore.Reason]string{
	versionstore.ReasonMissing:      "not found",
	versionstore.ReasonNULByte:      "the path contains a NUL byte",
	versionstore.ReasonParentNotDir: "a parent path segment is not a directory",
	versionstore.ReasonNotRegular:   "not a regular file",
	versionstore.ReasonOutside:      "outside the workspace",
	versionstore.ReasonPermission:   "permission denied",
	versionstore.ReasonChanged:      "file changed since it was read",
	versionstore.ReasonGone:         "file no longer exists",
	versionstore.ReasonOwnerChanged: "another user owns it now than when it had these bytes, and putting them back would hand them over",
	versionstore.ReasonDirOwner:     "its directory belongs to another user now, who could take the bytes put back there",
	versionstore.ReasonNone:         "failed",
}

// writerText names the process writing a file through the mount, as ps
// would: "by pid 4242 (python3)"; its command name is the process's own
// choice, so anything unprintable in it is escaped.
func writerText(w versionstore.Writer) string {
	if w.Pid == 0 {
		return "through the mount"
	}
	comm := w.Comm
	if strings.ContainsFunc(comm, func(r rune) bool { return !unicode.IsPrint(r) || r == '(' || r == ')' }) {
		comm = strconv.Quote(comm)
	}
	if comm == "" {
		return "by pid " + strconv.FormatUint(uint64(w.Pid), 10)
	}
	return "by pid " + strconv.FormatUint(uint64(w.Pid), 10) + " (" + comm + ")"
}

// osReason is the innermost description of err: the errno text for system
// call failures, without the operation and path that *PathError adds.
func osReason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	if err == nil {
		return "failed"
	}
	return err.Error()
}

// remedy is the reference implementation's hint appended to write and edit
// errors.
func remedy(verb string, code versionstore.Code) string {
	if verb != "write" && verb != "edit" {
		return ""
	}
	switch code {
	case versionstore.CodeStaleVersion:
		return " — re-read the file, then retry"
	case versionstore.CodeNotObserved:
		return " — read the file, then retry"
	}
	return ""
}

// policyFailure is a failure of the policy for verb on t: its refusal in
// the reference implementation's words, or a failure of the index itself in the
// FS_IO_ERROR form of every other I/O failure.
func policyFailure(verb string, t versionstore.Target, err error) error {
	var re *policy.RefusalError
	var fe *versionstore.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re) && errors.Is(err, policy.ErrObservedAbsent):
		return &toolError{code: versionstore.CodeNotFound, msg: "cannot " + verb + " " + quote(t.Display) + ": not found", err: err}
	case errors.As(err, &re):
		return &toolError{code: versionstore.CodeNotObserved,
			msg: verb + " requires reading " + quote(t.Display) + " first" + remedy(verb, versionstore.CodeNotObserved), err: err}
	case errors.As(err, &fe):
		return describe(verb, err)
	}
	return &toolError{code: versionstore.CodeIOError, msg: "cannot " + verb + " " + quote(t.Display) + ": index: " + err.Error(), err: err}
}

// The literal edit's failures.

func errEmptyOld() error { return argError("old_string must be a non-empty string") }

func errSameOldNew() error { return argError("old_string and new_string must differ") }

func errEditNotFound(display string) error {
	return &toolError{code: versionstore.CodeEditNotFound, msg: "old_string was not found in " + quote(display)}
}

func errAmbiguousEdit(n int, display string) error {
	return &toolError{code: versionstore.CodeAmbiguousEdit, msg: "old_string matched " + strconv.Itoa(n) + " times in " + quote(display) +
		"; provide a more specific old_string or set replace_all to true"}
}

// errNotText is a read or edit refused because the file is not UTF-8 text.
func errNotText(verb, display string, binary bool) error {
	why := "invalid UTF-8 text"
	if binary {
		why = "binary file"
	}
	return &toolError{code: versionstore.CodeNotText, msg: "cannot " + verb + " " + quote(display) + ": " + why}
}

// errOffsetRange is a read past the end of the file.
func errOffsetRange(offset, display string, total int) error {
	return &toolError{code: versionstore.CodeNotFound,
		msg: "offset " + offset + " is out of range for " + quote(display) + " (" + itoa(total) + " lines)"}
}

// errOutside is a path outside the workspace before the store saw it.
func errOutside(verb, display string) error {
	return &toolError{code: versionstore.CodeSandboxDenied, msg: "cannot " + verb + " " + quote(display) + ": outside the workspace"}
}

// The texts of successful calls.

func writeText(display string, created bool) string {
	msg := "Updated file"
	if created {
		msg = "Created file"
	}
	return "<path>" + display + "</path>\n<type>file</type>\n<content>\n" + msg + "\n</content>"
}

func editText(display string, replaceAll bool) string {
	if replaceAll {
		return "The file " + display + " has been updated. All occurrences were successfully replaced."
	}
	return "The file " + display + " has been updated successfully."
}

// internalError is a failure that is neither coded nor an argument error:
// said plainly rather than as a bare Go error string.
func internalError(err error) string { return "internal error: " + err.Error() }
