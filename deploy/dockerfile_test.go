package deploy

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/eniwire/eniwire/deploy/dockerfile"
)

// The repository's Dockerfile, parsed: no Docker engine runs here, so the tests read it and carry out its build
// stage's go build themselves.

func parseDockerfile(t *testing.T) (stages []dockerfile.Stage, text string) {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text = string(b)
	if stages, err = dockerfile.Parse(text); err != nil {
		t.Fatal(err)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a final stage", len(stages))
	}
	return stages, text
}

// shellWords splits a RUN line the way sh does for the simple quoting a Dockerfile uses.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// copyInstr is one COPY: its --from stage (empty: the build context), sources and destination.
type copyInstr struct {
	from    string
	sources []string
	dest    string
}

func copies(st dockerfile.Stage) []copyInstr {
	var out []copyInstr
	for _, in := range st.Instructions {
		if in.Cmd != "COPY" && in.Cmd != "ADD" {
			continue
		}
		var c copyInstr
		var rest []string
		for _, w := range strings.Fields(in.Args) {
			if v, ok := strings.CutPrefix(w, "--from="); ok {
				c.from = v
			} else if !strings.HasPrefix(w, "--") {
				rest = append(rest, w)
			}
		}
		c.sources, c.dest = rest[:len(rest)-1], rest[len(rest)-1]
		out = append(out, c)
	}
	return out
}

func goModVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+(?:\.\d+)?)\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

func TestTheDockerfileBuilderIsPinnedToGoModsGoVersion(t *testing.T) {
	stages, text := parseDockerfile(t)
	m := regexp.MustCompile(`^golang:(\d+\.\d+\.\d+)-bookworm(@sha256:[0-9a-f]{64})?$`).FindStringSubmatch(stages[0].Base)
	if m == nil {
		t.Fatalf("builder %q is not pinned as golang:<major.minor.patch>-bookworm[@sha256:<digest>]", stages[0].Base)
	}
	if want := goModVersion(t); m[1] != want {
		t.Errorf("builder Go %s, go.mod asks for %s", m[1], want)
	}
	if m[2] == "" && !strings.Contains(text, "release pipeline") {
		t.Errorf("the builder has no digest and the Dockerfile does not say where it comes from")
	}
	env := stageEnv(stages[0])
	if env["CGO_ENABLED"] != "0" || env["GOTOOLCHAIN"] != "local" {
		t.Errorf("build stage env %v, want CGO_ENABLED=0 and GOTOOLCHAIN=local", env)
	}
}

func stageEnv(st dockerfile.Stage) map[string]string {
	env := map[string]string{}
	for _, in := range st.Instructions {
		if in.Cmd == "ENV" {
			for _, kv := range strings.Fields(in.Args) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					env[k] = v
				}
			}
		}
	}
	return env
}

func TestTheFinalImageIsDistrolessStaticRunningTheAgentAsRoot(t *testing.T) {
	stages, _ := parseDockerfile(t)
	final := stages[len(stages)-1]
	base, tag, _ := strings.Cut(strings.SplitN(final.Base, "@", 2)[0], ":")
	if base != "gcr.io/distroless/static-debian12" {
		t.Errorf("final image %q, want gcr.io/distroless/static-debian12", final.Base)
	}
	if strings.Contains(tag, "nonroot") {
		t.Errorf("final image tag %q runs as nobody; the agent needs root for its capabilities", tag)
	}
	var entrypoint []string
	for _, in := range final.Instructions {
		switch in.Cmd {
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(in.Args), &entrypoint); err != nil {
				t.Errorf("ENTRYPOINT %s is not in exec form (no shell in distroless): %v", in.Args, err)
			}
		case "USER":
			if in.Args != "0:0" && in.Args != "0" && in.Args != "root" {
				t.Errorf("USER %s; the agent runs as root", in.Args)
			}
		case "RUN":
			t.Errorf("RUN in the final stage: distroless has no shell")
		}
	}
	if !slices.Equal(entrypoint, []string{"/usr/local/bin/eniwire-agent"}) {
		t.Errorf("ENTRYPOINT %v, want the agent", entrypoint)
	}
}

// The build stage's go build, run here as the Dockerfile runs it, produces every file the final stage copies
// from it, as static binaries stamped with the version; every file copied from the build context exists and
// is not excluded by .dockerignore.
func TestEveryPathTheDockerfileCopiesExistsInTheBuild(t *testing.T) {
	stages, _ := parseDockerfile(t)
	build, final := stages[0], stages[len(stages)-1]
	out := t.TempDir()
	const version = "v0.0.0-dockerfile-test"
	ran := false
	for _, in := range build.Instructions {
		if in.Cmd != "RUN" || !strings.HasPrefix(in.Args, "go build") {
			continue
		}
		words := shellWords(in.Args)
		var args []string
		for i := 2; i < len(words); i++ {
			w := words[i]
			switch {
			case w == "-o":
				if !strings.HasPrefix(words[i+1], "/out/") {
					t.Fatalf("go build -o %s: the test maps /out/ only", words[i+1])
				}
				args = append(args, "-o", out+"/"+strings.TrimPrefix(words[i+1], "/out/"))
				i++
			case w == "-ldflags":
				ld := words[i+1]
				if !strings.Contains(ld, "-X github.com/eniwire/eniwire/internal/version.Version=${VERSION}") {
					t.Errorf("-ldflags %q does not stamp internal/version.Version from ARG VERSION", ld)
				}
				args = append(args, "-ldflags", strings.ReplaceAll(ld, "${VERSION}", version))
				i++
			default:
				args = append(args, w)
			}
		}
		if !slices.Contains(args, "-trimpath") {
			t.Errorf("go build without -trimpath: %s", in.Args)
		}
		// No deadline but the test's: on a cold cache beside other packages' tests this build takes minutes.
		cmd := exec.Command("go", append([]string{"build"}, args...)...)
		cmd.Dir = ".."
		cmd.Env = os.Environ()
		for k, v := range stageEnv(build) {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the Dockerfile's %s fails here: %v\n%s", in.Args, err, b)
		}
		ran = true
	}
	if !ran {
		t.Fatal("the build stage runs no go build")
	}

	ignore := readDockerignore(t)
	dests := map[string]bool{}
	for _, c := range copies(final) {
		for _, src := range c.sources {
			dest := c.dest
			if strings.HasSuffix(dest, "/") {
				dest += filepath.Base(src)
			}
			dests[dest] = true
			switch c.from {
			case build.Name:
				p := filepath.Join(out, strings.TrimPrefix(src, "/out/"))
				checkStaticBinary(t, p, version)
			case "":
				if _, err := os.Stat(filepath.Join("..", src)); err != nil {
					t.Errorf("COPY %s: %v", src, err)
				}
				if ignore.excluded(src) {
					t.Errorf("COPY %s: .dockerignore excludes it from the build context", src)
				}
			default:
				t.Errorf("COPY --from=%s: not the build stage", c.from)
			}
		}
	}
	for _, want := range []string{"/usr/local/bin/eniwire-agent", "/usr/local/bin/eniwire", "/usr/local/bin/eniwirectl", "/etc/eniwire/cni/10-eniwire.conflist"} {
		if !dests[want] {
			t.Errorf("the image lacks %s", want)
		}
	}
}

// checkStaticBinary: the file exists, is an ELF with no interpreter and no shared libraries (distroless static
// has no libc), and carries the version given at link time.
func checkStaticBinary(t *testing.T, path, version string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Errorf("%s: %v", filepath.Base(path), err)
		return
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked (has PT_INTERP)", filepath.Base(path))
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", filepath.Base(path), libs)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(version)) {
		t.Errorf("%s does not carry the version %s given with -ldflags -X", filepath.Base(path), version)
	}
}
