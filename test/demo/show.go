package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"
)

// screen prints the demo for a person: numbered sections, tables, indented command output, and a progress
// line that rewrites itself on a terminal.
type screen struct {
	w       io.Writer
	tty     bool
	section int
	start   time.Time
	inLine  bool // a progress line is on screen
}

func newScreen(w io.Writer) *screen {
	s := &screen{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
		s.tty = err == nil
	}
	return s
}

func (s *screen) endProgress() {
	if s.inLine {
		fmt.Fprintln(s.w)
		s.inLine = false
	}
}

// heading starts a section.
func (s *screen) heading(title string) {
	s.endProgress()
	s.section++
	fmt.Fprintf(s.w, "\n== %d. %s  [%s]\n", s.section, title, time.Since(s.start).Round(100*time.Millisecond))
}

// say prints one line of narration.
func (s *screen) say(format string, args ...any) {
	s.endProgress()
	fmt.Fprintf(s.w, "   "+format+"\n", args...)
}

// block prints a command's output indented, at most max lines.
func (s *screen) block(cmd, out string, max int) {
	s.endProgress()
	fmt.Fprintf(s.w, "   $ %s\n", cmd)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i, l := range lines {
		if i == max {
			fmt.Fprintf(s.w, "     ... (%d more lines)\n", len(lines)-max)
			break
		}
		fmt.Fprintf(s.w, "     %s\n", l)
	}
}

// table prints rows under a header, aligned.
func (s *screen) table(header []string, rows [][]string) {
	s.endProgress()
	tw := tabwriter.NewWriter(s.w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "   %s\n", strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintf(tw, "   %s\n", strings.Join(r, "\t"))
	}
	tw.Flush()
}

// progress shows a status on one line: rewritten in place on a terminal, a new line only when it changes
// otherwise.
func (s *screen) progress(last *string, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if line == *last {
		return
	}
	*last = line
	if s.tty {
		fmt.Fprintf(s.w, "\r\033[K   %s", line)
		s.inLine = true
		return
	}
	fmt.Fprintf(s.w, "   %s\n", line)
}
