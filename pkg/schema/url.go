package schema

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// This file reads a connection string into libpq's keywords, beside
// pgconn.ParseConfig, which mcpd's pool uses, because that one does not fit
// here. This package is mcpctl's (mcpctl migrate), and mcpctl links no pgx
// (cmd/mcpctl's TestBinaryDependencies): the migrator runs golang-migrate's
// postgres driver on lib/pq, which takes keywords. The migrator must also
// drop the keywords only pgx reads (pool_max_conns would reach the server as
// a setting and be refused) and know which ones the string set (sslmode,
// connect_timeout); ParseConfig would give none of that back, as it resolves
// the string with the environment and its defaults into a Config (hosts into
// Fallbacks, sslmode into TLS settings). lib/pq's own parser takes no URL
// with a host list ("h1:5432,h2:5433"), which mcpd's --database-url may
// hold. TestConnStringAgreesWithPgconn keeps this reading of the hosts,
// ports, user, password and database the same as pgconn's.

// connConfig is a connection string as users write it, read into libpq's
// keywords.
type connConfig struct {
	// params are libpq keywords and their values.
	params map[string]string
	// lockName names the database in golang-migrate's advisory lock id: the
	// path of the URL ("/mcpd"), which is what every earlier mcpctl hashed,
	// so that an older and a newer migrator still exclude each other.
	lockName string
}

// parseConnString reads a connection string as users write it: a
// postgres://, postgresql:// or pgx5:// URL (several hosts separated by
// commas, as libpq and pgx take them) or a libpq key=value string. Errors
// never quote the string, which may hold a password.
func parseConnString(conn string) (connConfig, error) {
	conn = strings.TrimSpace(conn)
	if conn == "" {
		return connConfig{}, errors.New("database url is empty")
	}
	for _, prefix := range []string{"postgresql://", "postgres://", "pgx5://"} {
		if len(conn) >= len(prefix) && strings.EqualFold(conn[:len(prefix)], prefix) {
			return parseURL(conn[len(prefix):])
		}
	}
	if i := strings.Index(conn, "://"); i >= 0 && !strings.Contains(conn[:i], "=") {
		return connConfig{}, fmt.Errorf("database url scheme %q is not postgres, postgresql or pgx5", conn[:i])
	}
	kv, err := parseDSN(conn)
	if err != nil {
		return connConfig{}, err
	}
	return connConfig{params: kv, lockName: "/" + kv["dbname"]}, nil
}

// parseURL reads the part of a postgres:// URL after the scheme. The host
// list is split off first: net/url takes one host, not "h1:5432,[::1]:5433".
func parseURL(rest string) (connConfig, error) {
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hostList := "", authority
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, hostList = authority[:i+1], authority[i+1:]
	}
	u, err := url.Parse("postgres://" + userinfo + "placeholder" + tail)
	if err != nil {
		// url.Parse errors quote the URL, password included.
		return connConfig{}, errors.New("database url is not a valid URL")
	}
	kv := make(map[string]string)
	if u.User != nil {
		kv["user"] = u.User.Username()
		if pw, ok := u.User.Password(); ok {
			kv["password"] = pw
		}
	}
	if hostList != "" {
		hosts, ports, err := splitHosts(hostList)
		if err != nil {
			return connConfig{}, err
		}
		kv["host"] = hosts
		if ports != "" {
			kv["port"] = ports
		}
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		kv["dbname"] = db
	}
	for k, vs := range u.Query() {
		kv[k] = vs[len(vs)-1]
	}
	return connConfig{params: kv, lockName: u.Path}, nil
}

// splitHosts turns a URL's authority host part, "h1:5432,h2,[::1]:5433",
// into libpq's comma-separated host and port lists: "h1,h2,::1" and
// "5432,5432,5433" (ports "" when none is given).
func splitHosts(authority string) (hosts, ports string, err error) {
	var hs, ps []string
	anyPort := false
	for part := range strings.SplitSeq(authority, ",") {
		host, port := part, ""
		if h, p, err := net.SplitHostPort(part); err == nil {
			host, port = h, p
			anyPort = true
		} else if strings.HasPrefix(part, "[") && strings.HasSuffix(part, "]") {
			host = part[1 : len(part)-1]
		}
		if host == "" && port == "" {
			return "", "", errors.New("database url has an empty host in its host list")
		}
		if strings.ContainsAny(host, "/?#@[]") {
			return "", "", errors.New("database url has a bad host in its host list")
		}
		if host, err = url.PathUnescape(host); err != nil {
			return "", "", errors.New("database url has a bad escape in its host list")
		}
		if port != "" {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return "", "", errors.New("database url has a bad port in its host list")
			}
		}
		hs = append(hs, host)
		ps = append(ps, port)
	}
	if !anyPort {
		return strings.Join(hs, ","), "", nil
	}
	for i, p := range ps {
		if p == "" {
			ps[i] = "5432"
		}
	}
	return strings.Join(hs, ","), strings.Join(ps, ","), nil
}

// clientOnlyKey reports keywords that pgx and pgxpool read on the client
// side (mcpd's --database-url may carry them, e.g. pool_max_conns) and
// golang-migrate's x- options: libpq would send them to the server as
// settings, which it refuses.
func clientOnlyKey(k string) bool {
	switch k {
	case "statement_cache_capacity", "description_cache_capacity", "default_query_exec_mode", "prefer_simple_protocol":
		return true
	}
	return strings.HasPrefix(k, "pool_") || strings.HasPrefix(k, "x-")
}

// dsn writes params as a libpq key=value string, every value quoted.
func dsn(params map[string]string) string {
	esc := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteString("='")
		b.WriteString(esc.Replace(params[k]))
		b.WriteByte('\'')
	}
	return b.String()
}

// parseDSN reads a libpq keyword/value connection string:
// host=localhost port=5432 password='it\'s quoted' (a value in single
// quotes may hold spaces; a backslash escapes the next character).
func parseDSN(s string) (map[string]string, error) {
	kv := make(map[string]string)
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if s == "" {
			return kv, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			// s may hold a password: name no part of it.
			return nil, errors.New(`database dsn: a keyword without "="`)
		}
		key := strings.TrimRightFunc(s[:eq], unicode.IsSpace)
		if key == "" || strings.IndexFunc(key, unicode.IsSpace) >= 0 {
			return nil, fmt.Errorf("database dsn: bad keyword %q", key)
		}
		s = strings.TrimLeftFunc(s[eq+1:], unicode.IsSpace)
		var val strings.Builder
		if strings.HasPrefix(s, "'") {
			s = s[1:]
			closed := false
			for len(s) > 0 && !closed {
				c := s[0]
				switch {
				case c == '\\' && len(s) > 1:
					val.WriteByte(s[1])
					s = s[2:]
				case c == '\'':
					closed = true
					s = s[1:]
				default:
					val.WriteByte(c)
					s = s[1:]
				}
			}
			if !closed {
				return nil, fmt.Errorf("database dsn: unterminated quoted value for %q", key)
			}
			if s != "" && !unicode.IsSpace(rune(s[0])) {
				return nil, fmt.Errorf("database dsn: no space after the value of %q", key)
			}
		} else {
			for len(s) > 0 && !unicode.IsSpace(rune(s[0])) {
				if s[0] == '\\' && len(s) > 1 {
					val.WriteByte(s[1])
					s = s[2:]
					continue
				}
				val.WriteByte(s[0])
				s = s[1:]
			}
		}
		kv[key] = val.String()
	}
}
