package conformance

import (
	"encoding/xml"
	"fmt"
	"os"
	"strings"
)

// Result is one spec's outcome.
type Result struct {
	Name    string  // the spec's full text, e.g. "[sig-network] DNS should provide DNS for services [Conformance]"
	Status  string  // passed, failed, skipped (by the spec itself, with a reason) or another ginkgo state
	Seconds float64 // its run time
	Message string  // why it failed or skipped
}

// junitReport is the part of ginkgo's JUnit report read here.
type junitReport struct {
	Suites []struct {
		Cases []struct {
			Name    string  `xml:"name,attr"`
			Status  string  `xml:"status,attr"`
			Time    float64 `xml:"time,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// ReadJUnit reads the specs that ran from ginkgo's JUnit report: every "[It]" that was not filtered out, and
// any suite-level node (BeforeSuite, AfterSuite) that failed.
func ReadJUnit(path string) ([]Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep junitReport
	if err := xml.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	var out []Result
	for _, s := range rep.Suites {
		for _, c := range s.Cases {
			r := Result{Name: c.Name, Status: c.Status, Seconds: c.Time}
			switch {
			case c.Failure != nil:
				r.Message = c.Failure.Message
			case c.Error != nil:
				r.Message = c.Error.Message
			case c.Skipped != nil:
				r.Message = c.Skipped.Message
			}
			if r.Status == "skipped" && r.Message == "skipped" { // filtered out: a spec's own Skip gives a reason
				continue
			}
			if name, ok := strings.CutPrefix(r.Name, "[It] "); ok {
				r.Name = withoutLabels(name)
			} else if r.Status == "passed" || r.Status == "skipped" {
				continue
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// withoutLabels drops the list of labels ginkgo appends to a spec's name ("... [Conformance] [sig-network,
// Conformance]") when the name already carries each of them as a tag, as the Kubernetes suite's names do.
func withoutLabels(name string) string {
	i := strings.LastIndex(name, " [")
	if i < 0 || !strings.HasSuffix(name, "]") {
		return name
	}
	text := name[:i]
	for _, label := range strings.Split(name[i+2:len(name)-1], ", ") {
		if !strings.Contains(text, "["+label+"]") {
			return name
		}
	}
	return strings.TrimSpace(text)
}
