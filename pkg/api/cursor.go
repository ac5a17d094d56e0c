package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/heartbeat"
)

// Cursors are opaque to clients: base64url (no padding) of a small JSON
// object whose "k" says which listing it belongs to, so that a cursor of one
// listing is refused by the other.
const (
	cursorKindServers = "s"
	cursorKindEvents  = "e"
	maxCursorLen      = 512
)

type cursorWire struct {
	Kind       string `json:"k"`
	ModuleName string `json:"m,omitempty"`
	ServerID   string `json:"i,omitempty"`
	Seq        int64  `json:"q,omitempty"`
}

var errBadCursor = errors.New("not a cursor of this listing")

func encodeCursor(c cursorWire) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s, kind string) (cursorWire, error) {
	if len(s) > maxCursorLen {
		return cursorWire{}, errBadCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursorWire{}, errBadCursor
	}
	var c cursorWire
	if err := json.Unmarshal(b, &c); err != nil || c.Kind != kind {
		return cursorWire{}, errBadCursor
	}
	return c, nil
}

// encodeServerCursor returns the cursor of the page after c, or nil.
func encodeServerCursor(c *heartbeat.ServerCursor) *string {
	if c == nil {
		return nil
	}
	s := encodeCursor(cursorWire{Kind: cursorKindServers, ModuleName: c.ModuleName, ServerID: c.ServerID.String()})
	return &s
}

func decodeServerCursor(s string) (*heartbeat.ServerCursor, error) {
	c, err := decodeCursor(s, cursorKindServers)
	if err != nil {
		return nil, err
	}
	if !heartbeat.ValidModuleName(c.ModuleName) || len(c.ServerID) != 36 {
		return nil, errBadCursor
	}
	id, err := uuid.Parse(c.ServerID)
	if err != nil {
		return nil, errBadCursor
	}
	return &heartbeat.ServerCursor{ModuleName: c.ModuleName, ServerID: id}, nil
}

// encodeEventCursor returns the cursor of the events after seq, or nil.
func encodeEventCursor(seq *int64) *string {
	if seq == nil {
		return nil
	}
	s := encodeCursor(cursorWire{Kind: cursorKindEvents, Seq: *seq})
	return &s
}

func decodeEventCursor(s string) (int64, error) {
	c, err := decodeCursor(s, cursorKindEvents)
	if err != nil {
		return 0, err
	}
	if c.Seq <= 0 {
		return 0, errBadCursor
	}
	return c.Seq, nil
}
