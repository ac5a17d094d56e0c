package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/cyberos/mcpd/pkg/registry"
)

// serversHead is how a ServerList without servers starts when encoded.
const serversHead = `{"servers":null`

// writeServerList sends list (200) as json.Marshal would, but encodes one
// server at a time into a small buffer, so that a page of large servers is
// not held a second time as one encoded answer. The body must be out by the
// request's deadline: a client that reads too slowly is cut off there, and
// so is an answer whose request ran out of time.
func (h *handler) writeServerList(w http.ResponseWriter, r *http.Request, list ServerList) {
	servers := list.Servers
	list.Servers = nil
	tail, err := json.Marshal(list)
	if err != nil || !bytes.HasPrefix(tail, []byte(serversHead)) {
		list.Servers = servers
		h.writeJSON(w, r, http.StatusOK, list)
		return
	}
	tail = tail[len(serversHead):]

	if deadline, ok := r.Context().Deadline(); ok {
		// Not every writer can (a recorder in tests); the server's
		// WriteTimeout still bounds those.
		_ = http.NewResponseController(w).SetWriteDeadline(deadline)
	}
	w.Header().Set("Content-Type", ContentTypeJSON)
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	_, _ = bw.WriteString(`{"servers":[`)
	for i := range servers {
		if err := r.Context().Err(); err != nil {
			h.logger.WarnContext(r.Context(), "server list cut off", "path", r.URL.Path, "err", err)
			panic(http.ErrAbortHandler) // the status is sent: only a broken answer says that it is not whole
		}
		b, err := json.Marshal(servers[i])
		if err != nil {
			h.logger.ErrorContext(r.Context(), "encode server", "path", r.URL.Path, "err", err)
			panic(http.ErrAbortHandler)
		}
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		if _, err := bw.Write(b); err != nil {
			return // the client is gone or too slow; nothing more to say
		}
		servers[i] = registry.Server{} // sent: let the collector have it
	}
	_ = bw.WriteByte(']')
	_, _ = bw.Write(tail)
	_ = bw.Flush()
}
