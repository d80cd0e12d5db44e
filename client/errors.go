package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	tether "github.com/tetherhq/tether"
)

// responseError turns a non-2xx answer into a *tether.Error with the
// server's code and message. An answer that is not the protocol's error
// body (a proxy's page, say) gives code internal and the status only: raw
// bodies never reach error messages, where they could leak into logs or UIs.
func responseError(resp *http.Response) *tether.Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error *tether.ErrorInfo `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil && e.Error.Code != "" {
		return &tether.Error{Code: tether.Code(e.Error.Code), Message: e.Error.Message}
	}
	return &tether.Error{
		Code:    tether.CodeInternal,
		Message: fmt.Sprintf("server answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode)),
	}
}
