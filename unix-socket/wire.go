// Package unixsocket owns the daemon's HTTP/1.1 API on a Unix socket — one
// sorted route table under /v1 served by net/http, the wire types, and the
// typed Go client the CLI and harnesses use (net/http's Transport). JSON is
// encoding/json's both ways. It carries toolapi calls and reports state; it
// never touches files itself and decides nothing a tool may do, and it
// parses no HTTP or JSON by hand.
package unixsocket

import (
	"encoding/json"

	"github.com/dshfs/dshfs/policy"
	"github.com/dshfs/dshfs/toolapi"
	"github.com/dshfs/dshfs/versionstore"
	"github.com/dshfs/dshfs/versionstore/remote"
)

// The wire types. Tool calls and results are toolapi's own, so the socket
// and in-process callers see the same bytes.
type (
	// ToolRequest is the body of POST /v1/tools/{name}.
	ToolRequest = toolapi.Request
	// ToolDef is one element of GET /v1/tools.
	ToolDef = toolapi.ToolDef
	// HistoryEntry is one element of GET /v1/history, newest first.
	HistoryEntry = versionstore.HistoryEntry
)

// ToolResult is the answer of POST /v1/tools/{name}: toolapi.Result as it
// travels. The structured value stays raw JSON on the client side, so a
// caller that wants only the text pays nothing to decode it.
type ToolResult struct {
	Text    string             `json:"text"`
	IsError bool               `json:"is_error"`
	Error   *toolapi.ErrorInfo `json:"error,omitempty"`
	Value   json.RawMessage    `json:"value,omitempty"`
}

// Status is the answer of GET /v1/status.
type Status struct {
	MountPoint    string           `json:"mount_point"`
	Backing       string           `json:"backing"`
	Socket        string           `json:"socket"`
	StateDir      string           `json:"state_dir"`
	UptimeSeconds float64          `json:"uptime_seconds"`
	FilesIndexed  int              `json:"files_indexed"`
	DirtyFiles    int              `json:"dirty_files"`
	Actors        ActorSummary     `json:"actors"`
	Ops           map[string]int64 `json:"ops"`
	// IndexSalvage, if set, says the index was found damaged and what its
	// salvage copied and lost.
	IndexSalvage *versionstore.SalvageReport `json:"index_salvage,omitempty"`
	// Remote, if set, is how far the history's replica (mount --remote) is.
	Remote *remote.Status `json:"remote,omitempty"`
	// Transport is what carries the mount's FUSE requests: "/dev/fuse" or
	// "io_uring" (mount --io-uring); TransportNote, when io_uring was asked
	// for and does not carry them, says why.
	Transport     string `json:"transport,omitempty"`
	TransportNote string `json:"transport_note,omitempty"`
}

// ActorSummary counts the actors holding observations and names the most
// recently active (at most MaxRecentActors): a daemon serving many
// sessions has too many to list.
type ActorSummary struct {
	Count  int               `json:"count"`
	Recent []policy.Activity `json:"recent"`
}

// MaxRecentActors bounds ActorSummary.Recent.
const MaxRecentActors = 10

// ErrorBody is the body of every 4xx and 5xx answer.
type ErrorBody struct {
	Error string `json:"error"`
}
