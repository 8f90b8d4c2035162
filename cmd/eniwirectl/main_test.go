package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eniwire/eniwire/controller/journal"
)

func TestJournalPrintsAsTableAndJSON(t *testing.T) {
	dir := t.TempDir()
	s, st, err := journal.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.InstanceID = "i-0abc"
	st.ENIs = []journal.ENI{{OpID: "op1", ClientToken: "eniwire-op1", ID: "eni-1", State: journal.Attached, DeviceIndex: 1, IPs: []string{"10.0.0.5"}, LastError: "RequestLimitExceeded"}}
	st.Assignments = []journal.Assignment{{ContainerID: "0123456789abcdef", IfName: "eth0", PodNamespace: "default", PodName: "web", IP: "10.0.0.5", ENI: "eni-1", AssignedAt: time.Unix(0, 0)}}
	if err := s.Save(st); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, tc := range []struct {
		name, output string
		want         []string
	}{
		{"a table names the ENI op, its state and the pod", "table", []string{"op1", "attached", "RequestLimitExceeded", "default/web", "0123456789ab", "10.0.0.5"}},
		{"JSON carries the client token", "json", []string{`"clientToken": "eniwire-op1"`, `"podName": "web"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run([]string{"journal", "--state-dir", dir, "--output", tc.output}, &out); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Fatalf("output lacks %q:\n%s", w, out.String())
				}
			}
			if tc.output == "json" && !json.Valid(out.Bytes()) {
				t.Fatal("invalid JSON")
			}
		})
	}
	if err := run([]string{"journal", "--state-dir", dir, "--output", "yaml"}, &bytes.Buffer{}); err == nil {
		t.Fatal("--output yaml accepted")
	}
}
