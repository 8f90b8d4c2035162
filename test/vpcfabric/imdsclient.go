package vpcfabric

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// IMDSToken asks IMDS for an IMDSv2 token from inside the namespace at nsPath, as curl -X PUT would. A token
// answer that expired on the way (its TTL is the instance's hop limit) never arrives: the caller sees ctx
// end.
func IMDSToken(ctx context.Context, nsPath string) (string, error) {
	return imdsCall(ctx, nsPath, http.MethodPut, "/latest/api/token", "X-aws-ec2-metadata-token-ttl-seconds", "60")
}

// IMDSMetadata reads one path under /latest/meta-data/ from inside the namespace at nsPath, with token (an
// empty token asks as IMDSv1).
func IMDSMetadata(ctx context.Context, nsPath, token, path string) (string, error) {
	if token == "" {
		return imdsCall(ctx, nsPath, http.MethodGet, "/latest/meta-data/"+path, "", "")
	}
	return imdsCall(ctx, nsPath, http.MethodGet, "/latest/meta-data/"+path, "X-aws-ec2-metadata-token", token)
}

func imdsCall(ctx context.Context, nsPath, method, path, header, value string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, IMDSURL+path, nil)
	if err != nil {
		return "", err
	}
	if header != "" {
		req.Header.Set(header, value)
	}
	resp, err := HTTPClient(nsPath).Do(req)
	if err != nil {
		return "", fmt.Errorf("IMDS %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("IMDS %s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("IMDS %s %s: HTTP %d", method, path, resp.StatusCode)
	}
	return string(b), nil
}
