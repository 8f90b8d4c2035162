package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/eniwire/eniwire/controller/api"
)

// PolicyReporter answers api.PathPolicy: the agent's NetworkPolicy watch (controller/policywatch). Its
// errors are *api.Error values (CodeNotFound, CodeBadRequest) or anything else (internal).
type PolicyReporter interface {
	PolicyReport(ctx context.Context, pod, flow string) (*api.PolicyReport, error)
}

// WithPolicy serves api.PathPolicy from p and everything else from h.
func WithPolicy(h http.Handler, p PolicyReporter, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathPolicy, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		out, err := p.PolicyReport(r.Context(), q.Get("pod"), q.Get("explain"))
		var ae *api.Error
		switch {
		case err == nil:
			reply(w, log, out, nil)
		case errors.As(err, &ae) && ae.Code == api.CodeNotFound:
			writeError(w, http.StatusNotFound, ae)
		case errors.As(err, &ae) && ae.Code == api.CodeBadRequest:
			writeError(w, http.StatusBadRequest, ae)
		default:
			reply(w, log, nil, err)
		}
	})
	mux.Handle("/", h)
	return mux
}
