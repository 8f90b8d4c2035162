package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/eniwire/eniwire/cni"
)

// checkRanges refuses values that parse but make no sense, each with the setting's flag and variable: a
// negative count or duration (a negative pool interval spins the pool loop, a negative cooldown hands a
// released IP straight to the next pod), a maximum reconcile interval under the interval, an unknown log level
// or format, and an ADD wait the plugin's timeout does not outlast (the plugin would give up on ADDs the agent
// is about to answer). A negative ADD wait stays valid: it means "answer no IP at once".
func (s *settings) checkRanges() []error {
	var errs []error
	for _, c := range []struct {
		flag string
		v    int
	}{
		{"warm-eni-target", s.warmENI}, {"warm-ip-target", s.warmIP}, {"minimum-ip-target", s.minIP},
		{"max-eni", s.maxENI}, {"max-pods", s.maxPods}, {"warm-prefix-target", s.warmPrefix},
	} {
		if c.v < 0 {
			errs = append(errs, fmt.Errorf("--%s (%s): %d is negative (0 means unset)", c.flag, envOf(c.flag), c.v))
		}
	}
	for _, c := range []struct {
		flag string
		v    time.Duration
	}{
		{"ip-cooldown-period", s.cooldown}, {"reconcile-interval", s.reconcile}, {"max-reconcile-interval", s.maxReconcile},
		{"orphan-sweep-interval", s.orphanSweep}, {"pool-interval", s.poolInterval}, {"release-delay", s.releaseDelay},
		{"gc-grace", s.gcGrace}, {"start-jitter", s.jitter},
	} {
		if c.v < 0 {
			errs = append(errs, fmt.Errorf("--%s (%s): %s is negative (0 means the default)", c.flag, envOf(c.flag), c.v))
		}
	}
	if s.reconcile > 0 && s.maxReconcile > 0 && s.maxReconcile < s.reconcile {
		errs = append(errs, fmt.Errorf("--max-reconcile-interval (ENIWIRE_MAX_RECONCILE_INTERVAL) %s is under --reconcile-interval (ENIWIRE_RECONCILE_INTERVAL) %s", s.maxReconcile, s.reconcile))
	}
	if s.clockFactor < 0 {
		errs = append(errs, fmt.Errorf("--clock-factor (ENIWIRE_CLOCK_FACTOR): %g is negative", s.clockFactor))
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(s.logLevel)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level (ENIWIRE_LOG_LEVEL): %q is not debug, info, warn or error", s.logLevel))
	}
	if s.logFormat != "json" && s.logFormat != "text" {
		errs = append(errs, fmt.Errorf("--log-format (ENIWIRE_LOG_FORMAT): %q is not json or text", s.logFormat))
	}
	if err := s.checkAddWait(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkAddWait: the plugin's timeout (the conflist the agent installs, or the plugin's default when it installs
// none) must exceed the ADD wait by cni.SetUpMargin.
func (s *settings) checkAddWait() error {
	timeout, from := cni.DefaultTimeout, "the plugin's default timeout"
	if s.cniBinDir != "" && s.cniConflist != "" {
		b, err := os.ReadFile(s.cniConflist)
		switch {
		case errors.Is(err, os.ErrNotExist):
			// Refused where the install reads it; the default stands for this check.
		case err != nil:
			return fmt.Errorf("--cni-conflist (ENIWIRE_CNI_CONFLIST): %w", err)
		default:
			if timeout, err = cni.ConflistTimeout(b); err != nil {
				return fmt.Errorf("--cni-conflist (ENIWIRE_CNI_CONFLIST) %s: %w", s.cniConflist, err)
			}
			from = "the timeout of " + s.cniConflist
		}
	}
	if s.addWait+cni.SetUpMargin > timeout {
		return fmt.Errorf("--add-wait (ENIWIRE_ADD_WAIT) %s leaves the plugin no time to set the pod up: %s is %s, and an ADD needs %s beyond its wait; "+
			"lower the wait or raise the conflist's \"timeout\"", s.addWait, from, timeout, cni.SetUpMargin)
	}
	return nil
}

// envOf is the environment variable of a setting's flag.
func envOf(flag string) string {
	for _, s := range table {
		if s.flag == flag {
			return s.env
		}
	}
	return ""
}
