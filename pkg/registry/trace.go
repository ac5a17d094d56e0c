package registry

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// NewTraceID returns a random W3C trace id: 32 lowercase hex digits.
func NewTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// TraceIDFromTraceparent returns the trace id of a W3C traceparent header
// ("00-<32 hex>-<16 hex>-<2 hex>"), or "" when the header is absent or not
// valid, in which case the caller makes a new one.
func TraceIDFromTraceparent(h string) string {
	h = strings.TrimSpace(h)
	parts := strings.Split(h, "-")
	if len(parts) < 4 || len(parts[0]) != 2 || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return ""
	}
	if parts[0] == "ff" || !isLowerHex(parts[0]) || (parts[0] == "00" && len(parts) != 4) {
		return ""
	}
	if !isLowerHex(parts[1]) || !isLowerHex(parts[2]) || !isLowerHex(parts[3]) {
		return ""
	}
	if parts[1] == strings.Repeat("0", 32) || parts[2] == strings.Repeat("0", 16) {
		return ""
	}
	return parts[1]
}

// ValidTraceID reports whether s is 32 lowercase hex digits, not all zero.
func ValidTraceID(s string) bool {
	return len(s) == 32 && isLowerHex(s) && s != strings.Repeat("0", 32)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}
