package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/eniwire/eniwire/deploy/dockerfile"
	"github.com/eniwire/eniwire/test/ociimage"
)

// distroless is what the Dockerfile's base image (gcr.io/distroless/static) gives the agent that it may
// rely on: root's passwd entry and a sticky /tmp. Nothing else (no shell) is in it.
var distroless = []ociimage.File{
	{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
	{Path: "/tmp/", Mode: 0o777 | os.ModeSticky},
	{Path: "/root/", Mode: 0o700},
}

// ImageFromDockerfile builds the image the Dockerfile's final stage describes, so the test cluster runs the
// layout users get: each `COPY --from=<stage> /out/<bin>... <dir>/` takes <bin> from binDir, each
// `COPY <path> <dst>` takes the repository's file, and USER and ENTRYPOINT carry over. Any other
// instruction in the final stage is an error, so the Dockerfile cannot drift from what the tests run.
func ImageFromDockerfile(repoRoot, binDir string, tags []string) (ociimage.Image, error) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		return ociimage.Image{}, fmt.Errorf("reading the Dockerfile: %w", err)
	}
	stages, err := dockerfile.Parse(string(raw))
	if err != nil {
		return ociimage.Image{}, err
	}
	if len(stages) == 0 {
		return ociimage.Image{}, fmt.Errorf("Dockerfile: no stage")
	}
	im := ociimage.Image{Tags: tags, Files: append([]ociimage.File(nil), distroless...)}
	for _, in := range stages[len(stages)-1].Instructions {
		line, rest, args := in.Cmd+" "+in.Args, in.Args, strings.Fields(in.Args)
		switch in.Cmd {
		case "COPY":
			if len(args) < 2 {
				return im, fmt.Errorf("Dockerfile: %q: COPY needs a source and a destination", line)
			}
			dst := args[len(args)-1]
			srcs := args[:len(args)-1]
			fromStage := strings.HasPrefix(srcs[0], "--from=")
			if fromStage {
				srcs = srcs[1:]
			}
			for _, src := range srcs {
				from := filepath.Join(repoRoot, src)
				if fromStage {
					from = filepath.Join(binDir, filepath.Base(src))
				}
				to := dst
				if strings.HasSuffix(dst, "/") {
					to = dst + filepath.Base(src)
				}
				f, err := ociimage.FromBinary(from, to)
				if err != nil {
					return im, fmt.Errorf("Dockerfile: %q: %w", line, err)
				}
				if !fromStage {
					f.Mode = 0o644
				}
				im.Files = append(im.Files, f)
			}
		case "USER":
			im.User = strings.TrimSpace(rest)
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &im.Entrypoint); err != nil {
				return im, fmt.Errorf("Dockerfile: %q: ENTRYPOINT in exec form expected: %w", line, err)
			}
		default:
			return im, fmt.Errorf("Dockerfile: the final stage's %q is not mirrored by the test image builder (test/k8s/cluster/dockerfile.go)", in.Cmd)
		}
	}
	if len(im.Entrypoint) == 0 {
		return im, fmt.Errorf("Dockerfile: the final stage has no ENTRYPOINT")
	}
	return im, nil
}
