package agent_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/eniwire/eniwire/controller/api"
)

// TestGCTouchesOnlyTheAssignmentsOfItsNetwork: a runtime's GC names the attachments valid for one network
// (the conflist's name). Another network that also uses eniwire (under Multus, say) has attachments the
// runtime does not list in that GC: they are not touched.
func TestGCTouchesOnlyTheAssignmentsOfItsNetwork(t *testing.T) {
	s := serve(t, 200)
	for _, body := range []string{
		`{"containerID":"c-a","ifName":"eth0","network":"net-a","netns":"/nonexistent/netns/a"}`,
		`{"containerID":"c-a2","ifName":"eth0","network":"net-a","netns":"/nonexistent/netns/a2"}`,
		`{"containerID":"c-b","ifName":"net1","network":"net-b","netns":"/nonexistent/netns/b"}`,
	} {
		if code, out := rawPost(t, s.sock, api.PathAssign, body); code != http.StatusOK {
			t.Fatalf("Assign %s = %d %s", body, code, out)
		}
	}
	code, out := rawPost(t, s.sock, api.PathGC, `{"network":"net-a","valid":[{"containerID":"c-a2","ifName":"eth0"}]}`)
	if code != http.StatusOK {
		t.Fatalf("GC = %d %s", code, out)
	}
	var resp api.GCResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Released) != 1 || resp.Released[0].ContainerID != "c-a" || resp.Released[0].Network != "net-a" {
		t.Fatalf("GC of net-a released %+v, want only c-a", resp.Released)
	}
	st := s.node.Snapshot()
	if st.Assignment("c-b", "net1") == nil || st.Assignment("c-a2", "eth0") == nil {
		t.Fatalf("GC of net-a touched what it must not: %+v", st.Assignments)
	}
}
