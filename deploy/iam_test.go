package deploy

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/eniwire/eniwire/controller/ec2client"
	"github.com/eniwire/eniwire/controller/eni"
)

// stringOrList decodes IAM's "one string or a list of strings" fields.
type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = []string{one}
		return nil
	}
	var many []string
	err := json.Unmarshal(b, &many)
	*s = many
	return err
}

type iamStatement struct {
	Sid       string                                `json:"Sid"`
	Effect    string                                `json:"Effect"`
	Action    stringOrList                          `json:"Action"`
	Resource  stringOrList                          `json:"Resource"`
	Condition map[string]map[string]json.RawMessage `json:"Condition"`
}

func readPolicy(t *testing.T) []iamStatement {
	t.Helper()
	b, err := os.ReadFile("iam-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Version   string         `json:"Version"`
		Statement []iamStatement `json:"Statement"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("iam-policy.json: %v", err)
	}
	if p.Version != "2012-10-17" {
		t.Fatalf("policy Version %q, want 2012-10-17 (needed for policy variables and tag conditions)", p.Version)
	}
	return p.Statement
}

// condKeys lists a statement's condition keys.
func condKeys(s iamStatement) []string {
	var keys []string
	for _, kv := range s.Condition {
		for k := range kv {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// The policy allows exactly the EC2 actions the controller can call (the methods of ec2client.EC2API), so a
// call added to the controller without its permission fails here, not on a node in production.
func TestTheIAMPolicyAllowsExactlyTheEC2CallsTheControllerMakes(t *testing.T) {
	api := reflect.TypeFor[ec2client.EC2API]()
	want := map[string]bool{}
	for i := range api.NumMethod() {
		want["ec2:"+api.Method(i).Name] = true
	}
	got := map[string]bool{}
	for _, s := range readPolicy(t) {
		if s.Effect != "Allow" {
			continue
		}
		for _, a := range s.Action {
			if strings.Contains(a, "*") {
				t.Errorf("statement %s allows the wildcard action %s", s.Sid, a)
			}
			got[a] = true
		}
	}
	for a := range want {
		if !got[a] {
			t.Errorf("the controller calls %s but the policy does not allow it", a)
		}
	}
	for a := range got {
		if !want[a] && a != "ec2:CreateTags" {
			t.Errorf("the policy allows %s, which the controller never calls", a)
		}
	}
}

// Every action that changes an ENI is conditioned on eniwire's cluster tag: on the request for creation, on
// the resource for everything after, so a node can touch only ENIs that eniwire created for its cluster.
func TestTheIAMPolicyLetsANodeChangeOnlyENIsCarryingTheClusterTag(t *testing.T) {
	requestTag := "aws:RequestTag/" + eni.TagCluster
	resourceTag := "aws:ResourceTag/" + eni.TagCluster
	for _, s := range readPolicy(t) {
		t.Run("statement "+s.Sid, func(t *testing.T) {
			describeOnly := !slices.ContainsFunc(s.Action, func(a string) bool { return !strings.HasPrefix(a, "ec2:Describe") })
			if describeOnly {
				// Describe calls support no resource-level permissions: "*" is the only resource they take.
				if !slices.Equal(s.Resource, []string{"*"}) || len(s.Condition) != 0 {
					t.Errorf("describe statement has resources %v and conditions %v", s.Resource, s.Condition)
				}
				return
			}
			if slices.Contains(s.Resource, "*") {
				t.Fatalf("a mutating statement applies to every resource")
			}
			keys := condKeys(s)
			if len(keys) == 0 {
				t.Fatalf("a mutating statement has no condition")
			}
			for _, r := range s.Resource {
				if !strings.Contains(r, ":network-interface/") {
					continue
				}
				switch {
				case slices.Equal(s.Action, []string{"ec2:CreateNetworkInterface"}):
					if !slices.Contains(keys, requestTag) {
						t.Errorf("creating an ENI must require the request tag %s; conditions %v", requestTag, keys)
					}
				case slices.Equal(s.Action, []string{"ec2:CreateTags"}):
					if !slices.Contains(keys, requestTag) || !slices.Contains(keys, "ec2:CreateAction") {
						t.Errorf("tagging must be allowed only with CreateNetworkInterface and our tag; conditions %v", keys)
					}
				default:
					if !slices.Contains(keys, resourceTag) {
						t.Errorf("changing an existing ENI must require the resource tag %s; conditions %v", resourceTag, keys)
					}
				}
			}
		})
	}
}

// A node may put new ENIs only in the cluster's security groups: every statement that allows
// CreateNetworkInterface on security groups requires them in the cluster's VPC and tagged for the cluster,
// so a compromised node cannot give an ENI (and the addresses behind it) another workload's groups.
func TestTheIAMPolicyLetsANodeUseOnlyTheClustersSecurityGroups(t *testing.T) {
	clusterTag := "aws:ResourceTag/kubernetes.io/cluster/CLUSTER_NAME"
	covered := false
	for _, s := range readPolicy(t) {
		if s.Effect != "Allow" || !slices.Contains(s.Action, "ec2:CreateNetworkInterface") ||
			!slices.ContainsFunc(s.Resource, func(r string) bool { return strings.Contains(r, ":security-group/") }) {
			continue
		}
		covered = true
		keys := condKeys(s)
		if !slices.Contains(keys, clusterTag) || !slices.Contains(keys, "ec2:Vpc") {
			t.Errorf("statement %s allows security groups with conditions %v, want %s and ec2:Vpc", s.Sid, keys, clusterTag)
		}
	}
	if !covered {
		t.Error("no statement allows CreateNetworkInterface on security groups")
	}
}
