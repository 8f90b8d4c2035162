package cni

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("logLevel %q is not one of debug, info, warn, error", s)
	}
	return l, nil
}

// openLog returns the invocation's logger: JSON lines appended to conf.LogFile, or to stderr. stdout is never
// used, it carries the CNI result. A log file that cannot be opened falls back to stderr rather than failing
// the pod.
func openLog(conf *Conf, stderr io.Writer) (*slog.Logger, func()) {
	level, _ := parseLevel(conf.LogLevel)
	out, closeFn := stderr, func() {}
	if conf.LogFile != "" {
		if err := os.MkdirAll(filepath.Dir(conf.LogFile), 0o755); err == nil {
			if f, err := os.OpenFile(conf.LogFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o640); err == nil {
				out, closeFn = f, func() { _ = f.Close() }
			}
		}
	}
	h := slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level})
	return slog.New(h).With("plugin", "eniwire", "pid", os.Getpid()), closeFn
}
