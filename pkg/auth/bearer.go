package auth

import "strings"

// BearerToken returns the token of an Authorization header of the form
// "Bearer <token>" (the scheme is case-insensitive) and whether there was one.
func BearerToken(authorizationHeader string) (string, bool) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(authorizationHeader), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token := strings.TrimLeft(rest, " ")
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", false
	}
	return token, true
}
