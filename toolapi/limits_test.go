package toolapi

import (
	"strings"
	"testing"
)

// A request that could not be recorded in full is refused before anything
// is read or changed: once, a 40,000-byte actor created the file and then
// failed to record the observation ("index: key too large"), reporting a
// write that had happened as failed.
func TestOversizedInputsAreRefusedBeforeAnyChange(t *testing.T) {
	h := newHarness(t)
	h.put("seen.txt", "alpha\n")
	long := strings.Repeat("a", 40000)
	path := strings.Repeat("d/", MaxPathBytes/2) + "x.txt"
	tests := []struct {
		name, tool, actor, cwd, args, msg string
	}{
		{"write as a long actor", ToolWrite, long, "", `{"file_path":"new.txt","content":"x"}`, "actor must be at most 256 bytes"},
		{"read as a long actor", ToolRead, long, "", `{"file_path":"seen.txt"}`, "actor must be at most 256 bytes"},
		{"edit as a long actor", ToolEdit, long, "", `{"file_path":"seen.txt","old_string":"alpha","new_string":"beta"}`, "actor must be at most 256 bytes"},
		{"a long cwd", ToolWrite, agent, "/" + long, `{"file_path":"new.txt","content":"x"}`, "cwd must be at most 4096 bytes"},
		{"a long file_path", ToolWrite, agent, "", `{"file_path":"` + path + `","content":"x"}`, "file_path must be at most 4096 bytes"},
		{"a NUL in the actor", ToolWrite, "a\x00b", "", `{"file_path":"new.txt","content":"x"}`, "actor must not contain a NUL byte"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.in(t).callReq(tc.tool, Request{Actor: tc.actor, Cwd: tc.cwd, Arguments: []byte(tc.args)})
			mustFail(t, r, "", tc.msg)
			mustNotExist(t, h.backing("new.txt"))
			mustNotExist(t, h.backing("d"))
			if got := h.get("seen.txt"); got != "alpha\n" {
				t.Fatalf("seen.txt = %q after a refused call", got)
			}
		})
	}
	// At the limits, calls work.
	actor := strings.Repeat("a", MaxActorBytes)
	mustOK(t, h.call(ToolWrite, actor, `{"file_path":"new.txt","content":"x"}`))
	mustOK(t, h.call(ToolRead, actor, `{"file_path":"new.txt"}`))
	mustOK(t, h.call(ToolEdit, actor, `{"file_path":"new.txt","old_string":"x","new_string":"y"}`))
}

// An MCP client's name becomes part of an actor name only as letters,
// digits, '.', '_' and '-', bounded: the client chooses it.
func TestActorBase(t *testing.T) {
	for _, c := range []struct{ client, want string }{
		{"claude-code", "claude-code"},
		{"codex", "codex"},
		{"Claude Code (VS Code)", "Claude-Code-VS-Code"},
		{"../../etc/passwd", "etc-passwd"},
		{"a/b\\c\x00d\ne\u202ef", "a-b-c-d-e-f"},
		{"..", "mcp"},
		{"", "mcp"},
		{"日本語", "mcp"},
		{strings.Repeat("x", 100), strings.Repeat("x", MaxActorBaseBytes)},
		{strings.Repeat("x", MaxActorBaseBytes-1) + "/y", strings.Repeat("x", MaxActorBaseBytes-1)},
	} {
		if got := ActorBase(c.client); got != c.want {
			t.Errorf("ActorBase(%q) = %q, want %q", c.client, got, c.want)
		}
	}
}
