package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/eniwire/eniwire/test/ec2sim"
	"github.com/eniwire/eniwire/test/k8s/cluster"
	"github.com/eniwire/eniwire/test/vpcfabric"
)

const imdsHopLimitCase = "4f. IMDS hop limit 1: a pod gets no token, its node and a hostNetwork pod do; at 2 the pod does (SNAT, external SNAT)"

// pausePod is an agnhost pause pod on node, in the node's network namespace when hostNetwork.
func pausePod(name, node string, hostNetwork bool) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"case": "imds"}},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			HostNetwork:                   hostNetwork,
			Containers:                    []corev1.Container{{Name: "pause", Image: cluster.AgnhostImage, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"pause"}}},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
		},
	}
}

// imdsHopLimit sets node 1's HttpPutResponseHopLimit with ModifyInstanceMetadataOptions, as an operator
// would, and asks IMDS for a token from the node, a hostNetwork pod and a pod, first with the agent's SNAT
// (the pod's request is masqueraded to the node's address, conntrack shows it) and then with
// AWS_VPC_K8S_CNI_EXTERNALSNAT=true (the request leaves by the pod's ENI as the pod; no translation).
func (s *suite) imdsHopLimit(t *testing.T) string {
	ctx := context.Background()
	n := s.node1
	nodeNS := n.Netns.NetnsPath
	for _, p := range []*corev1.Pod{pausePod("imds-pod", n.Name, false), pausePod("imds-host", n.Name, true)} {
		mustCreate(t, "Pod "+p.Name, s.c.Client.CoreV1().Pods(ns).Create, p)
	}
	t.Cleanup(func() {
		_ = s.c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "case=imds"})
	})
	pods, err := waitPodsReady(ctx, s.c, ns, "case=imds", 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	podIP := ""
	for _, p := range pods {
		if p.Name == "imds-pod" {
			podIP = p.Status.PodIP
		}
	}
	api := ec2.New(ec2.Options{Region: s.c.Sim.Config().Region, BaseEndpoint: aws.String(vpcfabric.EC2URL),
		Credentials: credentials.NewStaticCredentialsProvider(ec2sim.TestAccessKey, ec2sim.TestSecretKey, ""),
		HTTPClient:  vpcfabric.HTTPClient(nodeNS)})
	setHopLimit := func(hops int32) {
		t.Helper()
		if _, err := api.ModifyInstanceMetadataOptions(ctx, &ec2.ModifyInstanceMetadataOptionsInput{
			InstanceId: aws.String(n.Instance.ID), HttpPutResponseHopLimit: aws.Int32(hops)}); err != nil {
			t.Fatalf("setting the hop limit to %d: %v", hops, err)
		}
	}
	t.Cleanup(func() { setHopLimit(2) })

	var figures []string
	for _, mode := range []struct {
		name, externalSNAT string
	}{{"SNAT", "false"}, {"external SNAT", "true"}} {
		if mode.externalSNAT == "true" {
			s.setExternalSNAT(t, "true")
			t.Cleanup(func() { s.setExternalSNAT(t, "false") })
		}
		podNS, err := podNetns(ctx, n, ns, "imds-pod")
		if err != nil {
			t.Fatal(err)
		}
		hostNS, err := podNetns(ctx, n, ns, "imds-host")
		if err != nil {
			t.Fatal(err)
		}
		setHopLimit(1)
		for _, who := range []struct{ name, nsPath string }{{"the node", nodeNS}, {"the hostNetwork pod", hostNS}} {
			if _, err := tokenAndInstanceID(ctx, who.nsPath, n.Instance.ID); err != nil {
				t.Errorf("%s, hop limit 1: %s: %v", mode.name, who.name, err)
			}
		}
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		tok, podErr := vpcfabric.IMDSToken(short, podNS)
		cancel()
		if podErr == nil {
			t.Errorf("%s, hop limit 1: the pod got token %q, want none", mode.name, tok)
		}
		translated, err := imdsTranslated(ctx, n, podIP)
		if err != nil {
			t.Fatal(err)
		}
		if want := mode.externalSNAT == "false"; translated != want {
			t.Errorf("%s: the pod's IMDS request translated to the node's address: %v, want %v", mode.name, translated, want)
		}
		setHopLimit(2)
		_, err2 := tokenAndInstanceID(ctx, podNS, n.Instance.ID)
		if err2 != nil {
			t.Errorf("%s, hop limit 2: the pod: %v", mode.name, err2)
		}
		figures = append(figures, fmt.Sprintf("%s (pod's request masqueraded: %v): hop limit 1: pod %s, node and hostNetwork pod a token; hop limit 2: pod %s",
			mode.name, translated, tokenWord(podErr), tokenWord(err2)))
		if translated { // the next mode's check starts from no translated entry
			if out, err := n.Netns.Command(ctx, "conntrack", "-D", "-s", podIP, "-d", "169.254.169.254").CombinedOutput(); err != nil {
				t.Fatalf("clearing the pod's IMDS conntrack entries: %v: %s", err, out)
			}
		}
	}
	return strings.Join(figures, "; ")
}

// tokenAndInstanceID gets a token from inside nsPath and reads the instance id with it.
func tokenAndInstanceID(ctx context.Context, nsPath, want string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tok, err := vpcfabric.IMDSToken(ctx, nsPath)
	if err != nil {
		return "", fmt.Errorf("no token: %w", err)
	}
	id, err := vpcfabric.IMDSMetadata(ctx, nsPath, tok, "instance-id")
	if err != nil || id != want {
		return "", fmt.Errorf("instance-id %q, %v; want %s", id, err, want)
	}
	return tok, nil
}

// tokenWord says whether a token request succeeded, for the figure.
func tokenWord(err error) string {
	if err != nil {
		return "no token"
	}
	return "a token"
}

// imdsTranslated says whether node n's conntrack holds a flow from podIP to IMDS answered to another
// address (the node's: masqueraded).
func imdsTranslated(ctx context.Context, n *cluster.Node, podIP string) (bool, error) {
	out, err := n.Netns.Command(ctx, "conntrack", "-L", "-p", "tcp", "-s", podIP, "-d", "169.254.169.254").Output()
	if err != nil {
		return false, fmt.Errorf("listing the node's conntrack entries from %s to IMDS: %w", podIP, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "src="+podIP) && strings.Contains(line, "dst="+n.Instance.PrimaryIP) {
			return true, nil
		}
	}
	return false, nil
}

// setExternalSNAT sets AWS_VPC_K8S_CNI_EXTERNALSNAT on the agents and waits for the rollout. External SNAT
// hands the Service CIDR to the host stack (ENIWIRE_SERVICE_CIDRS), so Services keep working meanwhile.
func (s *suite) setExternalSNAT(t *testing.T, v string) {
	t.Helper()
	cidrs := ""
	if v == "true" {
		cidrs = cluster.ServiceCIDR
	}
	s.setAgentEnv(t, "AWS_VPC_K8S_CNI_EXTERNALSNAT="+v, "ENIWIRE_SERVICE_CIDRS="+cidrs)
}
