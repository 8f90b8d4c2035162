package cluster

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/eniwire/eniwire/test/ociimage"
)

// The images' names. Pods name them with imagePullPolicy IfNotPresent (the manifests' own policy), so
// kubelet uses what the harness imported and never tries a registry.
const (
	PauseImage       = "registry.k8s.io/pause:3.10"
	CoreDNSImage     = "registry.k8s.io/coredns/coredns:v1.12.4"
	AgnhostImage     = "registry.k8s.io/e2e-test-images/agnhost:2.56"
	EniwireImage     = "ghcr.io/eniwire/eniwire:k8s-test"
	EniwireNextImage = "ghcr.io/eniwire/eniwire:k8s-test-next"
)

// writeImages writes every image archive into dir and returns their paths.
func writeImages(repoRoot, dir string, b Binaries) ([]string, error) {
	single := func(tag, bin, at string, entrypoint ...string) (ociimage.Image, error) {
		f, err := ociimage.FromBinary(bin, at)
		return ociimage.Image{Tags: []string{tag}, Files: append([]ociimage.File{f}, distroless...), Entrypoint: entrypoint}, err
	}
	var images []ociimage.Image
	for _, mk := range []func() (ociimage.Image, error){
		func() (ociimage.Image, error) { return single(PauseImage, b.Pause, "/pause", "/pause") },
		func() (ociimage.Image, error) { return single(CoreDNSImage, b.CoreDNS, "/coredns", "/coredns") },
		func() (ociimage.Image, error) { return single(AgnhostImage, b.Agnhost, "/agnhost", "/agnhost") },
		func() (ociimage.Image, error) {
			return ImageFromDockerfile(repoRoot, b.Eniwire, []string{EniwireImage})
		},
		func() (ociimage.Image, error) {
			return ImageFromDockerfile(repoRoot, b.EniwireNext, []string{EniwireNextImage})
		},
	} {
		im, err := mk()
		if err != nil {
			return nil, err
		}
		images = append(images, im)
	}
	var paths []string
	for i, im := range images {
		p := filepath.Join(dir, fmt.Sprintf("image-%d.tar", i))
		if err := im.WriteArchive(p); err != nil {
			return nil, fmt.Errorf("writing %s: %w", im.Tags[0], err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// importImages loads the archives into the node's containerd.
func (n *Node) importImages(ctx context.Context, archives []string) error {
	for _, a := range archives {
		if out, err := n.Ctr(ctx, "images", "import", a); err != nil {
			return fmt.Errorf("importing %s on %s: %w: %s", a, n.Name, err, out)
		}
	}
	return nil
}
