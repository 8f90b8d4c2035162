package eniconfig

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// apiServer is a fake Kubernetes API server over real HTTP for nodes and ENIConfigs: it answers lists and
// chunked watch streams in the API's JSON with resourceVersions, as client-go's reflector expects, and a test
// can take it away like a real server going down.
type apiServer struct {
	srv *httptest.Server

	mu       sync.Mutex
	rv       int
	objects  map[string]map[string]map[string]any // resource → name → object
	events   []event
	changed  chan struct{} // closed and replaced on every change
	selector map[string]string
}

type event struct {
	rv       int
	resource string
	kind     string // ADDED, MODIFIED, DELETED
	object   map[string]any
}

// The paths and kinds of the two resources.
var served = map[string]struct{ resource, apiVersion, kind string }{
	"/api/v1/nodes": {"nodes", "v1", "Node"},
	"/apis/crd.k8s.amazonaws.com/v1alpha1/eniconfigs": {"eniconfigs", "crd.k8s.amazonaws.com/v1alpha1", "ENIConfig"},
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	a := &apiServer{objects: map[string]map[string]map[string]any{}, changed: make(chan struct{}), selector: map[string]string{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.stop)
	return a
}

// stop takes the server away: open watch streams break and new connections are refused.
func (a *apiServer) stop() {
	a.srv.CloseClientConnections()
	a.srv.Close()
}

// kubeconfig writes a kubeconfig file that points at the server.
func (a *apiServer) kubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	conf := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: agent, user: {token: fake}}]
contexts: [{name: fake, context: {cluster: fake, user: agent}}]
current-context: fake
`, a.srv.URL)
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// put creates or replaces an object (its metadata.name set to name) and tells the watchers.
func (a *apiServer) put(resource, name string, obj map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.objects[resource] == nil {
		a.objects[resource] = map[string]map[string]any{}
	}
	kind := "MODIFIED"
	if _, ok := a.objects[resource][name]; !ok {
		kind = "ADDED"
	}
	a.rv++
	obj = withMeta(resource, obj, name, a.rv)
	a.objects[resource][name] = obj
	a.notify(event{rv: a.rv, resource: resource, kind: kind, object: obj})
}

// remove deletes an object and tells the watchers.
func (a *apiServer) remove(resource, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	obj, ok := a.objects[resource][name]
	if !ok {
		return
	}
	delete(a.objects[resource], name)
	a.rv++
	a.notify(event{rv: a.rv, resource: resource, kind: "DELETED", object: withMeta(resource, obj, name, a.rv)})
}

func (a *apiServer) notify(e event) {
	a.events = append(a.events, e)
	close(a.changed)
	a.changed = make(chan struct{})
}

// fieldSelector is the last field selector a client sent for a resource.
func (a *apiServer) fieldSelector(resource string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.selector[resource]
}

func withMeta(resource string, obj map[string]any, name string, rv int) map[string]any {
	var kind struct{ apiVersion, kind string }
	for _, s := range served {
		if s.resource == resource {
			kind.apiVersion, kind.kind = s.apiVersion, s.kind
		}
	}
	out := map[string]any{}
	for k, v := range obj {
		out[k] = v
	}
	meta := map[string]any{}
	if m, ok := obj["metadata"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	meta["name"], meta["resourceVersion"] = name, strconv.Itoa(rv)
	out["metadata"], out["apiVersion"], out["kind"] = meta, kind.apiVersion, kind.kind
	return out
}

func (a *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	s, ok := served[r.URL.Path]
	if !ok || r.Method != http.MethodGet {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	match := func(map[string]any) bool { return true }
	if sel := q.Get("fieldSelector"); sel != "" {
		name, ok := strings.CutPrefix(sel, "metadata.name=")
		if !ok {
			http.Error(w, "unsupported field selector "+sel, http.StatusBadRequest)
			return
		}
		match = func(o map[string]any) bool { return o["metadata"].(map[string]any)["name"] == name }
	}
	a.mu.Lock()
	a.selector[s.resource] = q.Get("fieldSelector")
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		from, _ := strconv.Atoi(q.Get("resourceVersion"))
		a.watch(w, r, s.resource, from, match)
		return
	}
	a.mu.Lock()
	items := []any{}
	for _, o := range a.objects[s.resource] {
		if match(o) {
			items = append(items, o)
		}
	}
	list := map[string]any{"apiVersion": s.apiVersion, "kind": s.kind + "List",
		"metadata": map[string]any{"resourceVersion": strconv.Itoa(a.rv)}, "items": items}
	a.mu.Unlock()
	_ = json.NewEncoder(w).Encode(list)
}

// watch streams the resource's events after resourceVersion from until the client or the server goes.
func (a *apiServer) watch(w http.ResponseWriter, r *http.Request, resource string, from int, match func(map[string]any) bool) {
	enc := json.NewEncoder(w)
	flusher := w.(http.Flusher)
	flusher.Flush()
	for {
		a.mu.Lock()
		var out []event
		for _, e := range a.events {
			if e.rv > from && e.resource == resource && match(e.object) {
				out = append(out, e)
			}
		}
		changed := a.changed
		from = a.rv
		a.mu.Unlock()
		for _, e := range out {
			if err := enc.Encode(map[string]any{"type": e.kind, "object": e.object}); err != nil {
				return
			}
		}
		flusher.Flush()
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}

func node(labels, annotations map[string]any) map[string]any {
	return map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}}
}

func eniConfig(subnet string, groups ...any) map[string]any {
	spec := map[string]any{"subnet": subnet}
	if len(groups) > 0 {
		spec["securityGroups"] = groups
	}
	return map[string]any{"spec": spec}
}
