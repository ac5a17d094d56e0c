package schema

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
)

// driverScheme is the URL scheme under which golang-migrate registers its pgx
// v5 database driver.
const driverScheme = "pgx5"

// driverURL turns a connection string as users write it, a postgres:// or
// postgresql:// URL or a libpq key=value DSN, into the pgx5:// URL that
// golang-migrate's pgx v5 driver opens. A pgx5:// URL is taken as it is.
func driverURL(conn string) (string, error) {
	conn = strings.TrimSpace(conn)
	if conn == "" {
		return "", errors.New("database url is empty")
	}
	for _, prefix := range []string{"postgresql://", "postgres://", "pgx5://"} {
		if len(conn) >= len(prefix) && strings.EqualFold(conn[:len(prefix)], prefix) {
			return driverScheme + "://" + conn[len(prefix):], nil
		}
	}
	if i := strings.Index(conn, "://"); i >= 0 && !strings.Contains(conn[:i], "=") {
		return "", fmt.Errorf("database url scheme %q is not postgres, postgresql or pgx5", conn[:i])
	}
	kv, err := parseDSN(conn)
	if err != nil {
		return "", err
	}
	u := url.URL{Scheme: driverScheme, Path: "/"}
	q := url.Values{}
	user, hasUser := kv["user"]
	password, hasPassword := kv["password"]
	switch {
	case hasUser && hasPassword:
		u.User = url.UserPassword(user, password)
	case hasUser:
		u.User = url.User(user)
	case hasPassword:
		q.Set("password", password)
	}
	if db, ok := kv["dbname"]; ok {
		u.Path = "/" + db
	}
	for k, v := range kv {
		switch k {
		case "user", "password", "dbname":
		default:
			// host and port go in the query too: it holds socket directories
			// and multi-host lists that an authority cannot.
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
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
			return nil, fmt.Errorf("database dsn: missing %q after %q", "=", s)
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
