package unixsocket

// Eight bytes at a time: the JSON encoder and decoder skip runs of plain
// ASCII — no control byte, quote, backslash or byte ≥ 0x80 — a word at a
// time. A read's answer is mostly such runs.

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainWord reports whether none of the eight bytes of w is a control byte,
// '"', '\\' or ≥ 0x80. The tests below are exact about whether any byte
// matches (a borrow only spreads upward from a byte that matches).
func plainWord(w uint64) bool {
	below := (w - 0x20*ones) &^ w // a byte < 0x20 sets its high bit
	quote := w ^ '"'*ones         // a quote becomes zero
	slash := w ^ '\\'*ones        // so does a backslash
	zero := (quote-ones)&^quote | (slash-ones)&^slash
	return (below|zero|w)&highs == 0
}

// word is the eight bytes of s from i, the first the lowest.
func word(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// wordAt is word for a byte slice.
func wordAt(b []byte, i int) uint64 {
	b = b[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// plainRun returns the end of the run of plain words in s from i: i, or
// the first i+8k whose word is not plain or does not fit.
func plainRun(s string, i int) int {
	for i+8 <= len(s) && plainWord(word(s, i)) {
		i += 8
	}
	return i
}

// plainRunAt is plainRun for a byte slice.
func plainRunAt(b []byte, i int) int {
	for i+8 <= len(b) && plainWord(wordAt(b, i)) {
		i += 8
	}
	return i
}
