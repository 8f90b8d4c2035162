package conformance

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Totals count results by status.
type Totals struct {
	Passed, Failed, Skipped, Other int
	Seconds                        float64
}

// Count totals the results.
func Count(results []Result) Totals {
	var t Totals
	for _, r := range results {
		t.Seconds += r.Seconds
		switch r.Status {
		case "passed":
			t.Passed++
		case "failed":
			t.Failed++
		case "skipped":
			t.Skipped++
		default:
			t.Other++
		}
	}
	return t
}

func (t Totals) String() string {
	s := fmt.Sprintf("%d passed, %d failed, %d skipped", t.Passed, t.Failed, t.Skipped)
	if t.Other > 0 {
		s += fmt.Sprintf(", %d other (interrupted, timed out, panicked)", t.Other)
	}
	return s + fmt.Sprintf("; %.0f spec-seconds", t.Seconds)
}

// WriteTable writes a Markdown table of the results sorted by name (test, result, seconds, and why a spec
// failed or skipped) under a heading, then the totals.
func WriteTable(w io.Writer, heading string, results []Result) error {
	results = slices.SortedFunc(slices.Values(results), func(a, b Result) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n| test | result | seconds | note |\n| --- | --- | ---: | --- |\n", heading)
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %.1f | %s |\n", cell(r.Name), r.Status, r.Seconds, cell(firstLine(r.Message, 160)))
	}
	fmt.Fprintf(&b, "\nTotals: %s\n\n", Count(results))
	_, err := io.WriteString(w, b.String())
	return err
}

func firstLine(s string, max int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
