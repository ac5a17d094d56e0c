// Package output prints mcpctl's results: tables for people, tab-separated
// rows for scripts, and the API's own objects as JSON or YAML.
//
// The rules follow cli/cli:
//
//   - On a terminal, table and wide print an aligned table with a header, a
//     coloured status (never when NO_COLOR is set) and ages as people read
//     them ("12s ago", "3m ago", "never").
//   - Piped, they print one line per row, cells separated by a single tab,
//     no header, no colour, and times in RFC 3339 (UTC), so that cut, awk and
//     sort work on them without skipping a first line.
//   - json prints the API's objects indented with their snake_case names:
//     one object for one server, an array for a list ("[]" when empty).
//   - yaml prints the same objects through their JSON form, so the keys are
//     the JSON names.
//   - An empty list in table or wide says so on stderr ("No servers found")
//     and prints nothing on stdout.
package output
