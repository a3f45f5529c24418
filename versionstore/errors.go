package versionstore

import (
	"errors"
	"io/fs"
	"strconv"
	"syscall"
)

// Code is one of the reference implementation's filesystem error codes. The set
// is closed: callers switch on it and harnesses match it, so no code is ever
// invented.
type Code string

// The error codes of the reference implementation, exactly.
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

// Reason is what exactly failed, finer than the Code: each reason is one
// message in toolapi, which alone turns errors into text.
type Reason int

// The reasons a store operation fails with, and the code each carries.
const (
	ReasonNone         Reason = iota
	ReasonMissing             // FS_NOT_FOUND: nothing at the path
	ReasonNULByte             // FS_NOT_FOUND: the path contains a NUL byte
	ReasonParentNotDir        // FS_NOT_FOUND: a parent segment is not a directory
	ReasonNotRegular          // FS_NOT_REGULAR_FILE
	ReasonOutside             // FS_SANDBOX_DENIED: outside the workspace
	ReasonPermission          // FS_PERMISSION_DENIED; Err is the cause
	ReasonIO                  // FS_IO_ERROR; Err is the cause
	ReasonTooLarge            // FS_TOO_LARGE: Size bytes (-1: grew while read) over Limit
	ReasonChanged             // FS_STALE_VERSION: not the version expected
	ReasonGone                // FS_STALE_VERSION: a guarded replace found no file
	ReasonMountWriting        // FS_STALE_VERSION: the mount is writing the file; By is who, if known
	ReasonExists              // FS_NOT_OBSERVED: a create-only write met a file
	ReasonAborted             // FS_ABORTED: the context was cancelled
	ReasonWouldLose           // no code: Err is ErrWouldLose
	ReasonOwnerChanged        // no code: another user owns the file than the bytes put back
	ReasonIndex               // FS_IO_ERROR: the index could not record a change; Err is the cause
	ReasonDirOwner            // no code: another user owns the directory the bytes would be put back in
	ReasonIndexRead           // FS_IO_ERROR: the index could not be read; Err is the cause
	ReasonUnhashed            // FS_TOO_LARGE: Size bytes over Limit, the size past which files are versioned by stat
)

var reasons = [...]struct {
	code Code
	name string
}{
	ReasonNone:         {"", "failed"},
	ReasonMissing:      {CodeNotFound, "missing"},
	ReasonNULByte:      {CodeNotFound, "NUL in path"},
	ReasonParentNotDir: {CodeNotFound, "parent not a directory"},
	ReasonNotRegular:   {CodeNotRegularFile, "not regular"},
	ReasonOutside:      {CodeSandboxDenied, "outside the root"},
	ReasonPermission:   {CodePermissionDenied, "permission"},
	ReasonIO:           {CodeIOError, "I/O"},
	ReasonTooLarge:     {CodeTooLarge, "too large"},
	ReasonChanged:      {CodeStaleVersion, "version mismatch"},
	ReasonGone:         {CodeStaleVersion, "absent"},
	ReasonMountWriting: {CodeStaleVersion, "mount writing"},
	ReasonExists:       {CodeNotObserved, "exists"},
	ReasonAborted:      {CodeAborted, "cancelled"},
	ReasonWouldLose:    {"", "unkept bytes"},
	ReasonOwnerChanged: {"", "owner changed"},
	ReasonIndex:        {CodeIOError, "index not written"},
	ReasonDirOwner:     {"", "directory owner"},
	ReasonIndexRead:    {CodeIOError, "index not read"},
	ReasonUnhashed:     {CodeTooLarge, "unhashed"},
}

// Code is the reference implementation's error code a failure of this
// reason carries.
func (r Reason) Code() Code { return reasons[r].code }

func (r Reason) String() string { return reasons[r].name }

// Error is a failed store operation, as data: toolapi renders it for the
// model. Its Error text is for logs and developers, never for the model.
type Error struct {
	Code   Code
	Reason Reason
	// Op is the operation the failure is reported against ("read",
	// "resolve", "restore"...); empty for Update, whose caller names it.
	Op string
	// Path is the display path the caller chose; the backing path never
	// appears in an error.
	Path string
	// Size and Limit are the sizes of a ReasonTooLarge.
	Size, Limit int64
	// By is who writes the file through the mount, for a
	// ReasonMountWriting (zero: the mount does not say).
	By Writer
	// Err is the underlying cause, if any.
	Err error
}

func (e *Error) Error() string {
	s := "versionstore: " + e.Op + " " + strconv.Quote(e.Path) + ": " + string(e.Code) + " (" + e.Reason.String() + ")"
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// fail is the error of op on display for reason r.
func fail(r Reason, op, display string) *Error {
	return &Error{Code: r.Code(), Reason: r, Op: op, Path: display}
}

// CodeOf returns the code of the first *Error in err's chain, or "" if there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// osError maps an operating-system failure to a coded error. EACCES and EPERM
// become FS_PERMISSION_DENIED; anything else is FS_IO_ERROR. A coded error
// passes through unchanged.
func osError(op, display string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	r := ReasonIO
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		r = ReasonPermission
	}
	fe := fail(r, op, display)
	fe.Err = err
	return fe
}

// indexError is the error of op on display when the index could not record
// a change (a full or failing disk under the state directory).
func indexError(op, display string, err error) *Error {
	fe := fail(ReasonIndex, op, display)
	fe.Err = err
	return fe
}

// indexReadError is the error of op on display when the index could not be
// read: a closed index, or an entry that no longer decodes. It is never
// taken for "the index has no entry", which would make a file it cannot
// read look new.
func indexReadError(op, display string, err error) *Error {
	fe := fail(ReasonIndexRead, op, display)
	fe.Err = err
	return fe
}

// wrapIndexRead is indexReadError, or nil when err is nil.
func wrapIndexRead(op, display string, err error) error {
	if err == nil {
		return nil
	}
	return indexReadError(op, display, err)
}
