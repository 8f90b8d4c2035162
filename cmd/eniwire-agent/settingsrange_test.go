package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNonsensicalSettingsAreRefusedNamingThem: values that parse but make no sense stop the agent at start
// with a message naming the setting (issue 36 item 21); the defaults and a negative ADD wait (answer at once)
// stay valid.
func TestNonsensicalSettingsAreRefusedNamingThem(t *testing.T) {
	for _, s := range table {
		t.Setenv(s.env, "") // restored after the test
		os.Unsetenv(s.env)
	}
	conflist := func(timeout string) string {
		p := filepath.Join(t.TempDir(), "10-eniwire.conflist")
		body := `{"cniVersion":"1.0.0","name":"eniwire","plugins":[{"type":"eniwire","timeout":"` + timeout + `"}]}`
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		args []string
		want string // "" when valid
	}{
		{nil, ""},
		{[]string{"-add-wait=-1s"}, ""},
		{[]string{"-pool-interval=-5s"}, "--pool-interval (ENIWIRE_POOL_INTERVAL): -5s is negative"},
		{[]string{"-ip-cooldown-period=-1"}, "--ip-cooldown-period (IP_COOLDOWN_PERIOD): -1s is negative"},
		{[]string{"-release-delay=-1m"}, "--release-delay (ENIWIRE_RELEASE_DELAY)"},
		{[]string{"-max-pods=-3"}, "--max-pods (MAX_PODS): -3 is negative"},
		{[]string{"-warm-ip-target=-1"}, "--warm-ip-target (WARM_IP_TARGET): -1 is negative"},
		{[]string{"-warm-prefix-target=-2"}, "--warm-prefix-target (WARM_PREFIX_TARGET)"},
		{[]string{"-reconcile-interval=5m", "-max-reconcile-interval=1m"}, "--max-reconcile-interval (ENIWIRE_MAX_RECONCILE_INTERVAL) 1m0s is under --reconcile-interval"},
		{[]string{"-log-level=verbose"}, `--log-level (ENIWIRE_LOG_LEVEL): "verbose" is not debug, info, warn or error`},
		{[]string{"-log-format=yaml"}, `--log-format (ENIWIRE_LOG_FORMAT): "yaml" is not json or text`},
		{[]string{"-clock-factor=-2"}, "--clock-factor (ENIWIRE_CLOCK_FACTOR): -2 is negative"},
		{[]string{"-add-wait=25s"}, "--add-wait (ENIWIRE_ADD_WAIT) 25s leaves the plugin no time to set the pod up: the plugin's default timeout is 30s"},
		{[]string{"-add-wait=20s", "-cni-conflist=" + conflist("60s")}, ""},
		{[]string{"-add-wait=20s", "-cni-conflist=" + conflist("25s")}, "--add-wait (ENIWIRE_ADD_WAIT) 20s leaves the plugin no time to set the pod up: the timeout of "},
		{[]string{"-cni-conflist=" + conflist("never")}, `timeout "never" is not a positive duration`},
		{[]string{"-add-wait=21s", "-cni-bin-dir=", "-cni-conflist=" + conflist("25s")}, "the plugin's default timeout is 30s"},
	} {
		_, err := parseSettings(c.args)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want no error", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}
