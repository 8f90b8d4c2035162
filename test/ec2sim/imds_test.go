package ec2sim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

func imdsGet(t *testing.T, c *imds.Client, path string) (string, error) {
	t.Helper()
	out, err := c.GetMetadata(ctxT(t), &imds.GetMetadataInput{Path: path})
	if err != nil {
		return "", err
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	return string(b), err
}

func mustIMDS(t *testing.T, c *imds.Client, path string) string {
	t.Helper()
	v, err := imdsGet(t, c, path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return v
}

func TestIMDSAnswersTheInstancesIdentityFromLiveState(t *testing.T) {
	w := newWorld(t, nil)
	c := w.srv.IMDSClient(t, w.inst.ID)
	cases := map[string]string{
		"instance-id":                 w.inst.ID,
		"instance-type":               "m5.large",
		"placement/availability-zone": "us-west-2a",
		"local-ipv4":                  w.inst.PrimaryIP,
		"mac":                         w.inst.PrimaryMAC,
		"network/interfaces/macs":     w.inst.PrimaryMAC + "/",
		"network/interfaces/macs/" + w.inst.PrimaryMAC + "/device-number":          "0",
		"network/interfaces/macs/" + w.inst.PrimaryMAC + "/interface-id":           w.inst.PrimaryENI,
		"network/interfaces/macs/" + w.inst.PrimaryMAC + "/subnet-ipv4-cidr-block": "10.0.0.0/19",
		"network/interfaces/macs/" + w.inst.PrimaryMAC + "/vpc-ipv4-cidr-blocks":   "10.0.0.0/16",
		"network/interfaces/macs/" + w.inst.PrimaryMAC + "/subnet-id":              DefaultSubnetA,
		"network/interfaces/macs/" + w.inst.PrimaryMAC + "/vpc-id":                 DefaultVPC,
		"network/interfaces/macs/" + w.inst.PrimaryMAC + "/local-ipv4s":            w.inst.PrimaryIP,
	}
	for path, want := range cases {
		t.Run(path, func(t *testing.T) {
			if got := mustIMDS(t, c, path); got != want {
				t.Fatalf("%s = %q, want %q", path, got, want)
			}
		})
	}
	t.Run("missing keys are 404", func(t *testing.T) {
		for _, p := range []string{"no-such-key", "network/interfaces/macs/" + w.inst.PrimaryMAC + "/ipv4-prefix",
			"network/interfaces/macs/02:00:00:00:00:00/local-ipv4s"} {
			_, err := imdsGet(t, c, p)
			if err == nil || !strings.Contains(err.Error(), "StatusCode: 404") {
				t.Fatalf("GET %s: %v, want 404", p, err)
			}
		}
	})
	t.Run("the identity document names the region", func(t *testing.T) {
		region, err := c.GetRegion(ctxT(t), &imds.GetRegionInput{})
		if err != nil || region.Region != "us-west-2" {
			t.Fatalf("region = %+v, %v", region, err)
		}
		doc, err := c.GetInstanceIdentityDocument(ctxT(t), &imds.GetInstanceIdentityDocumentInput{})
		if err != nil || doc.InstanceID != w.inst.ID || doc.PrivateIP != w.inst.PrimaryIP || doc.AccountID != "111122223333" {
			t.Fatalf("document = %+v, %v", doc, err)
		}
	})
	// The SDK always fetches a token, so IMDSv2 enforcement is checked with plain HTTP.
	t.Run("a GET without a token is 401 and the token TTL is echoed", func(t *testing.T) {
		u := w.srv.IMDSURL(w.inst.ID)
		resp, err := http.Get(u + "/latest/meta-data/instance-id")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status = %d, want 401", resp.StatusCode)
		}
		req, _ := http.NewRequest(http.MethodPut, u+"/latest/api/token", nil)
		req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "21600")
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds") != "21600" {
			t.Fatalf("ttl header = %q", resp.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
		}
	})
}

func TestIMDSShowsAnAttachedENIAndItsIPsOnlyAfterTheLag(t *testing.T) {
	w := newWorld(t, nil)
	ctx := ctxT(t)
	const lag = 300 * time.Millisecond
	w.sim.Faults().SetIMDSLag(lag)
	c := w.srv.IMDSClient(t, w.inst.ID)

	ni, err := w.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(DefaultSubnetA),
		SecondaryPrivateIpAddressCount: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	eniID := *ni.NetworkInterface.NetworkInterfaceId
	mac := *ni.NetworkInterface.MacAddress
	attachedAt := time.Now()
	if _, err := w.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: &eniID,
		InstanceId: aws.String(w.inst.ID), DeviceIndex: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	macs := func() []string { return strings.Fields(mustIMDS(t, c, "network/interfaces/macs")) }
	// Answers that came back within the lag must not show the change (a loaded machine may be slower).
	if got := macs(); time.Since(attachedAt) < lag && slices.Contains(got, mac+"/") {
		t.Fatal("the new MAC is in IMDS before the lag passed")
	}
	waitFor(t, "the MAC in IMDS", func() bool { return slices.Contains(macs(), mac+"/") })
	if since := time.Since(attachedAt); since < lag {
		t.Fatalf("the MAC showed after %v, before the %v lag", since, lag)
	}
	base := "network/interfaces/macs/" + mac + "/"
	if got := mustIMDS(t, c, base+"interface-id"); got != eniID {
		t.Fatalf("interface-id = %q", got)
	}
	if got := mustIMDS(t, c, base+"device-number"); got != "1" {
		t.Fatalf("device-number = %q", got)
	}
	if got := strings.Fields(mustIMDS(t, c, base+"local-ipv4s")); len(got) != 3 || got[0] != *ni.NetworkInterface.PrivateIpAddress {
		t.Fatalf("local-ipv4s = %v", got)
	}

	assignedAt := time.Now()
	as, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: &eniID,
		SecondaryPrivateIpAddressCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	newIP := *as.AssignedPrivateIpAddresses[0].PrivateIpAddress
	if got := mustIMDS(t, c, base+"local-ipv4s"); time.Since(assignedAt) < lag && slices.Contains(strings.Fields(got), newIP) {
		t.Fatal("the new IP is in IMDS before the lag passed")
	}
	waitFor(t, "the new IP in IMDS", func() bool {
		return slices.Contains(strings.Fields(mustIMDS(t, c, base+"local-ipv4s")), newIP)
	})

	pf, err := w.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: &eniID, Ipv4PrefixCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the prefix in IMDS", func() bool {
		v, err := imdsGet(t, c, base+"ipv4-prefix")
		return err == nil && v == *pf.AssignedIpv4Prefixes[0].Ipv4Prefix
	})
}

func TestIMDSIdentityDocumentIsJSON(t *testing.T) {
	w := newWorld(t, nil)
	out, err := w.srv.IMDSClient(t, w.inst.ID).GetDynamicData(ctxT(t), &imds.GetDynamicDataInput{Path: "instance-identity/document"})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Content.Close()
	var doc map[string]any
	if err := json.NewDecoder(out.Content).Decode(&doc); err != nil || doc["instanceType"] != "m5.large" {
		t.Fatalf("document = %v, %v", doc, err)
	}
}

func TestIMDSBySourceAnswersTheInstanceThatHoldsTheCallersAddress(t *testing.T) {
	w := newWorld(t, nil)
	other, err := w.sim.AddInstance(InstanceSpec{Type: "m5.large", SubnetID: w.inst.SubnetID})
	if err != nil {
		t.Fatal(err)
	}
	h := w.sim.IMDSHandlerBySource()
	call := func(method, path, from, token string) (int, string) {
		r := httptest.NewRequest(method, "http://169.254.169.254"+path, nil)
		r.RemoteAddr = from + ":40000"
		if token != "" {
			r.Header.Set("X-aws-ec2-metadata-token", token)
		}
		if method == http.MethodPut {
			r.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code, rec.Body.String()
	}
	token := func(from string) string {
		code, tok := call(http.MethodPut, "/latest/api/token", from, "")
		if code != http.StatusOK {
			t.Fatalf("token from %s: HTTP %d", from, code)
		}
		return tok
	}
	for _, inst := range []Instance{w.inst, other} {
		t.Run("from the primary IP of "+inst.ID, func(t *testing.T) {
			code, body := call(http.MethodGet, "/latest/meta-data/instance-id", inst.PrimaryIP, token(inst.PrimaryIP))
			if code != http.StatusOK || body != inst.ID {
				t.Fatalf("instance-id = HTTP %d %q, want %s", code, body, inst.ID)
			}
		})
	}
	t.Run("a token issued to one instance is refused to another", func(t *testing.T) {
		code, _ := call(http.MethodGet, "/latest/meta-data/instance-id", other.PrimaryIP, token(w.inst.PrimaryIP))
		if code != http.StatusUnauthorized {
			t.Fatalf("HTTP %d, want 401", code)
		}
	})
	t.Run("an address no ENI holds is refused", func(t *testing.T) {
		if code, _ := call(http.MethodPut, "/latest/api/token", "192.0.2.7", ""); code != http.StatusForbidden {
			t.Fatalf("HTTP %d, want 403", code)
		}
	})
}
