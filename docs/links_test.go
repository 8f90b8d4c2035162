package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's top directory, seen from this package's directory.
const repoRoot = ".."

// repoFiles lists the repository's files whose name ends in one of exts, as slash paths relative to the root.
func repoFiles(t *testing.T, exts ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != repoRoot && (strings.HasPrefix(name, ".") || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if slices.ContainsFunc(exts, func(ext string) bool { return strings.HasSuffix(path, ext) }) {
			rel, err := filepath.Rel(repoRoot, path)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	fence      = regexp.MustCompile("(?ms)^```.*?^```[^\n]*$")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	link       = regexp.MustCompile(`\]\(([^()\s]+)\)`)
	heading    = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$`)
)

// prose is a Markdown text without its code blocks and code spans, where link syntax means nothing.
func prose(md string) string {
	return inlineCode.ReplaceAllString(fence.ReplaceAllString(md, ""), "")
}

// anchors are the heading anchors GitHub gives a Markdown text: lower case, letters, digits, '-' and '_'
// kept, spaces to '-', everything else dropped; a repeated one gets -1, -2, ...
func anchors(md string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(md, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// Every relative link in the repository's Markdown (the README, docs/, test/README.md and the others) leads to
// a file inside the repository, and a link with an anchor to a heading of that file.
func TestEveryRelativeLinkResolvesInsideTheRepository(t *testing.T) {
	files := repoFiles(t, ".md")
	for _, must := range []string{"README.md", "docs/design.md", "docs/settings.md", "test/README.md"} {
		if !slices.Contains(files, must) {
			t.Fatalf("%s is missing (found %v)", must, files)
		}
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, file := range files {
		for _, m := range link.FindAllStringSubmatch(prose(read(t, file)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				abs := filepath.Join(root, filepath.Dir(filepath.FromSlash(file)), filepath.FromSlash(path))
				rel, err := filepath.Rel(root, abs)
				if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
					t.Errorf("%s: link %q leaves the repository", file, target)
					continue
				}
				if _, err := os.Stat(abs); err != nil {
					t.Errorf("%s: link %q: no such file in the repository (%s)", file, target, filepath.ToSlash(rel))
					continue
				}
				dest = filepath.ToSlash(rel)
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %q: an anchor into a file that is not Markdown", file, target)
				continue
			}
			if !anchors(read(t, dest))[anchor] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", file, target, dest, anchor)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d relative links; has the link syntax changed?", checked)
	}
	t.Logf("%d relative links in %d Markdown files resolve", checked, len(files))
}

// outsidePaths are the ways the tree once cited notes that live outside the repository. The EC2 facts the
// code relies on are in docs/ec2-facts.md, the design in docs/design.md.
var outsidePaths = []string{
	"../" + "shared",
	"shared/" + "reference",
	"reference/" + "ec2-api.md",
	"ec2-api.md " + "§",
	"reference/" + "prior-art",
	"prior-art-" + "aws-vpc-cni.md",
	"reference/" + "seed-issue",
	"DESIGN" + ".md",
}

var docPath = regexp.MustCompile(`\bdocs/[a-z0-9-]+\.md\b`)

// No source file or document cites a path outside the repository, and every docs/*.md a source file or
// document names exists.
func TestNoFileCitesAPathOutsideTheRepository(t *testing.T) {
	for _, file := range repoFiles(t, ".go", ".md", ".c", ".h", "Makefile", ".sh", ".yaml") {
		text := read(t, file)
		for _, p := range outsidePaths {
			if i := strings.Index(text, p); i >= 0 {
				line := strings.Count(text[:i], "\n") + 1
				t.Errorf("%s:%d cites %q, outside the repository; cite docs/ instead", file, line, p)
			}
		}
		for _, m := range docPath.FindAllStringIndex(text, -1) {
			name := text[m[0]:m[1]]
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(name))); err != nil {
				line := strings.Count(text[:m[0]], "\n") + 1
				t.Errorf("%s:%d names %s, which does not exist", file, line, name)
			}
		}
	}
}

// The README's first screen says what eniwire is and names the two commands a newcomer runs; .ci/run relies
// on the README naming `make test` as the test command.
func TestTheREADMEsFirstScreenNamesTheTwoCommands(t *testing.T) {
	lines := strings.Split(read(t, "README.md"), "\n")
	screen := strings.Join(lines[:min(25, len(lines))], "\n")
	for _, want := range []string{"Kubernetes on AWS", "`sudo make demo`", "`sudo make test`"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the README's first 25 lines do not contain %s:\n%s", want, screen)
		}
	}
	if n := len(lines); n > 200 {
		t.Errorf("the README has %d lines; it is the front door, the rest belongs in docs/", n)
	}
}
