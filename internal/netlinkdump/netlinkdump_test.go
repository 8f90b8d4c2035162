package netlinkdump_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/eniwire/eniwire/internal/netlinkdump"
)

// dumps answers with the errors given, one per call, then with "done" and no error.
type dumps struct {
	errs  []error
	calls int
}

func (d *dumps) dump() (string, error) {
	d.calls++
	if d.calls <= len(d.errs) {
		return fmt.Sprintf("partial %d", d.calls), d.errs[d.calls-1]
	}
	return "done", nil
}

func TestRetryTakesAnInterruptedDumpAgain(t *testing.T) {
	interrupted := fmt.Errorf("listing links: %w", netlink.ErrDumpInterrupted)
	for _, tc := range []struct {
		name      string
		errs      []error
		want      string
		wantErr   error
		wantCalls int
	}{
		{"a dump that is not interrupted is taken once", nil, "done", nil, 1},
		{"a dump interrupted once is taken again", []error{interrupted}, "done", nil, 2},
		{"another error is returned at once", []error{syscall.EPERM}, "partial 1", syscall.EPERM, 1},
		{"a dump interrupted every time gives up after Tries", repeat(interrupted, netlinkdump.Tries),
			fmt.Sprintf("partial %d", netlinkdump.Tries), netlink.ErrDumpInterrupted, netlinkdump.Tries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &dumps{errs: tc.errs}
			got, err := netlinkdump.Retry(d.dump)
			if got != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || d.calls != tc.wantCalls {
				t.Errorf("Retry = %q, %v after %d calls; want %q, %v after %d", got, err, d.calls, tc.want, tc.wantErr, tc.wantCalls)
			}
		})
	}
}

func repeat(err error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}
