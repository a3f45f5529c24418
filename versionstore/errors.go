package versionstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Code is one of the reference's filesystem error codes. The set is closed:
// callers switch on it and harnesses match it, so no code is ever invented.
type Code string

// The error codes of the reference stack, exactly.
const (
	CodeNotFound         Code = "FS_NOT_FOUND"
	CodeNotDirectory     Code = "FS_NOT_DIRECTORY"
	CodeNotText          Code = "FS_NOT_TEXT"
	CodeNotRegularFile   Code = "FS_NOT_REGULAR_FILE"
	CodeTooLarge         Code = "FS_TOO_LARGE"
	CodePermissionDenied Code = "FS_PERMISSION_DENIED"
	CodeSandboxDenied    Code = "FS_SANDBOX_DENIED"
	CodeIOError          Code = "FS_IO_ERROR"
	CodeStaleVersion     Code = "FS_STALE_VERSION"
	CodeNotObserved      Code = "FS_NOT_OBSERVED"
	CodeAmbiguousEdit    Code = "FS_AMBIGUOUS_EDIT"
	CodeEditNotFound     Code = "FS_EDIT_NOT_FOUND"
	CodeAborted          Code = "FS_ABORTED"
)

// Error is a filesystem failure with a reference code and the exact
// model-facing message. Err, when set, is the underlying cause; it is never
// shown to the model.
type Error struct {
	Code    Code
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of the first *Error in err's chain, or "" if there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Message templates shared by several operations. X is always the display path.
func notFound(verb, display string) *Error {
	return &Error{Code: CodeNotFound, Message: "cannot " + verb + " " + quote(display) + ": not found"}
}

func notRegular(verb, display string) *Error {
	return &Error{Code: CodeNotRegularFile, Message: "cannot " + verb + " " + quote(display) + ": not a regular file"}
}

func outsideWorkspace(verb, display string) *Error {
	return &Error{Code: CodeSandboxDenied, Message: "cannot " + verb + " " + quote(display) + ": outside the workspace"}
}

// quote renders a path the way the reference does: inside plain double quotes,
// without Go escaping, so messages match byte for byte.
func quote(s string) string { return `"` + s + `"` }

// osError maps an operating-system failure to a coded error. EACCES and EPERM
// become FS_PERMISSION_DENIED; anything else is FS_IO_ERROR with the errno's
// own text. The backing path never leaks into the message: only the display
// path the caller chose.
func osError(verb, display string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return &Error{Code: CodePermissionDenied, Message: "cannot " + verb + " " + quote(display) + ": permission denied", Err: err}
	}
	return &Error{Code: CodeIOError, Message: "cannot " + verb + " " + quote(display) + ": " + reason(err), Err: err}
}

// reason is the innermost description of err: the errno text for system call
// failures, without the operation and path that *PathError adds.
func reason(err error) string {
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
	return err.Error()
}
