// Package bearer reads the token of an Authorization header of the Bearer
// scheme (RFC 6750), for the API's keys and tokens and for the Durable
// Streams wake callbacks alike.
package bearer

import "strings"

// Token returns the token of an Authorization header value of the Bearer
// scheme, whose name is case-insensitive (RFC 9110 §11.1: "bearer" and
// "BEARER" are "Bearer"). ok is false for another scheme or no token.
func Token(authorization string) (token string, ok bool) {
	const scheme = "Bearer "
	if len(authorization) < len(scheme) || !strings.EqualFold(authorization[:len(scheme)], scheme) {
		return "", false
	}
	token = strings.TrimSpace(authorization[len(scheme):])
	return token, token != ""
}
