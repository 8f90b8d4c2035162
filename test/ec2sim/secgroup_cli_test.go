package ec2sim

import (
	"strings"
	"testing"

	"github.com/eniwire/eniwire/internal/testenv"
)

// The AWS CLI (botocore, a client independent of the Go SDK) drives the security group actions, with the
// shorthands --protocol, --port, --cidr and --source-group that it turns into IpPermissions itself.
func TestTheAWSCLIManagesSecurityGroupRules(t *testing.T) {
	testenv.RequireTool(t, "aws")
	w := newWorld(t, nil)
	aws := w.awsCLI(t)
	create := func(name string) string {
		return aws("create-security-group", "--group-name", name, "--description", name+" group", "--vpc-id", DefaultVPC,
			"--query", "GroupId")
	}
	clients, db := create("db-clients"), create("db")
	if !reGroup.MatchString(clients) || !reGroup.MatchString(db) {
		t.Fatalf("created %q and %q", clients, db)
	}
	ingress := func() string {
		return aws("describe-security-groups", "--group-ids", db, "--query",
			"SecurityGroups[0].IpPermissions[].[IpProtocol,FromPort,ToPort,join(',',[IpRanges[].CidrIp,UserIdGroupPairs[].GroupId][])]")
	}

	if got := aws("authorize-security-group-ingress", "--group-id", db, "--protocol", "tcp", "--port", "5432",
		"--source-group", clients, "--query", "SecurityGroupRules[0].ReferencedGroupInfo.GroupId"); got != clients {
		t.Errorf("the authorized rule references %q, want %s", got, clients)
	}
	aws("authorize-security-group-ingress", "--group-id", db, "--protocol", "udp", "--port", "53-54", "--cidr", "10.0.0.0/16")
	aws("authorize-security-group-ingress", "--group-id", db, "--protocol", "tcp", "--port", "all", "--cidr", "10.9.0.0/16")
	want := strings.Join([]string{"tcp\t5432\t5432\t" + clients, "udp\t53\t54\t10.0.0.0/16", "tcp\t0\t65535\t10.9.0.0/16"}, "\n")
	if got := ingress(); got != want {
		t.Fatalf("ingress of %s:\n%s\nwant\n%s", db, got, want)
	}
	if got := aws("describe-security-groups", "--group-ids", clients, "--query", "SecurityGroups[0].IpPermissionsEgress[0].[IpProtocol,IpRanges[0].CidrIp]"); got != "-1\t0.0.0.0/0" {
		t.Errorf("egress of a new group = %q, want every protocol to 0.0.0.0/0", got)
	}

	run := w.awsCLIResult(t)
	for _, tc := range []struct {
		name, code string
		args       []string
	}{
		{"authorizing a rule twice", CodeInvalidPermissionDuplicate, []string{"authorize-security-group-ingress", "--group-id", db,
			"--protocol", "tcp", "--port", "5432", "--source-group", clients}},
		{"deleting a group a rule names", CodeDependencyViolation, []string{"delete-security-group", "--group-id", clients}},
		{"revoking a rule the group does not hold", CodeInvalidPermissionNotFound, []string{"revoke-security-group-ingress",
			"--group-id", db, "--protocol", "tcp", "--port", "5433", "--source-group", clients}},
		{"creating a group with a taken name", CodeInvalidGroupDuplicate, []string{"create-security-group", "--group-name", "db",
			"--description", "again", "--vpc-id", DefaultVPC}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.args...)
			if err == nil || !strings.Contains(out, "("+tc.code+")") {
				t.Fatalf("aws ec2 %v: %v: %s; want %s", tc.args, err, out, tc.code)
			}
		})
	}

	aws("revoke-security-group-ingress", "--group-id", db, "--protocol", "tcp", "--port", "5432", "--source-group", clients)
	if got := ingress(); strings.Contains(got, clients) {
		t.Errorf("after the revoke the ingress still names %s:\n%s", clients, got)
	}
	aws("delete-security-group", "--group-id", clients)
	if out, err := run("describe-security-groups", "--group-ids", clients); err == nil || !strings.Contains(out, "("+CodeInvalidGroupNotFound+")") {
		t.Errorf("the deleted group is still described: %v: %s", err, out)
	}
}
