package deploy

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerignore is .dockerignore's patterns with Docker's meaning: paths relative to the context root, * and ?
// within one path element, ** across elements, a pattern that matches a directory excludes all below it, and
// the last matching pattern wins (a leading ! re-includes).
type dockerignore []struct {
	re     *regexp.Regexp
	negate bool
}

func readDockerignore(t *testing.T) dockerignore {
	t.Helper()
	f, err := os.Open("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var d dockerignore
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.TrimSpace(sc.Text())
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(path.Clean(strings.TrimPrefix(p, "!")), "/")
		d = append(d, struct {
			re     *regexp.Regexp
			negate bool
		}{regexp.MustCompile("^" + globToRegexp(p) + "$"), neg})
	}
	return d
}

func globToRegexp(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}

func (d dockerignore) excluded(p string) bool {
	p = path.Clean(filepath.ToSlash(p))
	var candidates []string
	for q := p; q != "." && q != "/"; q = path.Dir(q) {
		candidates = append(candidates, q)
	}
	out := false
	for _, pat := range d {
		for _, c := range candidates {
			if pat.re.MatchString(c) {
				out = !pat.negate
				break
			}
		}
	}
	return out
}

// Every file the image's go build reads (sources, embedded BPF objects, go.mod, go.sum) is in the build
// context, and what the build never reads (the VCS, tests, the simulator) is kept out of it.
func TestTheDockerignoreKeepsEverythingTheBuildReads(t *testing.T) {
	d := readDockerignore(t)
	cmd := exec.Command("go", "list", "-deps", "-json", "./cmd/eniwire-agent", "./cmd/eniwire")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum"}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			Dir                                             string
			Module                                          *struct{ Path string }
			GoFiles, EmbedFiles, SFiles, OtherFiles, HFiles []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || p.Module.Path != "github.com/eniwire/eniwire" {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, list := range [][]string{p.GoFiles, p.EmbedFiles, p.SFiles, p.OtherFiles, p.HFiles} {
			for _, f := range list {
				needed = append(needed, filepath.Join(rel, f))
			}
		}
	}
	if len(needed) < 10 {
		t.Fatalf("go list found only %v", needed)
	}
	for _, f := range needed {
		if d.excluded(f) {
			t.Errorf(".dockerignore excludes %s, which the image's build reads", f)
		}
	}
	for _, f := range []string{".git/HEAD", "test/ec2sim/server.go", "cni/add_test.go", "deploy/helm/eniwire/values.yaml"} {
		if !d.excluded(f) {
			t.Errorf(".dockerignore lets %s into the build context, which the build never reads", f)
		}
	}
	t.Logf("%d files the build reads are all in the context", len(needed))
}
