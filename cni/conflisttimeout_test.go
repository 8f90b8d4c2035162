package cni

import (
	"strings"
	"testing"
	"time"
)

func TestConflistTimeoutIsTheEniwirePluginsOrTheDefault(t *testing.T) {
	for _, c := range []struct {
		conflist string
		want     time.Duration
		err      string
	}{
		{`{"plugins":[{"type":"eniwire","timeout":"45s"},{"type":"portmap"}]}`, 45 * time.Second, ""},
		{`{"plugins":[{"type":"portmap","timeout":"1s"},{"type":"eniwire"}]}`, DefaultTimeout, ""},
		{`{"plugins":[{"type":"eniwire","timeout":"-3s"}]}`, 0, `timeout "-3s" is not a positive duration`},
		{`{"plugins":[{"type":"eniwire","timeout":"soon"}]}`, 0, `timeout "soon" is not a positive duration`},
		{`{"plugins":[{"type":"bridge"}]}`, 0, "no plugin of type eniwire"},
		{`{"plugins":`, 0, "not valid JSON"},
	} {
		got, err := ConflistTimeout([]byte(c.conflist))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one containing %q", c.conflist, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %v, %v; want %v", c.conflist, got, err, c.want)
		}
	}
}
