package api

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/cyberos/mcpd/pkg/registry"
)

// Cursors are opaque to clients: base64url (no padding) of a nonce and the
// AES-256-GCM sealing of a small binary payload whose first byte says which
// listing it belongs to, with the tenant's id as associated data. A cursor
// therefore reveals nothing (not the trail's global positions, which would
// show the platform's event rate), cannot be forged or altered, and is
// refused for another listing or another tenant. The key is the store's
// (CursorKey), the same for every replica and across restarts.
const (
	cursorKindServers  = 's'
	cursorKindPosition = 'p' // audit list and watch: one position space
	cursorKindSkills   = 'k'
	maxCursorLen       = 1024
)

var errBadCursor = errors.New("not a cursor of this listing")

// cursorCodec seals and opens cursors.
type cursorCodec struct{ aead cipher.AEAD }

// newCursorCodec returns a codec with key (32 bytes); a nil key draws a
// random one, for a handler whose cursors need not outlive it.
func newCursorCodec(key []byte) (*cursorCodec, error) {
	if key == nil {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("cursor key: %d bytes, want 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("cursor key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("cursor key: %w", err)
	}
	return &cursorCodec{aead: aead}, nil
}

func (c *cursorCodec) seal(tenant uuid.UUID, payload []byte) string {
	nonce := make([]byte, c.aead.NonceSize(), c.aead.NonceSize()+len(payload)+c.aead.Overhead())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(c.aead.Seal(nonce, nonce, payload, tenant[:]))
}

func (c *cursorCodec) open(tenant uuid.UUID, s string, kind byte) ([]byte, error) {
	if len(s) > maxCursorLen {
		return nil, errBadCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < c.aead.NonceSize()+c.aead.Overhead()+1 {
		return nil, errBadCursor
	}
	n := c.aead.NonceSize()
	payload, err := c.aead.Open(nil, b[:n], b[n:], tenant[:])
	if err != nil || len(payload) == 0 || payload[0] != kind {
		return nil, errBadCursor
	}
	return payload[1:], nil
}

// appendString appends a length-prefixed string.
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// readString reads a length-prefixed string of at most maxLen bytes.
func readString(b []byte, maxLen int) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(maxLen) || n > uint64(len(b)-k) {
		return "", nil, errBadCursor
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
}

// encodeServerCursor returns the cursor of the page after c, or nil.
func (c *cursorCodec) encodeServerCursor(tenant uuid.UUID, sc *registry.ServerCursor) *string {
	if sc == nil {
		return nil
	}
	b := append([]byte{cursorKindServers}, sc.ServerID[:]...)
	s := c.seal(tenant, appendString(b, sc.ModuleName))
	return &s
}

func (c *cursorCodec) decodeServerCursor(tenant uuid.UUID, s string) (*registry.ServerCursor, error) {
	b, err := c.open(tenant, s, cursorKindServers)
	if err != nil || len(b) < 16 {
		return nil, errBadCursor
	}
	id, _ := uuid.FromBytes(b[:16])
	module, rest, err := readString(b[16:], registry.MaxModuleNameLen)
	if err != nil || len(rest) != 0 || !registry.ValidModuleName(module) {
		return nil, errBadCursor
	}
	return &registry.ServerCursor{ModuleName: module, ServerID: id}, nil
}

// encodePosition returns the cursor of a position in the trail.
func (c *cursorCodec) encodePosition(tenant uuid.UUID, p registry.Position) string {
	b := make([]byte, 1, 25)
	b[0] = cursorKindPosition
	b = binary.BigEndian.AppendUint64(b, p.Epoch)
	b = binary.BigEndian.AppendUint64(b, p.TxID)
	b = binary.BigEndian.AppendUint64(b, uint64(p.Seq))
	return c.seal(tenant, b)
}

// encodeNextPosition returns the cursor of p, or nil.
func (c *cursorCodec) encodeNextPosition(tenant uuid.UUID, p *registry.Position) *string {
	if p == nil {
		return nil
	}
	s := c.encodePosition(tenant, *p)
	return &s
}

func (c *cursorCodec) decodePosition(tenant uuid.UUID, s string) (registry.Position, error) {
	b, err := c.open(tenant, s, cursorKindPosition)
	if err != nil || len(b) != 24 {
		return registry.Position{}, errBadCursor
	}
	p := registry.Position{
		Epoch: binary.BigEndian.Uint64(b[0:8]),
		TxID:  binary.BigEndian.Uint64(b[8:16]),
		Seq:   int64(binary.BigEndian.Uint64(b[16:24])),
	}
	if p.Seq < 0 {
		return registry.Position{}, errBadCursor
	}
	return p, nil
}

// encodeSkillCursor returns the cursor of the skills page after sc, or nil.
func (c *cursorCodec) encodeSkillCursor(tenant uuid.UUID, sc *registry.SkillCursor) *string {
	if sc == nil {
		return nil
	}
	b := appendString([]byte{cursorKindSkills}, sc.Name)
	s := c.seal(tenant, appendString(b, sc.ModuleName))
	return &s
}

func (c *cursorCodec) decodeSkillCursor(tenant uuid.UUID, s string) (*registry.SkillCursor, error) {
	b, err := c.open(tenant, s, cursorKindSkills)
	if err != nil {
		return nil, errBadCursor
	}
	name, b, err := readString(b, 4*registry.MaxSkillNameLen)
	if err != nil {
		return nil, errBadCursor
	}
	module, b, err := readString(b, registry.MaxModuleNameLen)
	if err != nil || len(b) != 0 || name == "" || !registry.ValidModuleName(module) {
		return nil, errBadCursor
	}
	return &registry.SkillCursor{Name: name, ModuleName: module}, nil
}
