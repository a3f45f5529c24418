package unixsocket

import (
	"bufio"
	"bytes"
	"io"
	"math"
)

// The fast path's request heads. The fast path must never answer a request
// net/http would refuse or read differently (a request smuggled past it
// would be one net/http's rules exist to stop), and it need not take every
// request net/http takes: anything it does not take goes to net/http with
// the bytes read so far, and is answered there. So it takes only heads in
// one narrow form, each part of which net/http reads the same way
// (net/textproto's readMIMEHeader, net/http's readRequest, readTransfer and
// the server's own checks):
//
//	METHOD PREFIX VALUE HTTP/1.1 CRLF      a fast route's, VALUE of a-z and _
//	*( field-name ":" OWS value OWS CRLF ) name of tchar, value of VCHAR, SP, HTAB
//	CRLF
//
// with exactly one Host (of the bytes net/http allows in one), exactly one
// Content-Length of decimal digits (no sign, no more than 2^63-1),
// Connection only "close" or "keep-alive", and no Transfer-Encoding, Expect
// or Upgrade. Lines must end in CRLF, no line may start with white space
// (folding), no byte may be a control or non-ASCII except HTAB in values.
// A head over maxHead bytes is net/http's too, which answers 431
// (Server.MaxHeaderBytes is maxHead). FuzzReadHead holds the parser to
// that against net/http itself.

var (
	crlf = []byte("\r\n")

	alnum      = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	tokenBytes = byteSet(alnum + "!#$%&'*+-.^_`|~")     // RFC 9110 tchar
	hostBytes  = byteSet(alnum + "!$%&'()*+,-.:;=[]_~") // httpguts.ValidHostHeader's
	valueBytes = visibleASCII()                         // VCHAR, SP and HTAB
)

func byteSet(s string) (set [256]bool) {
	for i := range len(s) {
		set[s[i]] = true
	}
	return set
}

func visibleASCII() (set [256]bool) {
	for c := 0x21; c <= 0x7e; c++ {
		set[c] = true
	}
	set[' '], set['\t'] = true, true
	return set
}

func all(b []byte, set *[256]bool) bool {
	for _, c := range b {
		if !set[c] {
			return false
		}
	}
	return true
}

// head is what the fast path needs of a request's head.
type head struct {
	raw   []byte // every byte of the head read, to replay on a hand-off
	route *fastRoute
	value string // the route's wildcard's

	contentLength int64
	close         bool
	hosts         int
	lengths       int
}

// readHead reads a request head into h (keeping h.raw's buffer). fast says
// the fast path takes the request; when it does not, h.raw holds what was
// read of the head, for net/http to read again. An error (nothing read
// before the end of the connection, or a read that failed) closes the
// connection, as net/http does without answering.
func readHead(br *bufio.Reader, h *head, routes []*fastRoute) (fast bool, err error) {
	*h = head{raw: h.raw[:0]}
	for {
		start := len(h.raw)
		h.raw, err = appendLine(br, h.raw)
		switch {
		case len(h.raw) > maxHead:
			return false, nil // net/http answers 431
		case err == io.EOF && len(h.raw) > 0:
			return false, nil // a partial head: net/http says what is wrong with it
		case err != nil:
			return false, err
		}
		line, ok := bytes.CutSuffix(h.raw[start:], crlf)
		switch {
		case !ok:
			return false, nil // a bare LF
		case start == 0:
			if !h.requestLine(line, routes) {
				return false, nil
			}
		case len(line) == 0:
			return h.hosts == 1 && h.lengths == 1, nil
		case !h.header(line):
			return false, nil
		}
	}
}

// appendLine appends the next line, LF included, to raw. A line may be
// longer than br's buffer; past maxHead it is cut short.
func appendLine(br *bufio.Reader, raw []byte) ([]byte, error) {
	for {
		frag, err := br.ReadSlice('\n')
		raw = append(raw, frag...)
		if err != bufio.ErrBufferFull || len(raw) > maxHead {
			return raw, err
		}
	}
}

// requestLine reports whether line is a request of one of routes, and
// notes which, and its wildcard's value.
func (h *head) requestLine(line []byte, routes []*fastRoute) bool {
	line, ok := bytes.CutSuffix(line, []byte(" HTTP/1.1"))
	if !ok {
		return false
	}
	for _, r := range routes {
		value, ok := bytes.CutPrefix(line, r.line)
		if ok && plainValue(value) {
			h.route, h.value = r, intern(value)
			return true
		}
	}
	return false
}

// plainValue reports whether v is a wildcard's value the fast path takes:
// a-z and _ only. Escapes, slashes, a query are net/http's.
func plainValue(v []byte) bool {
	for _, c := range v {
		if !('a' <= c && c <= 'z' || c == '_') {
			return false
		}
	}
	return len(v) > 0
}

// intern is v as a string, without an allocation for the values there
// mostly are (the tools' names).
func intern(name []byte) string {
	switch string(name) {
	case "read":
		return "read"
	case "write":
		return "write"
	case "edit":
		return "edit"
	case "read_image":
		return "read_image"
	}
	return string(name)
}

// header takes one header line, its CRLF removed, and reports whether the
// head can still be the fast path's.
func (h *head) header(line []byte) bool {
	name, value, ok := bytes.Cut(line, []byte(":"))
	if !ok || len(name) == 0 || !all(name, &tokenBytes) || !all(value, &valueBytes) {
		return false
	}
	value = bytes.Trim(value, " \t")
	switch {
	case asciiEqualFold(name, "host"):
		h.hosts++
		return h.hosts == 1 && all(value, &hostBytes)
	case asciiEqualFold(name, "content-length"):
		h.lengths++
		h.contentLength, ok = parseLength(value)
		return h.lengths == 1 && ok
	case asciiEqualFold(name, "connection"):
		closing := asciiEqualFold(value, "close")
		h.close = h.close || closing
		return closing || asciiEqualFold(value, "keep-alive")
	case asciiEqualFold(name, "transfer-encoding"), asciiEqualFold(name, "expect"), asciiEqualFold(name, "upgrade"):
		return false
	}
	return true
}

// parseLength reads a Content-Length as net/http does (strconv.ParseUint
// with 63 bits), for decimal digits only.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		d := int64(c) - '0'
		if d < 0 || d > 9 || n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// skipBlankLines discards what net/http discards before a request that
// follows a POST: up to four leading CR and LF bytes of the next four (RFC
// 9112 section 2.2 lets a server skip the blank lines an old client sends
// after a body). net/http waits for those four bytes, and closes without an
// answer if they do not come.
func skipBlankLines(br *bufio.Reader) error {
	peek, err := br.Peek(4)
	if err != nil {
		return err
	}
	n := 0
	for n < len(peek) && (peek[n] == '\r' || peek[n] == '\n') {
		n++
	}
	br.Discard(n)
	return nil
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
